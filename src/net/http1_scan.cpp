// HTTP/1.1's byte scans: see http1_scan.hpp.
#include "http1_scan.hpp"

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace relay::net::http1 {

// A value is mostly plain text, and the byte loop was most of the parser's
// cost. In the word loop, of the bytes a word flags the first is exact (later
// ones may be false, from the borrow): that is the one taken.
static_assert(std::endian::native == std::endian::little,
              "the word scan takes the lowest byte first");
const char* skipValueBytes(const char* p, const char* end) {
#if defined(__SSE2__)
  // Sixteen at a time where the machine has SSE2 (every x86-64): a byte is
  // flagged when min(byte, 0x1f) is the byte (unsigned: under 0x20) or it is
  // DEL; the words below take the tail.
  const __m128i control = _mm_set1_epi8(0x1f);
  const __m128i del = _mm_set1_epi8(0x7f);
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i bad =
        _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(x, control), x), _mm_cmpeq_epi8(x, del));
    const auto bits = static_cast<unsigned>(_mm_movemask_epi8(bad));
    if (bits == 0) {
      p += 16;
      continue;
    }
    p += std::countr_zero(bits);
    if (*p != '\t') return p;
    ++p;  // a tab is a value byte
  }
#endif
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHigh = 0x8080808080808080ULL;
  while (end - p >= 8) {
    std::uint64_t x;
    std::memcpy(&x, p, 8);
    const std::uint64_t control = (x - 0x20 * kOnes) & ~x & kHigh;  // bytes under 0x20
    const std::uint64_t del = ((x ^ (0x7f * kOnes)) - kOnes) & ~(x ^ (0x7f * kOnes)) & kHigh;
    const std::uint64_t hit = control | del;
    if (hit == 0) {
      p += 8;
      continue;
    }
    p += __builtin_ctzll(hit) / 8;
    if (*p != '\t') return p;
    ++p;  // a tab is a value byte
  }
  while (p < end && is(*p, kValue))
    ++p;
  return p;
}

const char* skipNameRun(const char* p, const char* limit) {
#if defined(__SSE2__)
  // A range check as unsigned min: byte - lo is in [0, n] when
  // min(byte - lo, n) is itself. Letters are taken with the case bit set
  // (no byte outside A-Z and a-z lands in a-z that way).
  const __m128i caseBit = _mm_set1_epi8(0x20);
  const __m128i a = _mm_set1_epi8('a');
  const __m128i letters = _mm_set1_epi8(25);
  const __m128i zero = _mm_set1_epi8('0');
  const __m128i digits = _mm_set1_epi8(9);
  const __m128i dash = _mm_set1_epi8('-');
  while (limit - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i l = _mm_sub_epi8(_mm_or_si128(x, caseBit), a);
    const __m128i d = _mm_sub_epi8(x, zero);
    const __m128i ok = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(l, letters), l),
                                                 _mm_cmpeq_epi8(_mm_min_epu8(d, digits), d)),
                                    _mm_cmpeq_epi8(x, dash));
    const auto stop = ~static_cast<unsigned>(_mm_movemask_epi8(ok)) & 0xffffu;
    if (stop != 0) return p + std::countr_zero(stop);
    p += 16;
  }
#else
  (void)limit;
#endif
  return p;
}

const char* findBlankLine(const char* p, std::size_t n, std::size_t from, std::uint64_t& searched) {
#if defined(__SSE2__)
  // Sixteen places at once: the four bytes at each place compared in four
  // loads offset by one. A search per line (memchr for each LF) cost about
  // 40 instructions a line, most of a head's search.
  {
    const __m128i cr = _mm_set1_epi8('\r');
    const __m128i lf = _mm_set1_epi8('\n');
    const auto at = [&](std::size_t i) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    };
    std::size_t s = from;
    for (; s + 19 <= n; s += 16) {  // the last load ends at s + 3 + 16
      const __m128i m = _mm_and_si128(
          _mm_and_si128(_mm_cmpeq_epi8(at(s), cr), _mm_cmpeq_epi8(at(s + 1), lf)),
          _mm_and_si128(_mm_cmpeq_epi8(at(s + 2), cr), _mm_cmpeq_epi8(at(s + 3), lf)));
      if (const auto bits = static_cast<unsigned>(_mm_movemask_epi8(m)); bits != 0) {
        const std::size_t match = s + static_cast<std::size_t>(std::countr_zero(bits));
        searched += match + 4 - from;
        return p + match + 4;
      }
    }
    searched += s - from;
    from = s;  // the rest, under 19 bytes, below
  }
#endif
  std::size_t i = from + 3;  // where the LF of the match could be
  while (i < n) {
    const void* lf = std::memchr(p + i, '\n', n - i);
    if (lf == nullptr) {
      searched += n - i;
      return nullptr;
    }
    const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(lf) - p);
    searched += at + 1 - i;
    i = at;
    if (p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r') return p + i + 1;
    i += 2;  // this LF could be the match's first only
  }
  return nullptr;
}

}  // namespace relay::net::http1
