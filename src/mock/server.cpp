#include "server.hpp"

#include <ctime>
#include <exception>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <nlohmann/json.hpp>

#include "pause.hpp"

namespace relay::mock {

namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kChatPath = "/v1/chat/completions";
constexpr std::string_view kModelsPath = "/v1/models";

std::string buildModelsBody(const MockOptions& options) {
  // A fixed `created` keeps the body byte-identical across runs.
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (std::size_t i = 0; i < options.models.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"id\":";
    appendJsonString(out, options.models[i]);
    out += ",\"object\":\"model\",\"created\":1700000000,\"owned_by\":";
    appendJsonString(out, options.name);
    out += '}';
  }
  out += "]}";
  return out;
}

bool isCancellation(const boost::system::system_error& e) {
  return e.code() == boost::asio::error::operation_aborted;
}

}  // namespace

MockServer::MockServer(const MockOptions& options, MockState& state)
    : options_(options), state_(state), modelsBody_(buildModelsBody(options)) {}

net::Task<void> MockServer::handle(net::Exchange& exchange) {
  // The mock reads every body first: it records requests whole.
  net::BodyResult body = co_await exchange.readBody();
  if (!body.ok()) {
    if (body.status != net::BodyStatus::kGone) {
      co_await replyError(exchange, body.httpStatus(), body.message);
    }
    co_return;
  }
  if (exchange.head.path.starts_with("/_mock/")) {
    co_await control(exchange);
    co_return;
  }
  std::uint64_t sequence = state_.beginExchange();
  if (state_.recording()) recordRequest(exchange);

  Outcome outcome = Outcome::kClientGone;
  std::exception_ptr failure;
  try {
    outcome = co_await api(exchange, sequence);
  } catch (const boost::system::system_error& e) {
    // Once the session cancels the coroutine, its next co_await throws this.
    if (!isCancellation(e) && !exchange.response->clientGone()) failure = std::current_exception();
  } catch (...) {
    failure = std::current_exception();
  }
  state_.endExchange(outcome == Outcome::kClientGone && !failure,
                     outcome == Outcome::kStreamCompleted);
  // Anything else is a bug in the mock: let the session turn it into a 500.
  if (failure) std::rethrow_exception(failure);
}

net::Task<Outcome> MockServer::api(net::Exchange& exchange, std::uint64_t sequence) {
  const Headers& headers = exchange.head.headers;

  // A request's own fault wins over the run-wide one (and leaves its count alone).
  FaultSpec fault;
  if (const std::optional<std::string_view> text = headers.find("x-mock-fault")) {
    FaultParseResult parsed = parseFaultSpec(*text);
    if (parsed.ok() && parsed.spec.times) parsed.error = "times= is for run-wide faults only";
    if (!parsed.ok()) co_return co_await replyError(exchange, 400, "x-mock-fault: " + parsed.error);
    fault = std::move(parsed.spec);
  } else if (std::optional<FaultSpec> runWide = state_.takeFault()) {
    fault = std::move(*runWide);
  }

  if (fault.firstByteDelayMs > 0 &&
      !co_await pauseFor(*exchange.response, fault.firstByteDelayMs)) {
    co_return Outcome::kClientGone;
  }
  if (fault.hang) {
    co_await waitForClientGone(*exchange.response);
    co_return Outcome::kClientGone;
  }
  if (fault.reset) {
    exchange.response->abort();
    co_return Outcome::kAborted;
  }
  if (fault.status) co_return co_await faultStatus(exchange, fault);
  if (fault.bodyBytes) co_return co_await faultBody(exchange, *fault.bodyBytes, fault.bodyChunked);

  if (!options_.apiKey.empty()) {
    const std::optional<std::string_view> auth = headers.find("authorization");
    bool schemeOk = auth && auth->size() > 7 && equalsIgnoreCase(auth->substr(0, 7), "bearer ");
    if (!schemeOk || std::string_view(*auth).substr(7) != options_.apiKey) {
      // OpenAI tells a missing key (code null) from a wrong one (invalid_api_key).
      bool missing = !schemeOk;
      std::string message = missing ? "You didn't provide an API key. You need to provide your API "
                                      "key in an Authorization header using Bearer auth (i.e. "
                                      "Authorization: Bearer YOUR_KEY)."
                                    : "Incorrect API key provided.";
      ErrorFields fields{message, {}, {}, {}};
      if (missing) fields.code = std::string_view();
      std::string body = errorBody(options_.flavor, 401, fields);
      co_return co_await reply(exchange, 401, std::move(body));
    }
  }

  const std::string& path = exchange.head.path;
  const std::string& method = exchange.head.method;
  if (path == kChatPath) {
    if (method == "POST") co_return co_await chatCompletions(exchange, fault, sequence);
  } else if (path == "/v1/embeddings") {
    if (method == "POST") co_return co_await embeddings(exchange);
  } else if (path == kModelsPath) {
    if (method == "GET") {
      if (fault.resetAfterChunks) {
        co_return co_await replyTruncated(exchange, makeHead(exchange, 200, kJson), modelsBody_);
      }
      co_return co_await reply(exchange, 200, modelsBody_);
    }
  } else {
    co_return co_await replyError(exchange, 404, "Invalid URL (" + method + " " + path + ")");
  }
  co_return co_await replyError(exchange, 405, "Method " + method + " not allowed on " + path);
}

net::Task<Outcome> MockServer::faultStatus(net::Exchange& exchange, const FaultSpec& fault) {
  int status = *fault.status;
  std::string message = "mock fault: status " + std::to_string(status);
  std::string body = errorBody(options_.flavor, status, {message, fault.errorType, {}, {}});
  net::ResponseHead head = makeHead(exchange, status, kJson);
  if (fault.retryAfterSeconds)
    head.headers.add("retry-after", std::to_string(*fault.retryAfterSeconds));
  if (fault.retryAfterMs) head.headers.add("retry-after-ms", std::to_string(*fault.retryAfterMs));
  bool sent = co_await exchange.response->respond(std::move(head), std::move(body));
  co_return sent ? Outcome::kAnswered : Outcome::kClientGone;
}

// A 200 JSON body of `bytes` bytes (an object padded with spaces), sent whole
// with its length or chunked in 64 KiB writes.
net::Task<Outcome> MockServer::faultBody(net::Exchange& exchange, std::uint32_t bytes,
                                         bool chunked) {
  net::ResponseSink& sink = *exchange.response;
  if (!chunked) {
    std::string body = "{";
    body.resize(std::max<std::uint32_t>(bytes, 2) - 1, ' ');
    body += '}';
    bool sent = co_await sink.respond(makeHead(exchange, 200, kJson), std::move(body));
    co_return sent ? Outcome::kAnswered : Outcome::kClientGone;
  }
  if (!co_await sink.start(makeHead(exchange, 200, kJson))) co_return Outcome::kClientGone;
  std::string piece(64 * 1024, ' ');
  std::uint64_t left = bytes;
  bool first = true;
  while (left > 0) {
    std::string_view part(piece.data(), std::min<std::uint64_t>(left, piece.size()));
    std::string opening;
    if (first) {
      opening = "{" + std::string(part.substr(1));
      part = opening;
      first = false;
    }
    if (!co_await sink.write(part)) co_return Outcome::kClientGone;
    left -= part.size();
  }
  if (!co_await sink.finish()) co_return Outcome::kClientGone;
  co_return Outcome::kAnswered;
}

// POST /v1/embeddings: one 8-dimensional vector per input, derived from its
// text (the same input always gets the same vector), and usage as OpenAI
// reports it (prompt tokens = characters / 4, rounded up).
net::Task<Outcome> MockServer::embeddings(net::Exchange& exchange) {
  auto body = nlohmann::json::parse(exchange.body, nullptr, false);
  if (!body.is_object() || !body.contains("model") || !body["model"].is_string() ||
      !body.contains("input")) {
    co_return co_await replyError(exchange, 400, "model and input are required", "input");
  }
  std::vector<std::string> inputs;
  std::uint64_t tokens = 0;
  const auto& input = body["input"];
  if (input.is_string()) {
    inputs.push_back(input.get<std::string>());
  } else if (input.is_array()) {
    for (const auto& item : input) {
      if (item.is_string())
        inputs.push_back(item.get<std::string>());
      else if (item.is_number())
        tokens += 1;
      else if (item.is_array())
        tokens += item.size();
    }
    if (inputs.empty() && tokens > 0) inputs.push_back(std::string());
  }
  nlohmann::json data = nlohmann::json::array();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    tokens += (inputs[i].size() + 3) / 4;
    std::uint64_t h = 1469598103934665603ull;
    for (char c : inputs[i])
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    nlohmann::json vec = nlohmann::json::array();
    for (int d = 0; d < 8; ++d)
      vec.push_back(static_cast<double>((h >> (d * 8)) & 0xff) / 255.0);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vec}});
  }
  nlohmann::json out = {{"object", "list"},
                        {"data", data},
                        {"model", body["model"]},
                        {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  co_return co_await reply(exchange, 200, out.dump());
}

net::Task<void> MockServer::control(net::Exchange& exchange) {
  const std::string& path = exchange.head.path;
  const std::string& method = exchange.head.method;
  if (path == "/_mock/requests" && method == "GET") {
    co_await reply(exchange, 200, state_.requestsJson());
  } else if (path == "/_mock/requests" && method == "DELETE") {
    state_.clearRequests();
    co_await reply(exchange, 200, "{\"ok\":true}");
  } else if (path == "/_mock/stats" && method == "GET") {
    co_await reply(exchange, 200, state_.statsJson());
  } else if (path == "/_mock/stats/reset" && method == "POST") {
    state_.resetStats();
    co_await reply(exchange, 200, "{\"ok\":true}");
  } else if (path == "/_mock/fault" && method == "POST") {
    FaultParseResult parsed = parseFaultSpec(exchange.body);
    if (!parsed.ok()) {
      co_await replyError(exchange, 400, parsed.error);
      co_return;
    }
    std::optional<RunWideFault> fault;
    if (!parsed.spec.isNoop()) fault = RunWideFault{parsed.spec, parsed.spec.times};
    state_.setFault(fault);
    std::string body = "{\"fault\":";
    appendJsonString(body, fault ? describeFault(parsed.spec) : std::string());
    body += '}';
    co_await reply(exchange, 200, std::move(body));
  } else if (path == "/_mock/fault" && method == "DELETE") {
    state_.setFault(std::nullopt);
    co_await reply(exchange, 200, "{\"fault\":\"\"}");
  } else if (path == "/_mock/fault" && method == "GET") {
    std::optional<RunWideFault> fault = state_.currentFault();
    std::string body = "{\"fault\":";
    appendJsonString(body, fault ? describeFault(fault->spec) : std::string());
    body += ",\"remaining\":";
    body += fault && fault->remaining ? std::to_string(*fault->remaining) : "null";
    body += '}';
    co_await reply(exchange, 200, std::move(body));
  } else {
    co_await replyError(exchange, 404, "Unknown mock control URL: " + method + " " + path);
  }
}

net::ResponseHead MockServer::makeHead(const net::Exchange& exchange, int status,
                                       std::string_view contentType) const {
  net::ResponseHead head;
  head.status = status;
  head.headers.reserve(4);
  head.headers.add("content-type", contentType);
  head.headers.add("x-mock-name", options_.name);
  if (const std::optional<std::string_view> id = exchange.head.headers.find("x-request-id")) {
    head.headers.add("x-request-id", *id);
  }
  return head;
}

net::Task<Outcome> MockServer::reply(net::Exchange& exchange, int status, std::string body) {
  bool sent =
      co_await exchange.response->respond(makeHead(exchange, status, kJson), std::move(body));
  co_return sent ? Outcome::kAnswered : Outcome::kClientGone;
}

net::Task<Outcome> MockServer::replyError(net::Exchange& exchange, int status, std::string message,
                                          std::string param) {
  // The mock's own errors (bad request, unknown URL) carry no code, as OpenAI's do.
  std::string body = errorBody(options_.flavor, status, {message, {}, param, std::string_view()});
  co_return co_await reply(exchange, status, std::move(body));
}

net::Task<Outcome> MockServer::replyTruncated(net::Exchange& exchange, net::ResponseHead head,
                                              std::string body) {
  net::ResponseSink& sink = *exchange.response;
  if (!co_await sink.start(std::move(head))) co_return Outcome::kClientGone;
  if (!co_await sink.write(std::string_view(body).substr(0, body.size() / 2))) {
    co_return Outcome::kClientGone;
  }
  sink.abort();
  co_return Outcome::kAborted;
}

void MockServer::recordRequest(const net::Exchange& exchange) {
  const net::RequestHead& head = exchange.head;
  RecordedRequest r;
  r.timeMs = nowUnixMs();
  r.method = head.method;
  r.path = head.path;
  r.query = head.query;
  r.protocol = head.protocol == net::Protocol::kHttp2 ? "h2" : "http/1.1";
  r.headers.reserve(head.headers.size());
  for (const HeaderField& f : head.headers)
    r.headers.emplace_back(f.name, f.value);
  r.body = exchange.body;
  state_.record(std::move(r));
}

}  // namespace relay::mock
