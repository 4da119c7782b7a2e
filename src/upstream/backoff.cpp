#include "relay/upstream/backoff.hpp"

#include <algorithm>

namespace relay::upstream {

Millis backoffCeiling(const BackoffOptions& options, unsigned retry) {
  const std::int64_t base = std::max<std::int64_t>(0, options.base.count());
  const std::int64_t max = std::max<std::int64_t>(0, options.max.count());
  if (base == 0) return Millis(0);
  // Double until the cap is reached instead of shifting: base << retry would
  // overflow long before `retry` is large.
  std::int64_t ceiling = base;
  for (unsigned i = 0; i < retry && ceiling < max; ++i)
    ceiling *= 2;
  return Millis(std::min(ceiling, max));
}

Millis fullJitter(Millis ceiling, std::uint64_t randomBits) {
  if (ceiling.count() <= 0) return Millis(0);
  // The top 53 bits give a double uniform in [0, 1) exactly; scaling by
  // ceiling + 1 and rounding down makes every whole millisecond in
  // [0, ceiling] equally likely (up to 2^-53).
  const double unit = static_cast<double>(randomBits >> 11) * 0x1.0p-53;
  const auto span = static_cast<double>(ceiling.count()) + 1.0;
  const auto ms = static_cast<std::int64_t>(unit * span);
  return Millis(std::min<std::int64_t>(ms, ceiling.count()));
}

}  // namespace relay::upstream
