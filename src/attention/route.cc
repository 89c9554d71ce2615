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

namespace {

// Forced to stock, else what the kernel supports, then forced to flyops or the table.
template <typename Supports, typename Measured>
AttnPlan decide(bool to_stock, const char* stock_reason, bool to_flyops, Supports&& supports, Measured&& measured) {
  if (to_stock) return AttnPlan{false, stock_reason};
  const Support s = supports();
  if (!s.ok) return AttnPlan{false, s.reason};
  if (to_flyops || measured()) return AttnPlan{true, ""};
  return AttnPlan{false, "stock measured faster on this shape class (attention/tuned_table.h)"};
}

}  // namespace

AttnPlan attention_choose(const AttnParams& p, const DeviceInfo& dev) {
  const int force = attention_forced();
  return decide(force == 2, "forced to stock (_attention_force)", force == 1,
                [&] { return attention_supports(p, dev); }, [&] { return attention::measured_faster(p); });
}

AttnPlan attention_bwd_choose(const AttnBwdParams& p, const DeviceInfo& dev) {
  const int force = attention_bwd_forced();
  return decide(force == 2, "forced to stock (_attention_backward_force)", force == 1 || force == 3,
                [&] { return attention_bwd_supports(p, dev); }, [&] { return attention::bwd_measured_faster(p); });
}

}  // namespace flyops
