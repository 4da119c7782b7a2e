// The write side of an HTTP/1.1 connection (private to net/): an answer's
// bytes to the caller's socket.
//
// H1Session decides what to write (the head it serialises, whether the body
// is chunked, whether an answer may still begin); H1Writer writes it, and
// owns what writing needs across calls:
//
//  - the head of a streamed answer held back to leave with the first chunk;
//  - the bytes a send could not write at once (at most one answer or one
//    chunk: "kept"), which go out before anything else. Of an answer, a
//    copy; of a chunk, only where the send stopped: its bytes are the
//    caller's, who passes them again to writeKept();
//  - whether a write failed (gone()), and the deadline of a write that waits
//    for the caller to make room, which the session's watchdog enforces.
//
// Most writes need no waiting: the socket is non-blocking and on plaintext
// one send takes the whole answer or chunk. Those are plain calls
// (answerNow(), chunkNow()). A write that must wait is a coroutine
// (writeKept(), chunk(), writeAll()), under the stall deadline.
#pragma once

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>

#include "edge_write.hpp"
#include "relay/net/send_now.hpp"
#include "session_common.hpp"

namespace relay::net {

template <class Stream>
class H1Writer {
 public:
  // `stream` outlives the writer (both are members of one session).
  // `stallTimeout`: how long one write may wait for the caller to make room
  // before the session resets the connection (server.idle_timeout_ms).
  H1Writer(Stream& stream, std::chrono::milliseconds stallTimeout)
      : stream_(stream), stallTimeout_(stallTimeout) {}
  H1Writer(const H1Writer&) = delete;
  H1Writer& operator=(const H1Writer&) = delete;

  // Whether the socket was found full in this same turn of the event loop
  // (a send of ours just took less than it was given): a write of the rest
  // then waits for room before it tries (edge_write.hpp). After a turn
  // boundary the edge may have been taken already, so it tries first.
  enum class Room { kTryFirst, kFullThisTurn };

  // A write failed (the caller reset the connection), or the session gave
  // up on the connection (markGone()). Nothing more is written.
  bool gone() const { return gone_; }
  void markGone() { gone_ = true; }

  // A whole answer, `head` then `body` (not the body when `headOnly`: the
  // answer to HEAD), in one send. What the socket does not take is kept —
  // the body moved out of `body` — for writeKept(). False when the
  // connection is gone.
  bool answerNow(const std::string& head, std::string& body, bool headOnly) {
    std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(body)};
    if (headOnly) bufs[1] = asio::const_buffer();
    std::size_t written = 0;
    const Sent sent = sendAtOnce(bufs, written);
    if (sent != Sent::kPartial) return sent == Sent::kDone;
    const std::size_t length = bufs[0].size() + bufs[1].size();
    if (written < head.size()) {
      keptHead_.assign(head, written);
    } else {
      keptHead_.clear();
    }
    if (!headOnly) keptBody_ = std::move(body);
    keptChunk_.reset();
    // Of the body, what the socket took is skipped when the rest is written.
    keptSkip_ = written > head.size() ? written - head.size() : 0;
    keptLength_ = length - written;
    return true;
  }

  // The head of a chunked answer: it leaves with the first chunk (or the
  // last chunk, when there is no other), in the same send.
  void holdHead(std::string head) { heldHead_ = std::move(head); }

  // `bytes` as one chunk, if the socket takes it at once. When it takes
  // part of it, where it stopped is kept (not the bytes: they are the
  // caller's) and the answer is nullopt: the caller then awaits
  // writeKept(bytes) with the same bytes, at once (so the rest goes out as
  // soon as the caller makes room, under the stall deadline). Also nullopt,
  // with nothing sent, when bytes are already kept (the caller owes
  // writeKept() first) and on TLS (its writes are never known complete at
  // once: the caller awaits chunk()). False when the connection is gone.
  std::optional<bool> chunkNow(std::string_view bytes) {
    if constexpr (!std::is_same_v<Stream, tcp::socket>) {
      return std::nullopt;
    } else {
      if (keptLength_ != 0) return std::nullopt;
      ChunkWrite c;
      std::size_t written = 0;
      const Sent sent = sendChunk(c, bytes, false, written);
      if (sent != Sent::kPartial) return sent == Sent::kDone;
      // The held head, if this was the first chunk, is the writer's own:
      // kept whole, with where the send stopped in the whole frame.
      keptHead_ = std::move(c.head);
      keptBody_.clear();
      keptSkip_ = written;
      keptLength_ = asio::buffer_size(c.used()) - written;
      keptChunk_ = bytes;
      return std::nullopt;
    }
  }

  // `bytes` as a chunk (none when empty), and the last chunk when `end`,
  // in one write after whatever is kept. False when the connection is gone.
  Task<bool> chunk(std::string_view bytes, bool end) {
    if (keptLength_ != 0) {
      // (fails for a chunkNow() not followed up)
      if (!co_await writeKept({}, Room::kTryFirst)) co_return false;
    }
    ChunkWrite c;
    std::size_t written = 0;
    const Sent sent = sendChunk(c, bytes, end, written);
    if (sent != Sent::kPartial) co_return sent == Sent::kDone;
    const std::span<const asio::const_buffer> used = c.used();
    co_return co_await writeRest(used, written, Room::kFullThisTurn);
  }

  bool hasKept() const { return keptLength_ != 0; }
  bool keptIsChunk() const { return keptChunk_.has_value(); }
  std::size_t keptBytes() const { return keptLength_; }

  // Writes what answerNow() or chunkNow() kept; false when the caller left.
  // After chunkNow(): `chunk` is the bytes it was given, again (what it
  // kept is where its send stopped). Other bytes, or none, break that
  // promise: nothing more is written and the connection is gone, rather
  // than a frame the caller never made. `room`: kFullThisTurn only when the
  // send that kept them ran in this same turn of the event loop (see Room).
  Task<bool> writeKept(std::string_view chunk, Room room) {
    if (keptChunk_) {
      ChunkWrite c;
      c.head = std::move(keptHead_);
      const std::size_t skip = keptSkip_;
      // The same bytes, where they were: a view of the same range.
      const bool same = chunk.data() == keptChunk_->data() && chunk.size() == keptChunk_->size() &&
                        !chunk.empty();
      dropKept();
      if (!same) {
        gone_ = true;
        co_return false;
      }
      frameChunk(c, chunk, false);
      const std::span<const asio::const_buffer> used = c.used();
      co_return co_await writeRest(used, skip, room);
    }
    std::string head = std::move(keptHead_);
    std::string body = std::move(keptBody_);
    const std::size_t skip = keptSkip_;
    dropKept();
    std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(body)};
    co_return co_await writeRest(bufs, skip, room);
  }

  // Forgets what is kept (the connection is about to be reset).
  void dropKept() {
    keptHead_ = std::string();
    keptBody_ = std::string();
    keptSkip_ = 0;
    keptLength_ = 0;
    keptChunk_.reset();
  }

  // Every byte of `buffers`: one send, and a wait for room only if the
  // socket did not take it all. `buffers` must live until this completes.
  template <class Buffers>
  Task<bool> writeAll(const Buffers& buffers) {
    std::size_t written = 0;
    const Sent sent = sendAtOnce(buffers, written);
    if (sent != Sent::kPartial) co_return sent == Sent::kDone;
    co_return co_await writeRest(buffers, written, Room::kFullThisTurn);
  }

  // A write waits for the caller to make room; it may wait until
  // stallDeadline(), after which the session resets the connection.
  bool writing() const { return pending_ > 0; }
  SteadyClock::time_point stallDeadline() const { return stallDeadline_; }

 private:
  enum class Sent {
    kDone,    // every byte went
    kFailed,  // the connection is gone (gone_ is set)
    kPartial  // the rest waits for room: writeRest()
  };

  // One send's pieces: the held head (if any), `bytes` as a chunk (if any),
  // and the last chunk when `end`.
  struct ChunkWrite {
    char size[24];
    std::array<asio::const_buffer, 5> bufs{};
    std::size_t n = 0;
    std::string head;
    std::span<const asio::const_buffer> used() const { return {bufs.data(), n}; }
  };

  // Frames into `c` and sends what the socket takes now.
  Sent sendChunk(ChunkWrite& c, std::string_view bytes, bool end, std::size_t& written) {
    c.head = std::move(heldHead_);
    heldHead_.clear();
    frameChunk(c, bytes, end);
    return sendAtOnce(c.used(), written);
  }

  // `c.head` (if any), `bytes` as a chunk (if any) and the last chunk when
  // `end`, as the pieces of one send.
  static void frameChunk(ChunkWrite& c, std::string_view bytes, bool end) {
    if (!c.head.empty()) c.bufs[c.n++] = asio::buffer(c.head);
    if (!bytes.empty()) {
      char* line = std::to_chars(c.size, c.size + sizeof c.size - 2, bytes.size(), 16).ptr;
      *line++ = '\r';
      *line++ = '\n';
      c.bufs[c.n++] = asio::buffer(c.size, static_cast<std::size_t>(line - c.size));
      c.bufs[c.n++] = asio::buffer(bytes.data(), bytes.size());
      c.bufs[c.n++] = asio::buffer("\r\n", 2);
    }
    if (end) c.bufs[c.n++] = asio::buffer("0\r\n\r\n", 5);
  }

  // One non-blocking send on plaintext; `written`: the bytes that went. TLS
  // sends nothing here (kPartial, 0): its writes go through writeRest().
  template <class Buffers>
  Sent sendAtOnce(const Buffers& buffers, std::size_t& written) {
    written = 0;
    foundFull_ = false;  // of this send only
    if (!lowestLayer(stream_).is_open()) {
      gone_ = true;
      return Sent::kFailed;
    }
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      boost::system::error_code ec;
      errno = 0;
      written = sendNow(stream_.native_handle(), buffers, ec);
      if (ec) {
        gone_ = true;
        return Sent::kFailed;
      }
      if (written == asio::buffer_size(buffers)) return Sent::kDone;
      // The kernel took less than it was offered: the socket is full, and
      // its next writable edge will come. Not so after an interrupted send,
      // or when pieces past kSendNowBuffers were never offered.
      foundFull_ = (written > 0 || errno == EAGAIN || errno == EWOULDBLOCK) &&
                   nonEmptyPieces(buffers) <= kSendNowBuffers;
    }
    return Sent::kPartial;
  }

  template <class Buffers>
  static std::size_t nonEmptyPieces(const Buffers& buffers) {
    std::size_t n = 0;
    for (const asio::const_buffer& b : buffers)
      n += b.size() != 0 ? 1 : 0;
    return n;
  }

  // The rest of a write, after the first `written` bytes. `buffers` is a
  // named object of the caller's frame (never a temporary in the co_await
  // expression: GCC 12 mishandles those), its buffers contiguous.
  // Plaintext: one operation that sends as room comes (edge_write.hpp),
  // not trying before its first wait when `room` says the socket was found
  // full in this turn and the last send did find it full.
  template <class Buffers>
  Task<bool> writeRest(const Buffers& buffers, std::size_t written, Room room) {
    const bool waitFirst = room == Room::kFullThisTurn && foundFull_;
    foundFull_ = false;
    // A caller that stops reading must not hold its exchange (and what it
    // holds: the upstream connection of a stream, the answer's memory) for
    // ever: the session's watchdog resets a write stuck this long.
    stallDeadline_ = SteadyClock::now() + stallTimeout_;
    ++pending_;
    boost::system::error_code ec;
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      const std::span<const asio::const_buffer> pieces(buffers);
      std::tie(ec, std::ignore) =
          co_await asyncEdgeWrite(stream_, pieces, written, asio::buffer_size(buffers), waitFirst,
                                  asio::as_tuple(asio::use_awaitable));
    } else {
      boost::beast::buffers_suffix<Buffers> rest(buffers);
      rest.consume(written);
      std::tie(ec, std::ignore) =
          co_await asio::async_write(stream_, rest, asio::as_tuple(asio::use_awaitable));
    }
    --pending_;
    if (ec) {
      gone_ = true;
      co_return false;
    }
    co_return true;
  }

  Stream& stream_;
  const std::chrono::milliseconds stallTimeout_;
  SteadyClock::time_point stallDeadline_{};
  int pending_ = 0;
  bool gone_ = false;
  std::string heldHead_;
  // What a partial send left. Of an answer: the head's rest, the body, how
  // much of the body was written, and the bytes left in all. Of a chunk
  // (keptChunk_: the caller's bytes, which it passes again, never read
  // through this view before then): the held head, if it went with it, where the
  // send stopped in the whole frame (keptSkip_), and the bytes left.
  std::string keptHead_;
  std::string keptBody_;
  std::size_t keptSkip_ = 0;
  std::size_t keptLength_ = 0;
  std::optional<std::string_view> keptChunk_;
  // The last sendAtOnce() took less than it offered the kernel (the socket
  // is full): what writeRest() may wait on before it tries. Every send
  // clears it first, and the writeRest() that reads it clears it; it
  // outlives dropKept(), which writeKept() calls before that writeRest().
  bool foundFull_ = false;
};

}  // namespace relay::net
