// libxtrain_spm.so: SentencePiece training and encoding behind a C interface (xtrain_spm.h says why
// it is a separate, dlopen()ed library).
#include "spm_shim/xtrain_spm.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

struct xspm_processor {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

void report(xspm_bytes_fn fn, void* ctx, const std::string& s) { fn(ctx, s.data(), s.size()); }

// The files' non-empty lines, one sentence each (SentencePiece trains on sentences, not files).
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::vector<std::string> files) : files_(std::move(files)) { advance(); }
  bool done() const override { return file_ >= files_.size() || !status_.ok(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  void advance() {
    while (file_ < files_.size()) {
      if (!in_.is_open()) {
        in_.open(files_[file_], std::ios::binary);
        if (!in_) {
          status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                                "cannot read training text " + files_[file_]);
          return;
        }
      }
      if (pos_ < rest_.size()) return next_chunk();
      while (std::getline(in_, rest_)) {
        pos_ = 0;
        if (!rest_.empty()) return next_chunk();
      }
      in_.close();
      ++file_;
    }
  }
  // A line longer than kMaxSentence (a JSONL document, a file without newlines) is served in
  // pieces cut at a space (else before a UTF-8 lead byte): SentencePiece skips longer sentences.
  void next_chunk() {
    size_t cut = rest_.size();
    if (cut - pos_ > kMaxSentence) {
      cut = rest_.rfind(' ', pos_ + kMaxSentence);
      if (cut == std::string::npos || cut <= pos_) {
        cut = pos_ + kMaxSentence;
        while (cut > pos_ + 1 && (static_cast<unsigned char>(rest_[cut]) & 0xc0) == 0x80) --cut;
      }
    }
    line_ = rest_.substr(pos_, cut - pos_);
    pos_ = cut;
  }
  static constexpr size_t kMaxSentence = 4000;  // SentencePiece's default max_sentence_length: 4192
  std::vector<std::string> files_;
  std::string rest_;  // the current line; served from pos_
  size_t pos_ = 0;
  size_t file_ = 0;
  std::ifstream in_;
  std::string line_;
  sentencepiece::util::Status status_;
};

}  // namespace

extern "C" {

int xspm_train(const char* const* files, size_t n_files, const char* const* options, size_t n_options,
               xspm_bytes_fn out, void* out_ctx, xspm_bytes_fn err, void* err_ctx) {
  std::unordered_map<std::string, std::string> args;
  for (size_t i = 0; i + 1 < 2 * n_options; i += 2) args[options[i]] = options[i + 1];
  LineIterator lines(std::vector<std::string>(files, files + n_files));
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok()) return report(err, err_ctx, status.ToString()), 1;
  report(out, out_ctx, model);
  return 0;
}

xspm_processor* xspm_load(const char* model, size_t size, xspm_bytes_fn err, void* err_ctx) {
  auto* p = new xspm_processor;
  const auto status = p->sp.LoadFromSerializedProto(absl::string_view(model, size));
  if (status.ok()) return p;
  report(err, err_ctx, status.ToString());
  delete p;
  return nullptr;
}

void xspm_free(xspm_processor* p) { delete p; }
int xspm_piece_size(const xspm_processor* p) { return p->sp.GetPieceSize(); }
int xspm_eos_id(const xspm_processor* p) { return p->sp.eos_id(); }

int xspm_encode(const xspm_processor* p, const char* text, size_t size, xspm_bytes_fn out, void* out_ctx,
                xspm_bytes_fn err, void* err_ctx) {
  std::vector<int> ids;
  const auto status = p->sp.Encode(absl::string_view(text, size), &ids);
  if (!status.ok()) return report(err, err_ctx, status.ToString()), 1;
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  out(out_ctx, reinterpret_cast<const char*>(ids32.data()), ids32.size() * sizeof(int32_t));
  return 0;
}

int xspm_decode(const xspm_processor* p, const int32_t* ids, size_t n, xspm_bytes_fn out, void* out_ctx,
                xspm_bytes_fn err, void* err_ctx) {
  std::string text;
  const auto status = p->sp.Decode(std::vector<int>(ids, ids + n), &text);
  if (!status.ok()) return report(err, err_ctx, status.ToString()), 1;
  report(out, out_ctx, text);
  return 0;
}

}  // extern "C"
