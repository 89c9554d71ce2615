// One place that turns a routing decision into a stats count and (when logging) a line.
#pragma once

#include <string>

#include "controls.h"

namespace flyops::binding {

// `what` ("inputs") and `kernel` (the chosen kernel's name) are built only when the log is
// on, keeping string work off the hot path.
template <typename Describe, typename Kernel>
void report(Op op, bool to_flyops, const char* reason, Describe&& what, Kernel&& kernel) {
  count(op, to_flyops, reason);
  if (log_level() <= 0) return;
  std::string line = std::string(op_name(op)) + " " + what() + " -> ";
  line += to_flyops ? kernel() : std::string("stock (") + reason + ")";
  log_line(line);
}

inline constexpr const char* kReasonDisabled = "flyops disabled";
inline constexpr const char* kReasonNotCuda = "input not on a CUDA device";

// The check every override makes first: true (and the call reported as stock's, with the
// reason) when flyops is off for the op or the input is not on a CUDA device.
template <typename Describe>
bool passed_over(Op op, bool on_cuda, Describe&& what) {
  if (active(op) && on_cuda) return false;
  report(op, false, on_cuda ? kReasonDisabled : kReasonNotCuda, what, [] { return std::string(); });
  return true;
}

}  // namespace flyops::binding
