#include "xtrain/monitor/web_assets.h"

namespace xtrain::monitor {

const WebAsset* find_web_asset(std::string_view path) {
  for (const auto& a : web_assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

const char* content_type_for(std::string_view path) {
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".json")) return "application/json";
  return "text/plain; charset=utf-8";
}

}  // namespace xtrain::monitor
