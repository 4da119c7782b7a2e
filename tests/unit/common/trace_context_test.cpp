#include "relay/common/trace_context.hpp"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

constexpr const char* kValid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

bool isLowerHex(std::string_view s, std::size_t size) {
  if (s.size() != size) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

TEST(Traceparent, ParsesTheSpecExample) {
  auto t = parseTraceparent(kValid);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->parentId, "00f067aa0ba902b7");
  EXPECT_EQ(t->flags, 1);
  auto unsampled = parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled);
  EXPECT_EQ(unsampled->flags, 0);
}

TEST(Traceparent, RefusesWhatTheSpecCallsInvalid) {
  const char* bad[] = {
      "",
      "00",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",      // short flags
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",    // v00 longer than 55
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ab",  // v00 with an extra field
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",     // uppercase
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero parent id
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
      "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // wrong separator
      "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
      "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  // fields shifted
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9-2b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e47z6-00f067aa0ba902b7-01",
  };
  for (const char* v : bad)
    EXPECT_FALSE(parseTraceparent(v)) << v;
}

TEST(Traceparent, ReadsALaterVersionByItsFirstFourFields) {
  auto longer =
      parseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next");
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09"));
  // ... but what follows the fourth field must start with '-'.
  EXPECT_FALSE(parseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"));
}

TEST(Tracestate, KeepsValidMembersAndDropsWhitespaceAndEmptyOnes) {
  EXPECT_EQ(normaliseTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(normaliseTracestate(" rojo=1 ,\tcongo=2\t,, "), "rojo=1,congo=2");
  EXPECT_EQ(normaliseTracestate("tenant1@system=v,3tenant@sys_2=x"),
            "tenant1@system=v,3tenant@sys_2=x");
  EXPECT_EQ(normaliseTracestate("a=b c"), "a=b c");  // a space inside a value
  EXPECT_EQ(normaliseTracestate("a=b "), "a=b");     // the space after it is the list's
  EXPECT_EQ(normaliseTracestate(""), "");
  EXPECT_EQ(normaliseTracestate(" , "), "");
}

TEST(Tracestate, RefusesWhatTheGrammarDoesNot) {
  const char* bad[] = {
      "novalue",
      "Upper=1",
      "1abc=1",
      "a=",
      "a= ",
      "a=b=c",
      "a=b,a=c",
      "@sys=1",
      "t@=1",
      "t@1sys=1",
      "t@systemnamewaytoolong=1",
      "a=\x7f",
      "a=\x01",
      "k/ey!=1",
  };
  for (const char* v : bad)
    EXPECT_FALSE(normaliseTracestate(v)) << v;
  std::string thirtyThree;
  for (int i = 0; i < 33; ++i)
    thirtyThree += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_FALSE(normaliseTracestate(thirtyThree));
  std::string thirtyTwo;
  for (int i = 0; i < 32; ++i)
    thirtyTwo += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_TRUE(normaliseTracestate(thirtyTwo));
  EXPECT_FALSE(normaliseTracestate("k=" + std::string(257, 'v')));
  EXPECT_TRUE(normaliseTracestate("k=" + std::string(256, 'v')));
}

TEST(Tracestate, OverLongListsLoseLongMembersFirstThenTheTail) {
  std::string longMember = "big=" + std::string(200, 'x');
  std::string list = longMember;
  for (int i = 0; i < 12; ++i)
    list += ",k" + std::to_string(i) + "=" + std::string(30, 'a' + i);
  auto out = normaliseTracestate(list);
  ASSERT_TRUE(out);
  EXPECT_LE(out->size(), 512u);
  EXPECT_EQ(out->find("big="), std::string::npos) << "the member over 128 characters goes first";
  EXPECT_EQ(out->rfind("k0=", 0), 0u) << "the front of the list is kept";
  // The twelve short members fit (about 410 characters): nothing else was cut.
  EXPECT_NE(out->find("k11="), std::string::npos);

  std::string many;
  for (int i = 0; i < 20; ++i)
    many += (i ? ",m" : "m") + std::to_string(i) + "=" + std::string(40, 'z');
  auto cut = normaliseTracestate(many);
  ASSERT_TRUE(cut);
  EXPECT_LE(cut->size(), 512u);
  EXPECT_EQ(cut->rfind("m0=", 0), 0u);
  EXPECT_EQ(cut->find("m19="), std::string::npos) << "then members from the end";
}

TEST(TraceContext, ContinuesAValidTraceWithANewSpanOfItsOwn) {
  Headers h;
  h.add("traceparent", kValid);
  h.add("tracestate", "rojo=00f067aa0ba902b7");
  h.add("tracestate", "congo=t61rcWkgMzE");
  TraceContext t = traceFrom(h);
  EXPECT_TRUE(t.continued());
  EXPECT_EQ(t.traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parentId, "00f067aa0ba902b7");
  EXPECT_TRUE(isLowerHex(t.spanId, 16));
  EXPECT_NE(t.spanId, t.parentId);
  EXPECT_EQ(t.tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(t.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-" + std::string(t.spanId) + "-01");
  auto again = parseTraceparent(t.traceparent());
  ASSERT_TRUE(again) << "what the gateway sends is valid itself";
}

TEST(TraceContext, KeepsOnlyTheSampledFlagAndAVersion00Header) {
  Headers h;
  h.add("traceparent", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe-extra");
  TraceContext t = traceFrom(h);
  ASSERT_TRUE(t.continued());
  EXPECT_EQ(t.flags, 0);
  EXPECT_EQ(t.traceparent().view().substr(0, 3), "00-");
  EXPECT_EQ(t.traceparent().view().substr(52), "-00");
}

TEST(TraceContext, StartsANewTraceWhenAbsentInvalidOrRepeated) {
  Headers none;
  TraceContext a = traceFrom(none);
  EXPECT_FALSE(a.continued());
  EXPECT_TRUE(isLowerHex(a.traceId, 32));
  EXPECT_TRUE(isLowerHex(a.spanId, 16));
  EXPECT_EQ(a.flags, 1);

  Headers invalid;
  invalid.add("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01");
  invalid.add("tracestate", "rojo=1");
  TraceContext b = traceFrom(invalid);
  EXPECT_FALSE(b.continued());
  EXPECT_NE(b.traceId, "00000000000000000000000000000000");
  EXPECT_EQ(b.tracestate, "") << "a tracestate without a valid traceparent is dropped";

  Headers twice;
  twice.add("traceparent", kValid);
  twice.add("traceparent", kValid);
  EXPECT_FALSE(traceFrom(twice).continued());

  Headers badState;
  badState.add("traceparent", kValid);
  badState.add("tracestate", "Bad=1");
  TraceContext c = traceFrom(badState);
  EXPECT_TRUE(c.continued());
  EXPECT_EQ(c.tracestate, "") << "an invalid tracestate is not passed on";
}

TEST(TraceContext, IdsAreFreshEachTime) {
  std::set<std::string> traces, spans;
  for (int i = 0; i < 1000; ++i) {
    traces.insert(newTraceId());
    spans.insert(newSpanId());
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
}

}  // namespace
}  // namespace relay
