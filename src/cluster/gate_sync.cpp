// The loops that keep one replica's view of the swarm in step with Redis:
// runtime keys, spend floors after an outage, and budget spend. They only
// read and send; admission itself is in redis_gate.cpp.
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "gate_core.hpp"
#include "relay/admission/clock.hpp"
#include "relay/cluster/redis_gate.hpp"
#include "relay/pipeline/snapshot.hpp"
#include "scripts.hpp"

namespace relay::cluster {

using admission::BudgetOptions;

namespace {

// Keys per HSCAN page of kr:keys: a hint to Redis (a hash it keeps as a
// listpack, up to hash-max-listpack-entries, 128 by default, comes whole).
constexpr std::string_view kKeysScanCount = "256";

// This process's view of every budgeted key's spend, as a floor for Redis's.
void pushFloors(GateCore& core, const std::shared_ptr<const pipeline::Snapshot>& snap) {
  if (!snap) return;
  for (const admission::Tenant& t : snap->keys.tenants()) {
    admission::Budget& budget = snap->budgets->budget(t.index);
    const BudgetOptions& o = budget.options();
    if (!o.usd && !o.maxInputTokens && !o.maxOutputTokens) continue;
    const admission::BudgetUsage seen = outageSpend().floorOf(t.name, budget.settledSoFar());
    if (seen.spent == 0 && seen.inputTokens == 0 && seen.outputTokens == 0) continue;
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(seen.periodStart.time_since_epoch())
            .count();
    std::string cmd;
    appendCommand(cmd,
                  {"EVALSHA", core.link->sha(kFloorScript), "1",
                   "kr:{" + t.name + "}:b:" + std::to_string(seconds), std::to_string(seen.spent),
                   std::to_string(seen.inputTokens), std::to_string(seen.outputTokens)});
    core.link->send(std::move(cmd), false);
  }
}
}  // namespace

// Runtime keys: when kr:keys:version moves (or on the first poll after
// each connect), the whole kr:keys hash goes to `changed`.
net::Task<void> keysPollLoop(std::shared_ptr<GateCore> core,
                             std::function<void(std::map<std::string, std::string>)> changed) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::optional<std::string> seen;
  while (!core->stopped) {
    timer.expires_after(kKeysPollInterval);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (core->stopped) co_return;
    if (!core->link->ready()) {
      seen.reset();  // after a reconnect, read everything again
      continue;
    }
    std::string get;
    appendCommand(get, {"GET", "kr:keys:version"});
    RedisReply version = co_await core->link->call(std::move(get));
    if (!version.ok()) continue;
    std::string v = version.value.type == RespValue::Type::kNull ? "0" : version.value.text;
    if (seen && *seen == v) continue;
    // In pages: one HGETALL of more than RespLimits::maxElements / 2 keys
    // is a reply the parser refuses, which would drop the connection on
    // every poll. HSCAN may give a key twice (the later value is the newer);
    // a change during the scan moves the version, and the next poll reads
    // again.
    std::map<std::string, std::string> out;
    std::string cursor = "0";
    bool whole = true;
    do {
      std::string scan;
      appendCommand(scan, {"HSCAN", "kr:keys", cursor, "COUNT", kKeysScanCount});
      RedisReply page = co_await core->link->call(std::move(scan));
      if (!page.ok() || page.value.type != RespValue::Type::kArray ||
          page.value.items.size() != 2 || page.value.items[1].type != RespValue::Type::kArray) {
        whole = false;
        break;
      }
      cursor = page.value.items[0].text;
      const auto& items = page.value.items[1].items;
      for (std::size_t i = 0; i + 1 < items.size(); i += 2)
        out.insert_or_assign(items[i].text, items[i + 1].text);
    } while (cursor != "0" && !core->stopped);
    if (!whole || core->stopped) continue;
    seen = v;
    changed(std::move(out));
  }
}

// Once every worker's replayed outage charges have been applied (a floor
// sent before them would be lowered by nothing and then counted twice, or
// swallow them), pushes the floors.
net::Task<void> floorsWhenReplayed(std::shared_ptr<GateCore> core, CurrentSnapshot current) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < 200 && !outageSpend().empty() && !core->stopped; ++i) {
    timer.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!core->stopped && core->link->ready()) pushFloors(*core, current());
}

// Every budgeted key's spend this period, as Redis has it, into the
// process's budgets (never lowering them).
net::Task<void> budgetSyncLoop(std::shared_ptr<GateCore> core, CurrentSnapshot current) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!core->stopped) {
    timer.expires_after(kBudgetSyncInterval);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (core->stopped) co_return;
    if (!core->link->ready()) continue;
    std::shared_ptr<const pipeline::Snapshot> snap = current();
    if (!snap) continue;
    for (const admission::Tenant& t : snap->keys.tenants()) {
      admission::Budget& budget = snap->budgets->budget(t.index);
      const BudgetOptions& o = budget.options();
      if (!o.usd && !o.maxInputTokens && !o.maxOutputTokens) continue;
      const admission::WallTime start = budget.settledSoFar().periodStart;
      const auto seconds =
          std::chrono::duration_cast<std::chrono::seconds>(start.time_since_epoch()).count();
      std::string cmd;
      appendCommand(
          cmd, {"HMGET", "kr:{" + t.name + "}:b:" + std::to_string(seconds), "su", "si", "so"});
      core->link->send(std::move(cmd), false, [snap, index = t.index, start](const RedisReply& r) {
        if (!r.ok() || r.value.items.size() != 3) return;
        admission::BudgetUsage shared{start, r.value.items[0].asInteger(0),
                                      static_cast<std::uint64_t>(r.value.items[1].asInteger(0)),
                                      static_cast<std::uint64_t>(r.value.items[2].asInteger(0))};
        snap->budgets->budget(index).raiseSpentTo(shared,
                                                  admission::SystemClock::instance().wallNow());
      });
    }
  }
}

}  // namespace relay::cluster
