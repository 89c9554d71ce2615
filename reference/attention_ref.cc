#include "reference/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace flyops::reference {

void attention_head(const double* q, const double* k, const double* v, int64_t Lq, int64_t Lk, int64_t D,
                    double scale, bool causal, int64_t offset, double* out, double* lse) {
  std::vector<double> s(static_cast<size_t>(Lk));
  for (int64_t i = 0; i < Lq; ++i) {
    const int64_t seen = causal ? std::min<int64_t>(Lk, std::max<int64_t>(0, i + offset + 1)) : Lk;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < seen; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
      s[j] = scale * dot;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < seen; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < seen; ++j) acc += s[j] * v[j * D + d];
      out[i * D + d] = seen > 0 ? acc / sum : 0.0;
    }
    lse[i] = seen > 0 ? mx + std::log(sum) : std::numeric_limits<double>::infinity();
  }
}

void attention_head_bwd(const double* q, const double* k, const double* v, const double* dout, int64_t Lq,
                        int64_t Lk, int64_t D, double scale, bool causal, int64_t offset, double* dq, double* dk,
                        double* dv) {
  std::vector<double> out(static_cast<size_t>(Lq * D)), lse(static_cast<size_t>(Lq));
  attention_head(q, k, v, Lq, Lk, D, scale, causal, offset, out.data(), lse.data());
  std::vector<double> p(static_cast<size_t>(Lk)), ds(static_cast<size_t>(Lk));
  for (int64_t i = 0; i < Lq; ++i) {
    const int64_t seen = causal ? std::min<int64_t>(Lk, std::max<int64_t>(0, i + offset + 1)) : Lk;
    double dsum = 0;
    for (int64_t d = 0; d < D; ++d) dsum += dout[i * D + d] * out[i * D + d];
    for (int64_t d = 0; d < D; ++d) dq[i * D + d] = 0;
    for (int64_t j = 0; j < seen; ++j) {
      double dot = 0, dp = 0;
      for (int64_t d = 0; d < D; ++d) {
        dot += q[i * D + d] * k[j * D + d];
        dp += dout[i * D + d] * v[j * D + d];
      }
      p[j] = std::exp(scale * dot - lse[i]);
      ds[j] = p[j] * (dp - dsum);
      for (int64_t d = 0; d < D; ++d) {
        dv[j * D + d] += p[j] * dout[i * D + d];
        dk[j * D + d] += scale * ds[j] * q[i * D + d];
        dq[i * D + d] += scale * ds[j] * k[j * D + d];
      }
    }
  }
}

}  // namespace flyops::reference
