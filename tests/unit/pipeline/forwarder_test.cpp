// The forwarder's decisions (chat_forward.hpp) over a scripted upstream
// client: each test states the upstreams' answers in the order the attempts
// meet them, and what the caller is given. No socket, no timer: the fake
// client answers at once and the sleeper only records how long it was asked
// to wait.
#include <deque>
#include <functional>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "chat_forward.hpp"
#include "relay/config/parse.hpp"

namespace relay::pipeline {
namespace {

using upstream::FailureKind;

constexpr std::string_view kDigest =
    "6fac8798243b010e8fa02c328f83b51b136055c8f806c34cf339cd1bf3212de3";
constexpr std::string_view kChatBody =
    R"({"model":"kimi-k2","messages":[{"role":"user","content":"hi"}]})";

// One upstream answer: a response head (with a body), or a failure before any head.
struct Outcome {
  FailureKind failure = FailureKind::kNone;
  int status = 200;
  Headers headers;
  std::string body;
  bool bodyFails = false;  // the body breaks off after its first read
  bool bodyLater = false;  // the body does not come with the head (readAllNow must wait)

  static Outcome head(int status, std::string body = "{}") {
    Outcome o;
    o.status = status;
    o.body = std::move(body);
    return o;
  }
  static Outcome fail(FailureKind kind) {
    Outcome o;
    o.failure = kind;
    return o;
  }
  Outcome& with(std::string_view name, std::string_view value) {
    headers.add(name, value);
    return *this;
  }
  Outcome& later() {
    bodyLater = true;
    return *this;
  }
};

class ScriptedStream final : public upstream::ResponseStream {
 public:
  explicit ScriptedStream(Outcome o) : o_(std::move(o)) {}
  int status() const override { return o_.status; }
  const Headers& headers() const override { return o_.headers; }
  net::Task<bool> read(std::string& out) override {
    if (reads_++ > 0) {
      if (o_.bodyFails) failure_.kind = FailureKind::kReset;
      co_return false;
    }
    out += o_.body;
    co_return true;
  }
  bool complete() const override { return reads_ > 0 && !o_.bodyFails; }
  net::Task<bool> readAll(std::string& out, std::uint64_t limit) override {
    co_return readWhole(out, limit);
  }
  std::optional<bool> readAllNow(std::string& out, std::uint64_t limit) override {
    if (o_.bodyLater) return std::nullopt;
    return readWhole(out, limit);
  }
  const upstream::Failure& failure() const override { return failure_; }
  void abort() override {}

 private:
  bool readWhole(std::string& out, std::uint64_t limit) {
    reads_ = 1;
    if (o_.body.size() > limit) {
      failure_.kind = FailureKind::kTooLarge;
      return false;
    }
    out += o_.body;
    return true;
  }

  Outcome o_;
  int reads_ = 0;
  upstream::Failure failure_;
};

// What the forwarder sent, per attempt.
struct Call {
  std::size_t upstream = 0;
  std::string path;
  std::string body;
  std::string authorization;
};

// Answers the n-th send with the n-th outcome; a send beyond the script fails the test.
class ScriptedClient final : public upstream::UpstreamClient {
 public:
  explicit ScriptedClient(std::vector<Outcome> script) : script_(script.begin(), script.end()) {}

  net::Task<std::unique_ptr<upstream::ResponseStream>> send(
      std::size_t index, const upstream::OutgoingRequest& request, const upstream::Deadlines&,
      upstream::Failure& failure) override {
    calls.push_back(Call{index, std::string(request.path), std::string(request.body),
                         std::string(request.authorization)});
    if (onSend) onSend(calls.size());
    if (script_.empty()) {
      ADD_FAILURE() << "attempt " << calls.size() << " was not in the script";
      failure.kind = FailureKind::kConnect;
      co_return nullptr;
    }
    Outcome o = std::move(script_.front());
    script_.pop_front();
    if (o.failure != FailureKind::kNone) {
      failure.kind = o.failure;
      failure.detail = "scripted";
      co_return nullptr;
    }
    co_return std::make_unique<ScriptedStream>(std::move(o));
  }

  std::vector<Call> calls;
  std::function<void(std::size_t)> onSend;  // after the n-th send is recorded
  std::size_t unused() const { return script_.size(); }

 private:
  std::deque<Outcome> script_;
};

class FakeSink final : public net::ResponseSink {
 public:
  net::Task<bool> respond(net::ResponseHead, std::string) override { co_return !gone; }
  net::Task<bool> start(net::ResponseHead) override { co_return !gone; }
  net::Task<bool> write(std::string_view) override { co_return !gone; }
  net::Task<bool> finish() override { co_return !gone; }
  void abort() override {}
  bool started() const override { return false; }
  bool clientGone() const override { return gone; }
  bool gone = false;
};

// Two upstreams serving kimi-k2 unless a test says otherwise.
std::string twoUpstreams(std::string_view retry = "") {
  return R"(upstreams:
  - name: alpha
    base_url: http://127.0.0.1:9/v1
    allow_insecure_http: true
    api_key: alpha-key
    models: [kimi-k2]
  - name: beta
    base_url: http://127.0.0.1:9/v2
    allow_insecure_http: true
    api_key: beta-key
    models: [kimi-k2]
)" + std::string(retry);
}

constexpr std::string_view kRetry = R"(retry:
  max_attempts: 3
  backoff: {base_ms: 100, max_ms: 400}
  retry_on: [connect_error, timeout, "429", "500", "502", "503", "504"]
)";

class Fixture {
 public:
  explicit Fixture(std::string upstreamsYaml, std::string keyLines = "") {
    std::string yaml = "server:\n  listen: [\"127.0.0.1:0\"]\n" + upstreamsYaml +
                       "keys:\n  - name: a\n    sha256: " + std::string(kDigest) + "\n" + keyLines;
    config::Config cfg = config::parseConfig(
        yaml, "relay.yaml",
        [](std::string_view) -> std::optional<std::string> { return std::nullopt; });
    snapshot_ = std::make_shared<Snapshot>(std::move(cfg), Services{&metrics_});
    worker_.emplace(snapshot_);
  }

  // Forwards one chat request for kimi-k2 through `client`.
  // With `callerLeaves`, the caller goes away during the first attempt.
  // `hops` is the caller's x-relay-hops (another relay in front).
  Forwarded forward(ScriptedClient& client, bool callerLeaves = false, unsigned hops = 0) {
    const Snapshot& snap = *snapshot_;
    net::Exchange exchange;
    exchange.head.method = "POST";
    exchange.head.path = "/v1/chat/completions";
    exchange.body = std::string(kChatBody);
    exchange.response = &sink_;
    ChatPlan plan;
    plan.tenant = &snap.keys.tenants()[0];
    EXPECT_FALSE(readChatRequest(exchange.body, plan.fields));
    plan.route = snap.catalog.route(plan.fields.model);
    EXPECT_NE(plan.route, nullptr);
    ChatRecord record(snap, exchange, RequestId("req-1"), SteadyClock::now());
    if (callerLeaves) client.onSend = [this](std::size_t) { sink_.gone = true; };

    ForwardRequest request{client, exchange, plan, record, hops, SteadyClock::now(), {}};
    request.sleepUntil = [this](SteadyClock::time_point when) -> net::Task<void> {
      sleeps.push_back(std::chrono::ceil<std::chrono::milliseconds>(when - SteadyClock::now()));
      co_return;
    };
    Forwarder forwarder(*worker_, snap, request);  // outlives io and any frame it holds
    boost::asio::io_context io;
    std::optional<Forwarded> out;
    boost::asio::co_spawn(io, forwarder.run(), [&](std::exception_ptr e, Forwarded f) {
      if (e) std::rethrow_exception(e);
      out = std::move(f);
    });
    io.run();
    attempts = record.upstreamSide().attempts;
    return std::move(*out);
  }

  std::string name(std::size_t upstream) const {
    return snapshot_->catalog.upstreams()[upstream].name;
  }
  const upstream::ModelRoute* route(std::string_view model) const {
    return snapshot_->catalog.route(model);
  }
  upstream::HealthStatus health(std::size_t upstream) const {
    return (*snapshot_->upstreamStates)[upstream].health().status(SteadyClock::now());
  }

  std::vector<std::chrono::milliseconds> sleeps;
  unsigned attempts = 0;

 private:
  telemetry::Metrics metrics_;
  std::shared_ptr<Snapshot> snapshot_;
  std::optional<Worker> worker_;
  FakeSink sink_;
};

std::string errorCode(const Forwarded& f) {
  if (!f.error) return "";
  return f.error->code;
}

TEST(Forwarder, ServerErrorsAreRetriedWithBackoffUntilMaxAttempts) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client(
      {Outcome::head(503), Outcome::head(503), Outcome::head(503), Outcome::head(200)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 3u);  // max_attempts, the first try included
  EXPECT_EQ(client.unused(), 1u);
  EXPECT_EQ(f.attempts, 3u);
  ASSERT_TRUE(out.error);
  EXPECT_FALSE(out.response);
  // The last upstream's own answer is passed on, with its status.
  EXPECT_EQ(out.error->status, 503);
  EXPECT_TRUE(out.answeredBy);
  // Full jitter under base_ms * 2^n: at most 100 ms, then 200 ms (a zero draw sleeps not at all).
  ASSERT_LE(f.sleeps.size(), 2u);
  for (std::size_t i = 0; i < f.sleeps.size(); ++i)
    EXPECT_LE(f.sleeps[i].count(), 200);
}

TEST(Forwarder, TooManyRequestsWaitsAsTheUpstreamAsksThenSucceeds) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(429).with("retry-after-ms", "250"), Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  ASSERT_TRUE(out.response);
  EXPECT_EQ(out.response->status(), 200);
  EXPECT_FALSE(out.error);
  ASSERT_EQ(f.sleeps.size(), 1u);
  EXPECT_GE(f.sleeps[0].count(), 249);
  EXPECT_LE(f.sleeps[0].count(), 250);
  EXPECT_EQ(f.attempts, 2u);
}

TEST(Forwarder, TheRequestSentCarriesTheUpstreamsKeyAndPath) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 1u);
  const Call& c = client.calls[0];
  EXPECT_EQ(c.authorization, "Bearer " + f.name(c.upstream) + "-key");
  EXPECT_EQ(c.path, c.upstream == 0 ? "/v1/chat/completions" : "/v2/chat/completions");
  EXPECT_NE(c.body.find(R"("model":"kimi-k2")"), std::string::npos);
  EXPECT_EQ(out.upstream, c.upstream);
}

TEST(Forwarder, AResponseHeadCommitsTheAttemptWhateverItsBodyDoesLater) {
  // A 2xx head is handed to the caller's side as it is: once its bytes flow,
  // a failure can no longer be retried, so nothing here reads ahead or retries.
  Fixture f(twoUpstreams(kRetry));
  Outcome broken = Outcome::head(200, "data: {\"choices\":[]}\n\n");
  broken.bodyFails = true;
  ScriptedClient client({broken, Outcome::head(200)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 1u);
  ASSERT_TRUE(out.response);
  std::string body;
  boost::asio::io_context io;
  bool first = false, second = true;
  boost::asio::co_spawn(
      io,
      [&]() -> net::Task<void> {
        first = co_await out.response->read(body);
        second = co_await out.response->read(body);
      },
      boost::asio::detached);
  io.run();
  EXPECT_TRUE(first);
  EXPECT_FALSE(second);
  EXPECT_EQ(out.response->failure().kind, FailureKind::kReset);
  EXPECT_EQ(client.calls.size(), 1u);
}

TEST(Forwarder, NoRetryOnceTheCallerHasGone) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(503), Outcome::head(200)});
  Forwarded out = f.forward(client, /*callerLeaves=*/true);
  EXPECT_EQ(client.calls.size(), 1u);
  EXPECT_FALSE(out.response);
}

TEST(Forwarder, AConnectionFailureFailsOverToTheOtherUpstream) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::fail(FailureKind::kConnect), Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  EXPECT_NE(client.calls[0].upstream, client.calls[1].upstream);  // untried upstreams first
  ASSERT_TRUE(out.response);
  EXPECT_EQ(out.upstream, client.calls[1].upstream);
}

TEST(Forwarder, EveryUpstreamFailingGivesAnOpenAiError) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::fail(FailureKind::kConnect), Outcome::fail(FailureKind::kConnect),
                         Outcome::fail(FailureKind::kConnect)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 3u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 503);  // several upstreams, none could serve
  EXPECT_EQ(out.error->code, "upstream_unavailable");
  EXPECT_NE(out.error->body.find("after 3 attempt(s)"), std::string::npos);
  EXPECT_FALSE(out.answeredBy);
}

TEST(Forwarder, AllTimeoutsAreAGatewayTimeout) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::fail(FailureKind::kFirstByteTimeout),
                         Outcome::fail(FailureKind::kFirstByteTimeout),
                         Outcome::fail(FailureKind::kFirstByteTimeout)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 3u);
  EXPECT_EQ(out.error->status, 504);
  EXPECT_EQ(errorCode(out), "upstream_timeout");
}

// A 4xx is the caller's to fix: passed on at once, not retried. Its body
// may come with the head or be awaited after it (run()'s slow path): the
// caller gets the same answer either way.
TEST(Forwarder, AClientErrorIsPassedOnWithoutRetry) {
  const std::string body = R"({"error":{"message":"bad messages","type":"invalid_request_error"}})";
  std::vector<std::string> answers;
  for (bool later : {false, true}) {
    SCOPED_TRACE(later ? "body after the head" : "body with the head");
    Fixture f(twoUpstreams(kRetry));
    Outcome o = Outcome::head(400, body);
    if (later) o.later();
    ScriptedClient client({o});
    Forwarded out = f.forward(client);
    EXPECT_EQ(client.calls.size(), 1u);
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status, 400);
    EXPECT_NE(out.error->body.find("bad messages"), std::string::npos);
    EXPECT_TRUE(out.answeredBy);
    EXPECT_TRUE(f.sleeps.empty());
    answers.push_back(out.error->body);
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0], answers[1]);
}

// An error body is read up to the upstream's max_response_bytes: one at the
// limit is passed on in the upstream's words, one byte more is dropped
// unread and the caller is told only who answered what — with the body at
// once or after the head alike.
TEST(Forwarder, AnErrorBodyOverMaxResponseBytesIsNotPassedOn) {
  const std::string yaml = R"(upstreams:
  - name: alpha
    base_url: http://127.0.0.1:9/v1
    allow_insecure_http: true
    api_key: alpha-key
    max_response_bytes: 1024
    models: [kimi-k2]
)";
  auto errorOfSize = [](std::size_t n) {
    const std::string open = R"({"error":{"message":"upstream words )";
    const std::string close = R"("}})";
    return open + std::string(n - open.size() - close.size(), 'w') + close;
  };
  for (bool later : {false, true}) {
    for (std::size_t size : {std::size_t{1024}, std::size_t{1025}}) {
      SCOPED_TRACE(std::to_string(size) + (later ? " bytes, after the head" : " bytes, with it"));
      Fixture f(yaml);
      Outcome o = Outcome::head(400, errorOfSize(size));
      if (later) o.later();
      ScriptedClient client({o});
      Forwarded out = f.forward(client);
      ASSERT_TRUE(out.error);
      EXPECT_EQ(out.error->status, 400);
      EXPECT_NE(out.error->body.find("upstream 'alpha' answered HTTP 400"), std::string::npos);
      EXPECT_EQ(out.error->body.find("upstream words") != std::string::npos, size == 1024);
    }
  }
}

// A retried 503 whose body came late still counts and is retried like one
// that came at once; the last one's body is what the caller gets.
TEST(Forwarder, LateErrorBodiesAreRetriedAndTheLastIsPassedOn) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(503, R"({"error":{"message":"first"}})").later(),
                         Outcome::head(503, R"({"error":{"message":"second"}})"),
                         Outcome::head(503, R"({"error":{"message":"third"}})").later()});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 3u);
  EXPECT_EQ(f.attempts, 3u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 503);
  EXPECT_NE(out.error->body.find("third"), std::string::npos);
  EXPECT_TRUE(out.answeredBy);
}

TEST(Forwarder, AResetAfterTheRequestWasWrittenCountsAsAnAttempt) {
  Fixture f(R"(upstreams:
  - name: alpha
    base_url: http://127.0.0.1:9/v1
    allow_insecure_http: true
    models: [kimi-k2]
retry:
  max_attempts: 2
  backoff: {base_ms: 100, max_ms: 400}
  retry_on: [connect_error, "503"]
)");
  ScriptedClient client(
      {Outcome::fail(FailureKind::kReset), Outcome::fail(FailureKind::kReset), Outcome::head(200)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 2u);
  EXPECT_EQ(f.attempts, 2u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 502);  // one upstream, unreachable
  EXPECT_EQ(errorCode(out), "upstream_unavailable");
}

TEST(Forwarder, AFallbackModelIsTriedWhenThePrimarysUpstreamsFailed) {
  Fixture f(R"(upstreams:
  - name: big
    base_url: http://127.0.0.1:9/v1
    allow_insecure_http: true
    models: [kimi-k2]
  - name: small
    base_url: http://127.0.0.1:9/v2
    allow_insecure_http: true
    models: [kimi-small]
routes:
  kimi-k2:
    fallback_models: [kimi-small]
)" + std::string(kRetry));
  ScriptedClient client({Outcome::head(503), Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  EXPECT_EQ(f.name(client.calls[0].upstream), "big");
  EXPECT_EQ(f.name(client.calls[1].upstream), "small");
  EXPECT_NE(client.calls[1].body.find(R"("model":"kimi-small")"), std::string::npos);
  ASSERT_TRUE(out.response);
  EXPECT_EQ(out.route, f.route("kimi-small"));
}

TEST(Forwarder, ASpentRetryBudgetStopsRetries) {
  Fixture f(twoUpstreams(R"(retry:
  max_attempts: 3
  retry_on: [connect_error]
  budget: {ratio: 0, min_per_second: 0}
)"));
  ScriptedClient client({Outcome::fail(FailureKind::kConnect), Outcome::head(200)});
  Forwarded out = f.forward(client);
  EXPECT_EQ(client.calls.size(), 1u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 502);
  EXPECT_NE(out.error->body.find("the retry budget refused further retries"), std::string::npos);
}

TEST(Forwarder, ARefusedGatewayCredentialMovesToTheNextUpstreamAtOnce) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client(
      {Outcome::head(401, R"({"error":{"message":"bad key alpha-key"}})"), Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  EXPECT_NE(client.calls[0].upstream, client.calls[1].upstream);
  EXPECT_TRUE(f.sleeps.empty());
  ASSERT_TRUE(out.response);
  // The upstream whose key was refused is ejected.
  EXPECT_EQ(f.health(client.calls[0].upstream), upstream::HealthStatus::kEjected);
}

TEST(Forwarder, EveryGatewayCredentialRefusedIsA502ThatBlamesNoCaller) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(401, R"({"error":{"message":"bad key alpha-key"}})"),
                         Outcome::head(403, R"({"error":{"message":"forbidden"}})")});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 502);
  EXPECT_EQ(out.error->code, "upstream_auth_failed");
  EXPECT_EQ(out.error->headers.get("x-should-retry"), "false");
  EXPECT_EQ(out.error->body.find("alpha-key"), std::string::npos);
  EXPECT_EQ(out.error->body.find("forbidden"), std::string::npos);
  EXPECT_FALSE(out.answeredBy);
}

TEST(Forwarder, BehindAnotherRelayOnlyOneAttemptIsMade) {
  // The outer relay retries; retrying here too would multiply the attempts.
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(503), Outcome::head(200)});
  Forwarded out = f.forward(client, false, /*hops=*/1);
  EXPECT_EQ(client.calls.size(), 1u);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 503);
}

TEST(Forwarder, ARelayLoopIsRefusedWithoutAnAttempt) {
  Fixture f(twoUpstreams(kRetry));
  ScriptedClient client({Outcome::head(200)});
  Forwarded out = f.forward(client, false, /*hops=*/8);
  EXPECT_TRUE(client.calls.empty());
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 508);
  EXPECT_EQ(out.error->code, "relay_loop_detected");
}

constexpr std::string_view kRegions = R"(upstreams:
  - name: eu
    base_url: http://127.0.0.1:9/v1
    allow_insecure_http: true
    region: eu-fra
    models: [kimi-k2]
  - name: us
    base_url: http://127.0.0.1:9/v2
    allow_insecure_http: true
    region: us-east
    models: [kimi-k2]
)";

TEST(Forwarder, ResidencyKeepsEveryAttemptInsideTheKeysRegions) {
  Fixture f(std::string(kRegions) + std::string(kRetry), "    regions: [eu-fra]\n");
  ScriptedClient client({Outcome::head(503), Outcome::head(503), Outcome::head(503)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 3u);
  for (const Call& c : client.calls)
    EXPECT_EQ(f.name(c.upstream), "eu");
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, 503);
  EXPECT_EQ(out.error->code, "residency_unavailable");
  EXPECT_NE(out.error->body.find("keys[].regions"), std::string::npos);
}

TEST(Forwarder, ResidencyStillServesFromTheAllowedRegion) {
  Fixture f(std::string(kRegions) + std::string(kRetry), "    regions: [us-east]\n");
  ScriptedClient client({Outcome::fail(FailureKind::kConnect), Outcome::head(200)});
  Forwarded out = f.forward(client);
  ASSERT_EQ(client.calls.size(), 2u);
  EXPECT_EQ(f.name(client.calls[0].upstream), "us");
  EXPECT_EQ(f.name(client.calls[1].upstream), "us");
  ASSERT_TRUE(out.response);
}

}  // namespace
}  // namespace relay::pipeline
