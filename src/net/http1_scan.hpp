// The byte-level scans of HTTP/1.1 framing (http1_parser.cpp): the character
// classes of RFC 9110/9112, and the three searches that run over every byte
// of every head — a head's end, a field name's plain run, a field value —
// done sixteen bytes at a time with SSE2 (every x86-64), eight at a time in
// a 64-bit word, or one at a time, in that order as room allows.
//
// Internal to the net module. Each search reads no further than the bound it
// is given, and each is checked at every place of its block size by
// tests/unit/net/http1_parser_test.cpp and against Beast's parser by
// fuzz_http1_parser.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace relay::net::http1 {

// One table per character class (RFC 9110 §5.6.2, RFC 9112 §3.2).
enum : std::uint8_t {
  kToken = 1,   // tchar
  kTarget = 2,  // a request-target byte: visible ASCII and obs-text
  kValue = 4,   // a field-value byte: HTAB, SP, visible ASCII, obs-text
};

constexpr std::array<std::uint8_t, 256> makeClasses() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0x21; c <= 0x7e; ++c)
    t[c] |= kTarget | kValue;
  for (int c = 0x80; c <= 0xff; ++c)
    t[c] |= kTarget | kValue;
  t[' '] |= kValue;
  t['\t'] |= kValue;
  for (int c = '0'; c <= '9'; ++c)
    t[c] |= kToken;
  for (int c = 'a'; c <= 'z'; ++c)
    t[c] |= kToken;
  for (int c = 'A'; c <= 'Z'; ++c)
    t[c] |= kToken;
  for (char c : std::string_view("!#$%&'*+-.^_`|~"))
    t[static_cast<unsigned char>(c)] |= kToken;
  return t;
}
inline constexpr std::array<std::uint8_t, 256> kClasses = makeClasses();

inline bool is(char c, std::uint8_t cls) {
  return (kClasses[static_cast<unsigned char>(c)] & cls) != 0;
}
inline bool isWs(char c) {
  return c == ' ' || c == '\t';
}

// The first byte at or after `p` that cannot be in a field value (a control
// byte other than HTAB, or DEL), looking no further than `end`; `end` if
// none.
const char* skipValueBytes(const char* p, const char* end);

// Past the run of letters, digits and '-' that starts at `p` (most field
// names are nothing else), reading no further than `limit`; the caller's
// token loop takes the rest of the name. Without SSE2, `p` itself.
const char* skipNameRun(const char* p, const char* limit);

// The first "\r\n\r\n" that starts in p[from, n): a pointer past it, or
// nullptr. Adds the bytes it looked at to `searched` (the bound on a head
// that trickles in: the caller resumes where the last search left off).
const char* findBlankLine(const char* p, std::size_t n, std::size_t from, std::uint64_t& searched);

}  // namespace relay::net::http1
