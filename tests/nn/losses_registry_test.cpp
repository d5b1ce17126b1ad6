// The loss registry: make_loss asks it (flattening [B, T, V] and checking keys as before), unknown
// names fail naming xtrain.loss.type, and an added loss is selected by name.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/nn/losses_registry.h"

namespace xtrain::losses_registry_test {
namespace {

TEST(LossRegistry, BuiltinsUnknownNamesAndAnAddedLoss) {
  EXPECT_EQ(nn::loss_names(), (std::vector<std::string>{"cross_entropy", "focal"}));
  nn::LossOptions o;
  o.type = "focall";
  try {
    nn::make_loss(o);
    ADD_FAILURE() << "unknown loss";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.loss.type: unknown loss \"focall\"; did you mean \"focal\"?"),
              std::string::npos)
        << e.what();
  }
  // A test-only loss: twice the cross-entropy, checked against ATen's cross_entropy directly.
  nn::register_loss({"double_ce", "2 x cross-entropy (test only)", nullptr, [](const nn::LossOptions&) -> nn::LossFn {
                       return [](const at::Tensor& l, const at::Tensor& t) { return 2 * at::cross_entropy_loss(l, t); };
                     }});
  o.type = "double_ce";
  const at::Tensor logits = at::randn({2, 3, 5});
  const at::Tensor target = at::randint(5, {2, 3});
  const double got = nn::make_loss(o)(logits, target).item<double>();
  const double want = 2 * at::cross_entropy_loss(logits.reshape({6, 5}), target.reshape({6})).item<double>();
  EXPECT_NEAR(got, want, 1e-6);  // the same fp32 ops; flattening is a view
  EXPECT_TRUE(nn::unregister_loss("double_ce"));
}

}  // namespace
}  // namespace xtrain::losses_registry_test
