// kimi-relay: command line, start-up wiring and signals.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <malloc.h>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "gateway.hpp"
#include "healthcheck.hpp"
#include "keys_cli.hpp"
#include "relay/admission/key_registry.hpp"
#include "relay/admission/key_store.hpp"
#include "relay/admission/state_dir_lock.hpp"
#include "relay/api/router.hpp"
#include "relay/config/parse.hpp"
#include "relay/net/server.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/telemetry/access_log.hpp"

namespace {

using namespace relay;

constexpr const char* kUsage = R"(kimi-relay — an OpenAI-compatible gateway for Kimi agent swarms

usage:
  kimi-relay --config FILE          run the gateway
  kimi-relay --check-config FILE    validate FILE (and its ${ENV} secrets) and exit
  kimi-relay keys new               print a new caller key and its sha256 digest
  kimi-relay keys hash [KEY]        print the sha256 digest of KEY (read from stdin if absent)
  kimi-relay keys create|list|show|update|revoke|rotate ...
                                    the runtime key API of a running gateway
                                    (kimi-relay keys create --help for the flags)
  kimi-relay healthcheck [--config FILE | --url http://IP:PORT/healthz]
                                    exit 0 when the admin /healthz answers 200
  kimi-relay --version
)";

int usageError(const std::string& message) {
  std::fprintf(stderr, "kimi-relay: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

int keysCommand(const std::vector<std::string>& args) {
  if (int code = app::keysAdminCommand(args); code >= 0) return code;
  if (args.size() >= 2 && args[1] == "new") {
    std::string key = admission::generateKey();
    std::printf("key:    %s\nsha256: %s\n", key.c_str(),
                admission::toHex(admission::sha256(key)).c_str());
    std::printf(
        "\nGive the key to the caller; put only the sha256 in the config:\n"
        "  keys:\n    - name: <caller>\n      sha256: \"%s\"\n",
        admission::toHex(admission::sha256(key)).c_str());
    return 0;
  }
  if (args.size() >= 2 && args[1] == "hash") {
    std::string key;
    if (args.size() >= 3) {
      key = args[2];
    } else if (!std::getline(std::cin, key)) {
      return usageError("keys hash: no key given on the command line or stdin");
    }
    if (std::string problem = admission::keyFormatProblem(key); !problem.empty())
      std::fprintf(stderr, "warning: %s\n", problem.c_str());
    std::printf("%s\n", admission::toHex(admission::sha256(key)).c_str());
    return 0;
  }
  return usageError("keys: expected new, hash, create, list, show, update, revoke or rotate");
}

void setupLogging(const config::Config& cfg) {
  auto logger = spdlog::stderr_color_mt("relay");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(cfg.log.level));
  spdlog::flush_on(spdlog::level::info);
}

int runGateway(const std::string& path) {
  config::Config cfg;
  try {
    cfg = config::loadConfigFile(path);
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "kimi-relay: %s\n", e.what());
    return 1;
  }
  setupLogging(cfg);

  telemetry::Metrics metrics;
  std::unique_ptr<telemetry::AccessLog> accessLog;
  std::shared_ptr<const pipeline::Snapshot> snapshot;
  std::unique_ptr<admission::StateDirLock> stateLock;
  pipeline::EventBus events;
  telemetry::LiveStats live;
  std::shared_ptr<admission::KeyRegistry> keys;
  pipeline::Services services{&metrics, nullptr, &events, &live};
  try {
    // Held for the process's life: one gateway per state_dir.
    if (!cfg.stateDir.empty()) stateLock = std::make_unique<admission::StateDirLock>(cfg.stateDir);
    accessLog = telemetry::AccessLog::open(cfg.log);
    services.accessLog = accessLog.get();
    keys = std::make_shared<admission::KeyRegistry>(cfg.stateDir);
    keys->load();
    config::Config effective = cfg;
    effective.keys = keys->effectiveKeys(cfg);  // keys created and changed through the admin API
    snapshot = std::make_shared<const pipeline::Snapshot>(std::move(effective), services);
    // Fail now, not two seconds in, when state_dir is missing or not writable.
    if (auto error = snapshot->budgets->flush()) throw std::runtime_error(*error);
  } catch (const std::exception& e) {
    spdlog::critical("{}: {}", path, e.what());
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  app::Gateway gateway(path, services, cfg, keys, snapshot);
  try {
    gateway.listen();
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
  int code = gateway.run();
  if (accessLog) accessLog->flush();
  spdlog::shutdown();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // A gateway's heap breathes with its traffic: keep freed memory instead of
  // returning it to the kernel after every burst and faulting it back in.
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usageError("no command given");
  const std::string& cmd = args[0];
  if (cmd == "--version" || cmd == "version") {
    std::printf("kimi-relay %s\n", RELAY_VERSION);
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::printf("%s", kUsage);
    return 0;
  }
  if (cmd == "keys") return keysCommand(args);
  if (cmd == "healthcheck") return app::healthcheck(args);
  if (cmd == "--check-config") {
    if (args.size() != 2) return usageError("--check-config needs a FILE");
    try {
      config::Config cfg = config::loadConfigFile(args[1]);
      for (const auto& tl : cfg.server.tlsListen)
        net::checkTlsFiles({tl.certFile, tl.keyFile});
      telemetry::Metrics metrics;
      pipeline::Snapshot snap(std::move(cfg), pipeline::Services{&metrics, nullptr});
      std::printf("%s: OK (%zu upstreams, %zu models, %zu keys)\n", args[1].c_str(),
                  snap.catalog.upstreams().size(), snap.catalog.routes().size(),
                  snap.keys.tenants().size());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kimi-relay: %s\n", e.what());
      return 1;
    }
  }
  if (cmd == "--config") {
    if (args.size() != 2) return usageError("--config needs a FILE");
    return runGateway(args[1]);
  }
  return usageError("unknown command '" + cmd + "'");
}
