// Prices and the cost of one request, in exact integer arithmetic.
//
// Why integers: a price is USD per 1M tokens (config::Price), held here as an
// integer number of micro-USD per 1M tokens — which is also pico-USD (1e-12
// USD) per token. tokens × price is then an exact integer count of pico-USD,
// sums of any number of requests are exact, and rounding happens once, when a
// total is printed. Doubles (or long double) would add a binary rounding error
// per request that summing amplifies; with integers 10,000 requests add up to
// the exact decimal the upstream's invoice shows. Prices with more than six
// decimals per million tokens are rounded to six when the table is built.
//
// Range: a std::uint64_t of pico-USD holds 18.4 million USD; one request's cost
// saturates there instead of wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "relay/config/config.hpp"

namespace relay::telemetry {

// Token counts of one request as the upstream reported them (or as estimated).
// Same convention as OpenAI's usage: promptTokens includes the cached ones.
struct Usage {
  std::int64_t promptTokens = 0;
  std::int64_t cachedTokens = 0;
  std::int64_t completionTokens = 0;
};

struct Cost {
  std::uint64_t picoUsd = 0;  // 1e-12 USD
  double usd() const { return static_cast<double>(picoUsd) / 1e12; }
  Cost& operator+=(Cost other);
  friend bool operator==(Cost, Cost) = default;
};

// One row of the price table: integer micro-USD per 1M tokens.
struct Price {
  std::uint64_t inputMicroUsd = 0;
  std::uint64_t cachedInputMicroUsd = 0;
  std::uint64_t outputMicroUsd = 0;
  friend bool operator==(const Price&, const Price&) = default;
};

// USD per 1M tokens → micro-USD per 1M tokens, rounded to nearest. Negative,
// NaN and non-finite prices become 0 (parseConfig rejects them anyway).
std::uint64_t microUsdPerMillion(double usdPerMillion);

// Cached prompt tokens at the cached-input price, the rest of the prompt at
// the input price, completion tokens at the output price. Negative counts
// count as 0; cachedTokens is clamped to promptTokens.
Cost costOf(const Price& price, const Usage& usage);

class PriceTable {
 public:
  PriceTable() = default;
  explicit PriceTable(const std::vector<config::Price>& prices);

  // The row for `model` served by `upstream`: the upstream-specific row wins
  // over the model-wide one (upstream ""); nullptr when neither exists.
  const Price* find(std::string_view model, std::string_view upstream) const;

  std::size_t size() const { return rows_.size(); }

 private:
  struct Row {
    std::string model;
    std::string upstream;  // "" = any upstream
    Price price;
  };
  std::vector<Row> rows_;  // sorted by (model, upstream); "" sorts first
};

// The display currency of the access log: a code and a fixed rate.
struct DisplayCurrency {
  std::string code = "USD";
  double perUsd = 1.0;

  DisplayCurrency() = default;
  explicit DisplayCurrency(const config::Currency& c) : code(c.code), perUsd(c.perUsd) {}
  bool isUsd() const { return code == "USD" && perUsd == 1.0; }
};

// Appends the exact decimal value of `cost` in USD: integer part, then up to
// 12 fraction digits with trailing zeros trimmed ("0", "0.0020679", "12.5").
void appendUsd(std::string& out, Cost cost);

// Appends cost × perUsd rounded to 8 decimals, trailing zeros trimmed. Display
// only: budgets and metrics stay in exact USD.
void appendConverted(std::string& out, Cost cost, double perUsd);

}  // namespace relay::telemetry
