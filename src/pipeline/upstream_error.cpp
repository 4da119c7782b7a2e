#include "relay/pipeline/upstream_error.hpp"

#include <nlohmann/json.hpp>

#include "relay/common/json_write.hpp"
#include "relay/common/redact.hpp"

namespace relay::pipeline {
namespace {

struct Mapping {
  std::string_view moonshotType;
  std::string_view type;
  std::string_view code;
  bool retryable;
};

// Moonshot error types and what an OpenAI client should see (PROTOCOLS.md).
constexpr Mapping kMoonshot[] = {
    {"invalid_authentication_error", "invalid_request_error", "upstream_authentication_failed",
     false},
    {"incorrect_api_key_error", "invalid_request_error", "upstream_authentication_failed", false},
    {"permission_denied_error", "invalid_request_error", "permission_denied", false},
    {"resource_not_found_error", "invalid_request_error", "model_not_found", false},
    {"rate_limit_reached_error", "requests", "rate_limit_exceeded", true},
    {"engine_overloaded_error", "server_error", "engine_overloaded", true},
    {"exceeded_current_quota_error", "insufficient_quota", "insufficient_quota", false},
    {"content_filter", "invalid_request_error", "content_filter", false},
    {"server_error", "server_error", "", true},
    {"unexpected_output", "server_error", "", true},
};

std::string snippet(std::string_view body) {
  std::string s(body.substr(0, 200));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return s;
}

}  // namespace

UpstreamErrorView normaliseUpstreamError(std::string_view upstreamName, int status,
                                         std::string_view body, std::string_view upstreamKey) {
  UpstreamErrorView v;
  // 4xx other than 408/409/429 will fail again the same way.
  v.retryable = status >= 500 || status == 408 || status == 409 || status == 429;
  std::string message;
  std::string param;
  v.type = status >= 500 ? "server_error" : "invalid_request_error";

  auto json = nlohmann::json::parse(body, nullptr, false);
  const nlohmann::json* err = nullptr;
  if (!json.is_discarded() && json.is_object()) {
    auto it = json.find("error");
    if (it != json.end() && it->is_object()) err = &*it;
  }
  if (err) {
    if (auto m = err->find("message"); m != err->end() && m->is_string()) message = *m;
    if (auto p = err->find("param"); p != err->end() && p->is_string()) param = *p;
    if (auto c = err->find("code"); c != err->end()) {
      if (c->is_string())
        v.code = *c;
      else if (c->is_number_integer())
        v.code = std::to_string(c->get<long long>());
    }
    if (auto t = err->find("type"); t != err->end() && t->is_string()) {
      std::string type = *t;
      v.type = type;
      for (const Mapping& m : kMoonshot) {
        if (type == m.moonshotType) {
          v.type = m.type;
          if (v.code.empty()) v.code = m.code;
          v.retryable = m.retryable;
          break;
        }
      }
      if (type == "insufficient_quota" || v.code == "insufficient_quota") v.retryable = false;
    }
  }
  if (status == 401 || status == 403) v.retryable = false;
  redactSecrets(message, upstreamKey);
  redactSecrets(param, upstreamKey);
  redactSecrets(v.code, upstreamKey);
  // Say who answered: a 401 here means the gateway's upstream key was refused,
  // not the caller's.
  std::string who =
      "upstream '" + std::string(upstreamName) + "' answered HTTP " + std::to_string(status);
  if (!message.empty()) {
    message = who + ": " + message;
  } else {
    message = who;
    if (!err && !body.empty()) {
      std::string s = snippet(body);
      redactSecrets(s, upstreamKey);
      message += ": " + s;
    }
  }
  v.body = openAiErrorJson(message, v.type, v.code, param);
  return v;
}

bool refusedGatewayCredential(int status, const UpstreamErrorView& view) {
  if (status == 401) return true;
  return status == 403 && view.code != "insufficient_quota" && view.type != "insufficient_quota";
}

}  // namespace relay::pipeline
