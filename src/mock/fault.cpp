#include "fault.hpp"

#include <charconv>
#include <functional>
#include <set>

#include "relay/common/headers.hpp"

namespace relay::mock {

namespace {

// Decimal digits only: "+1", "1.5" or "0x10" in a spec are typos, not numbers.
std::optional<std::uint32_t> parseCount(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

bool isTypeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

std::string itemError(std::string_view item, std::string_view why) {
  std::string out = "fault item '";
  out.append(item);
  out += "': ";
  out.append(why);
  return out;
}

// A key whose value is a count; `actions` counts the keys that exclude one
// another. Returns the error for an unknown key or a value out of range.
std::optional<std::string> applyNumber(FaultSpec& spec, std::string_view key, std::uint32_t number,
                                       std::string_view item, int& actions) {
  if (key == "status") {
    if (number < 400 || number > 599) return itemError(item, "status must be 400..599");
    spec.status = static_cast<int>(number);
    ++actions;
  } else if (key == "retry_after") {
    spec.retryAfterSeconds = number;
  } else if (key == "retry_after_ms") {
    spec.retryAfterMs = number;
  } else if (key == "reset_after") {
    spec.resetAfterChunks = number;
    ++actions;
  } else if (key == "body_bytes" || key == "body_bytes_chunked") {
    spec.bodyBytes = number;
    spec.bodyChunked = key == "body_bytes_chunked";
    ++actions;
  } else if (key == "event_bytes") {
    spec.eventBytes = number;
    ++actions;
  } else if (key == "first_byte_delay_ms") {
    spec.firstByteDelayMs = number;
  } else if (key == "times") {
    if (number == 0) return itemError(item, "times must be at least 1");
    spec.times = number;
  } else {
    return itemError(item,
                     "unknown key (known: status, retry_after, retry_after_ms, "
                     "error_type, hang, reset, reset_after, body_bytes, "
                     "body_bytes_chunked, event_bytes, first_byte_delay_ms, times)");
  }
  return std::nullopt;
}

}  // namespace

bool FaultSpec::isNoop() const {
  return !status && !hang && !reset && !resetAfterChunks && !bodyBytes && !eventBytes &&
         firstByteDelayMs == 0;
}

FaultParseResult parseFaultSpec(std::string_view text) {
  FaultParseResult result;
  FaultSpec& spec = result.spec;
  std::set<std::string, std::less<>> seen;
  int actions = 0;

  while (!text.empty()) {
    std::size_t semi = text.find(';');
    std::string_view item = trimWhitespace(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (item.empty()) continue;

    std::size_t eq = item.find('=');
    std::string_view key = trimWhitespace(item.substr(0, eq));
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : trimWhitespace(item.substr(eq + 1));
    bool hasValue = eq != std::string_view::npos;
    if (!seen.emplace(key).second) {
      result.error = itemError(item, "repeated");
      return result;
    }

    if (key == "hang" || key == "reset") {
      if (hasValue) {
        result.error = itemError(item, "takes no value");
        return result;
      }
      (key == "hang" ? spec.hang : spec.reset) = true;
      ++actions;
      continue;
    }
    if (!hasValue || value.empty()) {
      result.error = itemError(item, "needs a value (key=value)");
      return result;
    }
    if (key == "error_type") {
      for (char c : value) {
        if (!isTypeChar(c)) {
          result.error = itemError(item, "type may hold only letters, digits, '_', '-', '.'");
          return result;
        }
      }
      spec.errorType = std::string(value);
      continue;
    }

    std::optional<std::uint32_t> number = parseCount(value);
    if (!number) {
      result.error = itemError(item, "value must be a non-negative decimal integer");
      return result;
    }
    if (std::optional<std::string> error = applyNumber(spec, key, *number, item, actions)) {
      result.error = std::move(*error);
      return result;
    }
  }

  if (actions > 1) {
    result.error =
        "fault spec: status, hang, reset, reset_after, body_bytes(_chunked) and event_bytes "
        "exclude one another";
  } else if (!spec.status &&
             (spec.retryAfterSeconds || spec.retryAfterMs || !spec.errorType.empty())) {
    result.error = "fault spec: retry_after, retry_after_ms and error_type need status=";
  }
  return result;
}

std::string describeFault(const FaultSpec& spec) {
  std::string out;
  auto item = [&out](std::string_view key, const std::string& value) {
    if (!out.empty()) out += ';';
    out.append(key);
    if (!value.empty()) {
      out += '=';
      out += value;
    }
  };
  if (spec.status) item("status", std::to_string(*spec.status));
  if (spec.retryAfterSeconds) item("retry_after", std::to_string(*spec.retryAfterSeconds));
  if (spec.retryAfterMs) item("retry_after_ms", std::to_string(*spec.retryAfterMs));
  if (!spec.errorType.empty()) item("error_type", spec.errorType);
  if (spec.hang) item("hang", "");
  if (spec.reset) item("reset", "");
  if (spec.resetAfterChunks) item("reset_after", std::to_string(*spec.resetAfterChunks));
  if (spec.bodyBytes)
    item(spec.bodyChunked ? "body_bytes_chunked" : "body_bytes", std::to_string(*spec.bodyBytes));
  if (spec.eventBytes) item("event_bytes", std::to_string(*spec.eventBytes));
  if (spec.firstByteDelayMs != 0)
    item("first_byte_delay_ms", std::to_string(spec.firstByteDelayMs));
  if (spec.times) item("times", std::to_string(*spec.times));
  return out;
}

}  // namespace relay::mock
