#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <chrono>
#include <torch/nn/modules/conv.h>
#include "xtrain/compress/quant/int8_layers.h"
#include "xtrain/kernels/linear.h"
#include "xtrain/base/memory_pool.h"
namespace xtrain::compress {
template <class F> double best_ms(F f, int reps=7) { f(); double best=1e9; for (int i=0;i<reps;++i){auto t0=std::chrono::steady_clock::now(); f(); double ms=std::chrono::duration<double,std::milli>(std::chrono::steady_clock::now()-t0).count(); best=std::min(best,ms);} return best; }
TEST(TmpSpeed, Gemm) {
  xtrain::memory_pool::install(xtrain::base::MemoryPoolOptions{});
  at::set_num_threads(1);
  for (auto [M,N,K] : std::vector<std::tuple<int64_t,int64_t,int64_t>>{{4096,768,256},{4096,256,1024},{256,512,784}}) {
    auto x = at::randn({M,K}); auto w = at::randn({N,K})*0.1; auto b = at::randn({N});
    auto act = choose_affine_qparams(-4, 4);
    Int8Linear q(w,b,act,false,false);
    double tf = best_ms([&]{ kernels::linear(x,w,b); });
    double ti = best_ms([&]{ q.forward(x); });
    printf("linear %ldx%ldx%ld fp32 %.2f ms (%.0f GF/s) int8 %.2f ms (%.0f GOP/s) speedup %.2f\n", M,N,K, tf, 2.0*M*N*K/tf/1e6, ti, 2.0*M*N*K/ti/1e6, tf/ti);
  }
  for (auto [C,H,B] : std::vector<std::tuple<int64_t,int64_t,int64_t>>{{64,28,16},{128,14,16},{256,7,16},{512,4,16}}) {
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(C,C,3).padding(1).bias(false));
    auto x = at::randn({B,C,H,H}).relu();
    int64_t s[2]={1,1}, p[2]={1,1};
    Int8Conv2d q(conv->weight.detach(), at::Tensor(), s, p, choose_affine_qparams(0,4), true);
    at::NoGradGuard ng;
    double tf = best_ms([&]{ conv->forward(x); });
    double ti = best_ms([&]{ q.forward(x); });
    double fl = 2.0*B*H*H*C*C*9;
    printf("conv C%ld H%ld B%ld fp32 %.2f ms (%.0f GF/s) int8 %.2f ms (%.0f) speedup %.2f\n", C,H,B,tf,fl/tf/1e6,ti,fl/ti/1e6,tf/ti);
  }
}
}
