// The pieces of a federated run below the round loop (federated.cpp): the model's trainable
// parameters as one flat fp32 vector, a client's view of the training set, and one client's local
// training through a fresh Engine. Internal to federated/.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/data/dataset.h"
#include "xtrain/run/setup.h"

namespace torch::nn {
class Module;
}

namespace xtrain::federated {

// The trainable parameters of a module, by name, as one flat fp32 vector.
struct FlatParams {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  int64_t numel = 0;
};
FlatParams flat_layout(const torch::nn::Module& module);
at::Tensor flatten(const torch::nn::Module& module, const FlatParams& layout);
// Points every parameter at a fresh fp32 copy of its slice of `flat` (what a newly built model
// holds: the Engine then takes it as given).
void load_flat(torch::nn::Module& module, const FlatParams& layout, const at::Tensor& flat);

// The samples `indices` of `base`, renumbered [0, n).
class SubsetDataset : public data::Dataset {
 public:
  SubsetDataset(std::shared_ptr<data::Dataset> base, std::vector<int64_t> indices)
      : base_(std::move(base)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  data::Batch collate(const std::vector<int64_t>& indices) const override;
  data::DatasetInfo info() const override { return base_->info(); }

 private:
  std::shared_ptr<data::Dataset> base_;
  std::vector<int64_t> indices_;
};

struct Client {
  int64_t id = 0;
  std::shared_ptr<SubsetDataset> data;
  std::unique_ptr<data::Sampler> sampler;  // persists over rounds: each round continues its epochs
  int64_t size() const { return data->size(); }
};

// Client `id`'s view and sampler (seeded with the config's seed + id: client 0 holding everything
// walks the data as `xtrain train`'s loader does).
Client make_client(const Setup& s, int64_t id, std::vector<int64_t> indices);

struct LocalResult {
  at::Tensor update;                // flat float64: trained weights - global weights (both fp32)
  std::vector<double> step_losses;  // each local step's training loss
};

// E local steps from `global` with the config's optimizer (a fresh Engine: fresh optimizer state),
// lrs[k] the lr of local step k; prox_mu > 0 adds mu/2 ||w - global||^2 to the loss.
LocalResult train_client(Setup& s, Client& client, const FlatParams& layout, const at::Tensor& global,
                         const std::vector<double>& lrs, double prox_mu);

}  // namespace xtrain::federated
