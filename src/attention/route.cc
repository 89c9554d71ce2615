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

// Forced to stock, else what the kernel supports, then forced to flyops or the table
// (`table` gives why stock runs, or nullptr where flyops measured faster).
template <typename Supports, typename Table>
AttnPlan decide(bool to_stock, const char* stock_reason, bool to_flyops, Supports&& supports, Table&& table) {
  if (to_stock) return AttnPlan{false, stock_reason};
  const Support s = supports();
  if (!s.ok) return AttnPlan{false, s.reason};
  if (to_flyops) return AttnPlan{true, ""};
  const char* why = table();
  return why == nullptr ? AttnPlan{true, ""} : AttnPlan{false, why};
}

}  // namespace

AttnPlan attention_choose(const AttnParams& p, const DeviceInfo& dev) {
  const int force = attention_forced();
  return decide(force == 2, "forced to stock (_attention_force)", force == 1,
                [&] { return attention_supports(p, dev); },
                [&] { return attention::measured_faster(p) ? nullptr : attention::kStockFaster; });
}

AttnPlan attention_bwd_choose(const AttnBwdParams& p, const DeviceInfo& dev) {
  const int force = attention_bwd_forced();
  return decide(force == 2, "forced to stock (_attention_backward_force)", force == 1 || force == 3,
                [&] { return attention_bwd_supports(p, dev); }, [&] { return attention::bwd_stock_reason(p); });
}

}  // namespace flyops
