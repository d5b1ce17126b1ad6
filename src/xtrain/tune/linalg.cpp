// Cholesky and triangular solves, the textbook row-oriented algorithms (Golub & Van Loan 4.2).
#include "xtrain/tune/linalg.h"

#include <c10/util/Exception.h>

#include <cmath>

namespace xtrain::tune {

bool cholesky(const Matrix& a, Matrix* l) {
  TORCH_INTERNAL_ASSERT(a.rows == a.cols, "cholesky: matrix is not square");
  const int64_t n = a.rows;
  *l = Matrix(n, n);
  for (int64_t i = 0; i < n; ++i) {
    double* li = l->row(i);
    for (int64_t j = 0; j <= i; ++j) {
      const double* lj = l->row(j);
      double s = a(i, j);
      for (int64_t k = 0; k < j; ++k) s -= li[k] * lj[k];
      if (i == j) {
        if (!(s > 0.0) || !std::isfinite(s)) return false;
        li[i] = std::sqrt(s);
      } else {
        li[j] = s / lj[j];
      }
    }
  }
  return true;
}

void solve_lower(const Matrix& l, double* b) {
  for (int64_t i = 0; i < l.rows; ++i) {
    const double* li = l.row(i);
    double s = b[i];
    for (int64_t k = 0; k < i; ++k) s -= li[k] * b[k];
    b[i] = s / li[i];
  }
}

void solve_lower_transposed(const Matrix& l, double* b) {
  for (int64_t i = l.rows - 1; i >= 0; --i) {
    b[i] /= l(i, i);
    const double bi = b[i];
    const double* li = l.row(i);
    for (int64_t k = 0; k < i; ++k) b[k] -= li[k] * bi;  // column i of Lᵀ is row i of L
  }
}

Matrix cholesky_inverse(const Matrix& l) {
  const int64_t n = l.rows;
  Matrix ut(n, n);  // L⁻ᵀ (upper): row j holds column j of L⁻¹, so both loops below run along rows
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    std::fill(e.begin(), e.end(), 0.0);
    e[j] = 1.0;
    double* uj = ut.row(j);
    for (int64_t i = j; i < n; ++i) {
      const double* li = l.row(i);
      double s = e[i];
      for (int64_t k = j; k < i; ++k) s -= li[k] * e[k];
      e[i] = s / li[i];
      uj[i] = e[i];
    }
  }
  Matrix out(n, n);  // (L⁻ᵀ L⁻¹)_ij = Σ_{k ≥ max(i,j)} L⁻¹_ki L⁻¹_kj
  for (int64_t i = 0; i < n; ++i) {
    const double* ui = ut.row(i);
    for (int64_t j = 0; j <= i; ++j) {
      const double* uj = ut.row(j);
      double s = 0.0;
      for (int64_t k = i; k < n; ++k) s += ui[k] * uj[k];
      out(i, j) = s;
      out(j, i) = s;
    }
  }
  return out;
}

}  // namespace xtrain::tune
