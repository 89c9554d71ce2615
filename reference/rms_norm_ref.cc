#include "rms_norm_ref.h"

#include <cmath>
#include <vector>

namespace flyops::reference {

void rms_norm_fwd(const double* x, const double* w, int64_t M, int64_t N, double eps, double* y,
                  double* rstd) {
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = x + i * N;
    double ss = 0.0;
    for (int64_t j = 0; j < N; ++j) ss += xr[j] * xr[j];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
    if (rstd != nullptr) rstd[i] = r;
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = xr[j] * r * (w != nullptr ? w[j] : 1.0);
  }
}

void rms_norm_bwd(const double* dy, const double* x, const double* rstd, const double* w,
                  int64_t M, int64_t N, double* dx, double* dw) {
  if (dw != nullptr)
    for (int64_t j = 0; j < N; ++j) dw[j] = 0.0;
  for (int64_t i = 0; i < M; ++i) {
    const double* xr = x + i * N;
    const double* dyr = dy + i * N;
    const double r = rstd[i];
    double dot = 0.0;  // sum_j g_j x_j with g = dy * w
    for (int64_t j = 0; j < N; ++j) dot += dyr[j] * (w != nullptr ? w[j] : 1.0) * xr[j];
    const double coef = r * r * dot / static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) {
      const double g = dyr[j] * (w != nullptr ? w[j] : 1.0);
      if (dx != nullptr) dx[i * N + j] = r * (g - xr[j] * coef);
      if (dw != nullptr) dw[j] += dyr[j] * xr[j] * r;
    }
  }
}

}  // namespace flyops::reference
