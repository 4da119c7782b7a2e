// keys and mcp sections.
#include <algorithm>

#include "sections.hpp"
#include "url.hpp"

namespace relay::config::detail {

namespace {

constexpr std::size_t kMinSessionSecret = 32;

KeyLimits readLimits(const Value& v) {
  KeyLimits l;
  const MapView m = v.map({"rpm", "rpm_burst", "tpm", "tpm_burst", "concurrency"});
  m.with("rpm", [&](const Value& x) { l.rpm = x.unsignedInt<std::uint32_t>(); });
  m.with("rpm_burst", [&](const Value& x) { l.rpmBurst = x.unsignedInt<std::uint32_t>(); });
  m.with("tpm", [&](const Value& x) { l.tpm = x.unsignedInt<std::uint64_t>(); });
  m.with("tpm_burst", [&](const Value& x) { l.tpmBurst = x.unsignedInt<std::uint64_t>(); });
  m.with("concurrency", [&](const Value& x) { l.concurrency = x.unsignedInt<std::uint32_t>(); });
  if (l.rpmBurst != 0 && l.rpm == 0) {
    m.find("rpm_burst")->fail("has no effect without rpm (the refill rate)");
  }
  if (l.tpmBurst != 0 && l.tpm == 0) {
    m.find("tpm_burst")->fail("has no effect without tpm (the refill rate)");
  }
  return l;
}

KeyBudget readBudget(const Value& v) {
  KeyBudget b;
  const MapView m = v.map({"usd", "period", "max_input_tokens", "max_output_tokens"});
  m.with("usd", [&](const Value& x) { b.usd = x.number(0); });
  m.with("period", [&](const Value& x) {
    const std::string p = x.string();
    if (p == "day") {
      b.period = BudgetPeriod::kDay;
    } else if (p == "month") {
      b.period = BudgetPeriod::kMonth;
    } else if (p == "total") {
      b.period = BudgetPeriod::kTotal;
    } else {
      x.fail("must be one of day, month, total; got " + x.echo());
    }
  });
  m.with("max_input_tokens",
         [&](const Value& x) { b.maxInputTokens = x.unsignedInt<std::uint64_t>(); });
  m.with("max_output_tokens",
         [&](const Value& x) { b.maxOutputTokens = x.unsignedInt<std::uint64_t>(); });
  if (!b.usd && !b.maxInputTokens && !b.maxOutputTokens) {
    v.fail("sets no limit: give usd, max_input_tokens or max_output_tokens");
  }
  return b;
}

// A list of distinct names, each of which must be in `known`; `missing` says
// where it was looked for ("no upstream serves model").
std::vector<std::string> readReferences(const Value& v, const std::set<std::string>& known,
                                        std::string_view missing) {
  std::vector<std::string> out;
  for (const Value& item : v.list()) {
    std::string name = readModelId(item);
    if (known.count(name) == 0) item.fail(std::string(missing) + " " + item.echo());
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      item.fail(item.echo() + " is listed twice");
    }
    out.push_back(std::move(name));
  }
  return out;
}

McpServer readMcpServer(const Value& v) {
  McpServer s;
  const MapView m = v.map({"name", "url", "instances", "api_key", "region", "allow_insecure_http",
                           "ca_file", "max_response_bytes", "max_idle_ms", "max_idle_connections"});
  s.name = readName(m.require("name"));
  m.with("allow_insecure_http", [&](const Value& x) { s.allowInsecureHttp = x.boolean(); });
  const auto url = m.find("url");
  const auto instances = m.find("instances");
  if (url && instances) m.failAtKey("instances", "give either url or instances, not both");
  if (!url && !instances) v.fail("missing required key 'url' (or 'instances')");
  const std::vector<Value> items = url ? std::vector{*url} : instances->list();
  if (items.empty()) instances->fail("must list at least one URL");
  for (const Value& item : items) {
    const UrlCheck c = parseHttpUrl(item.string());
    if (!c.error.empty()) item.fail(c.error);
    if (!c.url.isHttps() && !s.allowInsecureHttp) {
      item.fail(
          "plain http:// is refused: the server's credential and the tool traffic would cross "
          "the network unencrypted; use https://, or set allow_insecure_http: true on this "
          "server (e.g. for one on loopback)");
    }
    std::string text = c.url.text();
    if (std::find(s.instances.begin(), s.instances.end(), text) != s.instances.end()) {
      item.fail("this URL is listed twice");
    }
    s.instances.push_back(std::move(text));
  }
  m.with("api_key", [&](const Value& x) { s.apiKey = x.secret(); });
  m.with("region", [&](const Value& x) { s.region = x.string(); });
  m.with("ca_file", [&](const Value& x) { s.caFile = readNonEmpty(x); });
  m.with("max_response_bytes",
         [&](const Value& x) { s.maxResponseBytes = x.unsignedInt<std::uint64_t>(1024); });
  m.with("max_idle_ms", [&](const Value& x) { s.maxIdleMs = readIdleMs(x); });
  m.with("max_idle_connections",
         [&](const Value& x) { s.maxIdleConnections = readIdleConnections(x); });
  return s;
}

std::string readOrigin(const Value& v) {
  std::string text = v.string();
  if (text == "*") return text;
  const UrlCheck c = parseHttpUrl(text);
  if (!c.error.empty()) {
    v.fail("must be '*' or an origin such as https://app.example.com: " + c.error);
  }
  if (!c.url.path.empty()) {
    v.fail("an origin has no path: write scheme://host[:port] without a trailing '/'");
  }
  return c.url.text();
}

}  // namespace

Key readKey(const Value& v, const Catalog& catalog) {
  Key k;
  const MapView m = v.map(
      {"name", "sha256", "models", "limits", "budget", "mcp_servers", "mcp_tools", "regions"});
  k.name = readName(m.require("name"));
  k.sha256 = readSha256(m.require("sha256"));
  m.with("models", [&](const Value& x) {
    k.models = readReferences(x, catalog.models, "no upstream serves model");
  });
  m.with("limits", [&](const Value& x) { k.limits = readLimits(x); });
  m.with("budget", [&](const Value& x) { k.budget = readBudget(x); });
  m.with("mcp_tools", [&](const Value& x) {
    const MapView tools = x.freeMap();
    for (const auto& [server, list] : tools.entries()) {
      if (catalog.mcpServers.count(server) == 0) {
        tools.failAtKey(server, "mcp.servers has no server named '" + server + "'");
      }
      std::vector<std::string> names;
      for (const Value& item : list.list()) {
        std::string tool = item.string();
        if (tool.empty() || tool.size() > 128) item.fail("a tool name is 1 to 128 characters");
        if (std::find(names.begin(), names.end(), tool) != names.end()) {
          item.fail(item.echo() + " is listed twice");
        }
        names.push_back(std::move(tool));
      }
      k.mcpTools.emplace(server, std::move(names));
    }
  });
  m.with("mcp_servers", [&](const Value& x) {
    k.mcpServers = readReferences(x, catalog.mcpServers, "mcp.servers has no server named");
  });
  m.with("regions", [&](const Value& x) { k.regions = readRegions(x); });
  return k;
}

std::vector<Key> readKeys(const Value& v, const Catalog& catalog) {
  std::vector<Key> out;
  for (const Value& item : v.list()) {
    Key k = readKey(item, catalog);
    for (const Key& other : out) {
      if (other.name == k.name) {
        const MapView m = item.freeMap();
        m.failAtKey("name", "key name " + m.require("name").echo() + " is already used");
      }
      if (other.sha256 == k.sha256) {
        item.freeMap().failAtKey("sha256",
                                 "the same digest is already used by key '" + other.name + "'");
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

Mcp readMcp(const Value& v) {
  Mcp mcp;
  const MapView m = v.map({"servers", "allowed_origins", "session_secret", "session_idle_ms"});
  m.with("session_idle_ms",
         [&](const Value& x) { mcp.sessionIdleMs = x.unsignedInt<std::uint32_t>(1000); });
  m.with("servers", [&](const Value& x) {
    for (const Value& item : x.list()) {
      McpServer s = readMcpServer(item);
      for (const McpServer& other : mcp.servers) {
        if (other.name == s.name) {
          const MapView m = item.freeMap();
          m.failAtKey("name", "MCP server name " + m.require("name").echo() + " is already used");
        }
      }
      mcp.servers.push_back(std::move(s));
    }
  });
  m.with("allowed_origins", [&](const Value& x) {
    for (const Value& item : x.list())
      mcp.allowedOrigins.push_back(readOrigin(item));
  });
  m.with("session_secret", [&](const Value& x) {
    mcp.sessionSecret = x.secret();
    if (!mcp.sessionSecret.empty() && mcp.sessionSecret.size() < kMinSessionSecret) {
      x.fail("must be at least 32 characters long (the value is not shown)");
    }
  });
  return mcp;
}

}  // namespace relay::config::detail
