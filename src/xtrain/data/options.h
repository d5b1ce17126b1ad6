// `xtrain.data` (ours: DeepSpeed leaves data to the user's script), with `xtrain.data.ordering`
// (ours: difficulty-ordered sampling after DELT, data_ordering.h), and DeepSpeed's legacy
// `curriculum_learning` (reference/deepspeed.md §a.10).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::data {

// Difficulty-ordered sampling (DELT: Dai et al., "Data Efficacy for Language Model Training",
// 2025 — score every sample, then order the training data by the score). Checked by
// validate_ordering() in difficulty_sampler.h.
struct DataOrderingOptions {
  bool enabled = false;
  std::string scorer = "entropy";
  std::string reference_checkpoint;
  int64_t score_samples = 0;
  double random_mix = 0.1;
  int64_t folds = 1;
  int64_t ordering_epochs = 1;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "serve training samples easy-to-hard by a difficulty score (ours; DELT-style ordering)");
    v.choice("scorer", scorer, {"entropy", "loss"},
             "difficulty: entropy = unigram entropy of the window's tokens in bits (repetitive text is easy; "
             "replaces a length score, constant for fixed-length windows); loss = mean per-token loss of "
             "reference_checkpoint's model in eval mode");
    v("reference_checkpoint", reference_checkpoint, "scorer=loss: run directory whose latest checkpoint scores the data");
    v("score_samples", score_samples,
      "windows scored (a random subset; unscored ones are served in the random mix); 0 = the samples the run "
      "draws, xtrain.steps x train_batch_size, capped at the train set");
    v("random_mix", random_mix, "fraction in [0, 1] of positions served uniformly at random instead of in order");
    v("folds", folds, "DELT folding: the sorted scored samples are dealt round-robin into this many folds, each "
      "served easy-to-hard in turn (1 = one easy-to-hard pass)");
    v("ordering_epochs", ordering_epochs, "epochs served in difficulty order; later epochs are shuffled uniformly");
  }
};

struct DataOptions {
  std::string type = "text";   // a registered dataset (data/registry.h): text | mnist | fashion_mnist | a plugin's
  std::string path = "mobydick";  // text: a file or "mobydick"; images: a folder, or "" for the default
  double val_fraction = 0.1;   // text: the last fraction of the file is validation
  int64_t prefetch = 2;        // batches prepared ahead by the loader thread
  std::string label;                  // csv: the label column
  std::vector<std::string> features;  // csv: the feature columns (empty: every column but the label)
  int64_t image_size = 0;             // images: resized to image_size² by bilinear interpolation (0: as stored)
  DataOrderingOptions ordering;
  nlohmann::json args = nlohmann::json::object();  // a plugin dataset's own settings, read by its entry
  template <class V>
  void visit(V& v) {
    v("type", type, "registered dataset: text, mnist, fashion_mnist or a plugin's (see Registered datasets)");
    v("path", path, "text file or dataset folder ('mobydick' / '' = the bundled default)");
    v("val_fraction", val_fraction, "text: share of the corpus held out for validation (taken from the end)");
    v("prefetch", prefetch, "batches prepared ahead in a background thread (0: none)");
    v("label", label, "csv: the label column's name (other datasets refuse it)");
    v("features", features, "csv: the feature columns' names (empty: every column but the label; others refuse it)");
    v("image_size", image_size, "images (mnist, fashion_mnist): side in pixels each image is resized to, "
      "bilinear as torch.nn.functional.interpolate(align_corners=False), per batch (0: as stored)");
    v("ordering", ordering, "difficulty-ordered sampling");
    v("args", args, "a registered dataset's own settings (a JSON object, checked by the dataset)");
  }
};

struct CurriculumOptions {
  bool enabled = false;
  std::string curriculum_type = "seqlen";
  int64_t min_difficulty = 8;
  int64_t max_difficulty = 1024;
  std::string schedule_type = "fixed_linear";
  // schedule_config
  int64_t total_curriculum_step = 0;
  int64_t difficulty_step = 8;
  int64_t root_degree = 1;
  std::vector<int64_t> difficulty;
  std::vector<int64_t> max_step;
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "sequence-length curriculum");
    v.choice("curriculum_type", curriculum_type, {"seqlen"}, "what grows");
    v("min_difficulty", min_difficulty, "first sequence length");
    v("max_difficulty", max_difficulty, "final sequence length");
    v.choice("schedule_type", schedule_type, {"fixed_linear", "fixed_root", "fixed_discrete"}, "pacing function");
    v.nested("schedule_config", [&](auto& s) {
      s("total_curriculum_step", total_curriculum_step, "steps until max_difficulty");
      s("difficulty_step", difficulty_step, "difficulty is a multiple of this");
      s("root_degree", root_degree, "fixed_root: degree of the root");
      s("difficulty", difficulty, "fixed_discrete: difficulties");
      s("max_step", max_step, "fixed_discrete: last step of each difficulty");
    });
  }
};

}  // namespace xtrain::data
