// Manifest <-> JSON with nlohmann-json; every malformation is a UsageError naming the file.
#include "xtrain/checkpoint/manifest.h"

#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {
namespace {

using nlohmann::json;

json table_json(const FileTable& files) {
  json out = json::object();
  for (const auto& [name, e] : files) out[name] = {{"bytes", e.bytes}, {"sha256", e.sha256}, {"kind", e.kind}};
  return out;
}

FileTable table_from(const json& j, const std::string& where) {
  XTRAIN_USAGE_CHECK(j.is_object(), "checkpoint: ", where, ": \"files\" must be an object");
  FileTable files;
  for (const auto& [name, e] : j.items()) {
    XTRAIN_USAGE_CHECK(e.is_object() && e.contains("bytes") && e.contains("sha256"), "checkpoint: ", where,
                       ": entry '", name, "' needs \"bytes\" and \"sha256\"");
    FileEntry entry;
    entry.bytes = e.at("bytes").get<int64_t>();
    entry.sha256 = e.at("sha256").get<std::string>();
    entry.kind = e.value("kind", std::string("tensors"));
    files[name] = entry;
  }
  return files;
}

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    XTRAIN_USAGE_ERROR("checkpoint: ", where, " is not valid JSON (", e.what(), ")");
  }
}

}  // namespace

std::string Manifest::to_json() const {
  json j = {{"format", format}, {"tag", tag}, {"seq", seq}, {"files", table_json(files)},
            {"extra", json::parse(extra_json)}};
  return j.dump(2);
}

Manifest Manifest::parse(const std::string& text, const std::string& where) {
  const json j = parse_json(text, where);
  XTRAIN_USAGE_CHECK(j.is_object() && j.contains("format") && j.contains("files"), "checkpoint: ", where,
                     " is not an xtrain manifest (no \"format\"/\"files\")");
  Manifest m;
  try {
    m.format = j.at("format").get<int64_t>();
    XTRAIN_USAGE_CHECK(m.format == kManifestFormat, "checkpoint: ", where, " has format ", m.format,
                       "; this xtrain reads format ", kManifestFormat, " (written by another version?)");
    m.tag = j.value("tag", std::string());
    m.seq = j.value("seq", int64_t(0));
    m.files = table_from(j.at("files"), where);
    m.extra_json = j.value("extra", json::object()).dump();
  } catch (const json::exception& e) {
    XTRAIN_USAGE_ERROR("checkpoint: ", where, ": unexpected value (", e.what(), ")");
  }
  return m;
}

std::string file_table_to_json(const FileTable& files) { return table_json(files).dump(2); }

FileTable file_table_from_json(const std::string& text, const std::string& where) {
  try {
    return table_from(parse_json(text, where), where);
  } catch (const json::exception& e) {
    XTRAIN_USAGE_ERROR("checkpoint: ", where, ": unexpected value (", e.what(), ")");
  }
}

}  // namespace xtrain::checkpoint
