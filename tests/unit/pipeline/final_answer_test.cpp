// The answer when no attempt succeeded (final_answer.hpp): each status the
// gateway gives, from the failed attempts and what kept others from being made.
#include "final_answer.hpp"

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

using std::chrono::steady_clock;
using upstream::AttemptFailure;
using upstream::FailureClass;

Tried failed(std::string upstream, FailureClass kind, std::string what) {
  Tried t;
  t.upstream = std::move(upstream);
  t.failure.kind = kind;
  t.what = std::move(what);
  return t;
}

Tried answered(std::string upstream, int status, std::string body) {
  Tried t =
      failed(std::move(upstream), FailureClass::kHttpStatus, "HTTP " + std::to_string(status));
  t.failure.status = status;
  ErrorAnswer pass;
  pass.status = status;
  pass.body = std::move(body);
  pass.code = "upstream_code";
  t.passthrough = std::move(pass);
  return t;
}

Tried refusedKey(std::string upstream) {
  Tried t = failed(std::move(upstream), FailureClass::kHttpStatus, "HTTP 401");
  t.credentialRefused = true;
  return t;
}

bool says(const ErrorAnswer& e, std::string_view words) {
  return e.body.find(words) != std::string::npos;
}

const steady_clock::time_point kNow = steady_clock::now();

TEST(FinalAnswer, NothingAvailableIsA503ThatNamesTheModel) {
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2"}, kNow);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "no_upstream_available");
  EXPECT_TRUE(says(e, "'kimi-k2'"));
  EXPECT_TRUE(says(e, R"("type":"server_error")"));
}

// All at their caps: a 429 whose Retry-After is the wait until one frees up,
// in whole seconds rounded up, never 0; one second when that is unknown.
TEST(FinalAnswer, EveryUpstreamAtItsCapIsA429WithAnHonestRetryAfter) {
  struct Case {
    std::optional<steady_clock::duration> freesIn;
    std::string retryAfter;
  };
  for (const Case& c :
       {Case{std::nullopt, "1"}, Case{std::chrono::milliseconds(1), "1"},
        Case{std::chrono::milliseconds(1000), "1"}, Case{std::chrono::milliseconds(1001), "2"},
        Case{std::chrono::seconds(30), "30"}, Case{-std::chrono::seconds(1), "1"}}) {
    Unserved u{.model = "kimi-k2", .full = true};
    if (c.freesIn) u.fullRetryAt = kNow + *c.freesIn;
    ErrorAnswer e = finalAnswer(u, kNow);
    EXPECT_EQ(e.status, 429);
    EXPECT_EQ(e.code, "upstream_capacity");
    EXPECT_EQ(e.headers.get("retry-after"), c.retryAfter);
  }
}

TEST(FinalAnswer, TheLastUpstreamsOwnErrorIsPassedOnAsItWas) {
  std::vector<Tried> tried{failed("alpha", FailureClass::kConnectError, "connection refused"),
                           answered("beta", 400, R"({"error":{"message":"bad messages"}})")};
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .tried = tried}, kNow);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.body, R"({"error":{"message":"bad messages"}})");
  EXPECT_EQ(e.code, "upstream_code");
}

TEST(FinalAnswer, OneUpstreamThatCouldNotServeIsA502) {
  std::vector<Tried> tried{failed("alpha", FailureClass::kConnectError, "connection refused"),
                           failed("alpha", FailureClass::kReset, "connection reset")};
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .tried = tried}, kNow);
  EXPECT_EQ(e.status, 502);
  EXPECT_EQ(e.code, "upstream_unavailable");
  EXPECT_TRUE(says(e, "after 2 attempt(s): alpha: connection refused; alpha: connection reset."));
}

TEST(FinalAnswer, SeveralUpstreamsThatCouldNotServeAreA503) {
  std::vector<Tried> tried{failed("alpha", FailureClass::kConnectError, "connection refused"),
                           failed("beta", FailureClass::kTimeout, "first byte timeout")};
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .tried = tried}, kNow);
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "upstream_unavailable");
  EXPECT_TRUE(says(e, "alpha: connection refused; beta: first byte timeout"));
}

TEST(FinalAnswer, OnlyTimeoutsAreA504) {
  std::vector<Tried> tried{failed("alpha", FailureClass::kTimeout, "first byte timeout"),
                           failed("beta", FailureClass::kTimeout, "idle timeout")};
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .tried = tried}, kNow);
  EXPECT_EQ(e.status, 504);
  EXPECT_EQ(e.code, "upstream_timeout");
  EXPECT_TRUE(says(e, "in time after 2 attempt(s)"));
}

TEST(FinalAnswer, ASpentRetryBudgetIsNamed) {
  std::vector<Tried> tried{failed("alpha", FailureClass::kConnectError, "connection refused")};
  Unserved u{.model = "kimi-k2", .tried = tried};
  EXPECT_FALSE(says(finalAnswer(u, kNow), "retry budget"));
  u.budgetRefused = true;
  EXPECT_TRUE(says(finalAnswer(u, kNow), "(the retry budget refused further retries)"));
}

// Each refusing upstream named once; the caller is told the fault is not theirs.
TEST(FinalAnswer, ARefusedGatewayCredentialIsA502NamingEachUpstreamOnce) {
  std::vector<Tried> tried{refusedKey("alpha"),
                           failed("gamma", FailureClass::kConnectError, "connection refused"),
                           refusedKey("beta"), refusedKey("alpha")};
  ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .tried = tried}, kNow);
  EXPECT_EQ(e.status, 502);
  EXPECT_EQ(e.code, "upstream_auth_failed");
  EXPECT_EQ(e.headers.get("x-should-retry"), "false");
  EXPECT_TRUE(says(e, "upstream 'alpha', 'beta' was refused"));
  EXPECT_TRUE(says(e, "your key is fine"));
  EXPECT_FALSE(says(e, "gamma"));
}

// Under a residency rule a failure to serve is a 503 naming the rule; an
// answer below 500 (the caller's fault, or capacity) is given as it was.
TEST(FinalAnswer, UnderAResidencyRuleAFailureToServeNamesTheRule) {
  const std::string_view rule = "key 'eu-team' may only use regions eu";
  {
    ErrorAnswer e = finalAnswer(Unserved{.model = "kimi-k2", .residencyRule = rule}, kNow);
    EXPECT_EQ(e.status, 503);
    EXPECT_EQ(e.code, "residency_unavailable");
    EXPECT_EQ(e.headers.get("retry-after"), "1");
    EXPECT_TRUE(says(e, "may only use regions eu"));
    EXPECT_TRUE(says(e, "(none of the allowed ones is available)"));
  }
  {
    std::vector<Tried> tried{failed("eu-1", FailureClass::kConnectError, "connection refused")};
    ErrorAnswer e =
        finalAnswer(Unserved{.model = "kimi-k2", .tried = tried, .residencyRule = rule}, kNow);
    EXPECT_EQ(e.status, 503);
    EXPECT_TRUE(says(e, "(tried: eu-1: connection refused)"));
  }
  {
    std::vector<Tried> tried{answered("eu-1", 400, R"({"error":{"message":"bad"}})")};
    ErrorAnswer e =
        finalAnswer(Unserved{.model = "kimi-k2", .tried = tried, .residencyRule = rule}, kNow);
    EXPECT_EQ(e.status, 400);
  }
  {
    ErrorAnswer e =
        finalAnswer(Unserved{.model = "kimi-k2", .residencyRule = rule, .full = true}, kNow);
    EXPECT_EQ(e.status, 429);
  }
}

}  // namespace
}  // namespace relay::pipeline
