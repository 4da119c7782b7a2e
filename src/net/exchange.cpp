#include "relay/net/exchange.hpp"

namespace relay::net {

Task<bool> ResponseSink::finishWith(std::string_view last) {
  // (GCC 12 miscompiles co_await inside && and ||: keep it a statement.)
  if (!last.empty()) {
    const bool written = co_await write(last);
    if (!written) co_return false;
  }
  co_return co_await finish();
}

int BodyResult::httpStatus() const {
  switch (status) {
    case BodyStatus::kComplete:
      return 200;
    case BodyStatus::kTooLarge:
      return 413;
    case BodyStatus::kTimeout:
      return 408;
    case BodyStatus::kMalformed:
      return 400;
    case BodyStatus::kNoRoom:
      return 503;
    case BodyStatus::kGone:
      break;
  }
  return 499;
}

std::string_view BodyResult::code() const {
  switch (status) {
    case BodyStatus::kTooLarge:
      return "request_too_large";
    case BodyStatus::kTimeout:
      return "request_timeout";
    case BodyStatus::kMalformed:
      return "bad_request";
    case BodyStatus::kNoRoom:
      return "connection_body_budget_full";
    case BodyStatus::kComplete:
    case BodyStatus::kGone:
      break;
  }
  return {};
}

std::optional<BodyResult> Exchange::readBodyNow() {
  if (!bodyResult_) {
    if (bodySource) {
      std::optional<BodyResult> r = bodySource->readAllNow(body);
      if (!r) return std::nullopt;
      bodyResult_ = std::move(*r);
    } else {
      bodyResult_ = BodyResult{};
    }
  }
  return *bodyResult_;
}

Task<BodyResult> Exchange::readBody() {
  if (!bodyResult_) {
    BodyResult r;
    if (bodySource) r = co_await bodySource->readAll(body);
    bodyResult_ = std::move(r);
  }
  co_return *bodyResult_;
}

}  // namespace relay::net
