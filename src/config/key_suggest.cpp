#include "key_suggest.hpp"

#include <algorithm>
#include <string>

namespace relay::config::detail {

namespace {

// Lowercase with '_' and '-' dropped: maxRequestBytes == max_request_bytes.
std::string folded(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '_' || c == '-') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

}  // namespace

std::size_t editDistance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  // Three rows suffice: the swap of neighbours looks two rows back.
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j)
    previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[m];
}

std::optional<std::string_view> closestKey(std::string_view unknown,
                                           const std::vector<std::string_view>& known) {
  const std::string target = folded(unknown);
  for (std::string_view k : known) {
    if (folded(k) == target) return k;
  }
  // A typo: at most one edit in three characters, and never the whole word.
  const std::size_t allowed = std::max<std::size_t>(1, unknown.size() / 3);
  std::optional<std::string_view> best;
  std::size_t bestDistance = allowed + 1;
  for (std::string_view k : known) {
    const std::size_t d = editDistance(unknown, k);
    if (d < bestDistance && d < unknown.size() && d < k.size()) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

}  // namespace relay::config::detail
