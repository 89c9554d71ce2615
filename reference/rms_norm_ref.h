// float64 CPU references for RMSNorm, the ground truth of the tests and the benchmark.
#pragma once

#include <cstdint>

namespace flyops::reference {

// y[i][j] = x[i][j] * rstd[i] * w[j], rstd[i] = 1 / sqrt(mean_j x[i][j]^2 + eps).
// Rows are contiguous, M x N; w may be null (all ones). rstd may be null.
void rms_norm_fwd(const double* x, const double* w, int64_t M, int64_t N, double eps, double* y,
                  double* rstd);

// Given the forward's rstd: dx (may be null) and dw (may be null; needs w).
void rms_norm_bwd(const double* dy, const double* x, const double* rstd, const double* w,
                  int64_t M, int64_t N, double* dx, double* dw);

}  // namespace flyops::reference
