// CPU reference for TopK with stock PyTorch's ordering: every NaN compares above +inf and
// equal to every other NaN, -0.0 below +0.0, and among equal elements the lower position
// first. Written with comparisons (not radix keys), so it checks the kernels' key encoding.
#pragma once

#include <cstdint>

namespace flyops::reference {

// Whether a comes strictly before b in a largest-first (or smallest-first) top-k.
bool topk_before(double a, double b, bool largest);

// The positions of the k first elements of each of `rows` rows of n (row-major), in
// order: indices[r * k + j].
void topk(const double* x, int64_t rows, int64_t n, int64_t k, bool largest, int64_t* indices);

}  // namespace flyops::reference
