#include "healthcheck.hpp"

#include <cstdio>

#include "http_call.hpp"
#include "relay/config/parse.hpp"

namespace relay::app {

int healthcheck(const std::vector<std::string>& args) {
  HttpTarget t;
  t.path = "/healthz";
  for (std::size_t i = 1; i + 1 < args.size(); i += 2) {
    if (args[i] == "--url") {
      if (!parseHttpTarget(args[i + 1], t)) {
        std::fprintf(stderr, "healthcheck: --url must be http://IP:PORT[/PATH]\n");
        return 2;
      }
    } else if (args[i] == "--config") {
      try {
        config::Config cfg = config::loadConfigFile(args[i + 1]);
        if (!cfg.admin.listen) {
          std::fprintf(stderr, "healthcheck: %s has no admin.listen\n", args[i + 1].c_str());
          return 2;
        }
        t.host = cfg.admin.listen->host;
        t.port = cfg.admin.listen->port;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "healthcheck: %s\n", e.what());
        return 2;
      }
    }
  }
  HttpResult r = httpCall(t, "GET", {}, "", 2);
  if (r.status == 0) std::fprintf(stderr, "healthcheck: %s\n", r.error.c_str());
  bool ok = r.status == 200;
  std::printf("%s\n", ok ? "healthy" : "unhealthy");
  return ok ? 0 : 1;
}

}  // namespace relay::app
