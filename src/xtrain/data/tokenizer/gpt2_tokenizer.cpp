#include "xtrain/base/error.h"
#include "xtrain/data/tokenizer/backends.h"
namespace xtrain::data {
std::unique_ptr<Tokenizer> load_gpt2(const std::filesystem::path& dir) {
  XTRAIN_USAGE_ERROR("tokenizer: gpt2 is not built yet (", dir.string(), ")");
}
}  // namespace xtrain::data
