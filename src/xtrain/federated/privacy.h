// Client-level differential privacy for `xtrain federated` (McMahan et al. 2018, DP-FedAvg): each
// client's update is clipped to L2 norm C, the server adds Gaussian noise N(0, (sigma C)^2) to every
// coordinate of the sum, and divides by the number of clients summed (a public count: with DP the
// weights are uniform, since weighting by sample counts would let one client's share exceed C).
// Neighbouring datasets differ by one client's whole data, so the sum's L2 sensitivity is C and each
// round is a Gaussian mechanism with noise multiplier sigma.
//
// Accounting: Renyi DP (Mironov 2017). One round has RDP alpha / (2 sigma^2) at every order alpha > 1;
// R rounds compose to R alpha / (2 sigma^2); the conversion eps = RDP(alpha) + log(1/delta) / (alpha - 1),
// minimised over real alpha > 1, gives the closed form
//   eps = R / (2 sigma^2) + sqrt(2 R log(1/delta)) / sigma   at alpha* = 1 + sigma sqrt(2 log(1/delta) / R).
// No amplification by sampling is claimed: the client sampling (--fraction) is not credited, so the
// epsilon reported is an upper bound (every round counts as if every client took part).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xtrain::federated {

struct PrivacyOptions {
  double clip = 0.0;   // C; 0: no DP
  double noise = 0.0;  // sigma, the noise multiplier
  double delta = 0.0;
  bool enabled() const { return clip > 0.0; }
};

// Scales `update` in place to L2 norm at most `clip`; returns its norm before clipping.
double clip_update(at::Tensor& update, double clip);

// epsilon after `rounds` Gaussian mechanisms of noise multiplier `sigma`, at `delta` (above).
double rdp_epsilon(double sigma, int64_t rounds, double delta);
// The minimising order alpha* (for the report).
double rdp_best_order(double sigma, int64_t rounds, double delta);

}  // namespace xtrain::federated
