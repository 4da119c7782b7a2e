#include "relay/telemetry/access_log.hpp"

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <thread>
#include <type_traits>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "relay/common/headers.hpp"
#include "relay/common/limits.hpp"
#include "relay/telemetry/metrics.hpp"
#include "relay/telemetry/telemetry.hpp"
#include "telemetry_test_support.hpp"

namespace relay::telemetry {
namespace {

using nlohmann::json;
using namespace std::chrono;

// 2025-01-31T12:34:56.789Z
const system_clock::time_point kAt = system_clock::time_point(milliseconds(1738326896789));

RequestRecord fullRecord() {
  RequestRecord r;
  r.requestId = "req_0123456789abcdef01234567";
  r.traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
  r.spanId = "53995c3f42cd8ad8";
  r.keyName = "team-a";
  r.keyId = 0;
  r.model = "kimi-k2";
  r.modelId = 0;
  r.fallbackModel = "kimi-k2-turbo";
  r.upstream = "holysheep";
  r.protocol = Protocol::kHttp2;
  r.stream = true;
  r.status = 200;
  r.attempts = 2;
  r.durationUs = 1'234'567;
  r.ttftUs = 45'001;
  r.upstreamUs = 40'000;
  r.usage = {1000, 200, 50};
  r.usageEstimated = true;
  r.errorCode = "";
  return r;
}

json line(const RequestRecord& r, Settlement s = {Cost{635'000'000}, true},
          std::string_view node = "none", DisplayCurrency currency = {}) {
  std::string out;
  appendAccessLine(out, r, s, node, currency, kAt);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  return json::parse(out);  // throws (fails the test) on invalid JSON or UTF-8
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::filesystem::path tempPath(const char* name) {
  return std::filesystem::temp_directory_path() /
         (std::string("kimi-relay-") + name + "-" + std::to_string(::getpid()) + ".log");
}

TEST(AccessLine, HasEveryFieldWithTheRightValue) {
  const json j = line(fullRecord());
  EXPECT_EQ(j["time"], "2025-01-31T12:34:56.789Z");
  EXPECT_EQ(j["request_id"], "req_0123456789abcdef01234567");
  EXPECT_EQ(j["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(j["span_id"], "53995c3f42cd8ad8");
  EXPECT_EQ(j["key"], "team-a");
  EXPECT_EQ(j["model"], "kimi-k2");
  EXPECT_EQ(j["upstream"], "holysheep");
  EXPECT_TRUE(j["node"].is_null());
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["attempts"], 2);
  EXPECT_DOUBLE_EQ(j["duration_ms"].get<double>(), 1234.567);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 45.001);
  EXPECT_DOUBLE_EQ(j["upstream_ms"].get<double>(), 40.0);
  EXPECT_EQ(j["prompt_tokens"], 1000);
  EXPECT_EQ(j["cached_tokens"], 200);
  EXPECT_EQ(j["completion_tokens"], 50);
  EXPECT_EQ(j["usage_estimated"], true);
  EXPECT_DOUBLE_EQ(j["cost_usd"].get<double>(), 0.000635);
  EXPECT_EQ(j["priced"], true);
  EXPECT_FALSE(j.contains("cost"));  // USD display: no second figure
  EXPECT_FALSE(j.contains("currency"));
  EXPECT_TRUE(j["error_code"].is_null());
  EXPECT_EQ(j["fallback_model"], "kimi-k2-turbo");
  EXPECT_EQ(j["protocol"], "h2");
  EXPECT_EQ(j["stream"], true);
  EXPECT_TRUE(j["region"].is_null());  // the test upstream has no region
  EXPECT_EQ(j.size(), 24u);
}

TEST(AccessLine, AbsentValuesAreNull) {
  RequestRecord r;
  r.status = 401;
  r.errorCode = "invalid_api_key";
  const json j = line(r, Settlement{}, "other");
  for (const char* k : {"request_id", "trace_id", "span_id", "key", "model", "upstream", "ttft_ms",
                        "upstream_ms", "fallback_model", "protocol"}) {
    EXPECT_TRUE(j[k].is_null()) << k;
  }
  EXPECT_EQ(j["node"], "other");
  EXPECT_EQ(j["error_code"], "invalid_api_key");
  EXPECT_EQ(j["cost_usd"], 0);
  EXPECT_EQ(j["duration_ms"], 0);
}

TEST(AccessLine, DisplayCurrencyAddsConvertedCost) {
  const json j = line(fullRecord(), Settlement{Cost{635'000'000}, true}, "none",
                      DisplayCurrency({"CNY", 7.3}));
  EXPECT_DOUBLE_EQ(j["cost_usd"].get<double>(), 0.000635);
  EXPECT_DOUBLE_EQ(j["cost"].get<double>(), 0.0046355);
  EXPECT_EQ(j["currency"], "CNY");
}

TEST(AccessLine, UnpricedIsFlagged) {
  const json j = line(fullRecord(), Settlement{Cost{}, false});
  EXPECT_EQ(j["priced"], false);
  EXPECT_EQ(j["cost_usd"], 0);
}

TEST(AccessLine, OddCharactersAreEscaped) {
  RequestRecord r = fullRecord();
  const std::string odd =
      "a\"b\\c\nd\re\tf\x01g\x1f h\x7f i\xE2\x80\xA8 j \xF0\x9F\x98\x80 </script>";
  r.requestId = odd;
  r.errorCode = "{\"injected\":true}";
  r.model = "\n{\"status\":999}";
  std::string out;
  appendAccessLine(out, r, Settlement{}, "none", {}, kAt);
  EXPECT_EQ(out.find('\n'), std::string::npos);  // one line, whatever the input
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find('\x01'), std::string::npos);
  const json j = json::parse(out);
  EXPECT_EQ(j["request_id"], odd);  // valid UTF-8 round-trips exactly
  EXPECT_EQ(j["error_code"], "{\"injected\":true}");
  EXPECT_EQ(j["model"], "\n{\"status\":999}");
  EXPECT_EQ(j["status"], 200);
  EXPECT_FALSE(j.contains("injected"));
}

TEST(AccessLine, InvalidUtf8IsReplacedNotPassedThrough) {
  RequestRecord r = fullRecord();
  r.errorCode = "bad\xFF\xFEseq \xE2\x82 cut \xC0\xAF overlong \xED\xA0\x80 surrogate";
  const json j = line(r);
  const std::string v = j["error_code"];
  EXPECT_EQ(v.find('\xFF'), std::string::npos);
  EXPECT_NE(v.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  EXPECT_NE(v.find("surrogate"), std::string::npos);
}

TEST(AccessLine, LongValuesAreCut) {
  RequestRecord r = fullRecord();
  const std::string longModel(10'000, 'm');
  r.model = longModel;
  const json j = line(r);
  const std::string v = j["model"];
  EXPECT_LE(v.size(), 256u + 3u);
  EXPECT_EQ(v.substr(v.size() - 3), "\xE2\x80\xA6");
}

TEST(AccessLine, TimeIsRfc3339UtcWithMilliseconds) {
  std::string a, b, c;
  appendRfc3339Millis(a, system_clock::time_point(milliseconds(0)));
  appendRfc3339Millis(b, system_clock::time_point(milliseconds(951782400005)));  // leap day
  appendRfc3339Millis(c, system_clock::time_point(milliseconds(951782400999)));  // same second
  EXPECT_EQ(a, "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(b, "2000-02-29T00:00:00.005Z");
  EXPECT_EQ(c, "2000-02-29T00:00:00.999Z");
}

TEST(AccessLog, WritesOneJsonLinePerRecordAndFlushes) {
  const auto path = tempPath("access");
  std::filesystem::remove(path);
  {
    // Small batches, no timed flush, and a queue that holds the whole burst:
    // every line arrives, in order.
    AccessLog log(path.string(), AccessLogOptions{1024, 1024, seconds(3600)});
    Metrics metrics;
    Telemetry telemetry(metrics, &log, test::makeConfig());
    RequestRecord r = fullRecord();
    for (int i = 0; i < 500; ++i) {
      r.attempts = static_cast<std::uint32_t>(i);
      telemetry.record(r);
    }
    log.flush();
    const std::string text = readFile(path);
    int n = 0;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l); ++n) {
      EXPECT_EQ(json::parse(l)["attempts"], n);  // in order
    }
    EXPECT_EQ(n, 500);
    log.write("{\"last\":true}");
  }  // the destructor writes what is queued
  EXPECT_NE(readFile(path).find("{\"last\":true}\n"), std::string::npos);
  std::filesystem::remove(path);
}

// A writer stuck on its disk (here: a pipe nobody reads) never blocks the
// request path: batches beyond the queue are dropped and their lines counted,
// and every line is either written or counted as dropped.
TEST(AccessLog, AFullQueueDropsAndCountsInsteadOfBlocking) {
  const auto path = tempPath("fifo");
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  const std::uint64_t droppedBefore = limitCount(Limit::kAccessLogDropped);
  constexpr int kLines = 4000;
  std::string line(200, 'x');
  std::size_t read = 0;
  std::thread drainer;
  {
    AccessLog log(path.string(), AccessLogOptions{1024, 4, seconds(3600)});
    for (int i = 0; i < kLines; ++i)
      log.write(line);  // returns: the pipe is full long before
    EXPECT_GT(limitCount(Limit::kAccessLogDropped), droppedBefore);
    // Now read, so that the destructor can write what is queued.
    drainer = std::thread([&] {
      int flags = ::fcntl(reader, F_GETFL);
      ::fcntl(reader, F_SETFL, flags & ~O_NONBLOCK);
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(reader, buf, sizeof buf);
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; ++i)
          read += buf[i] == '\n';
      }
    });
  }  // the destructor writes what is queued, then closes the pipe
  drainer.join();
  ::close(reader);
  std::filesystem::remove(path);
  EXPECT_EQ(read + (limitCount(Limit::kAccessLogDropped) - droppedBefore),
            static_cast<std::size_t>(kLines));
}

TEST(AccessLog, OffWhenTheConfigSaysNothing) {
  EXPECT_EQ(AccessLog::open(config::Log{}), nullptr);
  EXPECT_THROW(AccessLog("/nonexistent-dir/for/sure/access.log"), std::runtime_error);
}

// The log and the scrape never show a secret, though the config Telemetry is
// built from holds several.
TEST(AccessLog, NoSecretEverAppears) {
  const auto path = tempPath("secrets");
  std::filesystem::remove(path);
  Metrics metrics;
  {
    AccessLog log(path.string());
    Telemetry telemetry(metrics, &log, test::makeConfig(), {"node-1"});
    RequestRecord r = fullRecord();
    telemetry.record(r);
    r.status = 401;
    r.keyName = "";
    r.errorCode = "invalid_api_key";
    telemetry.record(r);
    r.status = 502;
    r.upstream = "moonshot";
    r.errorCode = "upstream_error";
    telemetry.record(r);
    telemetry.recordMcp(McpRecord{{}, kNone, "everything", 0, McpMethod::kToolsCall, 200, 1000});
    log.flush();
  }
  const std::string logged = readFile(path) + metrics.expose();
  for (std::string_view secret : {test::kUpstreamSecret, test::kCallerKeyDigest, test::kMcpSecret,
                                  test::kSessionSecret, std::string_view("Bearer")}) {
    EXPECT_EQ(logged.find(secret), std::string::npos) << secret;
  }
  EXPECT_NE(logged.find("team-a"), std::string::npos);  // the key's name is what shows
  std::filesystem::remove(path);
}

// The API cannot carry a header: record() takes only a RequestRecord, whose
// fields are pinned here. Adding a field breaks this test on purpose — review
// that it can never hold a secret, then update the list.
TEST(AccessLog, ApiTakesNoHeadersOrKeys) {
  static_assert(!std::is_invocable_v<decltype(&Telemetry::record), Telemetry&, const Headers&>);
  static_assert(!std::is_constructible_v<RequestRecord, Headers>);
  static_assert(!std::is_constructible_v<std::string_view, Headers>);
  RequestRecord r;
  auto& [requestId, traceId, spanId, keyName, keyId, model, modelId, fallbackModel, fallbackModelId,
         upstream, upstreamId, region, nodeId, protocol, stream, status, attempts, durationUs,
         ttftUs, upstreamUs, overheadUs, usage, usageEstimated, errorCode] = r;
  // Text: the gateway's request id, W3C trace and span ids (hex the gateway
  // validated or made: trace_context.hpp), config names, and an error code.
  // No other text.
  static_assert(std::is_same_v<decltype(requestId), std::string_view>);
  static_assert(std::is_same_v<decltype(traceId), std::string_view>);
  static_assert(std::is_same_v<decltype(spanId), std::string_view>);
  static_assert(std::is_same_v<decltype(keyName), std::string_view>);
  static_assert(std::is_same_v<decltype(model), std::string_view>);
  static_assert(std::is_same_v<decltype(fallbackModel), std::string_view>);
  static_assert(std::is_same_v<decltype(upstream), std::string_view>);
  static_assert(std::is_same_v<decltype(region), std::string_view>);  // upstreams[].region
  static_assert(std::is_same_v<decltype(errorCode), std::string_view>);
  static_assert(
      std::is_arithmetic_v<decltype(keyId)> && std::is_arithmetic_v<decltype(modelId)> &&
      std::is_arithmetic_v<decltype(fallbackModelId)> &&
      std::is_arithmetic_v<decltype(upstreamId)> && std::is_arithmetic_v<decltype(nodeId)> &&
      std::is_enum_v<decltype(protocol)> && std::is_arithmetic_v<decltype(stream)> &&
      std::is_arithmetic_v<decltype(status)> && std::is_arithmetic_v<decltype(attempts)> &&
      std::is_arithmetic_v<decltype(durationUs)> && std::is_arithmetic_v<decltype(ttftUs)> &&
      std::is_arithmetic_v<decltype(upstreamUs)> && std::is_arithmetic_v<decltype(overheadUs)> &&
      std::is_same_v<decltype(usage), Usage> && std::is_arithmetic_v<decltype(usageEstimated)>);
  SUCCEED();
}

}  // namespace
}  // namespace relay::telemetry
