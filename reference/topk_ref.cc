#include "reference/topk_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace flyops::reference {
namespace {

// -1, 0, 1 as a < b, a ~ b, a > b in stock's value order (NaNs tie at the top).
int compare(double a, double b) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  if (a < b) return -1;
  if (a > b) return 1;
  if (a == 0.0 && b == 0.0 && std::signbit(a) != std::signbit(b)) return std::signbit(a) ? -1 : 1;
  return 0;
}

}  // namespace

bool topk_before(double a, double b, bool largest) {
  const int c = compare(a, b);
  return largest ? c > 0 : c < 0;
}

void topk(const double* x, int64_t rows, int64_t n, int64_t k, bool largest, int64_t* indices) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x + r * n;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return topk_before(row[i], row[j], largest); });
    std::copy(order.begin(), order.begin() + k, indices + r * k);
  }
}

}  // namespace flyops::reference
