// The HTTP/2 server session (src/net/h2_session.cpp, h2_stream.cpp) fed what
// a client sends after the connection preface: SETTINGS, HEADERS and
// CONTINUATION (HPACK), DATA within or beyond the windows, PING, PRIORITY,
// RST_STREAM, WINDOW_UPDATE, GOAWAY, under small bounds (1 KiB header lists,
// 4 KiB bodies, 4 streams, 8 KiB stream windows). The preface arrives as the
// bytes the listener read to choose HTTP/2, as in src/net/runtime.cpp. See
// session_harness.hpp for the option byte and the handler the paths choose.
//
// Checked: the session ends and is destroyed once the client is gone (or, for
// a silent client, by its own timeouts); every handler has returned; a handler
// sees no connection-specific field and no body over max_request_bytes; what
// the client receives is whole frames of at most 16 KiB, SETTINGS first, no
// PRIORITY or PUSH_PROMISE; frames of streams only on client-initiated ids;
// each header block whole (CONTINUATION right behind it), decodable by an
// HPACK decoder, one response head per stream, with a 3-digit :status first,
// lowercase names and no connection-specific field; DATA only between a
// stream's head and its end, none at all for HEAD, and as many bytes as
// content-length says; nothing on a stream after it ended or was reset; no
// new response after GOAWAY beyond its last stream id.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nghttp2/nghttp2.h>

#include "session_harness.hpp"

namespace {

using relay::fuzz::ClientEnd;
using relay::fuzz::HandlerLog;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::uint8_t kData = 0, kHeaders = 1, kPriority = 2, kRstStream = 3, kSettings = 4,
                       kPushPromise = 5, kGoaway = 7, kContinuation = 9;
constexpr std::uint8_t kEndStream = 0x1, kEndHeaders = 0x4, kPadded = 0x8, kPriorityFlag = 0x20;

struct Frame {
  std::uint32_t length = 0;
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::uint32_t stream = 0;
  std::string_view payload;
};

std::uint32_t be(std::string_view bytes) {
  std::uint32_t v = 0;
  for (char c : bytes)
    v = (v << 8) | static_cast<std::uint8_t>(c);
  return v;
}

// The next whole frame of `wire`; false when fewer bytes than one are left.
bool nextFrame(std::string_view& wire, Frame& f) {
  if (wire.size() < 9) return false;
  f.length = be(wire.substr(0, 3));
  if (wire.size() < 9 + f.length) return false;
  f.type = static_cast<std::uint8_t>(wire[3]);
  f.flags = static_cast<std::uint8_t>(wire[4]);
  f.stream = be(wire.substr(5, 4)) & 0x7fffffffu;
  f.payload = wire.substr(9, f.length);
  wire.remove_prefix(9 + f.length);
  return true;
}

// The header block fragment of a HEADERS frame (padding and priority off);
// nullopt when the frame is malformed.
std::optional<std::string_view> fragment(const Frame& f) {
  std::string_view p = f.payload;
  std::size_t pad = 0;
  if (f.flags & kPadded) {
    if (p.empty()) return std::nullopt;
    pad = static_cast<std::uint8_t>(p[0]);
    p.remove_prefix(1);
  }
  if (f.flags & kPriorityFlag) {
    if (p.size() < 5) return std::nullopt;
    p.remove_prefix(5);
  }
  if (pad > p.size()) return std::nullopt;
  return p.substr(0, p.size() - pad);
}

class Hpack {
 public:
  Hpack() {
    if (nghttp2_hd_inflate_new(&inflater_) != 0) std::abort();
  }
  ~Hpack() { nghttp2_hd_inflate_del(inflater_); }
  Hpack(const Hpack&) = delete;
  Hpack& operator=(const Hpack&) = delete;

  // Decodes one whole header block into `fields`; false when it does not decode.
  bool decode(std::string_view block, std::vector<std::pair<std::string, std::string>>& fields) {
    auto* in = reinterpret_cast<const std::uint8_t*>(block.data());
    std::size_t left = block.size();
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t rv = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, left, 1);
      if (rv < 0) return false;
      in += rv;
      left -= static_cast<std::size_t>(rv);
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        return true;
      }
      if (rv == 0 && !(flags & NGHTTP2_HD_INFLATE_EMIT)) return false;
    }
  }

 private:
  nghttp2_hd_inflater* inflater_ = nullptr;
};

// The :method of each stream's request, read from the client's bytes as the
// session reads them, up to the first thing that would end the connection.
std::map<std::uint32_t, std::string> requestMethods(std::string_view wire) {
  std::map<std::uint32_t, std::string> methods;
  Hpack hpack;
  std::string block;
  std::uint32_t blockStream = 0;
  bool inBlock = false;
  Frame f;
  while (nextFrame(wire, f)) {
    if (f.length > 16384) break;  // over SETTINGS_MAX_FRAME_SIZE: FRAME_SIZE_ERROR
    if (inBlock && (f.type != kContinuation || f.stream != blockStream)) break;
    if (f.type == kHeaders) {
      const std::optional<std::string_view> part = fragment(f);
      if (!part) break;
      block.assign(*part);
      blockStream = f.stream;
    } else if (f.type == kContinuation) {
      if (!inBlock) break;
      block.append(f.payload);
    } else {
      continue;
    }
    inBlock = !(f.flags & kEndHeaders);
    if (inBlock) continue;
    std::vector<std::pair<std::string, std::string>> fields;
    if (!hpack.decode(block, fields)) break;
    if (methods.contains(blockStream)) continue;  // trailers
    std::string& method = methods[blockStream];
    for (const auto& [name, value] : fields) {
      if (name == ":method") {
        method = value;
        break;
      }
    }
  }
  return methods;
}

struct StreamSeen {
  bool head = false;   // a response HEADERS went out
  bool ended = false;  // END_STREAM or RST_STREAM went out
  std::optional<std::uint64_t> contentLength;
  std::uint64_t data = 0;
};

void checkFields(const std::vector<std::pair<std::string, std::string>>& fields, StreamSeen& s) {
  FUZZ_CHECK(!fields.empty() && fields[0].first == ":status" && fields[0].second.size() == 3 &&
                 fields[0].second[0] >= '2' && fields[0].second[0] <= '5',
             "a response head starts with a final 3-digit :status");
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string& name = fields[i].first;
    FUZZ_CHECK(!name.empty() && name[0] != ':', "one pseudo-header, :status");
    for (char c : name)
      FUZZ_CHECK(c < 'A' || c > 'Z', "header names are lowercase");
    FUZZ_CHECK(name == "content-length" || !relay::fuzz::isConnectionField(name),
               "no connection-specific field in a response");
    if (name == "content-length") {
      FUZZ_CHECK(!s.contentLength, "one content-length");
      std::uint64_t n = 0;
      for (char c : fields[i].second) {
        FUZZ_CHECK(c >= '0' && c <= '9', "content-length is digits");
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
      }
      s.contentLength = n;
    }
  }
}

void checkOutput(std::string_view wire, const std::map<std::uint32_t, std::string>& methods) {
  Hpack hpack;
  std::map<std::uint32_t, StreamSeen> streams;
  std::string block;
  std::uint32_t blockStream = 0;
  bool blockEndsStream = false;
  bool inBlock = false;
  bool first = true;
  std::optional<std::uint32_t> goawayLast;
  Frame f;
  while (nextFrame(wire, f)) {
    FUZZ_CHECK(f.length <= 16384, "frames fit the default SETTINGS_MAX_FRAME_SIZE");
    if (first) {
      FUZZ_CHECK(f.type == kSettings && f.flags == 0 && f.stream == 0,
                 "the session speaks first with SETTINGS");
      first = false;
    }
    FUZZ_CHECK(f.type <= kContinuation && f.type != kPriority && f.type != kPushPromise,
               "a server sends no PRIORITY, PUSH_PROMISE or unknown frame");
    FUZZ_CHECK(!inBlock || (f.type == kContinuation && f.stream == blockStream),
               "a header block's CONTINUATION frames follow it at once");
    const bool streamFrame =
        f.type == kData || f.type == kHeaders || f.type == kRstStream || f.type == kContinuation;
    if (streamFrame) {
      FUZZ_CHECK(f.stream % 2 == 1, "stream frames only on client-initiated streams");
    } else if (f.type != 8) {  // WINDOW_UPDATE may be either
      FUZZ_CHECK(f.stream == 0, "connection frames on stream 0");
    }
    if (f.type == kGoaway) {
      FUZZ_CHECK(f.length >= 8, "GOAWAY carries its last stream and error code");
      const std::uint32_t last = be(f.payload.substr(0, 4)) & 0x7fffffffu;
      FUZZ_CHECK(!goawayLast || last <= *goawayLast, "GOAWAY's last stream id never grows");
      goawayLast = last;
      continue;
    }
    if (!streamFrame) continue;
    StreamSeen& s = streams[f.stream];
    const auto method = methods.find(f.stream);
    const bool known = method != methods.end();
    const bool toHead = known && method->second == "HEAD";
    if (f.type == kRstStream) {
      s.ended = true;
      continue;
    }
    if (f.type == kHeaders) {
      FUZZ_CHECK(!s.head && !s.ended, "one response head per stream, before its end");
      FUZZ_CHECK(!goawayLast || f.stream <= *goawayLast,
                 "no response for a stream GOAWAY said was not processed");
      const std::optional<std::string_view> part = fragment(f);
      FUZZ_CHECK(part, "HEADERS frames are well formed");
      block.assign(*part);
      blockStream = f.stream;
      blockEndsStream = f.flags & kEndStream;
      s.head = true;
    } else if (f.type == kContinuation) {
      FUZZ_CHECK(inBlock, "CONTINUATION only inside a header block");
      block.append(f.payload);
    } else {  // DATA
      FUZZ_CHECK(s.head && !s.ended && !inBlock, "DATA only between a stream's head and its end");
      FUZZ_CHECK(!toHead, "no DATA in an answer to HEAD");
      FUZZ_CHECK(!(f.flags & kPadded), "the session does not pad");
      s.data += f.payload.size();
      if (s.contentLength && known) {
        FUZZ_CHECK(s.data <= *s.contentLength, "no more DATA than content-length says");
      }
      if (f.flags & kEndStream) {
        s.ended = true;
        if (s.contentLength && known) {
          FUZZ_CHECK(s.data == *s.contentLength, "as much DATA as content-length says");
        }
      }
      continue;
    }
    inBlock = !(f.flags & kEndHeaders);
    if (inBlock) continue;
    std::vector<std::pair<std::string, std::string>> fields;
    FUZZ_CHECK(hpack.decode(block, fields), "response header blocks decode");
    StreamSeen& owner = streams[blockStream];
    checkFields(fields, owner);
    if (blockEndsStream) {
      owner.ended = true;
      const auto m = methods.find(blockStream);
      if (owner.contentLength && m != methods.end() && m->second != "HEAD") {
        FUZZ_CHECK(*owner.contentLength == 0, "as much DATA as content-length says");
      }
    }
  }
  FUZZ_CHECK(!inBlock, "a header block is never left open");
  FUZZ_CHECK(wire.empty(), "the session never sends part of a frame");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  relay::fuzz::ignoreSigpipe();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto end = static_cast<ClientEnd>(data[0] & 3);
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto log = std::make_shared<HandlerLog>();
  const relay::fuzz::Connection::Result result = relay::fuzz::Connection::run(
      end, input, relay::fuzz::sessionConfig(end), log,
      [](relay::net::tcp::socket socket, relay::net::SessionContext context,
         relay::net::Handler handler) {
        relay::net::startHttp2(std::move(socket), std::string(kPreface), std::move(context),
                               std::move(handler));
      });
  FUZZ_CHECK(log->running == 0, "every handler has returned once the session is gone");
  checkOutput(result.received, requestMethods(input));
  return 0;
}
