// One HTTP/1.1 exchange on an upstream connection (exchange.hpp): write the
// request (one non-blocking send on plain TCP), read the response head, then the body
// piece by piece as it arrives.
#include "exchange.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/http/error.hpp>
#include <openssl/ssl.h>

#include "relay/common/head_writer.hpp"
#include "relay/common/limits.hpp"
#include "relay/common/read_room.hpp"
#include "relay/common/thread_scratch.hpp"
#include "relay/net/edge_read.hpp"
#include "relay/net/send_now.hpp"

namespace relay::upstream {
namespace {

namespace http = boost::beast::http;
namespace beast = boost::beast;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// The thread's buffer for request heads (relay/common/thread_scratch.hpp).
struct RequestHeads;

// The request head into `out` (cleared first).
void serializeRequest(const OutgoingRequest& req, const Target& target, std::string& out) {
  using namespace std::string_view_literals;
  out.clear();
  // Beside the parts counted, the request line's spaces and version, the
  // names and separators of host, authorization and content-length, the
  // length's digits and the blank line fit in 96 bytes (the writer grows if
  // not).
  HeadWriter w(out, 96 + req.method.size() + req.path.size() + target.hostHeader.size() +
                        req.sharedHead.size() + req.authorization.size() + req.headers.textBytes() +
                        4 * req.headers.size());
  w.raw(req.method).raw(" "sv).raw(req.path).raw(" HTTP/1.1\r\n"sv);
  w.field("host"sv, target.hostHeader);
  w.raw(req.sharedHead);
  if (!req.authorization.empty()) w.field("authorization"sv, req.authorization);
  for (const HeaderField& f : req.headers)
    w.field(f.name, f.value);
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, req.body.size());
    w.field("content-length"sv, std::string_view(digits, end - digits));
  }
  w.raw("\r\n"sv);
}

}  // namespace

Exchange::Exchange(std::shared_ptr<ConnectionHome> home, std::unique_ptr<Connection> conn,
                   const Deadlines& deadlines)
    : home_(std::move(home)),
      conn_(std::move(conn)),
      deadlines_(deadlines),
      watchdog_(*conn_->watchdogs) {
  watchdog_.watch(&conn_->socket());
  newParser();
}

bool Exchange::startRequest(const OutgoingRequest& req, const Target& target,
                            Clock::time_point now) {
  const Clock::time_point firstByteBy = now + deadlines_.firstByte;
  watchdog_.set(std::min(firstByteBy, deadlines_.total), firstByteBy < deadlines_.total
                                                             ? FailureKind::kFirstByteTimeout
                                                             : FailureKind::kTotalTimeout);
  std::string& scratch = threadScratch<RequestHeads>();
  serializeRequest(req, target, scratch);
  requestBytes_ = scratch.size() + req.body.size();
  // Plain TCP: one send now, which nearly always takes the whole request,
  // and no round through the scheduler; what did not fit (and every TLS
  // write) goes through finishRequest()'s asynchronous write.
  requestBytesWritten_ = 0;
  if (conn_->plain) {
    std::array<asio::const_buffer, 2> bufs{asio::buffer(scratch), asio::buffer(req.body)};
    boost::system::error_code sec;
    requestBytesWritten_ = net::sendNow(conn_->plain->native_handle(), bufs, sec);
    if (sec) return fail(FailureKind::kReset, sec.message());
  }
  // The rest waits for room: the head leaves the thread's buffer, which
  // another request may use meanwhile.
  if (requestBytesWritten_ < requestBytes_) pendingHead_ = scratch;
  return true;
}

Task<bool> Exchange::finishRequest(const OutgoingRequest& req) {
  std::array<asio::const_buffer, 2> bufs{asio::buffer(pendingHead_), asio::buffer(req.body)};
  beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(bufs);
  rest.consume(requestBytesWritten_);
  auto [wec, wn] =
      co_await conn_->visit([&](auto& s) { return asio::async_write(s, rest, kTuple); });
  requestBytesWritten_ += wn;
  pendingHead_ = std::string();
  if (wec) co_return fail(FailureKind::kReset, wec.message());
  co_return true;
}

Task<std::tuple<boost::system::error_code, std::size_t>> Exchange::readHeadBytes() {
  // On plain TCP an edge read, one recv; on TLS a read through the stream,
  // which may hold decrypted bytes the socket no longer signals (headAfter()
  // commits them). Not a coroutine: the read's own awaitable.
  if (conn_->plain)
    return net::asyncEdgeRead(*conn_->plain, conn_->buffer, Connection::kReadBytes, kTuple);
  return conn_->tls->async_read_some(conn_->buffer.prepare(Connection::kReadBytes), kTuple);
}

std::optional<bool> Exchange::headAfter(
    const std::tuple<boost::system::error_code, std::size_t>& read) {
  const auto& [ec, n] = read;
  if (conn_->tls) conn_->buffer.commit(n);
  return headFrom(n > 0 ? parseHead() : headAfterEmptyRead(ec));
}

// An interim answer (100 Continue, 103 Early Hints) is followed by the final
// one on the same connection: read on to it. Left unread, that answer would
// reach whoever uses the connection next.
std::optional<bool> Exchange::headFrom(std::optional<boost::system::error_code> head) {
  for (;;) {
    if (!head) return std::nullopt;
    const boost::system::error_code ec = *head;
    if (ec) {
      if (ec == http::error::end_of_stream || ec == asio::error::eof ||
          ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
          ec == asio::error::bad_descriptor)
        return fail(FailureKind::kReset, ec.message(), ec);
      if (ec == http::error::header_limit)
        return fail(FailureKind::kProtocol,
                    "the upstream's response head is larger than " + std::to_string(kMaxHeadBytes) +
                        " bytes",
                    ec);
      return fail(FailureKind::kProtocol, ec.message(), ec);
    }
    status_ = parser_->status();
    if (status_ / 100 != 1 || status_ == 101) break;
    if (++interims_ > kMaxInterimAnswers)
      return fail(FailureKind::kProtocol,
                  "more than " + std::to_string(kMaxInterimAnswers) + " interim (1xx) answers");
    headers_ = Headers{};
    newParser();
    head = parseHead();  // the final answer may have come with the interim one
  }
  // From here on one put() takes every chunk the buffer holds (before the
  // head, it must stop there: no body sink is set yet).
  parser_->eager(true);
  return true;
}

void Exchange::abort() {
  aborted_ = true;
  if (!conn_) return;
  boost::system::error_code ignored;
  conn_->socket().close(ignored);
}

// What the connection buffer holds, parsed into `out`. Every path of read()
// but the wait: the caller may resume at once, without a coroutine frame.
std::optional<bool> Exchange::readNow(std::string& out) {
  if (done_) return false;
  // A burst arrives as many chunks in one socket read: one read() returns
  // all of it.
  std::size_t got = 0;
  if (auto ec = parseBuffered(out, got)) return fail(FailureKind::kReset, ec.message(), ec);
  if (parser_->done()) {
    finishBody();  // the body's end came with these bytes (or before)
    return got > 0;
  }
  if (got == 0) return std::nullopt;
  // Until the next read, time passes at the caller's pace (a slow reader, a
  // closed window), not the upstream's: only the total deadline runs.
  watchdog_.set(deadlines_.total, FailureKind::kTotalTimeout);
  return true;
}

Task<bool> Exchange::read(std::string& out) {
  std::optional<bool> more = readNow(out);
  while (!more) {
    Task<ReadWait> wait = waitMore(out, Clock::now());
    const ReadWait got = co_await std::move(wait);
    more = readAfter(got, out);
  }
  co_return *more;
}

// One read of body bytes into the connection's buffer, under the idle
// deadline, which counts from `now`. Not a coroutine: the read's own
// awaitable (readAfter() takes its result).
Task<Exchange::ReadWait> Exchange::waitMore(std::string& out, Clock::time_point now) {
  (void)out;  // the bytes go to the connection's buffer; readAfter() parses them
  bool idleFirst = now + deadlines_.idle < deadlines_.total;
  watchdog_.set(std::min(now + deadlines_.idle, deadlines_.total),
                idleFirst ? FailureKind::kIdleTimeout : FailureKind::kTotalTimeout);
  // TLS may hold decrypted bytes the socket no longer signals: it reads
  // through the stream (readAfter() commits what it brought). Plain TCP
  // makes an edge read (relay/net/edge_read.hpp): while it waits it holds
  // no buffer (an open stream between events costs its socket only);
  // parseBuffered() takes what it brought and gives the buffer back.
  if (conn_->tls)
    return conn_->tls->async_read_some(conn_->buffer.prepare(Connection::kReadBytes), kTuple);
  return net::asyncEdgeRead(*conn_->plain, conn_->buffer, Connection::kReadBytes, kTuple);
}

std::optional<bool> Exchange::readAfter(const ReadWait& got, std::string& out) {
  const auto& [rec, n] = got;
  if (conn_->tls) conn_->buffer.commit(n);
  const boost::system::error_code ec = n == 0 ? rec : boost::system::error_code();
  if (ec == asio::error::eof && conn_->buffer.size() == 0) {
    // A body that runs to the connection's close ends here; any other is
    // cut short.
    boost::system::error_code eofEc;
    parser_->putEof(eofEc);
    if (eofEc) return fail(FailureKind::kReset, eofEc.message(), eofEc);
  } else if (ec) {
    return fail(FailureKind::kReset, ec.message(), ec);
  }
  return readNow(out);
}

// The head from what the connection buffer holds: the head parsed, or what
// is wrong with it; nullopt while more must arrive. Errors as Beast's read
// gave them (see headAfterEmptyRead).
//
// The bound is on the whole head, however it arrives: the parser takes
// nothing of a head until it has ended, and a head that has not ended
// within kMaxHeadBytes is header_limit, one byte over or a megabyte.
std::optional<boost::system::error_code> Exchange::parseHead() {
  if (conn_->buffer.size() == 0) return std::nullopt;
  boost::system::error_code ec;
  const std::size_t used = parser_->put(net::bufferView(conn_->buffer), ec);
  conn_->buffer.consume(used);
  if (ec == http::error::need_more) return std::nullopt;
  return ec;
}

// What a read that brought no byte means for the head being read:
// end_of_stream when the upstream closed before a byte of it,
// partial_message (or the parser's error) within it, the read's own error;
// nullopt when there is none and the head is still to come.
std::optional<boost::system::error_code> Exchange::headAfterEmptyRead(
    const boost::system::error_code& rec) {
  if (rec == asio::error::eof || rec == asio::ssl::error::stream_truncated) {
    if (!parser_->gotSome()) return http::error::end_of_stream;
    boost::system::error_code ec;
    parser_->putEof(ec);
    return ec ? ec : http::error::partial_message;
  }
  if (rec) return rec;
  return std::nullopt;
}

void Exchange::newParser() {
  parser_.emplace(headers_);
  parser_->headerLimit(kMaxHeadBytes);
  parser_->bodyLimit(std::nullopt);  // SSE streams have no end we could cap
}

// Parses the bytes in the connection's buffer into `out` (adding their
// count to `got`) without waiting for more.
boost::system::error_code Exchange::parseBuffered(std::string& out, std::size_t& got) {
  if (conn_->buffer.size() == 0) return {};
  boost::system::error_code ec;
  conn_->buffer.consume(parse(net::bufferView(conn_->buffer), out, got, ec));
  // On plain TCP an emptied buffer gives its memory back (the next edge
  // read prepares it again when bytes arrive); TLS reads into it every time.
  if (conn_->buffer.size() == 0 && !conn_->tls) conn_->buffer.shrink_to_fit();
  return ec;
}

// Body bytes of `in` into `out` (the parser appends them as it goes).
// Returns the bytes of `in` used.
std::size_t Exchange::parse(std::string_view in, std::string& out, std::size_t& got,
                            boost::system::error_code& error) {
  const std::size_t before = out.size();
  reserveForRead(out, in.size());  // the body bytes of `in` are at most `in`
  parser_->bodyTo(&out);
  std::size_t usedTotal = 0;
  while (!parser_->done() && in.size() > 0) {
    boost::system::error_code ec;
    const std::size_t used = parser_->put(in, ec);
    in.remove_prefix(used);
    usedTotal += used;
    if (ec == http::error::need_more) break;
    if (ec) {
      error = ec;
      break;
    }
    if (used == 0) break;
  }
  parser_->bodyTo(nullptr);
  got += out.size() - before;
  return usedTotal;
}

Task<bool> Exchange::readAll(std::string& out, std::uint64_t limit) {
  // A length the head declares for a body still to come. An answer to
  // which no body belongs (204, 304) may declare one too, for the body it
  // would have had: that is neither room to make nor over the limit.
  if (auto len = parser_->contentLength(); len && !parser_->done()) {
    if (*len > limit) co_return tooLarge(limit);
    out.reserve(out.size() + *len);
  }
  const std::size_t start = out.size();
  for (;;) {
    bool more = false;
    if (std::optional<bool> ready = readNow(out))
      more = *ready;
    else
      more = co_await read(out);
    if (!more) break;
    if (out.size() - start > limit) co_return tooLarge(limit);
  }
  co_return !failure_;
}

// readAll() at once when Content-Length frames the body and all of it is in
// the buffer; nullopt, having read nothing, otherwise (a chunked body, one
// to the connection's close, or one still arriving).
std::optional<bool> Exchange::readAllNow(std::string& out, std::uint64_t limit) {
  if (done_) return !failure_;
  if (!parser_->done()) {
    const std::optional<std::uint64_t> left = parser_->lengthLeft();
    if (!left) return std::nullopt;
    if (*parser_->contentLength() > limit) return tooLarge(limit);
    if (conn_->buffer.size() < *left) return std::nullopt;
    out.reserve(out.size() + *left);
  }
  // The parser stops at the declared length, which is within the limit, and
  // the buffer holds the rest of the body: these calls end with it.
  std::optional<bool> more;
  while ((more = readNow(out)) && *more) {
  }
  if (!more) return std::nullopt;  // not reached (see above); readAll() would go on
  return !failure_;
}

// A body over the cap is not read further: the connection is dropped.
bool Exchange::tooLarge(std::uint64_t limit) {
  countLimit(Limit::kUpstreamResponseBytes);
  fail(FailureKind::kTooLarge,
       "over " + std::to_string(limit) + " bytes, the upstream's max_response_bytes");
  return false;
}

bool Exchange::fail(FailureKind kind, std::string detail, boost::system::error_code ec) {
  done_ = true;
  FailureKind fired = watchdog_.fired();
  // Aborted with no deadline passed and no shutdown abort(): our caller left.
  if (fired == FailureKind::kNone && ec == asio::error::operation_aborted && !aborted_)
    kind = FailureKind::kCancelled;
  failure_.kind = fired != FailureKind::kNone ? fired : kind;
  failure_.detail = fired != FailureKind::kNone ? std::string() : std::move(detail);
  watchdog_.disarm();
  conn_.reset();  // never reuse a connection in an unknown state
  return false;
}

void Exchange::finishBody() {
  done_ = true;
  watchdog_.disarm();
  // Bytes past the response's end mean the upstream broke its own framing:
  // such a connection must never carry another request's answer.
  if (parser_->keepAlive() && conn_ && conn_->buffer.size() == 0 &&
      (!conn_->tls || SSL_pending(conn_->tls->native_handle()) == 0))
    home_->giveBack(std::move(conn_));
}

}  // namespace relay::upstream
