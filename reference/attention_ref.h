// Float64 CPU reference for attention forward: out = softmax(scale q k^T, masked) v and the
// natural-log log-sum-exp of each row's scaled scores (+inf, and a zero row, where a query
// sees no key). Causal: query i sees keys j <= i + offset.
#pragma once

#include <cstdint>

namespace flyops::reference {

// One head: q [Lq, D], k and v [Lk, D] (row-major); out [Lq, D], lse [Lq].
void attention_head(const double* q, const double* k, const double* v, int64_t Lq, int64_t Lk, int64_t D,
                    double scale, bool causal, int64_t offset, double* out, double* lse);

// Its backward for one head, from the same inputs and dout [Lq, D]: dq [Lq, D] written, dk
// and dv [Lk, D] added to (a key/value head sums over its query heads). P is recomputed in
// float64; Dsum_i = dout_i . out_i with the exact out.
void attention_head_bwd(const double* q, const double* k, const double* v, const double* dout, int64_t Lq,
                        int64_t Lk, int64_t D, double scale, bool causal, int64_t offset, double* dq, double* dk,
                        double* dv);

}  // namespace flyops::reference
