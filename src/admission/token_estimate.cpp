#include "relay/admission/token_estimate.hpp"

#include <algorithm>
#include <limits>

namespace relay::admission {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t saturatingAdd(std::uint64_t a, std::uint64_t b) {
  return b > kMax - a ? kMax : a + b;
}

std::uint64_t saturatingMul(std::uint64_t a, std::uint64_t b) {
  return a != 0 && b > kMax / a ? kMax : a * b;
}

}  // namespace

std::uint64_t estimatePromptTokens(std::size_t messageTextBytes, std::size_t messageCount) {
  const std::uint64_t bytes = messageTextBytes;
  const std::uint64_t text = bytes / kBytesPerToken + (bytes % kBytesPerToken != 0 ? 1 : 0);
  return saturatingAdd(saturatingAdd(text, saturatingMul(messageCount, kTokensPerMessage)),
                       kReplyPrimingTokens);
}

std::uint64_t reservationFor(std::uint64_t promptEstimate, std::optional<std::int64_t> maxTokens,
                             std::optional<std::int64_t> maxCompletionTokens,
                             std::uint64_t defaultMaxTokens) {
  std::optional<std::uint64_t> cap;
  for (const std::optional<std::int64_t>& v : {maxTokens, maxCompletionTokens}) {
    if (v && *v >= 0) cap = std::max(cap.value_or(0), static_cast<std::uint64_t>(*v));
  }
  return saturatingAdd(promptEstimate, cap.value_or(defaultMaxTokens));
}

}  // namespace relay::admission
