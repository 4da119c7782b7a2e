#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <string_view>

namespace relay::mock {

namespace {

template <class Int>
bool parseNumber(std::string_view text, Int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// "127.0.0.1:0", "localhost:8080" or "[::1]:0".
bool parseListen(std::string_view text, MockOptions& o) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
  }
  o.listenHost = std::string(host);
  return parseNumber(text.substr(colon + 1), o.listenPort);
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// One option that takes a value, into `o`. False, with `error` set, when
// the value is not one the option takes.
bool applyValued(std::string_view arg, std::string_view value, MockOptions& o, std::string& error) {
  bool ok = true;
  if (arg == "--listen") {
    ok = parseListen(value, o);
  } else if (arg == "--name") {
    o.name = std::string(value);
    ok = !value.empty();
  } else if (arg == "--api-key") {
    o.apiKey = std::string(value);
  } else if (arg == "--workers") {
    ok = parseNumber(value, o.workers) && o.workers >= 1 && o.workers <= 256;
  } else if (arg == "--models") {
    o.models = splitList(value);
    ok = !o.models.empty();
  } else if (arg == "--chunks") {
    ok = parseNumber(value, o.chunks) && o.chunks <= kMaxChunks;
  } else if (arg == "--chunk-delay-ms") {
    ok = parseNumber(value, o.chunkDelayMs);
  } else if (arg == "--fault") {
    FaultParseResult parsed = parseFaultSpec(value);
    if (!parsed.ok()) {
      error = "--fault: " + parsed.error;
      return false;
    }
    if (!parsed.spec.isNoop()) o.fault = parsed.spec;
  } else if (arg == "--tls-cert") {
    o.tlsCert = std::string(value);
  } else if (arg == "--tls-key") {
    o.tlsKey = std::string(value);
  } else if (arg == "--max-request-bytes") {
    ok = parseNumber(value, o.maxRequestBytes) && o.maxRequestBytes > 0;
  }
  if (!ok) error = "bad value for " + std::string(arg) + ": '" + std::string(value) + "'";
  return ok;
}

}  // namespace

const char* usageText() {
  return "usage: kimi-relay-mock --listen HOST:PORT [--name NAME] [--api-key SECRET]\n"
         "         [--workers N] [--models ID,ID...] [--moonshot] [--chunks N]\n"
         "         [--chunk-delay-ms MS] [--fault SPEC] [--no-record] [--coalesce]\n"
         "         [--tls-cert PEM --tls-key PEM] [--max-request-bytes N]\n"
         "Fault SPEC: ';'-separated items: status=CODE, retry_after=S, retry_after_ms=MS,\n"
         "  error_type=TYPE, hang, reset, reset_after=N, first_byte_delay_ms=MS, times=N\n";
}

OptionsResult parseOptions(int argc, const char* const* argv) {
  OptionsResult result;
  MockOptions& o = result.options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool inlineValue = false;
    if (std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    // Flags without a value.
    if (arg == "--help" || arg == "-h") {
      result.help = true;
      return result;
    }
    if (arg == "--moonshot" || arg == "--no-record" || arg == "--coalesce") {
      if (inlineValue) {
        result.error = std::string(arg) + " takes no value";
        return result;
      }
      if (arg == "--moonshot") o.flavor = Flavor::kMoonshot;
      if (arg == "--no-record") o.record = false;
      if (arg == "--coalesce") o.coalesce = true;
      continue;
    }
    static constexpr std::string_view kValued[] = {
        "--listen",         "--name",  "--api-key",  "--workers", "--models",           "--chunks",
        "--chunk-delay-ms", "--fault", "--tls-cert", "--tls-key", "--max-request-bytes"};
    if (std::find(std::begin(kValued), std::end(kValued), arg) == std::end(kValued)) {
      result.error = "unknown option " + std::string(arg);
      return result;
    }
    if (!inlineValue) {
      if (i + 1 >= argc) {
        result.error = std::string(arg) + " needs a value";
        return result;
      }
      value = argv[++i];
    }
    if (!applyValued(arg, value, o, result.error)) return result;
  }
  if (o.tlsCert.empty() != o.tlsKey.empty()) {
    result.error = "--tls-cert and --tls-key go together";
  }
  return result;
}

}  // namespace relay::mock
