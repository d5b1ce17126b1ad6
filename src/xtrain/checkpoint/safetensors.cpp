// safetensors read through a private read-only mmap (each tensor copied out once, so the result outlives the mapping
// and never depends on the file's alignment) and written with one DurableWriter pass: header, then each tensor's bytes.
#include "xtrain/checkpoint/safetensors.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // the reference implementation's limit

struct Dtype {
  const char* name;
  at::ScalarType type;
};
constexpr std::array<Dtype, 10> kDtypes = {{{"F64", at::kDouble},
                                            {"F32", at::kFloat},
                                            {"F16", at::kHalf},
                                            {"BF16", at::kBFloat16},
                                            {"I64", at::kLong},
                                            {"I32", at::kInt},
                                            {"I16", at::kShort},
                                            {"I8", at::kChar},
                                            {"U8", at::kByte},
                                            {"BOOL", at::kBool}}};

std::string dtype_name(at::ScalarType t, const std::string& tensor, const std::string& path) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  XTRAIN_USAGE_ERROR("safetensors: ", path, ": tensor '", tensor, "' has dtype ", t,
                     ", which safetensors cannot hold here (F64 F32 F16 BF16 "
                     "I64 I32 I16 I8 U8 BOOL)");
}

// A read-only mapping of a whole file; an empty file maps nothing.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    XTRAIN_USAGE_CHECK(fd >= 0, "safetensors: cannot open ", path, ": ", std::strerror(errno));
    struct stat st {};
    const bool ok = ::fstat(fd, &st) == 0;
    size_ = ok ? static_cast<size_t>(st.st_size) : 0;
    if (ok && size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<const uint8_t*>(p);
    }
    const int err = errno;
    ::close(fd);
    XTRAIN_USAGE_CHECK(ok && (size_ == 0 || data_ != nullptr), "safetensors: cannot map ", path, ": ",
                       std::strerror(err));
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

uint64_t as_count(const json& v, const std::string& what, const std::string& path) {
  XTRAIN_USAGE_CHECK(v.is_number_unsigned(), "safetensors: ", path, ": ", what, " must be a non-negative integer, got ",
                     v.dump());
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const json& e, const std::string& path) {
  const std::string where = "tensor '" + name + "'";
  XTRAIN_USAGE_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
                     "safetensors: ", path, ": ", where, " must be an object with dtype, shape and data_offsets, got ",
                     e.dump());
  Entry out;
  out.name = name;
  const auto& dtype = e["dtype"];
  const auto* d = std::find_if(kDtypes.begin(), kDtypes.end(),
                               [&](const Dtype& x) { return dtype.is_string() && dtype.get<std::string>() == x.name; });
  XTRAIN_USAGE_CHECK(d != kDtypes.end(), "safetensors: ", path, ": ", where, " has unknown dtype ", dtype.dump(),
                     " (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  out.type = d->type;
  XTRAIN_USAGE_CHECK(e["shape"].is_array(), "safetensors: ", path, ": ", where, " shape must be a list, got ",
                     e["shape"].dump());
  uint64_t numel = 1;
  for (const auto& s : e["shape"]) {
    out.shape.push_back(static_cast<int64_t>(as_count(s, where + " shape entry", path)));
    numel *= static_cast<uint64_t>(out.shape.back());
  }
  const auto& off = e["data_offsets"];
  XTRAIN_USAGE_CHECK(off.is_array() && off.size() == 2, "safetensors: ", path, ": ", where,
                     " data_offsets must be [begin, end], got ", off.dump());
  out.begin = as_count(off[0], where + " data_offsets", path);
  out.end = as_count(off[1], where + " data_offsets", path);
  XTRAIN_USAGE_CHECK(out.begin <= out.end, "safetensors: ", path, ": ", where, " data_offsets ", off.dump(),
                     " end before begin");
  const uint64_t bytes = numel * c10::elementSize(out.type);
  XTRAIN_USAGE_CHECK(out.end - out.begin == bytes, "safetensors: ", path, ": ", where, " is ", d->name, " ",
                     e["shape"].dump(), " (", bytes, " bytes) but data_offsets ", off.dump(), " span ",
                     out.end - out.begin, " bytes");
  return out;
}

// Offsets inside the data section, in order, with neither overlaps nor holes (the format's rule).
void check_layout(std::vector<Entry>& entries, uint64_t data_bytes, const std::string& path) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    XTRAIN_USAGE_CHECK(e.end <= data_bytes, "safetensors: ", path, ": tensor '", e.name, "' data_offsets [", e.begin,
                       ", ", e.end, "] run past the data section (", data_bytes,
                       " bytes after the header): the file is truncated or the "
                       "offsets are wrong");
    XTRAIN_USAGE_CHECK(e.begin >= offset, "safetensors: ", path, ": tensor '", e.name, "' data_offsets [", e.begin,
                       ", ", e.end, "] overlap tensor '", entries[i - 1].name, "' (which ends at ", offset, ")");
    XTRAIN_USAGE_CHECK(e.begin == offset, "safetensors: ", path, ": a hole of ", e.begin - offset,
                       " bytes before tensor '", e.name, "' (data_offsets must cover the data section exactly)");
    offset = e.end;
  }
  XTRAIN_USAGE_CHECK(offset == data_bytes, "safetensors: ", path, ": ", data_bytes - offset,
                     " bytes after the last tensor belong to no tensor (a trailing hole)");
}

json parse_header(const Mapping& m, uint64_t* header_bytes, const std::string& path) {
  XTRAIN_USAGE_CHECK(m.size() >= 8, "safetensors: ", path, " is truncated: ", m.size(),
                     " bytes, fewer than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | m.data()[i];
  XTRAIN_USAGE_CHECK(n <= kMaxHeader, "safetensors: ", path, ": header length ", n,
                     " is over 100 MiB: not a safetensors file");
  XTRAIN_USAGE_CHECK(n <= m.size() - 8, "safetensors: ", path, " is truncated: the header says ", n,
                     " bytes of JSON but only ", m.size() - 8, " bytes follow the length");
  const auto* text = reinterpret_cast<const char*>(m.data() + 8);
  json header = json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  XTRAIN_USAGE_CHECK(!header.is_discarded() && header.is_object(), "safetensors: ", path,
                     ": the header is not a JSON object (not a safetensors file?)");
  *header_bytes = n;
  return header;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  const Mapping m(path);
  uint64_t n = 0;
  const json header = parse_header(m, &n, path);
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, e] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(parse_entry(name, e, path));
      continue;
    }
    XTRAIN_USAGE_CHECK(e.is_object(), "safetensors: ", path, ": __metadata__ must be an object of strings");
    for (const auto& [k, v] : e.items()) {
      XTRAIN_USAGE_CHECK(v.is_string(), "safetensors: ", path, ": __metadata__ value of '", k, "' must be a string");
      out.metadata[k] = v.get<std::string>();
    }
  }
  check_layout(entries, m.size() - 8 - n, path);
  const uint8_t* data = m.data() + 8 + n;
  for (const auto& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const SafetensorsMetadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    XTRAIN_USAGE_CHECK(name != "__metadata__" && names.insert(name).second, "safetensors: ", path, ": tensor name '",
                       name, "' is reserved or appears twice");
    XTRAIN_USAGE_CHECK(t.defined() && t.layout() == at::kStrided && !t.is_quantized(), "safetensors: ", path,
                       ": tensor '", name, "' is not a dense tensor");
    const auto c = t.detach().cpu().contiguous();
    const uint64_t bytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type(), name, path)},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::array<uint8_t, 8> length{};
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));
  DurableWriter w(path);
  w.write(length.data(), length.size());
  w.write(text.data(), text.size());
  for (const auto& c : data) {
    if (c.numel() > 0) w.write(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return w.close();
}

}  // namespace xtrain::checkpoint
