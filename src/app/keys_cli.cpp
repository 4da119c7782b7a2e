#include "keys_cli.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "http_call.hpp"

namespace relay::app {
namespace {

using nlohmann::json;

constexpr const char* kKeysUsage =
    R"(usage: kimi-relay keys ACTION [ARGS] [--admin-url URL] [--admin-key KEY]
  create --name NAME [SETTINGS]   a new key; its secret is printed once
  list                            every key with its limits and usage
  show NAME                       one key
  update NAME [SETTINGS] [--restore]
                                  change settings (--restore brings back a revoked file key)
  revoke NAME                     at once
  rotate NAME [--grace-seconds N] a new secret; the old one works for N s more (default 3600)
SETTINGS: --rpm N --rpm-burst N --tpm N --tpm-burst N --concurrency N --models A,B
          --budget-usd X --budget-period day|month|total --max-input-tokens N
          --max-output-tokens N --mcp-servers A,B
The gateway's admin listener: --admin-url (or KIMI_RELAY_ADMIN_URL, default
http://127.0.0.1:9090) and the admin key: --admin-key (or KIMI_RELAY_ADMIN_KEY).
)";

int usage(const std::string& why) {
  std::fprintf(stderr, "kimi-relay keys: %s\n\n%s", why.c_str(), kKeysUsage);
  return 2;
}

json list(const std::string& csv) {
  json out = json::array();
  std::size_t at = 0;
  while (at <= csv.size()) {
    std::size_t comma = csv.find(',', at);
    std::string item = csv.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Numbers are passed as written: the gateway checks them with the config's rules.
json number(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  return v.is_number() ? v : json(text);
}

// What the command line of `kimi-relay keys ACTION` asks for.
struct KeysArgs {
  std::string url;
  std::string adminKey;
  std::string name;
  json body = json::object();
  json limits = json::object();
  json budget = json::object();
  std::int64_t grace = -1;
  bool restore = false;
};

// Reads the flags after ACTION into `a`. Returns an exit code when the
// command is over (--help, or a usage error), nullopt to go on.
std::optional<int> readKeysArgs(const std::vector<std::string>& args, const std::string& action,
                                KeysArgs& a) {
  const char* envUrl = std::getenv("KIMI_RELAY_ADMIN_URL");
  const char* envKey = std::getenv("KIMI_RELAY_ADMIN_KEY");
  a.url = envUrl ? envUrl : "http://127.0.0.1:9090";
  a.adminKey = envKey ? envKey : "";
  std::size_t i = 2;
  if ((action == "show" || action == "update" || action == "revoke" || action == "rotate") &&
      i < args.size() && args[i].rfind("--", 0) != 0) {
    a.name = args[i++];
  }
  for (; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("%s", kKeysUsage);
      return 0;
    }
    if (flag == "--restore") {
      a.restore = true;
      continue;
    }
    if (i + 1 >= args.size()) return usage(flag + " needs a value");
    const std::string& v = args[++i];
    if (flag == "--admin-url")
      a.url = v;
    else if (flag == "--admin-key")
      a.adminKey = v;
    else if (flag == "--name")
      a.name = v;
    else if (flag == "--rpm")
      a.limits["rpm"] = number(v);
    else if (flag == "--rpm-burst")
      a.limits["rpm_burst"] = number(v);
    else if (flag == "--tpm")
      a.limits["tpm"] = number(v);
    else if (flag == "--tpm-burst")
      a.limits["tpm_burst"] = number(v);
    else if (flag == "--concurrency")
      a.limits["concurrency"] = number(v);
    else if (flag == "--models")
      a.body["models"] = list(v);
    else if (flag == "--mcp-servers")
      a.body["mcp_servers"] = list(v);
    else if (flag == "--budget-usd")
      a.budget["usd"] = number(v);
    else if (flag == "--budget-period")
      a.budget["period"] = v;
    else if (flag == "--max-input-tokens")
      a.budget["max_input_tokens"] = number(v);
    else if (flag == "--max-output-tokens")
      a.budget["max_output_tokens"] = number(v);
    else if (flag == "--grace-seconds")
      a.grace = std::atoll(v.c_str());
    else
      return usage("unknown flag " + flag);
  }
  if (!a.limits.empty()) a.body["limits"] = a.limits;
  if (!a.budget.empty()) a.body["budget"] = a.budget;
  if (a.restore) a.body["revoked"] = false;
  if (a.adminKey.empty())
    return usage("the admin key is needed: --admin-key or KIMI_RELAY_ADMIN_KEY");
  if (action != "list" && a.name.empty()) return usage(action + " needs a key NAME");
  return std::nullopt;
}

// The admin API call for `action`: its method and payload; `target.path` is set.
std::pair<std::string, std::string> adminCall(const std::string& action, KeysArgs& a,
                                              HttpTarget& target) {
  target.path = "/admin/keys";
  if (action == "create") {
    a.body["name"] = a.name;
    return {"POST", a.body.dump()};
  }
  if (action == "show") {
    target.path += "/" + a.name;
    return {"GET", ""};
  }
  if (action == "update") {
    target.path += "/" + a.name;
    return {"PATCH", a.body.dump()};
  }
  if (action == "revoke") {
    target.path += "/" + a.name;
    return {"DELETE", ""};
  }
  if (action == "rotate") {
    target.path += "/" + a.name + "/rotate";
    return {"POST", a.grace >= 0 ? json{{"grace_seconds", a.grace}}.dump() : "{}"};
  }
  return {"GET", ""};  // list
}

// Prints the gateway's answer (an error's message on stderr); the exit code.
int printAdminReply(const HttpResult& r) {
  if (r.status == 0) {
    std::fprintf(stderr, "kimi-relay keys: %s\n", r.error.c_str());
    return 1;
  }
  json reply = json::parse(r.body, nullptr, false);
  if (r.status / 100 != 2) {
    std::string message = !reply.is_discarded() && reply.contains("error")
                              ? reply["error"].value("message", r.body)
                              : r.body;
    std::fprintf(stderr, "kimi-relay keys: HTTP %d: %s\n", r.status, message.c_str());
    return 1;
  }
  std::printf("%s\n", reply.is_discarded() ? r.body.c_str() : reply.dump(2).c_str());
  if (!reply.is_discarded() && reply.contains("key")) {
    std::fprintf(stderr,
                 "\nThe key above is shown this once; the gateway keeps only its digest.\n");
  }
  return 0;
}

}  // namespace

int keysAdminCommand(const std::vector<std::string>& args) {
  if (args.size() < 2) return -1;
  const std::string& action = args[1];
  if (action != "create" && action != "list" && action != "show" && action != "update" &&
      action != "revoke" && action != "rotate")
    return -1;
  KeysArgs a;
  if (std::optional<int> done = readKeysArgs(args, action, a)) return *done;
  HttpTarget target;
  if (!parseHttpTarget(a.url, target)) return usage("--admin-url must be http://IP:PORT");
  auto [method, payload] = adminCall(action, a, target);
  HttpResult r = httpCall(
      target, method,
      {{"authorization", "Bearer " + a.adminKey}, {"content-type", "application/json"}}, payload);
  return printAdminReply(r);
}

}  // namespace relay::app
