#include "xtrain/monitor/dashboard_auth.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstring>
#include <random>

#include "xtrain/base/sha256.h"

namespace xtrain::monitor {

bool is_loopback_host(const std::string& host_in) {
  std::string host = host_in;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string lower;
  for (unsigned char c : host) lower += static_cast<char>(std::tolower(c));
  if (lower == "localhost") return true;
  unsigned char v4[4];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, host.c_str(), v6) != 1) return false;
  static const unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  // ::ffff:a.b.c.d
  return std::memcmp(v6, kLoopback, 16) == 0 || (std::memcmp(v6, kMapped, 12) == 0 && v6[12] == 127);
}

std::string host_without_port(const std::string& host) {
  if (!host.empty() && host[0] == '[') return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.find(':'));
}

bool same_secret(const std::string& given, const std::string& expected) {
  // Fixed-length digests, compared without an early exit: a wrong guess of any length takes as long.
  const std::string a = sha256_hex(given), b = sha256_hex(expected);
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0 && !expected.empty();
}

std::string random_session() {
  std::random_device source;  // /dev/urandom (or the CPU's generator) on Linux
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    uint32_t word = source();
    for (int k = 0; k < 8; ++k, word >>= 4) out += kHex[word & 15];
  }
  return out;
}

std::string session_cookie_name(int port) { return "xtrain_dashboard_" + std::to_string(port); }

std::string cookie_value(const std::string& header, const std::string& name) {
  size_t at = 0;
  while (at < header.size()) {
    size_t end = header.find(';', at);
    if (end == std::string::npos) end = header.size();
    size_t begin = at;
    while (begin < end && header[begin] == ' ') ++begin;
    const size_t eq = header.find('=', begin);
    if (eq != std::string::npos && eq < end && header.compare(begin, eq - begin, name) == 0 &&
        eq - begin == name.size()) {
      return header.substr(eq + 1, end - eq - 1);
    }
    at = end + 1;
  }
  return "";
}

std::string session_set_cookie(const std::string& name, const std::string& value) {
  return name + "=" + value + "; Path=/; HttpOnly; SameSite=Strict";
}

std::string url_encode(const std::string& s, const std::string& keep) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || keep.find(static_cast<char>(c)) != std::string::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string location_without_token(const std::string& path, const std::multimap<std::string, std::string>& params) {
  // A decoded path may hold "//host" (another server, to a browser), CR/LF or anything else:
  // encode it, and keep it only when it is a plain absolute path of this server.
  std::string out = path.size() >= 1 && path[0] == '/' && (path.size() < 2 || path[1] != '/') ? url_encode(path, "/") : "/";
  char sep = '?';
  for (const auto& [key, value] : params) {
    if (key == "token") continue;
    out += sep + url_encode(key) + "=" + url_encode(value);
    sep = '&';
  }
  return out;
}

std::string handoff_page(const std::string& location) {
  std::string href;  // location is %-encoded already: only '&' needs escaping in an attribute
  for (char c : location) href += c == '&' ? std::string("&amp;") : std::string(1, c);
  return "<!doctype html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0; url=" + href +
         "\">\n<title>xtrain dashboard</title>\n<p><a href=\"" + href + "\">Continue to the dashboard</a></p>\n";
}

}  // namespace xtrain::monitor
