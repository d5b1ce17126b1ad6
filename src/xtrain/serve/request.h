// The JSON bodies of /v1/completions (OpenAI's completions subset) and /v1/classify, checked field
// by field: a wrong type or value is a RequestError naming the field (the server answers 400 with
// it); fields we do not know, or accept without effect, come back as warnings (in the response and
// the log), never silently.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace xtrain::serve {

class RequestError : public std::runtime_error {
 public:
  RequestError(std::string field, const std::string& message) : std::runtime_error(message), field(std::move(field)) {}
  std::string field;  // "" for the body as a whole
};

struct CompletionRequest {
  std::string prompt;
  std::optional<std::vector<int64_t>> prompt_ids;  // a prompt given as token ids
  int64_t max_tokens = 16;                         // OpenAI's default
  double temperature = 1.0;                        // 0: greedy (top_k 1)
  int64_t top_k = 0;
  double top_p = 1.0;
  std::vector<std::string> stop;  // up to 4
  uint64_t seed = 1;              // `xtrain generate`'s default
  bool stream = false;
  std::vector<std::string> warnings;
};

CompletionRequest parse_completion(const std::string& body);

struct ClassifyRequest {
  std::optional<std::string> text;  // text classifiers
  std::vector<double> input;        // tensor classifiers: the values, row-major
  std::vector<int64_t> shape;       // their nested-list shape
  std::vector<std::string> warnings;
};

ClassifyRequest parse_classify(const std::string& body);

// {"error": {"message", "type": "invalid_request_error", "param", "code"}} (OpenAI's shape).
std::string error_json(const std::string& message, const std::string& field, const std::string& type);

// The longest prefix of `text` no longer than `limit` bytes that does not end inside a UTF-8
// sequence (a byte-level model may have produced only part of a character so far).
size_t complete_utf8_prefix(const std::string& text, size_t limit);

}  // namespace xtrain::serve
