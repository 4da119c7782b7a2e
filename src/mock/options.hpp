// Command line of kimi-relay-mock. Tests depend on these flags; keep them stable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fault.hpp"
#include "replies.hpp"

namespace relay::mock {

struct MockOptions {
  std::string listenHost = "127.0.0.1";
  std::uint16_t listenPort = 0;
  std::string name = "mock";  // sent as x-mock-name, and owned_by in /v1/models
  std::string apiKey;         // empty = no authentication
  unsigned workers = 1;
  std::vector<std::string> models = {"kimi-k2", "kimi-k2-0905-preview"};
  Flavor flavor = Flavor::kOpenAi;
  std::uint32_t chunks = 20;
  std::uint32_t chunkDelayMs = 0;
  std::optional<FaultSpec> fault;  // run-wide, from --fault
  bool record = true;
  // Benchmarks: with no chunk delay, send a whole stream in one write, like a
  // canned SSE file, so the mock costs a few syscalls per stream instead of one
  // per chunk. Tests leave it off: there every chunk is its own write.
  bool coalesce = false;
  std::string tlsCert;  // both set = TLS listener (ALPN h2, http/1.1)
  std::string tlsKey;
  std::uint64_t maxRequestBytes = 16u << 20;
};

struct OptionsResult {
  MockOptions options;
  std::string error;  // usage error, for stderr
  bool help = false;
};

OptionsResult parseOptions(int argc, const char* const* argv);
const char* usageText();

// Largest value accepted for a chunk count (flag or x-mock-chunks).
inline constexpr std::uint32_t kMaxChunks = 100'000;

}  // namespace relay::mock
