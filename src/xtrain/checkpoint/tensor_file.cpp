// The archive is what torch::pickle_save builds (Pickler + PyTorchStreamWriter: data/<i> records,
// then data.pkl), but streamed to disk instead of into a vector: a checkpoint shard never needs a
// second in-memory copy.
#include "xtrain/checkpoint/tensor_file.h"

#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <memory>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {
namespace {

at::Tensor portable(const std::string& name, const at::Tensor& t, const std::string& path) {
  TORCH_CHECK(t.defined(), "checkpoint: tensor '", name, "' for ", path, " is undefined");
  TORCH_CHECK(t.layout() == at::kStrided && !t.is_quantized(), "checkpoint: tensor '", name,
              "' has an unsupported layout (dense tensors only)");
  at::Tensor c = t.detach().cpu();
  const bool compact = c.is_contiguous() && c.storage_offset() == 0 &&
                       c.storage().nbytes() == size_t(c.numel()) * c.element_size();
  return compact ? c : c.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

FileDigest write_tensor_file(const std::string& path, const NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : tensors) {
    TORCH_CHECK(!dict.contains(name), "checkpoint: tensor name '", name, "' appears twice in ", path);
    dict.insert(name, portable(name, t, path));
  }
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* p, size_t n) { pickle.insert(pickle.end(), p, p + n); });
  pickler.protocol();
  pickler.pushIValue(dict);
  pickler.stop();

  DurableWriter out(path);
  std::string write_error;  // the sink never throws into miniz; the first failure is kept here
  auto zip = std::make_unique<caffe2::serialize::PyTorchStreamWriter>([&](const void* p, size_t n) -> size_t {
    if (!write_error.empty()) return 0;
    try {
      return out.write(p, n);
    } catch (const std::exception& e) {
      write_error = e.what();
      return 0;
    }
  });
  try {
    const std::vector<at::Tensor>& storages = pickler.tensorData();
    for (size_t i = 0; i < storages.size(); ++i) {
      const at::Tensor& s = storages[i];
      zip->writeRecord("data/" + std::to_string(i), s.storage().data(), s.storage().nbytes());
    }
    zip->writeRecord("data.pkl", pickle.data(), pickle.size());
    zip->writeEndOfFile();
  } catch (...) {
    // A failed PyTorchStreamWriter retries writeEndOfFile in its destructor, which can throw during
    // unwinding (std::terminate) in some LibTorch versions: it is deliberately leaked instead.
    (void)zip.release();
    if (!write_error.empty()) throw UsageError(write_error);
    throw;
  }
  zip.reset();
  return out.close();
}

NamedTensors read_tensor_file(const std::string& path) {
  c10::IValue value;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    value = torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, at::Device(at::kCPU),
                                              reader);
  } catch (const c10::Error& e) {
    XTRAIN_USAGE_ERROR("checkpoint: ", path, " is not a readable tensor file (", e.what_without_backtrace(), ")");
  }
  XTRAIN_USAGE_CHECK(value.isGenericDict(), "checkpoint: ", path, " holds a ", value.tagKind(),
                     ", expected a dict of named tensors");
  NamedTensors out;
  for (const auto& item : value.toGenericDict()) {
    XTRAIN_USAGE_CHECK(item.key().isString() && item.value().isTensor(), "checkpoint: ", path,
                       " holds a dict entry that is not str -> Tensor");
    out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  }
  return out;
}

}  // namespace xtrain::checkpoint
