// From ATen tensors to the core's plain descriptions.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/status.h"

namespace flyops::binding {

DType to_dtype(c10::ScalarType t);

// For a tensor seen as rows over its last `inner_dims` dims: the stride between rows when
// every row is contiguous and consecutive rows sit at one distance, else none.
std::optional<int64_t> row_stride(const at::Tensor& t, int64_t inner_dims);

// "bf16[16384, 4096]" (with "@strides" when not contiguous), for log lines.
std::string describe(const at::Tensor& t);
std::string describe(const std::optional<at::Tensor>& t);

// The device to route for (the tensor's own CUDA device).
const DeviceInfo& routing_device(const at::Tensor& t);

// Raises "flyops <what> failed: <status> (<CUDA error>)" unless the core's call succeeded.
// A failed launch leaves its error pending; it is taken here, so that it is reported with
// this call and not by the next kernel's launch check.
void check_ran(Status s, const char* what);

// As check_ran, except that kUnsupported (the core refused before or between its launches:
// a shared-memory or cluster opt-in the driver denied, say) returns false, and the caller
// runs stock, whose writes replace anything written. True when the call ran.
bool ran_or_refused(Status s, const char* what);

// Scratch of `bytes` for a core call from PyTorch's caching allocator on `like`'s device, its
// address in *ptr (null for 0 bytes). Stream order keeps the memory until the call's kernels
// are done with it, so the tensor may be dropped once they are launched.
at::Tensor workspace_tensor(const at::Tensor& like, std::size_t bytes, void** ptr);

// The reason logged when the core refused a routed call at run time.
inline constexpr const char* kRefusedAtRun = "the kernel refused the call at run time (a shared-memory or cluster opt-in the driver denied)";

}  // namespace flyops::binding
