// The GEMM router: what the kernel supports, then the measured table.
#include <atomic>

#include "flyops/gemm.h"
#include "tuned_table.h"

namespace flyops {
namespace {
std::atomic<int> g_force{0};
std::atomic<int> g_force_cluster{0};
std::atomic<int> g_force_group_rows{0};
}  // namespace

void gemm_force(int mode, int cluster, int group_rows) {
  g_force.store(mode, std::memory_order_relaxed);
  g_force_cluster.store(cluster == 1 || cluster == 2 ? cluster : 0, std::memory_order_relaxed);
  g_force_group_rows.store(group_rows, std::memory_order_relaxed);
}
int gemm_forced() { return g_force.load(std::memory_order_relaxed); }
int gemm_forced_cluster() { return g_force_cluster.load(std::memory_order_relaxed); }
int gemm_forced_group_rows() { return g_force_group_rows.load(std::memory_order_relaxed); }

GemmPlan gemm_choose(const GemmParams& p, const DeviceInfo& dev) {
  const int force = gemm_forced();
  if (force == 2) return GemmPlan{false, "forced to stock (_gemm_force)"};
  const Support s = gemm_supports(p, dev);
  if (!s.ok) return GemmPlan{false, s.reason};
  if (force == 1) return GemmPlan{true, ""};
  if (const gemm::MeasuredShape* m = gemm::find_measured(p, dev.gpu, gemm::kMeasuredShapes))
    return m->flyops ? GemmPlan{true, "", m->cluster}
                     : GemmPlan{false, "stock measured faster on this shape (gemm/measured_shapes.inc)"};
  if (gemm::measured_faster(p)) return GemmPlan{true, ""};
  return GemmPlan{false, "stock measured faster on this shape class (gemm/tuned_table.h)"};
}

}  // namespace flyops
