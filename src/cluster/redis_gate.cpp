#include "relay/cluster/redis_gate.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "gate_core.hpp"
#include "redis_link.hpp"
#include "relay/admission/budget_period.hpp"
#include "relay/admission/clock.hpp"
#include "relay/pipeline/snapshot.hpp"

namespace relay::cluster {

namespace asio = boost::asio;
using admission::BudgetAsk;
using admission::BudgetLimit;
using admission::BudgetOptions;
using admission::LimitOptions;
using pipeline::GateAsk;
using pipeline::GateResult;
using pipeline::GateTicket;

namespace {

// A key's static script arguments, from its config.
struct KeyArgs {
  std::string name;
  std::string prefix;  // kr:{name}
  LimitOptions limits;
  BudgetOptions budget;
  bool hasBudget = false;
  std::int64_t capUsd = -1, capIn = -1, capOut = -1;
  int period = 1;

  std::uint32_t rpmCap() const { return limits.rpmBurst ? limits.rpmBurst : limits.rpm; }
  std::uint64_t tpmCap() const { return limits.tpmBurst ? limits.tpmBurst : limits.tpm; }
};

KeyArgs argsFor(const pipeline::Snapshot& snap, const admission::Tenant& t) {
  KeyArgs k;
  k.name = t.name;
  k.prefix = "kr:{" + t.name + "}";
  k.limits = pipeline::limitOptionsFor(*t.config);
  k.budget = snap.budgets->budget(t.index).options();
  k.hasBudget = k.budget.usd || k.budget.maxInputTokens || k.budget.maxOutputTokens;
  if (k.budget.usd) k.capUsd = admission::toNanoUsd(*k.budget.usd);
  if (k.budget.maxInputTokens) k.capIn = static_cast<std::int64_t>(*k.budget.maxInputTokens);
  if (k.budget.maxOutputTokens) k.capOut = static_cast<std::int64_t>(*k.budget.maxOutputTokens);
  k.period = k.budget.period == admission::BudgetPeriod::kDay     ? 0
             : k.budget.period == admission::BudgetPeriod::kMonth ? 1
                                                                  : 2;
  return k;
}

void appendKeys(std::vector<std::string>& cmd, const KeyArgs& k) {
  cmd.push_back("3");
  cmd.push_back(k.prefix);
  cmd.push_back(k.prefix + ":l");
  cmd.push_back(k.prefix + ":b:");
}

// `member`: the lease as the admission wrote it, or "?<id>" to look it up.
// The start (Unix seconds) of the budget period this replica's clock is in
// now: a settlement is charged to the period it was made in, when Redis's
// clock has already moved to the next (scripts.cpp, kSpend).
std::string settledIn(const KeyArgs& k) {
  const admission::WallTime start =
      admission::periodStart(k.budget.period, admission::SystemClock::instance().wallNow());
  return std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(start.time_since_epoch()).count());
}

std::string settleCommand(const GateCore& core, const KeyArgs& k, const std::string& member,
                          std::uint64_t reserved, std::uint64_t used, const BudgetAsk& cost) {
  std::vector<std::string> cmd{"EVALSHA", core.link->sha(kSettleScript)};
  cmd.reserve(20);
  appendKeys(cmd, k);
  for (std::string v :
       {member, std::to_string(reserved), std::to_string(used), std::to_string(k.limits.tpm),
        std::to_string(k.tpmCap()), std::to_string(k.period),
        std::to_string(std::max<std::int64_t>(cost.usd, 0)), std::to_string(cost.inputTokens),
        std::to_string(cost.outputTokens), std::to_string(k.capUsd), std::to_string(k.capIn),
        std::to_string(k.capOut), std::string(k.hasBudget ? "1" : "0"), settledIn(k)})
    cmd.push_back(std::move(v));
  std::string out;
  appendCommand(out, cmd);
  return out;
}

RedisLink::OnReply crossedHandler(pipeline::BudgetCrossed crossed) {
  if (!crossed) return {};
  return [crossed = std::move(crossed)](const RedisReply& r) {
    if (!r.ok() || r.value.items.size() < 2) return;
    const std::int64_t ppm = r.value.items[1].asInteger(-1);
    if (ppm >= 0) crossed(static_cast<double>(ppm) / 1e6);
  };
}

}  // namespace

// Declared in gate_core.hpp (the renew loop holds the live ones).
class RedisTicket final : public GateTicket {
 public:
  RedisTicket(std::shared_ptr<GateCore> core, KeyArgs key, std::string member,
              std::uint64_t reserved)
      : core_(std::move(core)),
        key_(std::move(key)),
        member_(std::move(member)),
        reserved_(reserved),
        usedTokens_(reserved) {
    core_->live.insert(this);
  }
  ~RedisTicket() override {
    if (!settled_) settle(usedTokens_, usedCost_, {});
  }

  void setUsedSoFar(std::uint64_t tokens, const BudgetAsk& cost) override {
    usedTokens_ = tokens;
    usedCost_ = cost;
  }

  void settle(std::uint64_t tokens, const BudgetAsk& cost,
              pipeline::BudgetCrossed crossed) override {
    if (settled_) return;
    settled_ = true;
    core_->live.erase(this);
    core_->link->send(settleCommand(*core_, key_, member_, reserved_, tokens, cost), /*keep=*/true,
                      crossedHandler(std::move(crossed)));
  }

  std::string renewCommand() const {
    std::vector<std::string> cmd{"EVALSHA", core_->link->sha(kRenewScript), "2", key_.prefix,
                                 key_.prefix + ":l"};
    cmd.push_back(member_);
    cmd.push_back(std::to_string(leaseTime().count()));
    std::string out;
    appendCommand(out, cmd);
    return out;
  }

 private:
  std::shared_ptr<GateCore> core_;
  KeyArgs key_;
  std::string member_;
  std::uint64_t reserved_;
  std::uint64_t usedTokens_;
  BudgetAsk usedCost_;
  bool settled_ = false;
};

namespace {

// An admission that holds nothing in Redis (no slot, budget or tokens).
class NothingToSettle final : public GateTicket {
 public:
  void setUsedSoFar(std::uint64_t, const BudgetAsk&) override {}
  void settle(std::uint64_t, const BudgetAsk&, pipeline::BudgetCrossed) override {}
};

// Admitted by this replica's own state while Redis was away: settles there,
// and its spend is replayed to Redis (once) when Redis is back, so the
// shared budget misses nothing.
class FallbackTicket final : public GateTicket {
 public:
  FallbackTicket(std::shared_ptr<GateCore> core, KeyArgs key, std::unique_ptr<GateTicket> local)
      : core_(std::move(core)), key_(std::move(key)), local_(std::move(local)) {}

  void setUsedSoFar(std::uint64_t tokens, const BudgetAsk& cost) override {
    local_->setUsedSoFar(tokens, cost);
  }

  void settle(std::uint64_t tokens, const BudgetAsk& cost,
              pipeline::BudgetCrossed crossed) override {
    local_->settle(tokens, cost, std::move(crossed));
    if (!key_.hasBudget) return;
    if (cost.usd <= 0 && cost.inputTokens == 0 && cost.outputTokens == 0) return;
    std::vector<std::string> cmd{"EVALSHA", core_->link->sha(kChargeScript)};
    appendKeys(cmd, key_);
    for (std::string v :
         {core_->nextId(), std::to_string(key_.period),
          std::to_string(std::max<std::int64_t>(cost.usd, 0)), std::to_string(cost.inputTokens),
          std::to_string(cost.outputTokens), std::to_string(key_.capUsd),
          std::to_string(key_.capIn), std::to_string(key_.capOut), settledIn(key_)})
      cmd.push_back(std::move(v));
    std::string out;
    appendCommand(out, cmd);
    BudgetAsk charged{std::max<std::int64_t>(cost.usd, 0), cost.inputTokens, cost.outputTokens};
    outageSpend().add(key_.name, charged);
    core_->link->send(
        std::move(out), /*keep=*/true,
        [name = key_.name, charged](const RedisReply&) { outageSpend().sub(name, charged); });
  }

 private:
  std::shared_ptr<GateCore> core_;
  KeyArgs key_;
  std::unique_ptr<GateTicket> local_;
};

admission::RateLimitHeaders rateHeaders(const KeyArgs& k, const RespValue& r) {
  admission::RateLimitHeaders h;
  auto item = [&](std::size_t i) { return r.items[i].asInteger(0); };
  if (k.limits.rpm) {
    h.addNumber("x-ratelimit-limit-requests", k.rpmCap());
    h.addNumber("x-ratelimit-remaining-requests",
                static_cast<std::uint64_t>(std::max<std::int64_t>(item(2), 0)));
    h.addResetDuration("x-ratelimit-reset-requests", std::chrono::microseconds(item(3)));
  }
  if (k.limits.tpm) {
    h.addNumber("x-ratelimit-limit-tokens", k.tpmCap());
    h.addNumber("x-ratelimit-remaining-tokens",
                static_cast<std::uint64_t>(std::max<std::int64_t>(item(4), 0)));
    h.addResetDuration("x-ratelimit-reset-tokens", std::chrono::microseconds(item(5)));
  }
  return h;
}

pipeline::ApiError rateRefusal(const admission::Refusal& r) {
  pipeline::ApiError e{429, r.message, std::string(r.errorType()), "rate_limit_exceeded"};
  r.appendHeaders(e.headers);
  return e;
}

pipeline::ApiError budgetRefusal(admission::BudgetRefusal refused) {
  pipeline::ApiError e{429, std::move(refused.message), "insufficient_quota", "insufficient_quota"};
  e.headers.add("x-should-retry", "false");
  return e;
}

class RedisKeyGate final : public pipeline::KeyGate {
 public:
  RedisKeyGate(asio::io_context& context, const config::Cluster& cluster, ClusterHooks hooks)
      : core_(std::make_shared<GateCore>(context, cluster)) {
    auto current = hooks.current;
    std::random_device rd;
    std::uniform_int_distribution<std::uint64_t> dist;
    static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::uint64_t r = dist(rd);
    for (int i = 0; i < 10; ++i, r /= 36)
      core_->idPrefix += kAlphabet[r % 36];
    core_->idPrefix += '.';
    core_->link = std::make_shared<RedisLink>(
        context, *cluster.redis, std::chrono::milliseconds(cluster.redisTimeoutMs),
        std::vector<const Script*>{&kAdmitScript, &kSettleScript, &kChargeScript, &kRenewScript,
                                   &kFloorScript});
    std::function<void()> onReady;
    if (current) {
      onReady = [&context, core = std::weak_ptr<GateCore>(core_), current] {
        if (auto c = core.lock()) {
          asio::co_spawn(
              context,
              [c, current]() -> net::Task<void> { co_await floorsWhenReplayed(c, current); },
              asio::detached);
        }
      };
    }
    core_->link->start(std::move(onReady));
    asio::co_spawn(
        context, [core = core_]() -> net::Task<void> { co_await renewLoop(core); }, asio::detached);
    if (current) {
      asio::co_spawn(
          context,
          [core = core_, current = std::move(current)]() -> net::Task<void> {
            co_await budgetSyncLoop(core, current);
          },
          asio::detached);
    }
    if (hooks.keysChanged) {
      asio::co_spawn(
          context,
          [core = core_, changed = std::move(hooks.keysChanged)]() -> net::Task<void> {
            co_await keysPollLoop(core, changed);
          },
          asio::detached);
    }
  }

  std::shared_ptr<GateCore> core() const { return core_; }

  std::size_t unsettled() const override { return core_->link->unanswered(); }

  void stop() override {
    core_->stopped = true;
    core_->renewTimer.cancel();
    core_->link->stop();
  }

  net::Task<GateResult> admit(const pipeline::Snapshot& snap, const GateAsk& ask) override {
    const admission::Tenant& tenant = *ask.tenant;
    KeyArgs key = argsFor(snap, tenant);
    if (!core_->link->ready()) co_return fallback(snap, ask, std::move(key));

    const std::string id = core_->nextId();
    std::vector<std::string> cmd{"EVALSHA", core_->link->sha(kAdmitScript)};
    cmd.reserve(24);
    appendKeys(cmd, key);
    const int mode = !key.hasBudget ? 0 : ask.refuseWhenSpent ? 2 : 1;
    // Admissions that leave nothing to give back (an rpm-only key, an MCP
    // stream without a budget) write no lease and need no settlement.
    const bool lease =
        (ask.holdSlot && key.limits.concurrency > 0) || mode != 0 || key.limits.tpm > 0;
    for (std::string v :
         {id, std::to_string(leaseTime().count()), std::to_string(key.limits.rpm),
          std::to_string(key.rpmCap()), std::to_string(key.limits.tpm),
          std::to_string(key.tpmCap()), std::to_string(ask.tokens),
          std::to_string(key.limits.concurrency), std::string(ask.holdSlot ? "1" : "0"),
          std::to_string(mode), std::to_string(key.period), std::to_string(key.capUsd),
          std::to_string(key.capIn), std::to_string(key.capOut),
          std::to_string(std::max<std::int64_t>(ask.budget.usd, 0)),
          std::to_string(ask.budget.inputTokens), std::to_string(ask.budget.outputTokens)})
      cmd.push_back(std::move(v));
    // This replica's last known spend: Redis never goes below it.
    if (key.hasBudget) {
      const admission::BudgetUsage seen =
          outageSpend().floorOf(tenant.name, snap.budgets->budget(tenant.index).settledSoFar());
      cmd.push_back(std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(seen.periodStart.time_since_epoch())
              .count()));
      cmd.push_back(std::to_string(seen.spent));
      cmd.push_back(std::to_string(seen.inputTokens));
      cmd.push_back(std::to_string(seen.outputTokens));
    } else {
      for (const char* v : {"-1", "0", "0", "0"})
        cmd.push_back(v);
    }
    cmd.push_back(lease ? "1" : "0");
    std::string encoded;
    appendCommand(encoded, cmd);
    RedisReply reply = co_await core_->link->call(std::move(encoded));
    if (!reply.ok() || reply.value.type != RespValue::Type::kArray ||
        reply.value.items.size() < 12) {
      if (lease &&
          (reply.error == RedisError::kTimeout || reply.error == RedisError::kConnection)) {
        // It may have run: undo it once it has (FIFO), or find nothing to undo.
        core_->link->send(settleCommand(*core_, key, "?" + id, ask.tokens, 0, BudgetAsk{}), true);
      }
      co_return fallback(snap, ask, std::move(key));
    }
    co_return decided(snap, ask, std::move(key), reply.value, lease);
  }

  void appendRateHeaders(const pipeline::Snapshot& snap, const admission::Tenant& tenant,
                         Headers& out) override {
    // Answers made before admission (a body error) carry what this worker
    // last heard from Redis about the key; the fresh numbers come with every
    // admission.
    auto it = lastHeaders_.find(tenant.name);
    if (it != lastHeaders_.end()) {
      it->second.appendTo(out);
    } else {
      pipeline::LocalKeyGate().appendRateHeaders(snap, tenant, out);
    }
  }

 private:
  static net::Task<void> renewLoop(std::shared_ptr<GateCore> core) {
    while (!core->stopped) {
      core->renewTimer.expires_after(leaseTime() / 3);
      boost::system::error_code ec;
      co_await core->renewTimer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (core->stopped) co_return;
      if (!core->link->ready()) continue;
      for (RedisTicket* t : core->live)
        core->link->send(t->renewCommand(), false);
    }
  }

  GateResult decided(const pipeline::Snapshot& snap, const GateAsk& ask, KeyArgs key,
                     const RespValue& r, bool lease) {
    const auto status = static_cast<AdmitStatus>(r.items[0].asInteger(-1));
    const std::int64_t ps = r.items[6].asInteger(0);
    const auto& clock = admission::SystemClock::instance();
    const admission::Tenant& tenant = *ask.tenant;
    if (key.hasBudget) {
      // What every replica has spent: the local fallback starts from it.
      admission::BudgetUsage shared{admission::WallTime(std::chrono::seconds(ps)),
                                    r.items[8].asInteger(0),
                                    static_cast<std::uint64_t>(r.items[9].asInteger(0)),
                                    static_cast<std::uint64_t>(r.items[10].asInteger(0))};
      snap.budgets->budget(tenant.index).raiseSpentTo(shared, clock.wallNow());
    }
    GateResult out;
    admission::RateLimitHeaders headers = rateHeaders(key, r);
    out.rateHeaders = headers;
    if (lastHeaders_.size() < 4096 || lastHeaders_.count(tenant.name))
      lastHeaders_[tenant.name] = headers;
    const std::chrono::microseconds wait(r.items[1].asInteger(0));
    switch (status) {
      case AdmitStatus::kAdmitted:
        if (lease) {
          out.ticket =
              std::make_unique<RedisTicket>(core_, std::move(key), r.items[11].text, ask.tokens);
        } else {
          out.ticket = std::make_unique<NothingToSettle>();
        }
        return out;
      case AdmitStatus::kRequests:
        out.reason = telemetry::RefusalReason::kRequests;
        out.refusal =
            rateRefusal(admission::bucketRefusal(tenant.name, admission::RefusalKind::kRequests,
                                                 key.rpmCap(), r.items[2].asInteger(0), 1, wait));
        return out;
      case AdmitStatus::kTokens:
        out.reason = telemetry::RefusalReason::kTokens;
        out.refusal = rateRefusal(
            admission::bucketRefusal(tenant.name, admission::RefusalKind::kTokens, key.tpmCap(),
                                     r.items[4].asInteger(0), ask.tokens, wait));
        return out;
      case AdmitStatus::kTooLarge:
        out.reason = telemetry::RefusalReason::kTokens;
        out.refusal =
            rateRefusal(admission::tooLargeRefusal(tenant.name, key.tpmCap(), ask.tokens));
        return out;
      case AdmitStatus::kConcurrency:
        out.reason = telemetry::RefusalReason::kConcurrency;
        out.refusal =
            rateRefusal(admission::concurrencyRefusal(tenant.name, key.limits.concurrency));
        return out;
      case AdmitStatus::kBudgetUsd:
      case AdmitStatus::kBudgetInput:
      case AdmitStatus::kBudgetOutput: {
        const BudgetLimit limit = status == AdmitStatus::kBudgetUsd ? BudgetLimit::kUsd
                                  : status == AdmitStatus::kBudgetInput
                                      ? BudgetLimit::kInputTokens
                                      : BudgetLimit::kOutputTokens;
        const std::optional<admission::WallTime> resets =
            admission::periodEnd(key.budget.period, admission::WallTime(std::chrono::seconds(ps)));
        out.reason = telemetry::RefusalReason::kBudget;
        out.refusal = budgetRefusal(
            ask.refuseWhenSpent
                ? admission::budgetSpentRefusal(tenant.name, key.budget, limit, resets)
                : admission::budgetShortRefusal(tenant.name, key.budget, limit,
                                                static_cast<std::uint64_t>(std::max<std::int64_t>(
                                                    r.items[7].asInteger(0), 0)),
                                                ask.budget, resets));
        return out;
      }
    }
    spdlog::warn("shared state: unexpected admit status {}; deciding locally",
                 r.items[0].asInteger(-1));
    return fallback(snap, ask, std::move(key));
  }

  GateResult fallback(const pipeline::Snapshot& snap, const GateAsk& ask, KeyArgs key) {
    if (core_->cluster.onRedisFailure == config::OnRedisFailure::kReject) {
      sharedStateStats().fallback(RedisFallback::kReject);
      GateResult out;
      out.reason = telemetry::RefusalReason::kSharedState;
      pipeline::ApiError e{503,
                           "The gateway's shared rate-limit and budget store (Redis at " +
                               core_->link->url().display() +
                               ") is unreachable, and cluster.on_redis_failure is 'reject', so "
                               "no request can be admitted; retry in a moment.",
                           "server_error", "shared_state_unavailable"};
      e.headers.add("retry-after", "1");
      e.headers.add("x-should-retry", "true");
      out.refusal = std::move(e);
      return out;
    }
    sharedStateStats().fallback(RedisFallback::kLocal);
    GateResult local = pipeline::LocalKeyGate::decide(snap, ask);
    if (local.ticket)
      local.ticket =
          std::make_unique<FallbackTicket>(core_, std::move(key), std::move(local.ticket));
    return local;
  }

  std::shared_ptr<GateCore> core_;
  std::unordered_map<std::string, admission::RateLimitHeaders> lastHeaders_;
};

}  // namespace

std::chrono::milliseconds leaseTime() {
  static const std::chrono::milliseconds lease = [] {
    const char* text = std::getenv("KIMI_RELAY_LEASE_MS");
    long ms = text ? std::strtol(text, nullptr, 10) : 0;
    if (ms < 500 || ms > 600'000) ms = 30'000;
    return std::chrono::milliseconds(ms);
  }();
  return lease;
}

namespace {

class RedisKeyPublisher final : public KeyPublisher {
 public:
  RedisKeyPublisher(asio::io_context& context, std::shared_ptr<GateCore> core)
      : context_(context), core_(std::move(core)) {}
  void publish(std::string name, std::string entryJson) override {
    asio::post(context_, [core = core_, name = std::move(name), json = std::move(entryJson)] {
      if (core->stopped) return;
      std::string set, bump;
      appendCommand(set, {"HSET", "kr:keys", name, json});
      appendCommand(bump, {"INCR", "kr:keys:version"});
      core->link->send(std::move(set), /*keep=*/true);
      core->link->send(std::move(bump), /*keep=*/true);
    });
  }

 private:
  asio::io_context& context_;
  std::shared_ptr<GateCore> core_;
};

}  // namespace

RedisGateParts makeRedisGate(asio::io_context& context, const config::Cluster& cluster,
                             ClusterHooks hooks) {
  const bool processWide = hooks.current || hooks.keysChanged;
  auto gate = std::make_unique<RedisKeyGate>(context, cluster, std::move(hooks));
  RedisGateParts parts;
  if (processWide) parts.publisher = std::make_shared<RedisKeyPublisher>(context, gate->core());
  parts.gate = std::move(gate);
  return parts;
}

}  // namespace relay::cluster
