// How many tokens a chat request reserves at admission, before the upstream
// has said how many it used.
//
// Prompt estimate: ceil(messageTextBytes / 4) + 3 per message + 3.
//  - messageTextBytes is what readChatRequest already counts: the bytes of every
//    string value inside `messages`, as sent (escapes not decoded), roles
//    included. Counting it again would cost a second pass over the body.
//  - 4 bytes per token is the usual figure for English on BPE tokenizers.
//    Chinese is 3 bytes per character in UTF-8 and about 1.5 characters per
//    token on Kimi's tokenizer, i.e. ~4.5 bytes per token, and clients that
//    send \uXXXX escapes (6 bytes per character) push the estimate up, not
//    down. Over-estimates are refunded at settlement; the only cost is a
//    request refused a little early when the key is near its limit.
//  - 3 tokens per message for the chat template's role and separators, and 3
//    for priming the reply: what OpenAI documents for its chat models.
//  - Known blind spots: `tools` and other fields outside `messages` are not
//    counted (under-estimate, charged at settlement), and an image sent as a
//    base64 data URL counts its bytes (over-estimate, refunded).
//
// Reservation = prompt estimate + completion cap, where the cap is the
// request's max_completion_tokens or max_tokens (the larger when both are
// given, since the upstream may honour either), else the configured default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace relay::admission {

inline constexpr std::uint64_t kBytesPerToken = 4;
inline constexpr std::uint64_t kTokensPerMessage = 3;
inline constexpr std::uint64_t kReplyPrimingTokens = 3;

std::uint64_t estimatePromptTokens(std::size_t messageTextBytes, std::size_t messageCount = 1);

// Negative values (refused earlier by readChatRequest) count as absent.
// Saturates instead of overflowing.
std::uint64_t reservationFor(std::uint64_t promptEstimate, std::optional<std::int64_t> maxTokens,
                             std::optional<std::int64_t> maxCompletionTokens,
                             std::uint64_t defaultMaxTokens);

}  // namespace relay::admission
