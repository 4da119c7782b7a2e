#include "relay/sse/parser.hpp"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace relay::sse {
namespace {

// A copy of what the parser reported, taken before consume() invalidates it.
struct Seen {
  std::string raw;
  std::string data;
  std::size_t dataLines = 0;
  std::string type;
  std::string id;
  bool hasId = false;
  std::optional<std::uint64_t> retry;
  bool hasComment = false;
  bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << "{raw=" << testing::PrintToString(s.raw)
            << " data=" << testing::PrintToString(s.data) << " lines=" << s.dataLines
            << " type=" << s.type << " id=" << s.id << "}";
}

// Drives a parser the way a relay does: after each read, every complete event
// is inspected, completeBytes() is "written", then consumed.
struct Relay {
  Parser parser;
  std::vector<Seen> events;
  std::string forwarded;

  explicit Relay(ParserLimits limits = {}) : parser(limits) {}

  ParseStatus read(std::string_view chunk) {
    parser.feed(chunk);
    const ParseStatus status = parser.parse();
    std::size_t expectedOffset = 0;
    for (const Event& e : parser.events()) {
      // Each event's raw bytes sit inside completeBytes() at its offset.
      EXPECT_EQ(parser.completeBytes().substr(e.offset, e.raw.size()), e.raw);
      EXPECT_GE(e.offset, expectedOffset);
      expectedOffset = e.offset + e.raw.size();
      events.push_back({std::string(e.raw), std::string(e.data), e.dataLines, std::string(e.type),
                        std::string(e.id), e.hasId, e.retry, e.hasComment});
    }
    forwarded += parser.completeBytes();
    parser.consume();
    return status;
  }
};

std::vector<Seen> parseWhole(std::string_view stream) {
  Relay relay;
  EXPECT_EQ(relay.read(stream), ParseStatus::kOk);
  return relay.events;
}

Seen dataEvent(std::string raw, std::string data) {
  Seen s;
  s.raw = std::move(raw);
  s.data = std::move(data);
  s.dataLines = 1;
  return s;
}

constexpr std::string_view kOpenAiStream =
    "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
    ": keep-alive\n\n"
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n"
    "data: [DONE]\n\n";

TEST(SseParser, ReportsEachEventWithItsRawBytesAndData) {
  Relay relay;
  ASSERT_EQ(relay.read(kOpenAiStream), ParseStatus::kOk);
  ASSERT_EQ(relay.events.size(), 4U);
  EXPECT_EQ(relay.events[0],
            dataEvent("data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
                      "{\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}"));
  EXPECT_EQ(relay.events[1].raw, ": keep-alive\n\n");
  EXPECT_TRUE(relay.events[1].hasComment);
  EXPECT_EQ(relay.events[1].dataLines, 0U);
  EXPECT_EQ(relay.events[3], dataEvent("data: [DONE]\n\n", "[DONE]"));
  EXPECT_EQ(relay.forwarded, kOpenAiStream);
  EXPECT_EQ(relay.parser.pendingBytes(), 0U);
}

TEST(SseParser, OneByteAtATimeGivesTheSameEventsAndBytes) {
  const std::vector<Seen> whole = parseWhole(kOpenAiStream);
  Relay relay;
  for (char c : kOpenAiStream)
    ASSERT_EQ(relay.read(std::string_view(&c, 1)), ParseStatus::kOk);
  EXPECT_EQ(relay.events, whole);
  EXPECT_EQ(relay.forwarded, kOpenAiStream);
}

// A blank line ending in CR is dispatched at once, so when a read ends right
// after that CR the LF that follows is forwarded as a byte of no event: the
// event's raw bytes lack it. Everything else must not depend on the split.
std::vector<Seen> withoutCrlfTail(std::vector<Seen> events) {
  for (Seen& e : events) {
    if (e.raw.ends_with("\r\n")) e.raw.pop_back();
  }
  return events;
}

TEST(SseParser, EverySplitPointGivesTheSameEventsAndBytes) {
  const std::string stream =
      "\xEF\xBB\xBF"
      "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n"
      "id: 7\rdata: x\r\r"
      ":c\n\n\n"
      "retry: 30\ndata:y\n\n"
      "data: z\r\n\r\n";
  const std::vector<Seen> whole = parseWhole(stream);
  ASSERT_EQ(whole.size(), 5U);
  EXPECT_EQ(whole[0].raw, "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n");
  EXPECT_EQ(whole[0].type, "a");
  EXPECT_EQ(whole[0].data, "1\n2");
  EXPECT_EQ(whole[1].raw, "id: 7\rdata: x\r\r");
  EXPECT_EQ(whole[2].raw, ":c\n\n");
  EXPECT_EQ(whole[3].retry, 30U);
  EXPECT_EQ(whole[4].raw, "data: z\r\n\r\n");
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    for (std::size_t j = i; j <= stream.size(); ++j) {
      Relay relay;
      relay.read(std::string_view(stream).substr(0, i));
      relay.read(std::string_view(stream).substr(i, j - i));
      relay.read(std::string_view(stream).substr(j));
      ASSERT_EQ(withoutCrlfTail(relay.events), withoutCrlfTail(whole))
          << "splits at " << i << ", " << j;
      ASSERT_EQ(relay.forwarded, stream) << "splits at " << i << ", " << j;
    }
  }
}

TEST(SseParser, AcceptsLfCrlfAndCrLineEnds) {
  for (std::string_view eol : {"\n", "\r\n", "\r"}) {
    const std::string stream = "data: a" + std::string(eol) + "data: b" + std::string(eol) +
                               std::string(eol) + "data: c" + std::string(eol) + std::string(eol);
    const std::vector<Seen> events = parseWhole(stream);
    ASSERT_EQ(events.size(), 2U) << testing::PrintToString(eol);
    EXPECT_EQ(events[0].data, "a\nb");
    EXPECT_EQ(events[0].dataLines, 2U);
    EXPECT_EQ(events[1].data, "c");
    EXPECT_EQ(events[0].raw + events[1].raw, stream);
  }
}

// Line ends of every kind, mixed at random in one stream, against a
// reference that splits lines the plain way (WHATWG: CRLF, then CR, then
// LF) and joins data lines by hand. The parser looks for a CR once per run
// of lines that end in LF alone: streams that mix the two must find every
// line end all the same, whole and in reads of every size.
TEST(SseParser, MixedLineEndsMatchAPlainReference) {
  std::uint64_t seed = 0x9e3779b97f4a7c15ULL;
  auto next = [&seed] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  const char* const kEnds[] = {"\n", "\r", "\r\n"};
  for (int round = 0; round < 200; ++round) {
    std::string stream;
    std::vector<std::string> expectedData;  // per dispatched event
    const int events = 1 + static_cast<int>(next() % 6);
    for (int e = 0; e < events; ++e) {
      const int lines = 1 + static_cast<int>(next() % 3);
      std::string data;
      for (int l = 0; l < lines; ++l) {
        const std::string value =
            "v" + std::to_string(next() % 1000) + std::string(next() % 40, 'x');
        stream += "data: " + value + kEnds[next() % 3];
        data += (l ? "\n" : "") + value;
      }
      // The blank line. After a line that ended in CR, an LF would join it
      // as one CRLF rather than end the event: CR or CRLF then.
      stream += stream.back() == '\r' ? kEnds[1 + next() % 2] : kEnds[next() % 3];
      expectedData.push_back(data);
    }
    // The last blank line must not be a lone CR that a later LF could
    // extend: end with LF so the whole stream is complete.
    stream += "\n";
    for (const std::size_t piece :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
      Relay relay;
      if (piece == 0) {
        ASSERT_EQ(relay.read(stream), ParseStatus::kOk);
      } else {
        for (std::size_t at = 0; at < stream.size(); at += piece)
          ASSERT_EQ(relay.read(std::string_view(stream).substr(at, piece)), ParseStatus::kOk);
      }
      std::vector<std::string> data;
      for (const Seen& seen : relay.events)
        if (seen.dataLines > 0) data.push_back(seen.data);
      ASSERT_EQ(data, expectedData)
          << "round " << round << ", reads of " << piece << ": " << testing::PrintToString(stream);
      ASSERT_EQ(relay.forwarded, stream) << "round " << round << ", reads of " << piece;
    }
  }
}

TEST(SseParser, CrAtTheEndOfOneReadAndLfAtTheStartOfTheNextAreOneLineEnd) {
  Relay relay;
  relay.read("data: a\r");
  EXPECT_TRUE(relay.events.empty());
  relay.read("\ndata: b\r");
  EXPECT_TRUE(relay.events.empty());  // "a\r\n" then "data: b\r": no blank line yet
  relay.read("\n\r");
  ASSERT_EQ(relay.events.size(), 1U);  // the blank line's CR ends the event at once
  EXPECT_EQ(relay.events[0].data, "a\nb");
  EXPECT_EQ(relay.events[0].raw, "data: a\r\ndata: b\r\n\r");
  relay.read("\ndata: c\n\n");  // this LF completes the CRLF: not a second blank line
  ASSERT_EQ(relay.events.size(), 2U);
  EXPECT_EQ(relay.events[1].raw, "data: c\n\n");
  EXPECT_EQ(relay.forwarded, "data: a\r\ndata: b\r\n\r\ndata: c\n\n");
}

TEST(SseParser, ReadsEventIdAndRetryFields) {
  const std::vector<Seen> events =
      parseWhole("event: update\nid: 42\nretry: 1500\ndata: {}\n\nid\ndata\n\n");
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].type, "update");
  EXPECT_TRUE(events[0].hasId);
  EXPECT_EQ(events[0].id, "42");
  EXPECT_EQ(events[0].retry, 1500U);
  EXPECT_EQ(events[0].data, "{}");
  // A field name alone has an empty value: an empty id, an empty data line.
  EXPECT_TRUE(events[1].hasId);
  EXPECT_EQ(events[1].id, "");
  EXPECT_EQ(events[1].dataLines, 1U);
  EXPECT_EQ(events[1].data, "");
}

TEST(SseParser, FollowsTheValueRules) {
  const std::vector<Seen> events = parseWhole(
      "data:x\n\n"               // no space after the colon
      "data:  two\n\n"           // only one space is removed
      "data: a:b\n\n"            // later colons belong to the value
      "retry: 12a\ndata: r\n\n"  // a retry that is not all digits is ignored
      "foo: bar\ndata: f\n\n"    // unknown fields are ignored
      "DATA: upper\n\n");        // names are case-sensitive: no data, no dispatch
  ASSERT_EQ(events.size(), 6U);
  EXPECT_EQ(events[0].data, "x");
  EXPECT_EQ(events[1].data, " two");
  EXPECT_EQ(events[2].data, "a:b");
  EXPECT_EQ(events[3].retry, std::nullopt);
  EXPECT_EQ(events[3].data, "r");
  EXPECT_EQ(events[4].data, "f");
  EXPECT_EQ(events[5].dataLines, 0U);
  EXPECT_EQ(events[5].raw, "DATA: upper\n\n");
}

// Found by fuzz_sse: a field without a colon has an empty value whose view
// was null, and the parser turned its address into a buffer offset
// (undefined behaviour; UBSan: "applying non-zero offset ... produced null
// pointer"). Every view, empty or not, must point into the event's bytes.
TEST(SseParser, FieldsWithoutAColonHaveEmptyValuesInsideTheEvent) {
  Parser parser;
  parser.feed("id: 7\n\nid\nevent\ndata\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), 2U);
  const Event& e = parser.events()[1];
  EXPECT_TRUE(e.hasId);
  EXPECT_EQ(e.id, "");
  EXPECT_EQ(e.type, "");
  EXPECT_EQ(e.data, "");
  EXPECT_EQ(e.dataLines, 1U);
  EXPECT_EQ(parser.lastEventId(), "");  // an empty id resets it, per WHATWG
  const char* begin = e.raw.data();
  const char* end = e.raw.data() + e.raw.size();
  for (std::string_view view : {e.id, e.type, e.data}) {
    EXPECT_GE(view.data(), begin);
    EXPECT_LE(view.data(), end);
  }
}

TEST(SseParser, KeepsTheLastEventIdAcrossEventsAndIgnoresIdsWithNul) {
  Relay relay;
  relay.read("id: first\ndata: 1\n\ndata: 2\n\n");
  EXPECT_EQ(relay.parser.lastEventId(), "first");
  ASSERT_EQ(relay.events.size(), 2U);
  EXPECT_FALSE(relay.events[1].hasId);
  relay.read(std::string_view("id: a\0b\ndata: 3\n\n", 17));
  EXPECT_EQ(relay.parser.lastEventId(), "first");
  EXPECT_FALSE(relay.events[2].hasId);
  relay.read("id\n\n");  // an empty id resets it
  EXPECT_EQ(relay.parser.lastEventId(), "");
}

TEST(SseParser, CommentsAndBlankLinesAreForwardedButDispatchNothing) {
  Relay relay;
  relay.read("\n\n: ping\n\n\r\n:\ndata: x\n: trailing\n\n");
  ASSERT_EQ(relay.events.size(), 2U);
  EXPECT_EQ(relay.events[0].raw, ": ping\n\n");
  EXPECT_TRUE(relay.events[0].hasComment);
  EXPECT_EQ(relay.events[1].raw, ":\ndata: x\n: trailing\n\n");
  EXPECT_EQ(relay.events[1].data, "x");
  EXPECT_TRUE(relay.events[1].hasComment);
  EXPECT_EQ(relay.forwarded, "\n\n: ping\n\n\r\n:\ndata: x\n: trailing\n\n");
}

TEST(SseParser, SkipsALeadingBomEvenWhenSplit) {
  Relay relay;
  relay.read("\xEF");
  relay.read("\xBB");
  relay.read(
      "\xBF"
      "data: x\n\n");
  ASSERT_EQ(relay.events.size(), 1U);
  EXPECT_EQ(relay.events[0].raw, "data: x\n\n");
  EXPECT_EQ(relay.events[0].data, "x");
  EXPECT_EQ(relay.forwarded,
            "\xEF\xBB\xBF"
            "data: x\n\n");
  // Later, the same bytes are part of a line: here a field name nobody knows.
  relay.read(
      "\xEF\xBB\xBF"
      "data: y\n\n");
  ASSERT_EQ(relay.events.size(), 2U);
  EXPECT_EQ(relay.events[1].dataLines, 0U);
}

TEST(SseParser, RefusesAnEventLargerThanTheCap) {
  Relay relay(ParserLimits{.maxEventBytes = 16});
  EXPECT_EQ(relay.read("data: 123456789\n"), ParseStatus::kOk);       // 16 bytes: at the cap
  EXPECT_EQ(relay.read("\n"), ParseStatus::kEventTooLarge);           // 17 once complete
  EXPECT_EQ(relay.read("data: x\n\n"), ParseStatus::kEventTooLarge);  // sticky
  EXPECT_TRUE(relay.events.empty());

  Relay endless(ParserLimits{.maxEventBytes = 64});
  EXPECT_EQ(endless.read("data: ok\n\n"), ParseStatus::kOk);
  ParseStatus status = ParseStatus::kOk;
  std::size_t fed = 0;
  while (status == ParseStatus::kOk && fed < 1000) {
    status = endless.read("data: and more\n");
    fed += 15;
  }
  EXPECT_EQ(status, ParseStatus::kEventTooLarge);
  EXPECT_EQ(fed, 75U);  // refused as soon as the incomplete event passed 64 bytes
  ASSERT_EQ(endless.events.size(), 1U);
  EXPECT_EQ(endless.forwarded, "data: ok\n\n");
  endless.parser.reset();
  EXPECT_EQ(endless.read("data: again\n\n"), ParseStatus::kOk);
  EXPECT_EQ(endless.events.size(), 2U);
}

// Found by fuzz_sse: an event ending in CRLF was refused when its final LF
// came in the same read (11 bytes > 10) and accepted when it came in the next
// (the CR had already ended a 10-byte event). The final LF no longer counts.
TEST(SseParser, TheCapDoesNotDependOnWhereTheFinalCrlfIsSplit) {
  const std::string event = "data: 1\r\n\r\n";  // 11 bytes, 10 without the last LF
  Relay whole(ParserLimits{.maxEventBytes = 10});
  EXPECT_EQ(whole.read(event), ParseStatus::kOk);
  Relay split(ParserLimits{.maxEventBytes = 10});
  EXPECT_EQ(split.read(event.substr(0, 10)), ParseStatus::kOk);
  EXPECT_EQ(split.read(event.substr(10)), ParseStatus::kOk);
  ASSERT_EQ(whole.events.size(), 1U);
  ASSERT_EQ(split.events.size(), 1U);
  EXPECT_EQ(whole.events[0].data, split.events[0].data);
  EXPECT_EQ(whole.forwarded, split.forwarded);

  Relay over(ParserLimits{.maxEventBytes = 9});
  EXPECT_EQ(over.read(event), ParseStatus::kEventTooLarge);
  Relay overSplit(ParserLimits{.maxEventBytes = 9});
  EXPECT_EQ(overSplit.read(event.substr(0, 10)), ParseStatus::kEventTooLarge);
}

TEST(SseParser, ReportsEventsCompletedBeforeTheCapWasHit) {
  Parser parser(ParserLimits{.maxEventBytes = 12});
  parser.feed("data: a\n\ndata: too long for the cap");
  EXPECT_EQ(parser.parse(), ParseStatus::kEventTooLarge);
  ASSERT_EQ(parser.events().size(), 1U);
  EXPECT_EQ(parser.completeBytes(), "data: a\n\n");
}

TEST(SseParser, DefaultCapIs16MiB) {
  EXPECT_EQ(ParserLimits{}.maxEventBytes, 16U << 20);
}

TEST(SseParser, ReadsStraightIntoItsBufferAndBatchesCompleteEvents) {
  Parser parser;
  const std::string_view read1 = "data: 1\n\ndata: 2\n\ndata: 3";
  parser.inbox().append(read1);  // as an HTTP body parser appends a read's body
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  // One write forwards both complete events; the partial third stays behind.
  EXPECT_EQ(parser.completeBytes(), "data: 1\n\ndata: 2\n\n");
  ASSERT_EQ(parser.events().size(), 2U);
  EXPECT_EQ(parser.events()[1].offset, 9U);
  EXPECT_EQ(parser.pendingBytes(), 7U);
  parser.consume();
  EXPECT_EQ(parser.completeBytes(), "");
  EXPECT_TRUE(parser.events().empty());
  parser.feed("\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), 1U);
  EXPECT_EQ(parser.events()[0].raw, "data: 3\n\n");
  EXPECT_EQ(parser.events()[0].data, "3");
}

TEST(SseParser, ViewsSurviveTheBufferGrowingBeforeConsume) {
  Parser parser;
  parser.feed("data: first\ndata: joined\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  // More reads without consume(): the buffer reallocates and joined data grows.
  parser.feed(std::string(100000, ':') + "\n\ndata: x\ndata: y\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), 3U);
  EXPECT_EQ(parser.events()[0].raw, "data: first\ndata: joined\n\n");
  EXPECT_EQ(parser.events()[0].data, "first\njoined");
  EXPECT_EQ(parser.events()[2].data, "x\ny");
  EXPECT_EQ(parser.completeBytes().size(),
            std::string_view("data: first\ndata: joined\n\n").size() + 100002U +
                std::string_view("data: x\ndata: y\n\n").size());
}

TEST(SseParser, LeavesAnUnterminatedEventPending) {
  Relay relay;
  relay.read("data: 1\n\ndata: cut sh");
  EXPECT_EQ(relay.events.size(), 1U);
  EXPECT_EQ(relay.parser.pendingBytes(), 12U);
  relay.read("ort\n");
  EXPECT_EQ(relay.events.size(), 1U);
  EXPECT_EQ(relay.parser.pendingBytes(), 16U);
}

// The edge of what a read's lists keep: a read of provider-sized events
// (128 bytes or more each, so the lists are sized at once) keeps room for
// kEventsKept of them; one more and the room goes back.
TEST(SseParser, DropEventsKeepsRoomForKEventsKeptAndNotOneMore) {
  const auto read = [](std::size_t events) {
    std::string bytes;
    for (std::size_t i = 0; i < events; ++i)
      bytes += "data: " + std::string(130, 'x') + "\n\n";
    return bytes;
  };
  Parser parser;
  parser.feed(read(Parser::kEventsKept));
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), Parser::kEventsKept);
  parser.dropEvents();
  EXPECT_EQ(parser.events().capacity(), Parser::kEventsKept);  // kept, not grown
  parser.consume();
  parser.feed(read(Parser::kEventsKept + 1));
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), Parser::kEventsKept + 1);
  parser.dropEvents();
  EXPECT_EQ(parser.events().capacity(), 0U);
}

// A relay that is done with a read's events before it waits gives back the
// lists of a read that brought many (a burst), and keeps those of a few.
TEST(SseParser, DropEventsGivesBackABurstsListsAndKeepsCompleteBytes) {
  Parser parser;
  std::string burst;
  for (int i = 0; i < 100; ++i)
    burst += "data: " + std::to_string(i) + "\n\n";
  parser.feed(burst);
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), 100U);
  parser.dropEvents();
  EXPECT_TRUE(parser.events().empty());
  EXPECT_EQ(parser.events().capacity(), 0U);
  EXPECT_EQ(parser.completeBytes(), burst);  // still to be written
  parser.consume();
  parser.feed("data: a\n\ndata: b\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  parser.dropEvents();
  EXPECT_GT(parser.events().capacity(), 0U);  // a paced stream's lists stay
  EXPECT_LE(parser.events().capacity(), Parser::kEventsKept);
  // Parsing goes on as before after a drop.
  parser.consume();
  parser.feed("data: c\n\n");
  ASSERT_EQ(parser.parse(), ParseStatus::kOk);
  ASSERT_EQ(parser.events().size(), 1U);
  EXPECT_EQ(parser.events()[0].data, "c");
}

}  // namespace
}  // namespace relay::sse
