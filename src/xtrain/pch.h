// The one shared precompiled header: the heavy LibTorch headers that most translation units need.
// Our own headers never include these (they include <ATen/core/Tensor.h>); .cpp files include the
// narrow headers they use, and this header only makes them cheap.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/Functions.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
