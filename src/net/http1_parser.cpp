// HTTP/1.1 message framing: see relay/net/http1_parser.hpp.
#include "relay/net/http1_parser.hpp"

#include <algorithm>
#include <cstring>

#include <boost/beast/http/error.hpp>

#include "http1_scan.hpp"

namespace relay::net::http1 {

namespace {

using boost::system::error_code;
using Err = boost::beast::http::error;

// How much of an unfinished request head is checked for a method.
constexpr std::size_t kMethodPeek = 32;

// A name of token bytes against a lowercase literal of the same length.
inline bool tokenEquals(std::string_view name, std::string_view lower) {
  for (std::size_t i = 0; i < lower.size(); ++i) {
    if ((name[i] | 0x20) != lower[i]) return false;
  }
  return true;
}

// `s` without leading and trailing spaces and tabs.
std::string_view trimWs(std::string_view s) {
  while (!s.empty() && isWs(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && isWs(s.back()))
    s.remove_suffix(1);
  return s;
}

// Calls f(element) for each comma-separated element of `list`, trimmed of
// whitespace (empty ones too); stops at the first f that returns false.
template <class F>
bool eachElement(std::string_view list, F&& f) {
  for (;;) {
    const std::size_t comma = list.find(',');
    if (!f(trimWs(list.substr(0, comma)))) return false;
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

bool allToken(std::string_view s) {
  for (char c : s) {
    if (!is(c, kToken)) return false;
  }
  return !s.empty();
}

bool parseDecimal(std::string_view s, std::uint64_t& v) {
  if (s.empty()) return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  return true;
}

// chunk-ext (RFC 9112 §7.1.1) over [p, end): *( BWS ";" BWS name [ BWS "="
// BWS ( token / quoted-string ) ] ), as Beast checks it.
bool validChunkExtensions(const char* p, const char* end) {
  auto skipWs = [&] {
    const char* start = p;
    while (p < end && isWs(*p))
      ++p;
    return p != start;
  };
  auto token = [&] {
    const char* start = p;
    while (p < end && is(*p, kToken))
      ++p;
    return p != start;
  };
  while (p < end) {
    skipWs();
    if (p == end || *p != ';') return false;
    ++p;
    skipWs();
    if (!token()) return false;
    const bool ws = skipWs();
    if (p == end) return !ws;
    if (*p == ';') continue;
    if (*p != '=') return false;
    ++p;
    skipWs();
    if (p == end) return false;
    if (*p == '"') {
      for (++p;; ++p) {
        if (p == end) return false;
        if (*p == '"') break;
        if (*p == '\\' && ++p == end) return false;
        if (!is(*p, kValue)) return false;  // no control bytes, quoted or not
      }
      ++p;
    } else if (!token()) {
      return false;
    }
  }
  return true;
}

}  // namespace

FieldName classifyField(std::string_view n) {
  switch (n.size()) {
    case 2:
      if (tokenEquals(n, "te")) return FieldName::kTe;
      break;
    case 6:
      if (tokenEquals(n, "expect")) return FieldName::kExpect;
      break;
    case 7:
      if (tokenEquals(n, "upgrade")) return FieldName::kUpgrade;
      if (tokenEquals(n, "trailer")) return FieldName::kTrailer;
      break;
    case 10:
      if (tokenEquals(n, "connection")) return FieldName::kConnection;
      if (tokenEquals(n, "keep-alive")) return FieldName::kKeepAlive;
      break;
    case 14:
      if (tokenEquals(n, "content-length")) return FieldName::kContentLength;
      if (tokenEquals(n, "http2-settings")) return FieldName::kHttp2Settings;
      break;
    case 16:
      if (tokenEquals(n, "proxy-connection")) return FieldName::kProxyConnection;
      break;
    case 17:
      if (tokenEquals(n, "transfer-encoding")) return FieldName::kTransferEncoding;
      break;
    default:
      break;
  }
  return FieldName::kOther;
}

bool Parser::keepAlive() const {
  if (flags_ & (kToEnd | kNoReuse)) return false;  // only the close ends this body
  // Transfer-Encoding in HTTP/1.0 is faulty framing (RFC 9112 §6.1): the
  // connection is not used again whatever it says.
  if (version_ < 11 && (flags_ & kTransferEncoding)) return false;
  if (flags_ & kClose) return false;  // in HTTP/1.0 too, beside keep-alive (RFC 9112 §9.3)
  if (version_ >= 11) return true;
  return (flags_ & kKeepAlive) != 0;
}

std::size_t Parser::put(std::string_view in, error_code& ec) {
  ec = {};
  if (state_ == State::kComplete) return 0;
  if (state_ != State::kHead) return putBody(in.data(), in.size(), ec);
  const std::size_t used = putHead(in.data(), in.size(), ec);
  if (ec || !eager_ || state_ == State::kComplete || used == in.size()) return used;
  error_code bodyEc;
  const std::size_t body = putBody(in.data() + used, in.size() - used, bodyEc);
  if (bodyEc != Err::need_more) ec = bodyEc;  // the head is progress enough
  return used + body;
}

void Parser::putEof(error_code& ec) {
  ec = {};
  if (state_ == State::kToEof) state_ = State::kComplete;
  if (state_ != State::kComplete) ec = Err::partial_message;
}

std::size_t Parser::putHead(const char* p, std::size_t n, error_code& ec) {
  if (n == 0) {
    ec = Err::need_more;
    return 0;
  }
  gotSome_ = true;
  const std::size_t window = std::min(n, headerLimit_);
  const char* end = findBlankLine(p, window, scanned_, bytesSearched_);
  if (end == nullptr) {
    if (request_) {
      // Bytes of another protocol need not wait for the limit or a timeout.
      // Only the first kMethodPeek bytes are looked at, so a head that
      // trickles in a byte at a time costs no more per byte however long it
      // grows (the search above resumes where it left off).
      const char* q = p;
      const char* last = p + std::min(window, kMethodPeek);
      while (q < last && is(*q, kToken))
        ++q;
      if (q < last && (*q != ' ' || q == p)) {
        ec = Err::bad_method;
        return 0;
      }
    }
    if (n >= headerLimit_) {
      ec = Err::header_limit;
      return 0;
    }
    scanned_ = window >= 3 ? window - 3 : 0;
    ec = Err::need_more;
    return 0;
  }
  scanned_ = 0;
  const char* q = p;
  if (auto e = parseStartLine(q, end)) {
    ec = e;
    return 0;
  }
  if (auto e = parseFields(q, end - 2, true)) {
    ec = e;
    return 0;
  }
  if (auto e = finishHead()) {
    ec = e;
    return 0;
  }
  return static_cast<std::size_t>(end - p);
}

error_code Parser::parseStartLine(const char*& p, const char* end) {
  auto version = [&](error_code bad) -> error_code {
    if (end - p < 8 || std::memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' ||
        p[7] < '0' || p[7] > '9')
      return bad;
    version_ = (p[5] - '0') * 10 + (p[7] - '0');
    p += 8;
    if (version_ < 10 || version_ > 11) return bad;
    return {};
  };
  if (request_) {
    const char* method = p;
    while (is(*p, kToken))
      ++p;
    if (*p != ' ' || p == method) return Err::bad_method;
    const std::string_view methodText(method, static_cast<std::size_t>(p - method));
    const char* target = ++p;
    while (is(*p, kTarget))
      ++p;
    if (*p != ' ' || p == target) return Err::bad_target;
    const std::string_view targetText(target, static_cast<std::size_t>(p - target));
    ++p;
    if (auto e = version(Err::bad_version)) return e;
    if (p[0] != '\r' || p[1] != '\n') return Err::bad_version;
    p += 2;
    onStartLine(methodText, targetText, 0);
    return {};
  }
  if (auto e = version(Err::bad_version)) return e;
  if (*p++ != ' ') return Err::bad_version;
  if (end - p < 4) return Err::bad_status;
  for (int i = 0; i < 3; ++i) {
    if (p[i] < '0' || p[i] > '9') return Err::bad_status;
  }
  status_ = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
  if (p[3] != ' ') return Err::bad_status;
  p += 4;
  while (is(*p, kValue))
    ++p;  // the reason phrase, which no one reads
  if (*p != '\r') return Err::bad_reason;
  if (p[1] != '\n') return Err::bad_line_ending;
  p += 2;
  onStartLine({}, {}, status_);
  return {};
}

// Field lines over [p, end), where `end` is the CR of the blank line that
// ends them (so every line here ends in CRLF before `end`, and nothing reads
// past it). `report`: the head's fields (to framing and onField); off for a
// trailer section, which is only checked.
error_code Parser::parseFields(const char* p, const char* end, bool report) {
  while (p < end) {
    const char* name = p;
    p = skipNameRun(p, end + 2);  // the head's blank line ends at end + 2
    while (is(*p, kToken))
      ++p;
    if (*p != ':' || p == name) return Err::bad_field;
    const std::string_view nameText(name, static_cast<std::size_t>(p - name));
    ++p;
    // The value: OWS, value bytes, CRLF; then obs-fold lines (a line that
    // begins with SP or HTAB continues this one), each joined by one space.
    std::string_view value;
    bool folded = false;
    for (;;) {
      while (isWs(*p))
        ++p;
      const char* start = p;
      p = skipValueBytes(p, end + 2);  // the head's own end: a CR stops it first
      if (*p != '\r') return Err::bad_value;
      if (p[1] != '\n') return Err::bad_line_ending;
      const char* last = p;  // leading whitespace is skipped: trim the trailing
      while (last > start && isWs(last[-1]))
        --last;
      const std::string_view segment(start, static_cast<std::size_t>(last - start));
      p += 2;
      if (!folded) {
        value = segment;
      } else if (!segment.empty()) {
        if (!folded_.empty()) folded_ += ' ';
        folded_.append(segment);
      }
      if (p >= end || !isWs(*p)) break;
      // A folded line in a request is refused (RFC 9112 §5.2 allows either):
      // a proxy in front that takes it for a field of its own would see
      // other fields, and other framing, than ours.
      if (request_) return Err::bad_obs_fold;
      if (!folded) {
        folded = true;
        folded_.assign(value);
      }
    }
    if (folded) value = folded_;
    if (!report) {
      // A trailer changes no framing, but one that says the connection will
      // close is believed: it is not reused.
      const FieldName kind = classifyField(nameText);
      if (kind == FieldName::kConnection || kind == FieldName::kProxyConnection) {
        eachElement(value, [&](std::string_view token) {
          if (token.size() == 5 && tokenEquals(token, "close")) flags_ |= kNoReuse;
          return true;
        });
      }
      continue;
    }
    const FieldName kind = classifyField(nameText);
    if (kind != FieldName::kOther) {
      if (auto e = framingField(kind, value)) return e;
    }
    onField(kind, nameText, value);
  }
  return {};
}

error_code Parser::framingField(FieldName kind, std::string_view value) {
  switch (kind) {
    case FieldName::kConnection:
    case FieldName::kProxyConnection: {
      const bool ok = eachElement(value, [&](std::string_view token) {
        if (token.empty()) return true;
        if (!allToken(token)) return false;
        if (token.size() == 5 && tokenEquals(token, "close")) flags_ |= kClose;
        if (token.size() == 10 && tokenEquals(token, "keep-alive")) flags_ |= kKeepAlive;
        return true;
      });
      return ok ? error_code{} : error_code(Err::bad_value);
    }
    case FieldName::kContentLength: {
      if (flags_ & kChunked) return Err::bad_content_length;
      error_code bad;
      eachElement(value, [&](std::string_view number) {
        std::uint64_t v = 0;
        if (!parseDecimal(number, v)) {
          bad = Err::bad_content_length;
          return false;
        }
        if ((flags_ & kContentLength) && v != contentLength_) {
          bad = Err::multiple_content_length;
          return false;
        }
        contentLength_ = v;
        flags_ |= kContentLength;
        return true;
      });
      return bad;
    }
    case FieldName::kTransferEncoding: {
      if (flags_ & (kChunked | kContentLength)) return Err::bad_transfer_encoding;
      flags_ |= kTransferEncoding;
      // Chunked only when it is the last coding and named once, in a list of
      // codings that are all tokens (Beast stopped reading a list at a byte
      // that is not, and could take "chunked, <bytes>" as chunked).
      int chunkedAt = -1;
      int last = -1;
      int i = 0;
      const bool valid = eachElement(value, [&](std::string_view coding) {
        if (coding.empty()) return true;
        if (!allToken(coding)) return false;
        if (coding.size() == 7 && tokenEquals(coding, "chunked") && chunkedAt < 0) chunkedAt = i;
        last = i++;
        return true;
      });
      if (!valid) flags_ |= kBadCodings;  // and no later field makes it chunked
      if (!(flags_ & kBadCodings) && chunkedAt >= 0 && chunkedAt == last) flags_ |= kChunked;
      return {};
    }
    default:
      return {};
  }
}

error_code Parser::finishHead() {
  if (!request_ && (status_ / 100 == 1 || status_ == 204 || status_ == 304)) {
    state_ = State::kComplete;               // no body belongs to these, whatever the fields say
    if (status_ == 101) flags_ |= kNoReuse;  // the connection has changed protocols
  } else if (flags_ & kChunked) {
    state_ = State::kChunkSize;
  } else if (!request_ && (flags_ & kTransferEncoding)) {
    state_ = State::kToEof;  // a coding other than chunked last: RFC 9112 §6.3 (4)
    flags_ |= kToEnd;
  } else if (flags_ & kContentLength) {
    if (bodyLimit_ && contentLength_ > *bodyLimit_) return Err::body_limit;
    remaining_ = contentLength_;
    state_ = contentLength_ > 0 ? State::kLength : State::kComplete;
  } else {
    state_ = request_ ? State::kComplete : State::kToEof;
    if (!request_) flags_ |= kToEnd;
  }
  onHeaderDone();
  return {};
}

std::size_t Parser::putBody(const char* const p0, std::size_t n, error_code& ec) {
  const char* p = p0;
  const char* const end = p0 + n;
  bool more = false;
  while (!more && state_ != State::kComplete) {
    switch (state_) {
      case State::kLength:
      case State::kChunkData: {
        if (p == end) {
          more = true;
          break;
        }
        const std::size_t take = static_cast<std::size_t>(
            std::min<std::uint64_t>(remaining_, static_cast<std::uint64_t>(end - p)));
        onBody(std::string_view(p, take));
        p += take;
        remaining_ -= take;
        if (remaining_ == 0)
          state_ = state_ == State::kLength ? State::kComplete : State::kChunkEnd;
        break;
      }
      case State::kChunkEnd:
        if (end - p < 2) {
          if (p < end && *p != '\r') {
            ec = Err::bad_chunk;
            return static_cast<std::size_t>(p - p0);
          }
          more = true;
          break;
        }
        if (p[0] != '\r' || p[1] != '\n') {
          ec = Err::bad_chunk;
          return static_cast<std::size_t>(p - p0);
        }
        p += 2;
        state_ = State::kChunkSize;
        break;
      case State::kChunkSize:
        more = !putChunkSize(p, end, ec);
        if (ec) return static_cast<std::size_t>(p - p0);
        break;
      case State::kTrailer:
        more = !putTrailer(p, end, ec);
        if (ec) return static_cast<std::size_t>(p - p0);
        break;
      case State::kToEof: {
        if (p == end) {
          more = true;
          break;
        }
        const std::size_t take = static_cast<std::size_t>(end - p);
        if (bodyLimit_ && take > *bodyLimit_ - bodySeen_) {
          ec = Err::body_limit;
          return static_cast<std::size_t>(p - p0);
        }
        bodySeen_ += take;
        onBody(std::string_view(p, take));
        p = end;
        more = true;
        break;
      }
      case State::kHead:
      case State::kComplete:
        more = true;
        break;
    }
  }
  if (more && p == p0 && state_ != State::kComplete) ec = Err::need_more;
  return static_cast<std::size_t>(p - p0);
}

// chunk-size [ chunk-ext ] CRLF. False while the line has not arrived.
bool Parser::putChunkSize(const char*& p, const char* end, error_code& ec) {
  const std::size_t window =
      std::min<std::size_t>(static_cast<std::size_t>(end - p), kMaxChunkLine);
  const void* found = std::memchr(p, '\n', window);
  if (found == nullptr) {
    if (window == kMaxChunkLine) ec = Err::bad_chunk;  // no end within the bound
    return false;
  }
  const char* lf = static_cast<const char*>(found);
  if (lf == p || lf[-1] != '\r') {
    ec = Err::bad_line_ending;
    return false;
  }
  const char* q = p;
  std::uint64_t size = 0;
  for (; q < lf - 1; ++q) {
    int d;
    if (*q >= '0' && *q <= '9') {
      d = *q - '0';
    } else if ((*q | 0x20) >= 'a' && (*q | 0x20) <= 'f') {
      d = (*q | 0x20) - 'a' + 10;
    } else {
      break;
    }
    if (size > (UINT64_MAX >> 4)) {
      ec = Err::bad_chunk;
      return false;
    }
    size = (size << 4) | static_cast<std::uint64_t>(d);
  }
  if (q == p) {
    ec = Err::bad_chunk;
    return false;
  }
  if (size > 0 && bodyLimit_) {
    if (size > *bodyLimit_ - bodySeen_) {
      ec = Err::body_limit;
      return false;
    }
    bodySeen_ += size;
  }
  if (!validChunkExtensions(q, lf - 1)) {
    ec = Err::bad_chunk_extension;
    return false;
  }
  // Extension bytes count as body bytes: a body of one-byte chunks could
  // otherwise carry a chunk line's worth of extensions per byte it declares.
  if (const auto extension = static_cast<std::uint64_t>(lf - 1 - q); extension > 0 && bodyLimit_) {
    if (extension > *bodyLimit_ - bodySeen_) {
      ec = Err::body_limit;
      return false;
    }
    bodySeen_ += extension;
  }
  p = lf + 1;
  remaining_ = size;
  state_ = size > 0 ? State::kChunkData : State::kTrailer;
  return true;
}

// After the last chunk: trailer fields (checked, not reported) and the blank
// line. False while they have not arrived whole.
bool Parser::putTrailer(const char*& p, const char* end, error_code& ec) {
  const std::size_t avail = static_cast<std::size_t>(end - p);
  if (avail < 2) return false;
  if (p[0] == '\r' && p[1] == '\n') {
    p += 2;
    state_ = State::kComplete;
    return true;
  }
  const std::size_t window = std::min(avail, headerLimit_);
  const char* blank = findBlankLine(p, window, scanned_, bytesSearched_);
  if (blank == nullptr) {
    if (avail >= headerLimit_) {
      ec = Err::header_limit;
    } else {
      scanned_ = window >= 3 ? window - 3 : 0;
    }
    return false;
  }
  scanned_ = 0;
  if (auto e = parseFields(p, blank - 2, false)) {
    ec = e;
    return false;
  }
  p = blank;
  state_ = State::kComplete;
  return true;
}

}  // namespace relay::net::http1
