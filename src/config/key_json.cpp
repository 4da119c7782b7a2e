// One key in and out of JSON, for the admin API and the runtime key store.
// JSON is YAML's flow syntax, so the body goes through the same reader (and
// the same rules and messages) as a `keys[]` entry of the config file.
#include <string>

#include "relay/common/json_write.hpp"
#include "relay/config/parse.hpp"
#include "sections.hpp"
#include "yaml_document.hpp"

namespace relay::config {

Key parseKeyJson(std::string_view json, const Config& context, const std::string& sourceName) {
  const EnvLookup noEnvironment = [](std::string_view) { return std::optional<std::string>(); };
  const detail::Source source{sourceName, &noEnvironment};
  const YAML::Node document = detail::loadSingleDocument(json, source);
  const detail::Value root(source, document, "", document.Mark());
  if (!root.isMap()) root.fail("must be a JSON object with the key's settings");
  const detail::Catalog catalog = detail::catalogOf(context.upstreams, context.mcp);
  try {
    Key key = detail::readKey(root, catalog);
    if (std::string why = residencyProblem(context, &key); !why.empty()) root.fail(why);
    return key;
  } catch (const YAML::Exception& e) {
    detail::throwAt(source, e.mark, "", "unexpected YAML error: " + e.msg);
  }
}

namespace {

void appendList(std::string& out, const std::vector<std::string>& items) {
  out += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    appendJsonString(out, items[i]);
  }
  out += ']';
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string keyToJson(const Key& k) {
  std::string out = "{\"name\":";
  appendJsonString(out, k.name);
  out += ",\"sha256\":";
  appendJsonString(out, k.sha256);
  if (!k.models.empty()) {
    out += ",\"models\":";
    appendList(out, k.models);
  }
  const KeyLimits& l = k.limits;
  if (l.rpm || l.rpmBurst || l.tpm || l.tpmBurst || l.concurrency) {
    out += ",\"limits\":{\"rpm\":" + std::to_string(l.rpm) +
           ",\"rpm_burst\":" + std::to_string(l.rpmBurst) + ",\"tpm\":" + std::to_string(l.tpm) +
           ",\"tpm_burst\":" + std::to_string(l.tpmBurst) +
           ",\"concurrency\":" + std::to_string(l.concurrency) + "}";
  }
  if (k.budget) {
    const KeyBudget& b = *k.budget;
    out += ",\"budget\":{\"period\":\"";
    out += b.period == BudgetPeriod::kDay     ? "day"
           : b.period == BudgetPeriod::kMonth ? "month"
                                              : "total";
    out += "\"";
    if (b.usd) out += ",\"usd\":" + number(*b.usd);
    if (b.maxInputTokens) out += ",\"max_input_tokens\":" + std::to_string(*b.maxInputTokens);
    if (b.maxOutputTokens) out += ",\"max_output_tokens\":" + std::to_string(*b.maxOutputTokens);
    out += '}';
  }
  if (!k.mcpServers.empty()) {
    out += ",\"mcp_servers\":";
    appendList(out, k.mcpServers);
  }
  if (!k.mcpTools.empty()) {
    out += ",\"mcp_tools\":{";
    bool first = true;
    for (const auto& [server, tools] : k.mcpTools) {
      if (!first) out += ',';
      first = false;
      appendJsonString(out, server);
      out += ':';
      appendList(out, tools);
    }
    out += '}';
  }
  if (!k.regions.empty()) {
    out += ",\"regions\":";
    appendList(out, k.regions);
  }
  out += '}';
  return out;
}

}  // namespace relay::config
