// Cost of reading and rewriting one chat request body on the hot path:
// the json_scan route (one validating scan + byte splice) against a full
// nlohmann/json parse and dump, plus the SSE parser over a 21-event stream.
//   build-*/bench/json_scan_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <string>

#include <nlohmann/json.hpp>

#include "relay/common/chat_request.hpp"
#include "relay/common/json_scan.hpp"
#include "relay/sse/parser.hpp"
#include "relay/sse/usage.hpp"

namespace {

// ~300 bytes, the size BENCH.md loads the gateway with.
constexpr std::string_view kBody =
    R"({"model":"kimi-k2","messages":[{"role":"system","content":"You are a concise assistant."},)"
    R"({"role":"user","content":"Summarise the plot of Hamlet in two sentences, and name the )"
    R"(play's author and the year it was first performed."}],"temperature":0.6,"max_tokens":256,)"
    R"("stream":true,"user":"agent-17"})";

void scanAndSplice(benchmark::State& state) {
  relay::ChatRequestFields fields;
  std::string out;
  for (auto _ : state) {
    if (relay::readChatRequest(kBody, fields)) state.SkipWithError("refused");
    out.clear();
    relay::rewriteChatRequest(kBody, fields,
                              {.model = "kimi-k2-0905-preview", .forceIncludeUsage = true}, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBody.size()));
}
BENCHMARK(scanAndSplice);

void validateOnly(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(relay::validateJson(kBody));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBody.size()));
}
BENCHMARK(validateOnly);

void nlohmannParseDump(benchmark::State& state) {
  for (auto _ : state) {
    auto json = nlohmann::json::parse(kBody);
    json["model"] = "kimi-k2-0905-preview";
    json["stream_options"]["include_usage"] = true;
    std::string out = json.dump();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBody.size()));
}
BENCHMARK(nlohmannParseDump);

// 21 events as an OpenAI upstream streams them with include_usage: 19 content
// chunks, the usage-only chunk, [DONE]; fed in one read, every event's data
// checked for usage as the relay does.
std::string openAiStream() {
  std::string stream;
  const std::string head =
      R"(data: {"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1718000000,)"
      R"("model":"kimi-k2-0905-preview","system_fingerprint":"fp_1","choices":[)";
  for (int i = 0; i < 19; ++i) {
    stream += head + R"({"index":0,"delta":{"content":"word )" + std::to_string(i) +
              R"( "},"logprobs":null,"finish_reason":null}],"usage":null})" + "\n\n";
  }
  stream += head + R"(],"usage":{"prompt_tokens":52,"completion_tokens":19,"total_tokens":71}})"
                   "\n\n";
  stream += "data: [DONE]\n\n";
  return stream;
}

void sseRelay21Events(benchmark::State& state) {
  const bool readUsage = state.range(0) != 0;
  const std::string stream = openAiStream();
  relay::sse::Parser parser;
  std::int64_t tokens = 0;
  for (auto _ : state) {
    parser.reset();
    parser.feed(stream);
    if (parser.parse() != relay::sse::ParseStatus::kOk) state.SkipWithError("parse");
    for (const relay::sse::Event& event : parser.events()) {
      if (!readUsage) continue;
      if (auto usage = relay::sse::extractUsage(event.data)) tokens += usage->usage.totalTokens;
    }
    benchmark::DoNotOptimize(parser.completeBytes().data());
    parser.consume();
  }
  benchmark::DoNotOptimize(tokens);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
}
// Arg 0: framing only; arg 1: also reading usage from every event's data.
BENCHMARK(sseRelay21Events)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
