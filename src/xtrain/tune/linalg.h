// Dense float64 linear algebra for the Gaussian process: a row-major matrix, Cholesky, triangular
// solves, the inverse from a Cholesky factor. Plain C++ rather than ATen on purpose: the matrices
// are at most a few hundred wide, where per-operator dispatch would cost more than the arithmetic,
// and the tuner stays free of LibTorch threads (it forks trial processes).
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::tune {

struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;

  Matrix() = default;
  Matrix(int64_t r, int64_t c, double fill = 0.0) : rows(r), cols(c), data(static_cast<size_t>(r * c), fill) {}
  double& operator()(int64_t i, int64_t j) { return data[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return data[static_cast<size_t>(i * cols + j)]; }
  double* row(int64_t i) { return data.data() + i * cols; }
  const double* row(int64_t i) const { return data.data() + i * cols; }
};

// Lower-triangular L with L Lᵀ = A (A symmetric, only its lower triangle is read). False when a
// pivot is not positive (A not numerically positive definite); *l is then unspecified.
bool cholesky(const Matrix& a, Matrix* l);
// Solves L x = b in place (forward substitution); b has l.rows entries.
void solve_lower(const Matrix& l, double* b);
// Solves Lᵀ x = b in place (back substitution).
void solve_lower_transposed(const Matrix& l, double* b);
// A⁻¹ = L⁻ᵀ L⁻¹ from the Cholesky factor of A (full symmetric matrix).
Matrix cholesky_inverse(const Matrix& l);

}  // namespace xtrain::tune
