#include "chat_record.hpp"

#include <spdlog/spdlog.h>

namespace relay::pipeline {

namespace {
std::int64_t micros(SteadyClock::duration d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}
}  // namespace

ChatRecord::ChatRecord(const Snapshot& snapshot, const net::Exchange& exchange,
                       const RequestId& requestId, SteadyClock::time_point start)
    : snapshot_(snapshot),
      exchange_(exchange),
      requestId_(requestId),
      trace_(traceFrom(exchange.head.headers)),
      traceparent_(trace_.traceparent()),
      start_(start) {}

ChatRecord::~ChatRecord() {
  try {
    settle();
  } catch (const std::exception& e) {
    spdlog::error("request {}: settling failed: {}", requestId_.view(), e.what());
  }
}

void ChatRecord::firstByteSent() {
  if (firstByte_) return;
  firstByte_ = SteadyClock::now();
  firstByteEvent();
}

void ChatRecord::producedSoFar(std::uint64_t completionTokens) {
  outputEstimate_ = completionTokens;
  if (plan_ && plan_->ticket)
    plan_->ticket->setUsedSoFar(plan_->promptEstimate + completionTokens, admission::BudgetAsk{});
}

void ChatRecord::settle() {
  if (settled_) return;
  settled_ = true;
  const telemetry::RequestRecord r = describe(SteadyClock::now());
  const telemetry::Settlement settled = snapshot_.telemetry->record(r);
  chargeKey(r, settled);
  if (snapshot_.eventsWanted()) publishFinished(r, settled);
}

// The exchange as telemetry records it: names and ids, timings, usage.
telemetry::RequestRecord ChatRecord::describe(SteadyClock::time_point now) const {
  const admission::Tenant* tenant = plan_ ? plan_->tenant : nullptr;
  const upstream::ModelRoute* route = plan_ ? plan_->route : nullptr;
  telemetry::RequestRecord r;
  r.requestId = requestId_;
  r.traceId = trace_.traceId;
  r.spanId = trace_.spanId;
  if (tenant) {
    r.keyName = tenant->name;
    r.keyId = static_cast<std::uint32_t>(tenant->index);
  }
  if (route) {
    r.model = route->model;
    r.modelId = static_cast<std::uint32_t>(route->index);
  } else if (plan_ && !plan_->fields.model.empty()) {
    r.model = plan_->fields.model;  // logged as asked (escaped); its metric label is "none"
  }
  const UpstreamSide& up = upstream_;
  if (up.route && up.route != route) {
    r.fallbackModel = up.route->model;
    r.fallbackModelId = static_cast<std::uint32_t>(up.route->index);
  }
  if (up.upstream) {
    r.upstream = snapshot_.catalog.upstreams()[*up.upstream].name;
    r.region = snapshot_.catalog.upstreams()[*up.upstream].config->region;
    r.upstreamId = static_cast<std::uint32_t>(*up.upstream);
  }
  r.nodeId = snapshot_.telemetry->labels().nodeId(exchange_.head.headers.get("x-node-id"));
  r.protocol = exchange_.head.protocol == net::Protocol::kHttp2 ? telemetry::Protocol::kHttp2
                                                                : telemetry::Protocol::kHttp1;
  r.stream = plan_ && plan_->fields.stream;
  // 499 (nginx's "client closed request") when the caller left before an answer.
  r.status = status_ != 0 ? status_ : (exchange_.response->clientGone() ? 499 : 0);
  r.attempts = up.attempts;
  r.durationUs = micros(now - start_);
  if (firstByte_) r.ttftUs = micros(*firstByte_ - start_);
  r.upstreamUs = up.headUs;
  r.overheadUs = std::max<std::int64_t>(0, micros(now - start_ - waited_));
  r.errorCode = errorCode_;

  // Usage as reported; an estimate, flagged, when the upstream gave none but
  // tokens were (probably) spent.
  if (usage_) {
    r.usage = {usage_->promptTokens, usage_->cachedTokens, usage_->completionTokens};
  } else if (up.upstream && (outputEstimate_ > 0 || status_ / 100 == 2) && status_ < 400) {
    const std::uint64_t promptEstimate = plan_ ? plan_->promptEstimate : 0;
    r.usage = {static_cast<std::int64_t>(promptEstimate), 0,
               static_cast<std::int64_t>(outputEstimate_)};
    r.usageEstimated = true;
  }
  return r;
}

// The token reservation and the budget hold become the real usage and cost.
void ChatRecord::chargeKey(const telemetry::RequestRecord& r,
                           const telemetry::Settlement& settled) {
  if (!plan_ || !plan_->tenant || !plan_->ticket) return;
  std::uint64_t used = static_cast<std::uint64_t>(r.usage.promptTokens + r.usage.completionTokens);
  admission::BudgetAsk actual{static_cast<admission::NanoUsd>(settled.cost.picoUsd / 1000),
                              static_cast<std::uint64_t>(r.usage.promptTokens),
                              static_cast<std::uint64_t>(r.usage.completionTokens)};
  BudgetCrossed crossed;
  if (snapshot_.eventsWanted()) {
    crossed = [events = snapshot_.events, id = requestId_, trace = trace_.traceId,
               key = plan_->tenant->name, node = std::string(nodeHeader())](double share) {
      if (!events->active()) return;
      RelayEvent e;
      e.kind = "budget.threshold";
      e.requestId = id;
      e.traceId = trace;
      e.key = key;
      e.node = node;
      e.usedFraction = share;
      e.message = "the key has spent 80% of a budget cap";
      events->publish(e);
    };
  }
  plan_->ticket->settle(used, actual, std::move(crossed));
}

std::string_view ChatRecord::nodeHeader() const {
  return exchange_.head.headers.get("x-node-id").substr(0, 64);
}

void ChatRecord::firstByteEvent() const {
  if (!snapshot_.eventsWanted() || !plan_ || !plan_->tenant) return;
  RelayEvent e;
  e.kind = "request.first_byte";
  e.requestId = requestId_;
  e.traceId = trace_.traceId;
  e.key = plan_->tenant->name;
  e.node = nodeHeader();
  if (upstream_.upstream) e.upstream = snapshot_.catalog.upstreams()[*upstream_.upstream].name;
  e.ttftMs = std::chrono::duration_cast<std::chrono::milliseconds>(*firstByte_ - start_).count();
  snapshot_.publish(e);
}

void ChatRecord::publishFinished(const telemetry::RequestRecord& r,
                                 const telemetry::Settlement& settled) const {
  RelayEvent e;
  e.kind = "request.finished";
  e.requestId = requestId_;
  e.traceId = trace_.traceId;
  e.key = r.keyName;
  e.node = nodeHeader();
  e.model = r.fallbackModel.empty() ? r.model : r.fallbackModel;
  e.upstream = r.upstream;
  e.region = r.region;
  e.status = r.status;
  e.reason = r.errorCode;
  e.attempt = r.attempts;
  e.latencyMs = r.durationUs / 1000;
  if (r.ttftUs >= 0 && firstByte_) e.ttftMs = r.ttftUs / 1000;
  e.promptTokens = r.usage.promptTokens;
  e.completionTokens = r.usage.completionTokens;
  e.costUsd = settled.cost.usd();
  snapshot_.publish(e);
}

}  // namespace relay::pipeline
