// The aten overrides, registered for the CUDA key when Python asks (flyops' loader calls
// torch.ops.flyops._register_overrides() right after loading the library). The dispatcher
// warns once per process when a kernel replaces a built-in one; flyops replaces them by
// design, so that one warning is filtered here instead of reaching every `import torch`.
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>
#include <memory>
#include <mutex>

#include "attention_binding.h"
#include "gemm_binding.h"
#include "registration.h"
#include "rms_norm_binding.h"
#include "topk_binding.h"

namespace flyops::binding {
namespace {

class DropOverrideWarning : public c10::WarningHandler {
 public:
  explicit DropOverrideWarning(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& w) override {
    if (std::strstr(w.msg().c_str(), "Overriding a previously registered kernel") != nullptr) return;
    next_->process(w);
  }

 private:
  c10::WarningHandler* next_;
};

}  // namespace

void register_overrides() {
  static std::once_flag once;
  std::call_once(once, [] {
    DropOverrideWarning filter(c10::WarningUtils::get_warning_handler());
    c10::WarningUtils::WarningHandlerGuard guard(&filter);
    // Lives as long as the process: the registrations end with it.
    static auto* aten_cuda = new torch::Library(torch::Library::IMPL, "aten",
                                                c10::DispatchKey::CUDA, __FILE__, __LINE__);
    register_rms_norm(*aten_cuda);
    register_topk(*aten_cuda);
    register_gemm(*aten_cuda);
    register_attention(*aten_cuda);
  });
}

}  // namespace flyops::binding
