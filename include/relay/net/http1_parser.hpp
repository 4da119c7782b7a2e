// HTTP/1.1 message framing (RFC 9112) for both directions: the caller's
// requests (net/h1_session.cpp) and the upstreams' responses
// (upstream/exchange.cpp).
//
// Why our own and not Beast's basic_parser: Beast parses a head field by
// field as bytes arrive, looks every name up in its table of 300-odd known
// fields, and walks lists through iterators: 5.8k instructions of its own per
// proxied request for the two heads. This parser waits until a head has
// arrived whole (it never resumes inside one), then reads it in one pass
// with a table per character class and values eight bytes at a time, and
// recognises only the names framing needs: 4.5k for the same two heads, and
// 1.8k fewer per request in all (docs/benchmarks.md).
//
// What it accepts is what Beast 1.81 accepted, so callers see the same
// answers and errors (Beast's http::error codes, and their messages, are
// kept):
//   - the start line and field syntax of RFC 9112 §3-5: a token method, a
//     target of visible bytes, HTTP/1.0 or HTTP/1.1; a field name of token
//     bytes followed at once by ':' ("Host : x" is bad_field); values of
//     visible bytes, spaces, tabs and obs-text; lines end in CRLF only (a
//     bare CR or LF is an error); obs-fold is unfolded into single spaces;
//   - Content-Length: decimal, a list only of equal values; two fields that
//     disagree are multiple_content_length; with chunked, an error;
//   - Transfer-Encoding: chunked only as the last coding, once; with a
//     Content-Length, an error. (A request whose last coding is not chunked
//     is refused by the session: its body's end is unknowable.)
//   - a response to which no body belongs (1xx, 204, 304) has none; a
//     response with neither length nor chunked runs to the connection's end.
// Where it differs from Beast, on purpose (tests/fuzz/fuzz_http1_parser.cpp
// checks the two agree everywhere else):
//   - a chunk-size line (with its extensions) is at most kMaxChunkLine bytes,
//     and a trailer section at most the head limit (Beast waited for an end
//     of line however long: the buffer limit was the only bound);
//   - a quoted chunk extension holds no control bytes (Beast took any), and
//     extension bytes count toward the body limit (Beast counted only data);
//   - a Transfer-Encoding list with a coding that is not a token is never
//     chunked, nor is any later one (Beast read such a list up to that
//     coding: "chunked, <bytes>" was chunked);
//   - a response whose last coding is not chunked runs to the connection's
//     end even beside a Content-Length (RFC 9112 §6.3; Beast took the
//     length);
//   - a trailer's fields are checked for syntax only: they never change the
//     framing (Beast applied Connection and Content-Length rules to them);
//     one that says Connection: close still keeps the connection from reuse;
//   - obs-fold in a request is refused (bad_obs_fold; RFC 9112 §5.2 allows
//     that or unfolding): a proxy in front that took the folded line for a
//     field of its own would see other framing than ours. Answers are
//     unfolded, as Beast did;
//   - Transfer-Encoding in HTTP/1.0 ends the connection after the message
//     (RFC 9112 §6.1), and a 101 answer never goes back to a pool;
//   - an HTTP/1.0 message whose Connection lists close is not reused even
//     when it lists keep-alive too (RFC 9112 §9.3: close wins; Beast kept
//     the connection);
//   - a request head whose method is already not a token is refused before
//     its end arrives (bytes of another protocol on a plaintext port).
//
// No Asio and no allocation on the common path: the head and body go to the
// owner through the hooks below, as views into the bytes given to put().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/system/error_code.hpp>

namespace relay::net::http1 {

// The names framing needs; any other is kOther.
enum class FieldName : std::uint8_t {
  kOther,
  kConnection,
  kProxyConnection,
  kContentLength,
  kTransferEncoding,
  kUpgrade,
  kExpect,
  kKeepAlive,
  kTe,
  kTrailer,
  kHttp2Settings,
};

// `name` (any case) as one of the above.
FieldName classifyField(std::string_view name);

class Parser {
 public:
  // A chunk-size line, extensions included, is at most this long.
  static constexpr std::size_t kMaxChunkLine = 4096;

  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  virtual ~Parser() = default;

  // The head (start line to the blank line that ends it) is at most this
  // many bytes: a head not ended within them is header_limit. Also the bound
  // on a chunked body's trailer section.
  void headerLimit(std::size_t bytes) { headerLimit_ = bytes; }
  // The body is at most this many bytes (nullopt: no bound). A Content-Length
  // over it is body_limit before the head is done.
  void bodyLimit(std::optional<std::uint64_t> bytes) { bodyLimit_ = bytes; }
  // On: one put() goes on from the head into the body. Off: put() returns
  // once the head is done (the body is asked for apart from it).
  void eager(bool on) { eager_ = on; }

  // Parses what it can of `in` and returns the bytes it used; the caller
  // gives the rest again, with more, next time. ec: need_more when nothing
  // more can be done without more bytes (some may have been used), or one of
  // Beast's http::error values; after an error the parser is not used again.
  std::size_t put(std::string_view in, boost::system::error_code& ec);
  // The connection ended: a body that runs to the end is complete; anything
  // else unfinished is partial_message.
  void putEof(boost::system::error_code& ec);

  bool gotSome() const { return gotSome_; }
  bool headerDone() const { return state_ > State::kHead; }
  bool done() const { return state_ == State::kComplete; }
  // After the head: whether the connection may carry another message.
  bool keepAlive() const;
  bool chunked() const { return (flags_ & kChunked) != 0; }
  std::optional<std::uint64_t> contentLength() const {
    if ((flags_ & kContentLength) == 0) return std::nullopt;
    return contentLength_;
  }
  // After the head: the body bytes still to come when Content-Length frames
  // the body (a Transfer-Encoding takes precedence over a Content-Length, so
  // contentLength() alone does not say this); nullopt for any other framing.
  std::optional<std::uint64_t> lengthLeft() const {
    if (state_ != State::kLength) return std::nullopt;
    return remaining_;
  }
  int version() const { return version_; }  // 10 or 11
  // Bytes looked at in searching for the end of a head or trailer so far:
  // each is looked at about once however the bytes arrive (a head that
  // trickles in costs no more per byte as it grows).
  std::uint64_t bytesSearched() const { return bytesSearched_; }
  int status() const { return status_; }  // responses

 protected:
  explicit Parser(bool request) : request_(request) {}

  // The start line: for a request, its method and target (status 0); for a
  // response, its status (method and target empty).
  virtual void onStartLine(std::string_view method, std::string_view target, int status) = 0;
  // Each field of the head, in order; obs-fold already unfolded. Not called
  // for a chunked body's trailer fields.
  virtual void onField(FieldName kind, std::string_view name, std::string_view value) = 0;
  // The head is done; the framing (contentLength(), chunked(), keepAlive())
  // is known.
  virtual void onHeaderDone() {}
  virtual void onBody(std::string_view bytes) = 0;

 private:
  enum class State : std::uint8_t {
    kHead,
    kLength,     // Content-Length bytes left: remaining_
    kChunkSize,  // a chunk-size line
    kChunkData,  // remaining_ bytes of a chunk
    kChunkEnd,   // the CRLF after a chunk's data
    kTrailer,    // after the last chunk: trailer fields, blank line
    kToEof,      // a response body that runs to the connection's end
    kComplete,
  };
  enum : std::uint8_t {
    kContentLength = 1,
    kChunked = 2,
    kClose = 4,
    kKeepAlive = 8,
    kTransferEncoding = 16,
    kToEnd = 32,       // the body runs to the connection's end
    kBadCodings = 64,  // a Transfer-Encoding list held a coding that is not a token
    kNoReuse = 128,    // a 101, or a trailer that says close
  };

  std::size_t putHead(const char* p, std::size_t n, boost::system::error_code& ec);
  boost::system::error_code parseStartLine(const char*& p, const char* end);
  boost::system::error_code parseFields(const char* p, const char* end, bool report);
  boost::system::error_code framingField(FieldName kind, std::string_view value);
  boost::system::error_code finishHead();
  std::size_t putBody(const char* p, std::size_t n, boost::system::error_code& ec);
  bool putChunkSize(const char*& p, const char* end, boost::system::error_code& ec);
  bool putTrailer(const char*& p, const char* end, boost::system::error_code& ec);

  const bool request_;
  State state_ = State::kHead;
  std::uint8_t flags_ = 0;
  bool eager_ = false;
  bool gotSome_ = false;
  int version_ = 0;
  int status_ = 0;
  std::size_t headerLimit_ = 8192;
  std::size_t scanned_ = 0;  // bytes already searched for the head's (or trailer's) end
  std::uint64_t bytesSearched_ = 0;
  std::optional<std::uint64_t> bodyLimit_;
  std::uint64_t contentLength_ = 0;
  std::uint64_t remaining_ = 0;  // of the Content-Length, or of the chunk
  std::uint64_t bodySeen_ = 0;   // chunked and to-EOF bodies, against bodyLimit_
  std::string folded_;           // an obs-folded value, unfolded (rare)
};

}  // namespace relay::net::http1
