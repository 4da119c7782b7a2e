// The operator console on the admin listener (docs/operations.md, Console):
// one page and its script and style, built into the binary, and the JSON it
// reads. The page loads without the admin key and shows nothing until the
// key it is given works: every call it makes carries the key in
// Authorization (kept in the tab's sessionStorage, never in a cookie), so a
// page of another origin can neither ride on a login (CSRF) nor read a reply.
//   GET /, /console/{file}         the page and its files (no key)
//   GET /admin/console/state       keys, upstreams, nodes now (admin key)
//   GET /admin/console/history     the last hour in 10 s samples (admin key)
// Key actions go through the runtime key API (/admin/keys), the live tail
// through /admin/events.
#pragma once

#include <string_view>

#include "relay/api/admin.hpp"
#include "relay/common/headers.hpp"
#include "relay/net/exchange.hpp"

namespace relay::api {

// The Content-Security-Policy of every admin answer: the page may load its
// own files and talk to its own origin only, with no inline script or style,
// and may not be framed.
inline constexpr std::string_view kConsoleCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

// At most this many keys are listed in /admin/console/state (the rest are
// counted in keys_total); /admin/keys lists every one.
inline constexpr std::size_t kConsoleMaxKeys = 1000;

// True for "/" and "/console/...": the page's files, served without a key.
bool isConsoleAsset(std::string_view path);
net::Task<void> serveConsoleAsset(net::Exchange& exchange);

// /admin/console/{state,history}; the admin key is checked already.
net::Task<void> serveConsoleData(net::Exchange& exchange, AdminState& state);

// Adds the headers every admin answer carries: CSP, nosniff, no referrer,
// no framing, and Cache-Control: no-store unless the answer set its own.
void addAdminSecurityHeaders(Headers& headers);

}  // namespace relay::api
