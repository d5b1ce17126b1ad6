// The dashboard's static files (web/**), compiled into the binary by cmake/XtrainWeb.cmake so
// `xtrain dashboard` needs no install step and serves exactly the bundled files: a request path is
// looked up in this table, never joined to a filesystem path.
#pragma once
#include <string_view>
#include <vector>

namespace xtrain::monitor {

struct WebAsset {
  std::string_view path;   // relative to web/, '/'-separated: "index.html", "vendor/uPlot.iife.min.js"
  std::string_view bytes;  // the file's content
};

// Every bundled file (defined in the generated web_assets.cpp).
const std::vector<WebAsset>& web_assets();
// The asset at exactly `path`, or nullptr.
const WebAsset* find_web_asset(std::string_view path);
// "text/html; charset=utf-8", "text/javascript; charset=utf-8", … by file extension.
const char* content_type_for(std::string_view path);

}  // namespace xtrain::monitor
