// A minimal protocol-buffers encoder (the wire format: varint keys, varint / fixed32 / fixed64 /
// length-delimited values) for the few TensorBoard messages we write. Hand-written instead of
// generated code, so the monitor does not depend on protobuf or TensorFlow's .proto files.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace xtrain::monitor {

class ProtoWriter {
 public:
  void varint_field(int field, uint64_t v) {
    key(field, 0);
    varint(v);
  }
  void int64_field(int field, int64_t v) { varint_field(field, static_cast<uint64_t>(v)); }
  void double_field(int field, double v) {
    key(field, 1);
    fixed(&v, 8);
  }
  void float_field(int field, float v) {
    key(field, 5);
    fixed(&v, 4);
  }
  void bytes_field(int field, const std::string& bytes) {
    key(field, 2);
    varint(bytes.size());
    out_ += bytes;
  }
  void message_field(int field, const ProtoWriter& m) { bytes_field(field, m.out_); }
  void packed_doubles_field(int field, const std::vector<double>& values) {
    std::string body;
    for (double v : values) body.append(reinterpret_cast<const char*>(&v), 8);  // little-endian hosts
    bytes_field(field, body);
  }
  const std::string& bytes() const { return out_; }

 private:
  void key(int field, int wire_type) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void fixed(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }

  std::string out_;
};

}  // namespace xtrain::monitor
