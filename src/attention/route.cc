// The attention router: what the kernel supports, then the measured table.
#include <atomic>

#include "flyops/attention.h"
#include "tuned_table.h"

namespace flyops {
namespace {
std::atomic<int> g_force{0}, g_bwd_force{0};
}  // namespace

void attention_force(int mode) { g_force.store(mode, std::memory_order_relaxed); }
int attention_forced() { return g_force.load(std::memory_order_relaxed); }
void attention_bwd_force(int mode) { g_bwd_force.store(mode, std::memory_order_relaxed); }
int attention_bwd_forced() { return g_bwd_force.load(std::memory_order_relaxed); }

AttnPlan attention_choose(const AttnParams& p, const DeviceInfo& dev) {
  const int force = attention_forced();
  if (force == 2) return AttnPlan{false, "forced to stock (_attention_force)"};
  const Support s = attention_supports(p, dev);
  if (!s.ok) return AttnPlan{false, s.reason};
  if (force == 1 || attention::measured_faster(p)) return AttnPlan{true, ""};
  return AttnPlan{false, "stock measured faster on this shape class (attention/tuned_table.h)"};
}

AttnPlan attention_bwd_choose(const AttnBwdParams& p, const DeviceInfo& dev) {
  const int force = attention_bwd_forced();
  if (force == 2) return AttnPlan{false, "forced to stock (_attention_backward_force)"};
  const Support s = attention_bwd_supports(p, dev);
  if (!s.ok) return AttnPlan{false, s.reason};
  if (force == 1 || force == 3 || attention::bwd_measured_faster(p)) return AttnPlan{true, ""};
  return AttnPlan{false, "stock measured faster on this shape class (attention/tuned_table.h)"};
}

}  // namespace flyops
