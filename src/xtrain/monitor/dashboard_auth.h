// Who may read the dashboard, as pure functions over strings (the HTTP glue is in
// dashboard_server.cpp). The token arrives in an `Authorization: Bearer T` header, or once in the
// URL (`?token=T`), which the server trades for a cookie holding a random per-server session value
// and a redirect to the same URL without the token: the token does not stay in the address bar or
// reach a Referer, and the browser never stores it. The redirect is a page that refreshes at once,
// not a 30x: after a link from another site, a browser treats the whole 30x chain as cross-site and
// withholds the SameSite=Strict cookie from its last request; the page's own refresh is same-site.
// Secrets are compared through their SHA-256 digests: the time taken depends on neither the
// content nor the length of a guess.
#pragma once
#include <map>
#include <string>

namespace xtrain::monitor {

// 127.0.0.0/8 (dotted quad), ::1 (also as [::1] and ::ffff:127.x.y.z) or "localhost". Anything
// else, including names that merely start with "127.", is not loopback.
bool is_loopback_host(const std::string& host);
// "host" from a Host header value "host:port" / "[v6]:port".
std::string host_without_port(const std::string& host_header);

// Equal secrets; time independent of where they differ and of their lengths.
bool same_secret(const std::string& given, const std::string& expected);
// 64 hex characters from the system's random source: the value of the session cookie.
std::string random_session();

// The cookie name for a server on `port` (cookies are per host, not per port).
std::string session_cookie_name(int port);
// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "".
std::string cookie_value(const std::string& cookie_header, const std::string& name);
// "<name>=<value>; Path=/; HttpOnly; SameSite=Strict"
std::string session_set_cookie(const std::string& name, const std::string& value);
// Where to send the browser after it showed its token in the URL: the same path (%-encoded; "/"
// for anything that could leave this server, such as "//host") with every parameter but `token`.
std::string location_without_token(const std::string& path, const std::multimap<std::string, std::string>& params);

// The page answering `?token=T`: refreshes at once to `location` (from location_without_token),
// with a plain link as a fallback.
std::string handoff_page(const std::string& location);

// RFC 3986 percent-encoding; `keep` lists extra characters left as they are.
std::string url_encode(const std::string& s, const std::string& keep = "");

}  // namespace xtrain::monitor
