// A scalar as torch.optim.LBFGS (torch 1.13, lbfgs.py) holds it, so our trajectory takes the same
// branches and rounds the same way: either a Python float (double arithmetic) or a 0-d float32
// tensor (a dot product, a loss slope). Mixing the two computes in float32 with the Python number
// rounded to float first, as ATen does with a wrapped number; Python's `x / tensor` is
// tensor.reciprocal() * x (torch/_tensor.py __rdiv__). min/max are Python's (first of equals wins).
#pragma once
#include <ATen/core/Tensor.h>

#include <cmath>

namespace xtrain::optim::lbfgs {

struct Num {
  double v = 0.0;
  bool f32 = false;  // a 0-d float32 tensor
  static Num py(double x) { return {x, false}; }
  static Num f(float x) { return {static_cast<double>(x), true}; }
  static Num item(const at::Tensor& t) { return f(t.item<float>()); }
  float as_float() const { return static_cast<float>(v); }
};

inline bool any_f32(Num a, Num b) { return a.f32 || b.f32; }
inline Num operator+(Num a, Num b) { return any_f32(a, b) ? Num::f(a.as_float() + b.as_float()) : Num::py(a.v + b.v); }
inline Num operator-(Num a, Num b) { return any_f32(a, b) ? Num::f(a.as_float() - b.as_float()) : Num::py(a.v - b.v); }
inline Num operator*(Num a, Num b) { return any_f32(a, b) ? Num::f(a.as_float() * b.as_float()) : Num::py(a.v * b.v); }
inline Num operator/(Num a, Num b) {
  if (!a.f32 && b.f32) return Num::f((1.0f / b.as_float()) * a.as_float());  // __rdiv__: reciprocal() * a
  return any_f32(a, b) ? Num::f(a.as_float() / b.as_float()) : Num::py(a.v / b.v);
}
inline Num abs(Num a) { return a.f32 ? Num::f(std::fabs(a.as_float())) : Num::py(std::fabs(a.v)); }
inline Num sqrt(Num a) { return a.f32 ? Num::f(std::sqrt(a.as_float())) : Num::py(std::sqrt(a.v)); }
inline bool operator<(Num a, Num b) { return any_f32(a, b) ? a.as_float() < b.as_float() : a.v < b.v; }
inline bool operator>(Num a, Num b) { return b < a; }
inline bool operator<=(Num a, Num b) { return any_f32(a, b) ? a.as_float() <= b.as_float() : a.v <= b.v; }
inline bool operator>=(Num a, Num b) { return b <= a; }
inline Num py_max(Num a, Num b) { return b > a ? b : a; }
inline Num py_min(Num a, Num b) { return b < a ? b : a; }

}  // namespace xtrain::optim::lbfgs
