// POST /v1/chat/completions: a deterministic completion, whole or streamed.
//
// Usage is a documented function of the request so that tests can predict it:
//   prompt_tokens     = max(1, ceil(C / 4)), C = code points of every message's
//                       content (string content, or the `text` of each part);
//                       header x-mock-prompt-tokens: N overrides it.
//   completion_tokens = chunks (--chunks, or header x-mock-chunks: N), capped by
//                       max_tokens / max_completion_tokens (finish_reason
//                       "length" when the cap bites, else "stop").
//   cached_tokens     = min(x-mock-cached-tokens (default 0), prompt_tokens).
#include <algorithm>
#include <charconv>
#include <ctime>
#include <optional>
#include <string>

#include "chat_request.hpp"
#include "pause.hpp"
#include "server.hpp"

namespace relay::mock {

namespace {

// A per-request number header: nullopt if absent, false `ok` if malformed.
std::optional<std::uint64_t> headerNumber(const Headers& headers, std::string_view name, bool& ok) {
  const std::optional<std::string_view> text = headers.find(name);
  if (!text) return std::nullopt;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty()) {
    ok = false;
    return std::nullopt;
  }
  return value;
}

}  // namespace

net::Task<Outcome> MockServer::chatCompletions(net::Exchange& exchange, const FaultSpec& fault,
                                               std::uint64_t sequence) {
  ChatRequestResult parsed = parseChatRequest(exchange.body);
  if (!parsed.ok()) {
    co_return co_await replyError(exchange, 400, std::move(parsed.error), std::move(parsed.param));
  }
  ChatRequest& request = parsed.request;

  const Headers& headers = exchange.head.headers;
  bool headersOk = true;
  std::uint64_t chunks =
      headerNumber(headers, "x-mock-chunks", headersOk).value_or(options_.chunks);
  std::uint64_t delayMs =
      headerNumber(headers, "x-mock-chunk-delay-ms", headersOk).value_or(options_.chunkDelayMs);
  std::optional<std::uint64_t> promptOverride =
      headerNumber(headers, "x-mock-prompt-tokens", headersOk);
  std::uint64_t cached = headerNumber(headers, "x-mock-cached-tokens", headersOk).value_or(0);
  if (!headersOk || chunks > kMaxChunks || delayMs > 600'000) {
    co_return co_await replyError(
        exchange, 400,
        "x-mock-chunks (0.." + std::to_string(kMaxChunks) +
            "), x-mock-chunk-delay-ms (0..600000), x-mock-prompt-tokens and "
            "x-mock-cached-tokens take a non-negative decimal integer");
  }

  CompletionPlan plan;
  plan.id = "chatcmpl-mock-" + std::to_string(sequence);
  plan.created = static_cast<std::int64_t>(std::time(nullptr));
  plan.model = std::move(request.model);
  plan.echo = makeEcho(request.lastUserContent);
  plan.usage.promptTokens =
      promptOverride.value_or(std::max<std::uint64_t>(1, (request.contentChars + 3) / 4));
  plan.usage.cachedTokens = std::min(cached, plan.usage.promptTokens);
  plan.usage.completionTokens = chunks;
  if (request.maxTokens && *request.maxTokens < chunks) {
    plan.usage.completionTokens = *request.maxTokens;
    plan.finishReason = "length";
  }
  auto delay = static_cast<std::uint32_t>(delayMs);

  if (request.stream) {
    co_return co_await streamCompletion(exchange, plan, request.includeUsage, delay, fault);
  }
  // A whole answer takes as long as its stream would have.
  if (delay > 0) {
    const auto ms = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(delayMs * plan.usage.completionTokens, 0xFFFFFFFFu));
    const bool waited = co_await pauseFor(*exchange.response, ms);  // not inside &&: GCC 12
    if (!waited) co_return Outcome::kClientGone;
  }
  std::string body = completionBody(options_.flavor, plan);
  if (fault.resetAfterChunks) {
    co_return co_await replyTruncated(exchange, makeHead(exchange, 200, "application/json"),
                                      std::move(body));
  }
  co_return co_await reply(exchange, 200, std::move(body));
}

net::Task<Outcome> MockServer::streamCompletion(net::Exchange& exchange, const CompletionPlan& plan,
                                                bool includeUsage, std::uint32_t delayMs,
                                                const FaultSpec& fault) {
  net::ResponseSink& sink = *exchange.response;
  net::ResponseHead head = makeHead(exchange, 200, "text/event-stream");
  head.headers.add("cache-control", "no-cache");
  if (!co_await sink.start(std::move(head))) co_return Outcome::kClientGone;

  if (fault.eventBytes) {
    // One oversized event first (a data line of that many bytes), then the rest.
    std::string event = "data: {\"pad\":\"";
    event.append(std::max<std::uint32_t>(*fault.eventBytes, 32) - 24, 'x');
    event += "\"}\n\n";
    for (std::size_t at = 0; at < event.size(); at += 64 * 1024) {
      if (!co_await sink.write(std::string_view(event).substr(at, 64 * 1024)))
        co_return Outcome::kClientGone;
    }
  }
  ChunkBuilder builder(options_.flavor, plan, includeUsage);
  std::uint64_t pieces = plan.usage.completionTokens;
  if (fault.resetAfterChunks) pieces = std::min<std::uint64_t>(pieces, *fault.resetAfterChunks);
  if (options_.coalesce && delayMs == 0 && !fault.resetAfterChunks) {
    std::string body;
    for (std::uint64_t i = 0; i < pieces; ++i)
      body += builder.content(i);
    body += builder.tail();
    const bool written = co_await sink.write(body);  // statements, not ||: GCC 12
    if (!written) co_return Outcome::kClientGone;
    const bool finished = co_await sink.finish();
    if (!finished) co_return Outcome::kClientGone;
    co_return Outcome::kStreamCompleted;
  }
  // One write per chunk, so a relay sees events arrive apart; the delay goes
  // between consecutive writes.
  for (std::uint64_t i = 0; i < pieces; ++i) {
    if (i > 0 && delayMs > 0) {
      const bool waited = co_await pauseFor(sink, delayMs);  // not inside &&: GCC 12
      if (!waited) co_return Outcome::kClientGone;
    }
    if (!co_await sink.write(builder.content(i))) co_return Outcome::kClientGone;
  }
  if (fault.resetAfterChunks) {
    // A mid-stream reset: no finish chunk, no usage, no [DONE].
    sink.abort();
    co_return Outcome::kAborted;
  }
  if (pieces > 0 && delayMs > 0) {
    const bool waited = co_await pauseFor(sink, delayMs);  // not inside &&: GCC 12
    if (!waited) co_return Outcome::kClientGone;
  }
  if (!co_await sink.write(builder.tail())) co_return Outcome::kClientGone;
  if (!co_await sink.finish()) co_return Outcome::kClientGone;
  co_return Outcome::kStreamCompleted;
}

}  // namespace relay::mock
