// SentencePiece BPE and unigram tokenizers over Debian's libsentencepiece. Trained for exact
// round-trips: identity normalization, whitespace kept as it is, no dummy prefix, and byte
// fallback (characters outside the vocabulary, newlines included, become <0xNN> byte pieces), so
// decode(encode(text)) == text and encode(a) + encode(b) decodes to a + b. SentencePiece runs in
// libxtrain_spm.so, loaded with dlopen (src/spm_shim/xtrain_spm.h says why).
#include <dlfcn.h>

#include <cstring>
#include <thread>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "spm_shim/xtrain_spm.h"
#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/tokenizer/backends.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFile = "sentencepiece.model";
constexpr const char* kShimName = "libxtrain_spm.so";

struct SpmApi {
  decltype(&xspm_train) train;
  decltype(&xspm_load) load;
  decltype(&xspm_free) free;
  decltype(&xspm_piece_size) piece_size;
  decltype(&xspm_eos_id) eos_id;
  decltype(&xspm_encode) encode;
  decltype(&xspm_decode) decode;
};

// $XTRAIN_SPM_LIBRARY, else beside the program (build tree) or in ../<libdir> (installed), else
// where the build put it.
std::vector<fs::path> shim_candidates() {
  if (auto p = env::get("XTRAIN_SPM_LIBRARY")) return {*p};
  std::vector<fs::path> paths;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) paths = {exe.parent_path() / kShimName};
#ifdef XTRAIN_SPM_INSTALL_LIBDIR
  if (!ec) paths.push_back(exe.parent_path().parent_path() / XTRAIN_SPM_INSTALL_LIBDIR / kShimName);
#endif
#ifdef XTRAIN_SPM_BUILD_PATH
  paths.emplace_back(XTRAIN_SPM_BUILD_PATH);
#endif
  return paths;
}

SpmApi open_spm_api() {
  std::string tried;
  for (const auto& path : shim_candidates()) {
    // DEEPBIND: SentencePiece's protobuf references bind to its own bundled copy.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
      tried += "\n  " + path.string() + ": " + dlerror();
      continue;
    }
    const auto sym = [&](const char* name) {
      void* f = dlsym(h, name);
      XTRAIN_USAGE_CHECK(f, "tokenizer: ", path.string(), " has no ", name, " (a stale build? rebuild xtrain)");
      return f;
    };
    return SpmApi{reinterpret_cast<decltype(&xspm_train)>(sym("xspm_train")),
                  reinterpret_cast<decltype(&xspm_load)>(sym("xspm_load")),
                  reinterpret_cast<decltype(&xspm_free)>(sym("xspm_free")),
                  reinterpret_cast<decltype(&xspm_piece_size)>(sym("xspm_piece_size")),
                  reinterpret_cast<decltype(&xspm_eos_id)>(sym("xspm_eos_id")),
                  reinterpret_cast<decltype(&xspm_encode)>(sym("xspm_encode")),
                  reinterpret_cast<decltype(&xspm_decode)>(sym("xspm_decode"))};
  }
  XTRAIN_USAGE_ERROR("tokenizer: SentencePiece (bpe, unigram) needs ", kShimName,
                     ", built with xtrain beside the program (set XTRAIN_SPM_LIBRARY to its path); tried:", tried);
}

const SpmApi& spm() {
  static const SpmApi api = open_spm_api();
  return api;
}

void to_string(void* ctx, const char* data, size_t size) { static_cast<std::string*>(ctx)->assign(data, size); }

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string type, std::string serialized, const std::string& origin)
      : type_(std::move(type)), serialized_(std::move(serialized)) {
    std::string err;
    sp_ = spm().load(serialized_.data(), serialized_.size(), to_string, &err);
    XTRAIN_USAGE_CHECK(sp_, "tokenizer: ", origin, " is not a SentencePiece model: ", err);
  }
  ~SentencePieceTokenizer() override { spm().free(sp_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::string type() const override { return type_; }
  int64_t vocab_size() const override { return spm().piece_size(sp_); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::string bytes, err;
    XTRAIN_USAGE_CHECK(spm().encode(sp_, text.data(), text.size(), to_string, &bytes, to_string, &err) == 0,
                       "tokenizer: SentencePiece encode failed: ", err);
    std::vector<int32_t> ids(bytes.size() / sizeof(int32_t));
    std::memcpy(ids.data(), bytes.data(), ids.size() * sizeof(int32_t));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    const int64_t n = vocab_size();
    for (size_t i = 0; i < ids.size(); ++i) {
      XTRAIN_USAGE_CHECK(ids[i] >= 0 && ids[i] < n, "tokenizer: ", type_, " id ", ids[i], " at position ", i,
                         " is outside the vocabulary [0, ", n, ")");
    }
    std::string text, err;
    XTRAIN_USAGE_CHECK(spm().decode(sp_, ids.data(), ids.size(), to_string, &text, to_string, &err) == 0,
                       "tokenizer: SentencePiece decode failed: ", err);
    return text;
  }
  std::optional<int32_t> end_of_text() const override {
    const int eos = spm().eos_id(sp_);
    return eos >= 0 ? std::optional<int32_t>(eos) : std::nullopt;
  }
  void save(const fs::path& dir) const override {
    fs::create_directories(dir);
    write_file_atomic((dir / kModelFile).string(), serialized_);
    nlohmann::json j{{"type", type_}, {"vocab_size", vocab_size()}, {"model", kModelFile}};
    write_file_atomic((dir / kTokenizerFile).string(), j.dump(2));
  }

 private:
  std::string type_;
  std::string serialized_;
  xspm_processor* sp_ = nullptr;
};

}  // namespace

std::unique_ptr<Tokenizer> train_sentencepiece(const std::string& type, int64_t vocab_size,
                                               const std::vector<fs::path>& files) {
  XTRAIN_USAGE_CHECK(vocab_size > 0, "tokenizer: a ", type, " tokenizer needs a vocabulary size (--vocab-size), got ",
                     vocab_size);
  for (const auto& f : files) XTRAIN_USAGE_CHECK(fs::exists(f), "tokenizer: training text ", f.string(), " does not exist");
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<std::string> options{
      "model_type", type, "vocab_size", std::to_string(vocab_size),
      "normalization_rule_name", "identity", "remove_extra_whitespaces", "false",
      "add_dummy_prefix", "false", "byte_fallback", "true", "split_digits", "true",
      "character_coverage", "0.9995", "input_sentence_size", "2000000",
      "shuffle_input_sentence", "true", "num_threads", std::to_string(threads), "minloglevel", "2"};
  std::vector<const char*> option_ptrs, file_ptrs;
  for (const auto& o : options) option_ptrs.push_back(o.c_str());
  std::vector<std::string> file_names;
  for (const auto& f : files) file_names.push_back(f.string());
  for (const auto& f : file_names) file_ptrs.push_back(f.c_str());
  std::string serialized, err;
  const int rc = spm().train(file_ptrs.data(), file_ptrs.size(), option_ptrs.data(), option_ptrs.size() / 2,
                             to_string, &serialized, to_string, &err);
  XTRAIN_USAGE_CHECK(rc == 0, "tokenizer: training the ", type, " tokenizer with vocabulary size ", vocab_size,
                     " failed: ", err,
                     " (byte fallback needs 256 byte pieces plus 3 specials plus the text's characters: use a larger "
                     "--vocab-size; a unigram vocabulary also cannot exceed what the text supports)");
  return std::make_unique<SentencePieceTokenizer>(type, std::move(serialized), "the trained model");
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& type, const fs::path& model_file) {
  XTRAIN_USAGE_CHECK(fs::exists(model_file), "tokenizer: SentencePiece model ", model_file.string(),
                     " does not exist");
  return std::make_unique<SentencePieceTokenizer>(type, read_file(model_file.string()), model_file.string());
}

}  // namespace xtrain::data
