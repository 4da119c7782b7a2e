// HTTP/1.1 framing (relay/net/http1_parser.hpp): heads taken whole however
// they arrive, the syntax and framing rules the gateway relies on against
// request smuggling and desynchronised upstream connections, every bound at
// its edge, and bodies by length, chunks and the connection's end.
#include "relay/net/http1_parser.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/beast/http/error.hpp>
#include <gtest/gtest.h>

namespace relay::net::http1 {
namespace {

using boost::system::error_code;
using Err = boost::beast::http::error;

// Records what the parser reports.
class Recorder final : public Parser {
 public:
  explicit Recorder(bool request) : Parser(request) {}

  std::string method, target;
  int status = -1;
  std::vector<std::pair<std::string, std::string>> fields;
  std::vector<FieldName> kinds;
  std::string body;
  int headerDoneCalls = 0;

  // Feeds `wire` in pieces of `step` bytes as a connection would: what the
  // parser leaves is offered again with the next piece. Returns the last
  // error that was not need_more (or need_more if the message is unfinished)
  // and sets `left` to the bytes never used.
  error_code feed(std::string_view wire, std::size_t step, std::string* left = nullptr) {
    std::string pending;
    error_code ec;
    for (std::size_t at = 0; at < wire.size() || !pending.empty();) {
      if (at < wire.size()) {
        const std::size_t n = std::min(step, wire.size() - at);
        pending.append(wire.substr(at, n));
        at += n;
      }
      for (;;) {
        if (done()) break;
        const std::size_t used = put(pending, ec);
        pending.erase(0, used);
        if (ec && ec != Err::need_more) {
          if (left) *left = pending;
          return ec;
        }
        if (ec || used == 0 || pending.empty()) break;
      }
      if (done() || at >= wire.size()) break;
    }
    if (left) *left = pending;
    return done() ? error_code{} : error_code(Err::need_more);
  }

 private:
  void onStartLine(std::string_view m, std::string_view t, int s) override {
    method = m;
    target = t;
    status = s;
  }
  void onField(FieldName kind, std::string_view name, std::string_view value) override {
    fields.emplace_back(name, value);
    kinds.push_back(kind);
  }
  void onHeaderDone() override { ++headerDoneCalls; }
  void onBody(std::string_view bytes) override { body.append(bytes); }
};

error_code parseRequest(std::string_view wire, Recorder& r) {
  r.eager(true);
  return r.feed(wire, wire.size());
}

std::string chunkedRequest(std::string chunks) {
  return "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks;
}

TEST(Http1Parser, RequestHeadAndBodyInOnePiece) {
  Recorder r(true);
  const std::string wire =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization:  Bearer k  \r\n"
      "Content-Length: 5\r\nX-Empty:\r\n\r\nhello";
  ASSERT_EQ(parseRequest(wire, r), error_code{});
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/chat/completions?x=1");
  ASSERT_EQ(r.fields.size(), 4u);
  EXPECT_EQ(r.fields[1], (std::pair<std::string, std::string>{"Authorization", "Bearer k"}));
  EXPECT_EQ(r.fields[3], (std::pair<std::string, std::string>{"X-Empty", ""}));
  EXPECT_EQ(r.kinds[2], FieldName::kContentLength);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.contentLength(), 5u);
  EXPECT_TRUE(r.keepAlive());
  EXPECT_EQ(r.version(), 11);
  EXPECT_EQ(r.headerDoneCalls, 1);
}

TEST(Http1Parser, AHeadIsTakenOnlyWholeWhateverThePieces) {
  const std::string wire =
      "GET /v1/models HTTP/1.1\r\nHost: gw\r\nX-Long: " + std::string(300, 'v') + "\r\n\r\n";
  for (std::size_t step :
       {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, wire.size()}) {
    Recorder r(true);
    std::string pending;
    for (std::size_t at = 0; at < wire.size(); at += step) {
      pending.append(wire.substr(at, step));
      error_code ec;
      const std::size_t used = r.put(pending, ec);
      if (at + step < wire.size()) {
        ASSERT_EQ(ec, Err::need_more) << "step " << step << " at " << at;
        ASSERT_EQ(used, 0u) << "nothing of a head is used before it ends";
        ASSERT_TRUE(r.fields.empty());
      } else {
        ASSERT_EQ(ec, error_code{});
        EXPECT_EQ(used, wire.size());
      }
    }
    EXPECT_TRUE(r.done()) << "step " << step;
    ASSERT_EQ(r.fields.size(), 2u);
    EXPECT_EQ(r.fields[1].second, std::string(300, 'v'));
  }
}

TEST(Http1Parser, HeadLimitAtItsEdge) {
  const std::string start = "GET / HTTP/1.1\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  const std::size_t limit = 1024;
  const std::string exact = start + std::string(limit - start.size() - end.size(), 'a') + end;
  ASSERT_EQ(exact.size(), limit);
  for (std::size_t step : {std::size_t{1}, std::size_t{100}, limit + 1}) {
    Recorder ok(true);
    ok.headerLimit(limit);
    EXPECT_EQ(ok.feed(exact, step), error_code{}) << "a head of exactly the limit, step " << step;
    Recorder over(true);
    over.headerLimit(limit);
    const std::string oneMore =
        start + std::string(limit - start.size() - end.size() + 1, 'a') + end;
    EXPECT_EQ(over.feed(oneMore, step), Err::header_limit) << "one byte more, step " << step;
  }
  // A head that never ends is refused once the limit's worth has arrived.
  Recorder endless(true);
  endless.headerLimit(limit);
  error_code ec;
  EXPECT_EQ(endless.put(start + std::string(limit - start.size() - 1, 'a'), ec), 0u);
  EXPECT_EQ(ec, Err::need_more);
  endless.put(start + std::string(limit - start.size(), 'a'), ec);
  EXPECT_EQ(ec, Err::header_limit);
}

TEST(Http1Parser, StartLineErrors) {
  struct Case {
    const char* wire;
    Err expected;
  } cases[] = {
      {"G@T / HTTP/1.1\r\n\r\n", Err::bad_method},
      {" GET / HTTP/1.1\r\n\r\n", Err::bad_method},
      {"\r\n\r\n", Err::bad_method},
      {"GET  / HTTP/1.1\r\n\r\n", Err::bad_target},
      {"GET /a\x7f HTTP/1.1\r\n\r\n", Err::bad_target},
      {"GET / HTTP/2.0\r\n\r\n", Err::bad_version},
      {"GET / HTTP/1.1 \r\n\r\n", Err::bad_version},
      {"GET / HTTX/1.1\r\n\r\n", Err::bad_version},
      {"GET / HTTP/1.1\rX\r\n\r\n", Err::bad_version},
  };
  for (const Case& c : cases) {
    Recorder r(true);
    EXPECT_EQ(parseRequest(c.wire, r), c.expected) << c.wire;
    EXPECT_FALSE(r.headerDone());
  }
}

TEST(Http1Parser, BytesOfAnotherProtocolAreRefusedBeforeAHeadCouldEnd) {
  Recorder r(true);
  error_code ec;
  r.put(std::string_view("\x16\x03\x01\x02\x00\x01", 6), ec);
  EXPECT_EQ(ec, Err::bad_method);
  Recorder partial(true);
  partial.put("POS", ec);
  EXPECT_EQ(ec, Err::need_more) << "a method still arriving is not refused";
}

// The head's end is found wherever it falls in the search's sixteen-byte
// steps and however the head is split across reads, and never at a line end
// that is not a blank line.
TEST(Http1Parser, TheHeadsEndIsFoundAtEveryPlaceAndAcrossReads) {
  for (std::size_t pad = 0; pad < 48; ++pad) {
    const std::string value(pad, 'v');
    const std::string head =
        "GET /x HTTP/1.1\r\nHost: a\r\nX-1: 1\r\nX-2: \r\nX-Pad: " + value + "\r\n\r\n";
    for (std::size_t step : {std::size_t{1}, std::size_t{3}, std::size_t{16}, std::size_t{17},
                             std::size_t{19}, head.size()}) {
      Recorder r(true);
      std::string left;
      ASSERT_FALSE(r.feed(head + "GET /next", step, &left)) << pad << " " << step;
      ASSERT_TRUE(r.done());
      ASSERT_EQ(r.fields.size(), 4u);
      EXPECT_EQ(r.fields.back().second, value) << pad << " " << step;
      // What follows the head is the next request's, untouched.
      EXPECT_EQ(std::string("GET /next").substr(0, left.size()), left) << pad << " " << step;
    }
    // One byte short of the blank line: not yet a head.
    Recorder r(true);
    error_code ec;
    EXPECT_EQ(r.put(std::string_view(head).substr(0, head.size() - 1), ec), 0u);
    EXPECT_EQ(ec, Err::need_more) << pad;
  }
}

// A head that arrives a byte at a time is searched once, not once per byte
// (that would be quadratic: a peer sending a 64 KiB head byte by byte would
// make us look at 2 G bytes). And the early method check looks at a few
// bytes only.
TEST(Http1Parser, AHeadThatTricklesInIsNotRescannedFromItsStart) {
  const std::size_t limit = 64 * 1024;
  std::string pending = "GETTING" + std::string(limit - 8192, 'A');  // a token "method", no end yet
  Recorder r(true);
  r.headerLimit(limit);
  error_code ec;
  for (std::size_t i = 0; i < 4096; ++i) {
    pending.push_back('A');
    ASSERT_EQ(r.put(pending, ec), 0u);
    ASSERT_EQ(ec, Err::need_more);
  }
  EXPECT_LE(r.bytesSearched(), pending.size() + 3 * 4096);
  pending.resize(limit, 'A');
  r.put(pending, ec);
  EXPECT_EQ(ec, Err::header_limit);
  EXPECT_LE(r.bytesSearched(), limit + 3 * 4096);

  // The same for a trailer section.
  Recorder t(true);
  t.eager(true);
  std::string wire = chunkedRequest("0\r\nX-T: ");
  error_code tec;
  std::size_t used = t.put(wire, tec);
  wire.erase(0, used);
  const std::uint64_t before = t.bytesSearched();
  for (int i = 0; i < 2000; ++i) {
    wire.push_back('v');
    ASSERT_EQ(t.put(wire, tec), 0u);
  }
  EXPECT_LE(t.bytesSearched() - before, wire.size() + 3 * 2000);
}

// Names and values are scanned sixteen bytes at a time, then eight, then
// one: a byte that ends a name or a value is found at every place, with the
// field first in the head (the wide loops run) and last (near the head's end,
// the narrow ones do).
TEST(Http1Parser, EveryStopByteIsFoundAtEveryPlaceInANameAndAValue) {
  const auto parse = [](const std::string& field, bool last, Recorder& r) {
    const std::string head = last ? "GET / HTTP/1.1\r\nHost: a\r\n" + field + "\r\n\r\n"
                                  : "GET / HTTP/1.1\r\n" + field + "\r\nHost: a\r\n\r\n";
    error_code ec;
    r.put(head, ec);
    return ec;
  };
  for (bool last : {false, true}) {
    for (std::size_t at = 0; at < 40; ++at) {
      const std::string where = (last ? "last, at " : "first, at ") + std::to_string(at);
      std::string name(40, 'n');
      for (char c :
           {'_', '.', '~', '`', '|', '7', 'Z'}) {  // token bytes the fast run stops at, or takes
        name[at] = c;
        Recorder r(true);
        EXPECT_FALSE(parse(name + ": v", last, r)) << where << " " << c;
        ASSERT_EQ(r.fields.size(), 2u) << where;
        EXPECT_EQ(r.fields[last ? 1 : 0].first, name) << where;
      }
      for (char c : {'@', '[', '{', '/', ' ', '(', '\x01', '\x80'}) {  // not token bytes
        if (c == ' ' && at == 0) continue;  // a line that starts with SP is a fold
        name[at] = c;
        Recorder r(true);
        EXPECT_EQ(parse(name + ": v", last, r), Err::bad_field) << where << " " << int(c);
      }
      name[at] = 'n';

      std::string value(40, 'v');
      for (char c : {'\t', '\x80', '\xff', ' ', '~'}) {                  // value bytes
        if ((c == '\t' || c == ' ') && (at == 0 || at == 39)) continue;  // trimmed there
        value[at] = c;
        Recorder r(true);
        EXPECT_FALSE(parse("X-V: " + value, last, r)) << where << " " << int(c);
        ASSERT_EQ(r.fields.size(), 2u) << where;
        EXPECT_EQ(r.fields[last ? 1 : 0].second, value) << where << " " << int(c);
      }
      for (char c : {'\x01', '\x1f', '\x7f', '\0'}) {  // not value bytes
        value[at] = c;
        Recorder r(true);
        EXPECT_EQ(parse("X-V: " + value, last, r), Err::bad_value) << where << " " << int(c);
      }
    }
  }
}

TEST(Http1Parser, FieldSyntaxErrors) {
  struct Case {
    std::string field;
    Err expected;
  } cases[] = {
      {"Host : x", Err::bad_field},   // whitespace before the colon
      {"Ho(st: x", Err::bad_field},   // not a token
      {": x", Err::bad_field},        // no name
      {"Host x", Err::bad_field},     // no colon
      {"X-A: a\nb", Err::bad_value},  // a bare LF inside a value
      {"X-A: a\rb", Err::bad_line_ending},
      {std::string("X-A: a\0b", 8), Err::bad_value},
      {"X-A: a\x7f", Err::bad_value},
  };
  for (const Case& c : cases) {
    Recorder r(true);
    EXPECT_EQ(parseRequest("GET / HTTP/1.1\r\n" + c.field + "\r\n\r\n", r), c.expected) << c.field;
    EXPECT_FALSE(r.headerDone()) << c.field;
  }
  Recorder obsText(true);
  EXPECT_EQ(parseRequest("GET / HTTP/1.1\r\nX-A: caf\xc3\xa9\t!\r\n\r\n", obsText), error_code{});
  EXPECT_EQ(obsText.fields[0].second, "caf\xc3\xa9\t!");
}

TEST(Http1Parser, ObsFoldIsRefusedInRequestsAndUnfoldedInAnswers) {
  for (const char* fold : {"X-A: one\r\n two\r\n", "Content-Length:\r\n 3\r\n",
                           "X: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"}) {
    Recorder r(true);
    EXPECT_EQ(parseRequest(std::string("POST / HTTP/1.1\r\n") + fold + "\r\nabc", r),
              Err::bad_obs_fold)
        << fold;
    EXPECT_FALSE(r.headerDone());
  }
  Recorder r(false);
  r.eager(true);
  ASSERT_EQ(r.feed("HTTP/1.1 200 OK\r\nX-A: one \r\n  two\r\n\tthree \r\n \r\nX-B:\r\n "
                   "b\r\nContent-Length: 0\r\n\r\n",
                   1000),
            error_code{});
  ASSERT_EQ(r.fields.size(), 3u);
  EXPECT_EQ(r.fields[0].second, "one two three");
  EXPECT_EQ(r.fields[1].second, "b");
}

TEST(Http1Parser, ContentLengthRules) {
  auto with = [](std::string fields) {
    Recorder r(true);
    error_code ec = parseRequest("POST / HTTP/1.1\r\n" + fields + "\r\n\r\n", r);
    return std::make_pair(ec, r.contentLength());
  };
  EXPECT_EQ(with("Content-Length: 0").second, 0u);
  EXPECT_EQ(with("Content-Length: 3, 3").first, Err::need_more);  // a 3-byte body to come
  EXPECT_EQ(with("Content-Length: 3, 3").second, 3u);
  EXPECT_EQ(with("Content-Length: 3, 4").first, Err::multiple_content_length);
  EXPECT_EQ(with("Content-Length: 3\r\nContent-Length: 4").first, Err::multiple_content_length);
  EXPECT_EQ(with("Content-Length: 3,").first, Err::bad_content_length);
  EXPECT_EQ(with("Content-Length: +3").first, Err::bad_content_length);
  EXPECT_EQ(with("Content-Length: 0x3").first, Err::bad_content_length);
  EXPECT_EQ(with("Content-Length:").first, Err::bad_content_length);
  EXPECT_EQ(with("Content-Length: 18446744073709551616").first, Err::bad_content_length);
  EXPECT_EQ(with("Content-Length: 3\r\nTransfer-Encoding: chunked").first,
            Err::bad_transfer_encoding);
  EXPECT_EQ(with("Transfer-Encoding: chunked\r\nContent-Length: 3").first, Err::bad_content_length);
}

TEST(Http1Parser, ChunkedOnlyAsTheLastCodingNamedOnce) {
  auto chunked = [](std::string te, error_code* err = nullptr) {
    Recorder r(true);
    r.eager(false);
    error_code ec = r.feed("POST / HTTP/1.1\r\nTransfer-Encoding: " + te + "\r\n\r\n", 1000);
    if (err) *err = ec;
    return r.chunked();
  };
  EXPECT_TRUE(chunked("chunked"));
  EXPECT_TRUE(chunked("CHUNKED"));
  EXPECT_TRUE(chunked("gzip, chunked"));
  EXPECT_FALSE(chunked("chunked, gzip"));
  EXPECT_FALSE(chunked("chunked, chunked"));
  EXPECT_FALSE(chunked("gzip"));
  error_code ec;
  chunked("chunked\r\nTransfer-Encoding: gzip", &ec);
  EXPECT_EQ(ec, Err::bad_transfer_encoding);
}

TEST(Http1Parser, ChunkedBodyInAnyPiecesLeavesTheNextRequestAlone) {
  const std::string next = "GET /next HTTP/1.1\r\n\r\n";
  const std::string wire = chunkedRequest(
      "5\r\nhello\r\n1;name=value;q=\"a\\\"b\"\r\n \r\nA\r\n0123456789\r\n0\r\n"
      "Retry-After: 1\r\nX-T: t\r\n\r\n" +
      next);
  for (std::size_t step = 1; step <= wire.size(); ++step) {
    Recorder r(true);
    r.eager(true);
    std::string left;
    ASSERT_EQ(r.feed(wire, step, &left), error_code{}) << "step " << step;
    EXPECT_EQ(r.body, "hello 0123456789") << "step " << step;
    EXPECT_EQ(r.fields.size(), 1u) << "trailer fields are not head fields";
    EXPECT_EQ(left, next.substr(0, left.size())) << "step " << step;
  }
  Recorder r(true);
  std::string left;
  r.eager(true);
  ASSERT_EQ(r.feed(wire, wire.size(), &left), error_code{});
  EXPECT_EQ(left, next);
}

TEST(Http1Parser, ChunkErrors) {
  struct Case {
    const char* chunks;
    Err expected;
  } cases[] = {
      {"x\r\n", Err::bad_chunk},
      {"\r\n", Err::bad_chunk},
      {"5\r\nhelloX\r\n", Err::bad_chunk},  // no CRLF after the data
      {"5\nhello\r\n", Err::bad_line_ending},
      {"5 \r\nhello\r\n0\r\n\r\n", Err::bad_chunk_extension},  // whitespace, then no ';'
      {"5;\r\nhello\r\n0\r\n\r\n", Err::bad_chunk_extension},  // ';' with no name
      {"5;a=\r\nhello\r\n0\r\n\r\n", Err::bad_chunk_extension},
      {"5;a=\"x\r\nhello\r\n0\r\n\r\n", Err::bad_chunk_extension},
      {"5;a=\"x\ry\"\r\nhello\r\n0\r\n\r\n", Err::bad_chunk_extension},  // a CR, quoted
      {"10000000000000000\r\n", Err::bad_chunk},                         // over 64 bits
      {"0\r\nX : y\r\n\r\n", Err::bad_field},                            // a bad trailer field
  };
  for (const Case& c : cases) {
    Recorder r(true);
    EXPECT_EQ(parseRequest(chunkedRequest(c.chunks), r), c.expected) << c.chunks;
  }
}

TEST(Http1Parser, AChunkSizeLineAtItsBound) {
  // 1 hex digit, ";e=", padding, CRLF: exactly kMaxChunkLine bytes.
  const std::size_t pad = Parser::kMaxChunkLine - 1 - 3 - 2;
  const std::string exact = "1;e=" + std::string(pad, 'v') + "\r\nx\r\n0\r\n\r\n";
  Recorder ok(true);
  EXPECT_EQ(parseRequest(chunkedRequest(exact), ok), error_code{});
  EXPECT_EQ(ok.body, "x");
  const std::string over = "1;e=" + std::string(pad + 1, 'v') + "\r\nx\r\n0\r\n\r\n";
  Recorder bad(true);
  EXPECT_EQ(parseRequest(chunkedRequest(over), bad), Err::bad_chunk);
  // Arriving a byte at a time, the line is refused once the bound has passed
  // without an end, not held for ever.
  Recorder endless(true);
  endless.eager(true);
  EXPECT_EQ(endless.feed(chunkedRequest("1;e=" + std::string(2 * Parser::kMaxChunkLine, 'v')), 1),
            Err::bad_chunk);
}

TEST(Http1Parser, TrailerSectionAtTheHeadLimit) {
  const std::string head = chunkedRequest("");
  const std::size_t limit = head.size() + 64;  // the head fits; the trailer has its own count
  auto trailerOf = [](std::size_t bytes) {     // "X: vvv\r\n\r\n" of exactly `bytes`
    return "X: " + std::string(bytes - 7, 'v') + "\r\n\r\n";
  };
  Recorder ok(true);
  ok.headerLimit(limit);
  EXPECT_EQ(parseRequest(head + "0\r\n" + trailerOf(limit), ok), error_code{});
  Recorder over(true);
  over.headerLimit(limit);
  EXPECT_EQ(parseRequest(head + "0\r\n" + trailerOf(limit + 1), over), Err::header_limit);
}

TEST(Http1Parser, BodyLimitAtItsEdge) {
  auto withLength = [](std::uint64_t length) {
    Recorder r(true);
    r.bodyLimit(10);
    error_code ec = parseRequest("POST / HTTP/1.1\r\nContent-Length: " + std::to_string(length) +
                                     "\r\n\r\n" + std::string(length, 'b'),
                                 r);
    return std::make_pair(ec, r.headerDone());
  };
  EXPECT_EQ(withLength(10), std::make_pair(error_code{}, true));
  EXPECT_EQ(withLength(11), std::make_pair(error_code(Err::body_limit), false))
      << "refused from the head, before any of the body";
  auto chunked = [](std::string chunks) {
    Recorder r(true);
    r.bodyLimit(10);
    return parseRequest(chunkedRequest(chunks), r);
  };
  EXPECT_EQ(chunked("5\r\n12345\r\n5\r\n12345\r\n0\r\n\r\n"), error_code{});
  EXPECT_EQ(chunked("5\r\n12345\r\n6\r\n123456\r\n0\r\n\r\n"), Err::body_limit);
  EXPECT_EQ(chunked("ffffffffffffffff\r\n"), Err::body_limit);
  // Extension bytes count as body bytes: ";e=v" is 4, so 6 of data fit and 7
  // do not, however the chunks are cut.
  EXPECT_EQ(chunked("6;e=v\r\n123456\r\n0\r\n\r\n"), error_code{});
  EXPECT_EQ(chunked("7;e=v\r\n1234567\r\n0\r\n\r\n"), Err::body_limit);
  EXPECT_EQ(chunked("1;e\r\n1\r\n1;e\r\n1\r\n0;e=v\r\n\r\n"), error_code{});  // 6 + 4
  EXPECT_EQ(chunked("1;e\r\n1\r\n1;e\r\n1\r\n0;e=vv\r\n\r\n"), Err::body_limit)
      << "the last chunk's extensions count too";
}

TEST(Http1Parser, NotEagerStopsAtTheHead) {
  Recorder r(true);
  r.eager(false);
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n";
  error_code ec;
  EXPECT_EQ(r.put(head + "abc", ec), head.size());
  EXPECT_EQ(ec, error_code{});
  EXPECT_TRUE(r.headerDone());
  EXPECT_FALSE(r.done());
  EXPECT_EQ(r.put("abc", ec), 3u);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.body, "abc");
}

TEST(Http1Parser, ConnectionPersistence) {
  auto keepAlive = [](std::string version, std::string fields) {
    Recorder r(true);
    parseRequest("GET / HTTP/" + version + "\r\n" + fields + "\r\n", r);
    EXPECT_TRUE(r.done()) << version << " " << fields;
    return r.keepAlive();
  };
  EXPECT_TRUE(keepAlive("1.1", ""));
  EXPECT_FALSE(keepAlive("1.1", "Connection: keep-alive, Close\r\n"));
  EXPECT_FALSE(keepAlive("1.0", ""));
  EXPECT_TRUE(keepAlive("1.0", "Connection: Keep-Alive\r\n"));
  // Close wins in HTTP/1.0 too, in one list or two fields (RFC 9112 §9.3).
  EXPECT_FALSE(keepAlive("1.0", "Connection: keep-alive, close\r\n"));
  EXPECT_FALSE(keepAlive("1.0", "Connection: keep-alive\r\nConnection: CLOSE\r\n"));
  Recorder bad(true);
  EXPECT_EQ(parseRequest("GET / HTTP/1.1\r\nConnection: a b\r\n\r\n", bad), Err::bad_value);

  // Transfer-Encoding in HTTP/1.0: the connection ends after the message,
  // whatever Connection says (what follows is never read as a request).
  Recorder te10(true);
  std::string left;
  te10.eager(true);
  EXPECT_EQ(te10.feed("POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n"
                      "\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n",
                      1000, &left),
            error_code{});
  EXPECT_FALSE(te10.keepAlive());

  // A 101 never goes back to a pool; nor does a connection whose answer's
  // trailer says close.
  Recorder switched(false);
  switched.feed("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", 100);
  EXPECT_TRUE(switched.done());
  EXPECT_FALSE(switched.keepAlive());
  Recorder trailerClose(false);
  trailerClose.eager(true);
  EXPECT_EQ(trailerClose.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
                              "Connection: close\r\n\r\n",
                              100),
            error_code{});
  EXPECT_FALSE(trailerClose.keepAlive());
  EXPECT_EQ(trailerClose.fields.size(), 1u) << "still not a field of the head";
}

TEST(Http1Parser, ResponsesWithoutABody) {
  for (const char* line : {"HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified",
                           "HTTP/1.1 100 Continue", "HTTP/1.1 103 Early Hints"}) {
    Recorder r(false);
    r.eager(true);
    std::string left;
    EXPECT_EQ(r.feed(std::string(line) + "\r\nContent-Length: 5\r\n\r\nhello", 1000, &left),
              error_code{})
        << line;
    EXPECT_TRUE(r.done());
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(left, "hello") << "what follows belongs to the next answer";
  }
}

TEST(Http1Parser, ResponseBodies) {
  Recorder length(false);
  length.eager(true);
  EXPECT_EQ(length.feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 3), error_code{});
  EXPECT_EQ(length.status, 200);
  EXPECT_EQ(length.body, "ok");
  EXPECT_TRUE(length.keepAlive());

  // Neither a length nor chunked: the body runs to the connection's end.
  Recorder toEof(false);
  toEof.eager(true);
  EXPECT_EQ(toEof.feed("HTTP/1.1 200 OK\r\n\r\nall of it", 4), Err::need_more);
  EXPECT_FALSE(toEof.keepAlive());
  error_code ec;
  toEof.putEof(ec);
  EXPECT_EQ(ec, error_code{});
  EXPECT_TRUE(toEof.done());
  EXPECT_EQ(toEof.body, "all of it");
  EXPECT_FALSE(toEof.keepAlive()) << "a connection its close ended is never reused";

  // A coding other than chunked last: the same (RFC 9112 §6.3), whatever
  // length is also sent.
  Recorder gzip(false);
  gzip.eager(true);
  gzip.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nabc", 100);
  EXPECT_FALSE(gzip.done());
  EXPECT_EQ(gzip.body, "abc");

  // Cut short: partial.
  Recorder cut(false);
  cut.eager(true);
  cut.feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", 100);
  cut.putEof(ec);
  EXPECT_EQ(ec, Err::partial_message);
  Recorder cutHead(false);
  cutHead.feed("HTTP/1.1 200 OK\r\n", 100);
  EXPECT_TRUE(cutHead.gotSome());
  cutHead.putEof(ec);
  EXPECT_EQ(ec, Err::partial_message);

  Recorder http10(false);
  http10.feed("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", 100);
  EXPECT_TRUE(http10.keepAlive());
}

TEST(Http1Parser, StatusLineErrors) {
  for (const char* line : {"HTTP/1.1 200", "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "HTTP/1.1  200 OK",
                           "HTTP/2 200 OK", "HTTP/1.1 200 O\x01K"}) {
    Recorder r(false);
    EXPECT_NE(r.feed(std::string(line) + "\r\n\r\n", 100), error_code{}) << line;
    EXPECT_FALSE(r.headerDone()) << line;
  }
}

TEST(Http1Parser, FieldNamesFramingNeedsInAnyCase) {
  EXPECT_EQ(classifyField("Content-Length"), FieldName::kContentLength);
  EXPECT_EQ(classifyField("TRANSFER-ENCODING"), FieldName::kTransferEncoding);
  EXPECT_EQ(classifyField("connection"), FieldName::kConnection);
  EXPECT_EQ(classifyField("Proxy-Connection"), FieldName::kProxyConnection);
  EXPECT_EQ(classifyField("keep-alive"), FieldName::kKeepAlive);
  EXPECT_EQ(classifyField("TE"), FieldName::kTe);
  EXPECT_EQ(classifyField("Expect"), FieldName::kExpect);
  EXPECT_EQ(classifyField("Upgrade"), FieldName::kUpgrade);
  EXPECT_EQ(classifyField("Trailer"), FieldName::kTrailer);
  EXPECT_EQ(classifyField("HTTP2-Settings"), FieldName::kHttp2Settings);
  EXPECT_EQ(classifyField("Content-Lengt"), FieldName::kOther);
  EXPECT_EQ(classifyField("Content-Lengths"), FieldName::kOther);
  EXPECT_EQ(classifyField("x-request-id"), FieldName::kOther);
}

}  // namespace
}  // namespace relay::net::http1
