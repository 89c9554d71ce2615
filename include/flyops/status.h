// Status codes returned by every flyops core entry point. The core never throws.
#pragma once

namespace flyops {

enum class Status {
  kSuccess = 0,
  kUnsupported,      // the input is valid but no flyops kernel handles it (caller uses stock)
  kInvalidArgument,  // params violate the op's contract (caller bug)
  kCudaError,        // a CUDA runtime call or launch failed
};

const char* status_string(Status s);

}  // namespace flyops
