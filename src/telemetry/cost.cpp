#include "relay/telemetry/cost.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <tuple>

namespace relay::telemetry {
namespace {

constexpr std::uint64_t kPicoPerUsd = 1'000'000'000'000ULL;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::uint64_t saturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > kMax - b ? kMax : a + b;
}

// tokens × micro-USD-per-million = pico-USD, exact up to the saturation point.
std::uint64_t times(std::int64_t tokens, std::uint64_t microPerMillion) {
  if (tokens <= 0 || microPerMillion == 0) return 0;
  std::uint64_t p = 0;
  return __builtin_mul_overflow(static_cast<std::uint64_t>(tokens), microPerMillion, &p) ? kMax : p;
}

void appendUnsigned(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// `units` of 10^-scale written as a decimal, trailing fraction zeros trimmed.
void appendDecimal(std::string& out, std::uint64_t units, int scale) {
  std::uint64_t one = 1;
  for (int i = 0; i < scale; ++i)
    one *= 10;
  appendUnsigned(out, units / one);
  std::uint64_t frac = units % one;
  if (frac == 0) return;
  char digits[20];
  for (int i = scale - 1; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  int len = scale;
  while (digits[len - 1] == '0')
    --len;
  out.push_back('.');
  out.append(digits, static_cast<std::size_t>(len));
}

}  // namespace

Cost& Cost::operator+=(Cost other) {
  picoUsd = saturatingAdd(picoUsd, other.picoUsd);
  return *this;
}

std::uint64_t microUsdPerMillion(double usdPerMillion) {
  if (!(usdPerMillion > 0) || !std::isfinite(usdPerMillion)) return 0;
  long double micro = std::round(static_cast<long double>(usdPerMillion) * 1'000'000.0L);
  if (micro >= static_cast<long double>(kMax)) return kMax;
  return static_cast<std::uint64_t>(micro);
}

Cost costOf(const Price& price, const Usage& usage) {
  const std::int64_t prompt = std::max<std::int64_t>(usage.promptTokens, 0);
  const std::int64_t cached = std::clamp<std::int64_t>(usage.cachedTokens, 0, prompt);
  Cost c;
  c.picoUsd = times(prompt - cached, price.inputMicroUsd);
  c.picoUsd = saturatingAdd(c.picoUsd, times(cached, price.cachedInputMicroUsd));
  c.picoUsd = saturatingAdd(c.picoUsd, times(usage.completionTokens, price.outputMicroUsd));
  return c;
}

PriceTable::PriceTable(const std::vector<config::Price>& prices) {
  rows_.reserve(prices.size());
  for (const config::Price& p : prices) {
    rows_.push_back(Row{p.model, p.upstream,
                        Price{microUsdPerMillion(p.input), microUsdPerMillion(p.cachedInput),
                              microUsdPerMillion(p.output)}});
  }
  auto key = [](const Row& r) { return std::tie(r.model, r.upstream); };
  // Stable, then keep the first of duplicates: the row written first in the
  // file wins, as parseConfig's error for duplicates would point at the second.
  std::stable_sort(rows_.begin(), rows_.end(),
                   [&](const Row& a, const Row& b) { return key(a) < key(b); });
  rows_.erase(std::unique(rows_.begin(), rows_.end(),
                          [&](const Row& a, const Row& b) { return key(a) == key(b); }),
              rows_.end());
}

const Price* PriceTable::find(std::string_view model, std::string_view upstream) const {
  auto at = [&](std::string_view up) -> const Price* {
    auto it = std::lower_bound(
        rows_.begin(), rows_.end(), std::pair(model, up),
        [](const Row& r, const std::pair<std::string_view, std::string_view>& k) {
          return std::pair<std::string_view, std::string_view>(r.model, r.upstream) < k;
        });
    return it != rows_.end() && it->model == model && it->upstream == up ? &it->price : nullptr;
  };
  if (!upstream.empty()) {
    if (const Price* p = at(upstream)) return p;
  }
  return at({});
}

void appendUsd(std::string& out, Cost cost) {
  appendDecimal(out, cost.picoUsd, 12);
}

void appendConverted(std::string& out, Cost cost, double perUsd) {
  long double v = static_cast<long double>(cost.picoUsd) / 1e12L * perUsd;
  if (!std::isfinite(v) || v < 0) v = 0;
  // Rounded once to units of 1e-8, then written digit by digit (no float printing).
  long double scaled = std::round(v * 1e8L);
  if (scaled >= static_cast<long double>(kMax)) scaled = static_cast<long double>(kMax);
  appendDecimal(out, static_cast<std::uint64_t>(scaled), 8);
}

}  // namespace relay::telemetry
