// kimi-relay-mock: an OpenAI/Moonshot-compatible fake upstream for the demo,
// the integration tests and the benchmarks.
//
// Start-up contract (tests read it): exactly one line on stdout,
// "kimi-relay-mock listening on HOST:PORT" with the bound port, then flushed.
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>

#include "options.hpp"
#include "relay/net/server.hpp"
#include "server.hpp"
#include "state.hpp"

namespace {

std::string endpointText(const std::string& host, std::uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace relay;
  mock::OptionsResult parsed = mock::parseOptions(argc, argv);
  if (parsed.help) {
    std::fputs(mock::usageText(), stdout);
    return 0;
  }
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "kimi-relay-mock: %s\n%s", parsed.error.c_str(), mock::usageText());
    return 2;
  }
  const mock::MockOptions& options = parsed.options;
  // A peer that resets mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);

  try {
    mock::MockState state(options.record);
    if (options.fault) state.setFault(mock::RunWideFault{*options.fault, options.fault->times});
    mock::MockServer server(options, state);

    net::Runtime runtime(options.workers);
    net::ListenerOptions listener;
    listener.name = "mock";
    listener.address.host = options.listenHost;
    listener.address.port = options.listenPort;
    listener.maxRequestBytes = options.maxRequestBytes;
    if (!options.tlsCert.empty()) listener.tls = net::TlsFiles{options.tlsCert, options.tlsKey};
    // The server is shared by every worker: its state is atomic or locked.
    config::Endpoint bound = runtime.listen(listener, [&server](unsigned) {
      return net::Handler([&server](net::Exchange& exchange) { return server.handle(exchange); });
    });

    std::cout << "kimi-relay-mock listening on " << endpointText(bound.host, bound.port)
              << std::endl;
    runtime.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kimi-relay-mock: %s\n", e.what());
    return 1;
  }
  return 0;
}
