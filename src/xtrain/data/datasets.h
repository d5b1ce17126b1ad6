// The built-in datasets' openers (data/registry.cpp registers them): text bytes from a file or the
// fetched Moby-Dick, and IDX images (MNIST from the cache folder, Fashion-MNIST from Debian's
// package, or a folder the config names).
#pragma once
#include <cstdint>
#include <string>

#include "xtrain/data/dataset.h"

namespace xtrain::data {

// xtrain.data.path (a file or "mobydick"), split by xtrain.data.val_fraction (the tail is val).
Splits open_text_dataset(const DataOptions& options, int64_t seq_len, const std::string& cache_dir);
// The four IDX files of xtrain.data.path, or the default folder of `fashion` / MNIST.
Splits open_idx_dataset(const DataOptions& options, const std::string& cache_dir, bool fashion);

}  // namespace xtrain::data
