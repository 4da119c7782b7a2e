// Our HTTP/1.1 framing (relay/net/http1_parser.hpp) against Beast 1.81's
// basic_parser, the parser it replaced, on the same bytes cut into the same
// pieces: a head ours accepts Beast accepts with the same start line, fields,
// length, coding and persistence; a head Beast accepts ours accepts; and the
// body bytes and where the message ends agree. Where ours is meant to differ
// (relay/net/http1_parser.hpp says where), the difference is allowed here and
// nowhere else.
//
// Input: one byte of mode (bit 0: a response instead of a request; the rest:
// the size of the pieces the message arrives in, 0 for all at once), then the
// message. Seeds: corpus/http1_parser/.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

#include "fuzz_check.hpp"
#include "relay/net/http1_parser.hpp"

namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using boost::system::error_code;
using Fields = std::vector<std::pair<std::string, std::string>>;

constexpr std::size_t kHeadLimit = 1 << 20;

// What a parser made of the bytes.
struct Outcome {
  error_code error;  // the first that is not need_more
  bool headDone = false;
  bool done = false;
  std::string method, target;
  int status = 0;
  Fields fields;
  std::string body;
  bool keepAlive = false;
  bool chunked = false;
  std::optional<std::uint64_t> length;
  int version = 0;                       // ours only
  std::optional<std::size_t> usedAtEnd;  // bytes used when the message was done
};

class Ours final : public relay::net::http1::Parser {
 public:
  Ours(bool request, Outcome& out) : Parser(request), out_(out) {
    headerLimit(kHeadLimit);
    eager(false);  // a put stops at the head's end; eager from there on
  }

 private:
  void onStartLine(std::string_view m, std::string_view t, int s) override {
    out_.method = m;
    out_.target = t;
    out_.status = s;
  }
  void onField(relay::net::http1::FieldName, std::string_view n, std::string_view v) override {
    out_.fields.emplace_back(n, v);
  }
  void onBody(std::string_view b) override { out_.body.append(b); }
  Outcome& out_;
};

template <bool isRequest>
class Theirs final : public http::basic_parser<isRequest> {
 public:
  explicit Theirs(Outcome& out) : out_(out) {
    this->header_limit(kHeadLimit);
    this->body_limit(boost::none);
    this->eager(false);
  }

 private:
  void on_request_impl(http::verb, beast::string_view m, beast::string_view t, int,
                       error_code&) override {
    out_.method.assign(m.data(), m.size());
    out_.target.assign(t.data(), t.size());
  }
  void on_response_impl(int s, beast::string_view, int, error_code&) override { out_.status = s; }
  void on_field_impl(http::field, beast::string_view n, beast::string_view v,
                     error_code&) override {
    if (this->is_header_done()) return;  // trailer fields: ours does not report them
    out_.fields.emplace_back(std::string(n.data(), n.size()), std::string(v.data(), v.size()));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(beast::string_view b, error_code&) override {
    out_.body.append(b.data(), b.size());
    return b.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view b, error_code&) override {
    out_.body.append(b.data(), b.size());
    return b.size();
  }
  void on_finish_impl(error_code&) override {}
  Outcome& out_;
};

// Feeds `wire` in pieces of `step` bytes (0: at once) as a connection would;
// a response unfinished at the end gets the connection's end.
template <class P, class Put>
void drive(P& p, Outcome& out, std::string_view wire, std::size_t step, bool request, Put put) {
  std::string pending;
  std::size_t at = 0;
  std::size_t consumed = 0;
  while (!out.error && !out.done) {
    if (at == wire.size() && pending.empty()) break;
    const std::size_t n = step == 0 ? wire.size() - at : std::min(step, wire.size() - at);
    pending.append(wire.substr(at, n));
    at += n;
    for (;;) {
      if (out.done) break;
      error_code ec;
      const std::size_t used = put(p, std::string_view(pending), ec);
      pending.erase(0, used);
      consumed += used;
      if (out.done && !out.usedAtEnd) out.usedAtEnd = consumed;
      if (ec && ec != http::error::need_more) {
        out.error = ec;
        break;
      }
      if (ec || used == 0 || pending.empty()) break;
    }
    if (n == 0) break;  // nothing more to give
  }
  if (!request && !out.error && !out.done && out.headDone) {
    error_code ec;
    if constexpr (requires { p.putEof(ec); }) {
      p.putEof(ec);
    } else {
      p.put_eof(ec);
    }
    if (ec) out.error = ec;
  }
}

template <bool isRequest>
void compare(std::string_view wire, std::size_t step) {
  Outcome mine;
  Ours ours(isRequest, mine);
  drive(ours, mine, wire, step, isRequest, [&](Ours& p, std::string_view in, error_code& ec) {
    const std::size_t used = p.put(in, ec);
    if (!mine.headDone && p.headerDone()) {
      mine.keepAlive = p.keepAlive();  // at the head: a trailer's fields do not
      p.eager(true);                   // change it (Beast's do)
    }
    mine.headDone = p.headerDone();
    mine.done = p.done();
    return used;
  });
  if (mine.headDone) {
    mine.chunked = ours.chunked();
    mine.length = ours.contentLength();
    mine.version = ours.version();
  }
  mine.done = ours.done();

  Outcome theirs;
  Theirs<isRequest> beastParser(theirs);
  drive(beastParser, theirs, wire, step, isRequest,
        [&](Theirs<isRequest>& p, std::string_view in, error_code& ec) {
          const std::size_t used = p.put(boost::asio::buffer(in.data(), in.size()), ec);
          if (!theirs.headDone && p.is_header_done()) {
            theirs.keepAlive = p.keep_alive();
            p.eager(true);
          }
          theirs.headDone = p.is_header_done();
          theirs.done = p.is_done();
          return used;
        });
  if (theirs.headDone) {
    theirs.chunked = beastParser.chunked();
    theirs.length = beastParser.content_length()
                        ? std::optional<std::uint64_t>(*beastParser.content_length())
                        : std::nullopt;
  }
  theirs.done = beastParser.is_done();

  // Beast unfolds obs-fold into a 4 KiB buffer, and a longer folded value is
  // header_limit there: ours has no such bound beside the head's own.
  if (theirs.error == http::error::header_limit) return;
  // Obs-fold in a request is refused by ours (a proxy in front could read the
  // folded line as a field of its own); Beast unfolded it.
  if (isRequest && mine.error == http::error::bad_obs_fold) return;

  // A Transfer-Encoding list with a coding that is not a token is not
  // chunked in ours; Beast read such a list up to that coding.
  bool badCodings = false;
  for (const auto& [name, value] : mine.fields) {
    if (relay::net::http1::classifyField(name) != relay::net::http1::FieldName::kTransferEncoding)
      continue;
    std::string_view list = value;
    while (!list.empty()) {
      std::string_view coding = list.substr(0, list.find(','));
      list.remove_prefix(std::min(list.size(), coding.size() + 1));
      while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
        coding.remove_prefix(1);
      while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
        coding.remove_suffix(1);
      for (char c : coding) {
        if (!std::isalnum(static_cast<unsigned char>(c)) &&
            std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos)
          badCodings = true;
      }
    }
  }
  if (badCodings) {  // (and a request with it is refused by the session)
    FUZZ_CHECK(!mine.chunked, "a list of codings that are not all tokens is not chunked");
    return;
  }
  FUZZ_CHECK(mine.headDone == theirs.headDone || (!mine.headDone && !mine.error && theirs.error) ||
                 (!theirs.headDone && !theirs.error && mine.error),
             "one parser accepted a head the other refused");
  if (!mine.headDone || !theirs.headDone) return;
  FUZZ_CHECK(mine.method == theirs.method && mine.target == theirs.target, "start line");
  FUZZ_CHECK(mine.status == theirs.status, "status");
  FUZZ_CHECK(mine.fields == theirs.fields, "fields");
  FUZZ_CHECK(mine.chunked == theirs.chunked, "chunked");
  FUZZ_CHECK(mine.length == theirs.length, "content length");

  // A response whose last coding is not chunked runs to the connection's end
  // in ours (RFC 9112 §6.3); Beast took a Content-Length beside it.
  bool otherCoding = false;
  for (const auto& [name, value] : mine.fields) {
    if (relay::net::http1::classifyField(name) == relay::net::http1::FieldName::kTransferEncoding)
      otherCoding = !mine.chunked;
  }
  if (!isRequest && otherCoding) return;
  // Persistence, as the head set it. Ours never reuses a connection after a
  // Transfer-Encoding in HTTP/1.0 (faulty framing, RFC 9112 §6.1) or after a
  // 101; Beast did.
  bool hasCoding = false;
  for (const auto& field : mine.fields) {
    hasCoding = hasCoding || relay::net::http1::classifyField(field.first) ==
                                 relay::net::http1::FieldName::kTransferEncoding;
  }
  // An HTTP/1.0 message whose Connection (or Proxy-Connection) lists close
  // is not reused by ours even beside keep-alive (RFC 9112 §9.3); Beast
  // reused it. (A value that merely contains the letters is let through:
  // ours, which reads the list, is then the one to trust.)
  bool closeListed = false;
  for (const auto& field : mine.fields) {
    const auto kind = relay::net::http1::classifyField(field.first);
    if (kind != relay::net::http1::FieldName::kConnection &&
        kind != relay::net::http1::FieldName::kProxyConnection)
      continue;
    std::string lower = field.second;
    for (char& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    closeListed = closeListed || lower.find("close") != std::string::npos;
  }
  if ((hasCoding && mine.version < 11) || mine.status == 101) {
    FUZZ_CHECK(!mine.keepAlive, "reused after faulty framing or a 101");
  } else if (mine.version < 11 && closeListed && !mine.keepAlive) {
    // allowed: see above
  } else {
    FUZZ_CHECK(mine.keepAlive == theirs.keepAlive, "keep-alive");
  }

  // The body: the same bytes and the same end, in bytes used. Allowed to
  // differ only where ours is the stricter, each by name:
  // - Beast applied framing rules to a trailer's fields (ours checks their
  //   syntax only): Beast refused in the trailer, after the same body;
  const bool beastTrailerRule = mine.chunked && mine.done && mine.body == theirs.body &&
                                (theirs.error == http::error::bad_content_length ||
                                 theirs.error == http::error::bad_transfer_encoding ||
                                 theirs.error == http::error::multiple_content_length ||
                                 theirs.error == http::error::bad_value);
  // - ours refuses a chunk line Beast took (over 4 KiB; control bytes or a
  //   bare LF in a quoted extension): what ours passed on is a prefix of
  //   what Beast did.
  const bool stricterChunkLine =
      mine.chunked &&
      (mine.error == http::error::bad_chunk || mine.error == http::error::bad_chunk_extension ||
       mine.error == http::error::bad_line_ending) &&
      theirs.body.compare(0, mine.body.size(), mine.body) == 0;
  if (beastTrailerRule || stricterChunkLine) return;
  if (mine.error && theirs.error) return;  // both refused
  if (!mine.error && !mine.done && theirs.error) {
    // Beast refused a line before its end arrived (a CR not followed by LF);
    // ours waits for the line, and will refuse it or meet its bound.
    FUZZ_CHECK(mine.body == theirs.body, "body bytes before Beast refused");
    return;
  }
  FUZZ_CHECK(static_cast<bool>(mine.error) == static_cast<bool>(theirs.error),
             "a body one parser refused");
  FUZZ_CHECK(mine.body == theirs.body, "body bytes");
  FUZZ_CHECK(mine.done == theirs.done, "whether the message ended");
  FUZZ_CHECK(mine.usedAtEnd == theirs.usedAtEnd, "where the message ends, in bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool response = (data[0] & 1) != 0;
  const std::size_t step = data[0] >> 1;
  const std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
  if (response) {
    compare<false>(wire, step);
  } else {
    compare<true>(wire, step);
  }
  return 0;
}
