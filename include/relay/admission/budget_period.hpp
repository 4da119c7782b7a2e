// Budget periods on UTC calendar boundaries, and the UTC timestamps written in
// messages and in the state file ("2026-12-01T00:00:00Z").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "relay/admission/clock.hpp"

namespace relay::admission {

enum class BudgetPeriod { kDay, kMonth, kTotal };

std::string_view periodName(BudgetPeriod period);       // "day", "month", "total"
std::string_view periodAdjective(BudgetPeriod period);  // "daily", "monthly", "total"
std::optional<BudgetPeriod> parsePeriod(std::string_view name);

// Start of the period containing `now`: 00:00:00Z of the day or of the first of
// the month; the Unix epoch for kTotal. Whole seconds.
WallTime periodStart(BudgetPeriod period, WallTime now);
// Start of the next period; nullopt for kTotal, which never resets.
std::optional<WallTime> periodEnd(BudgetPeriod period, WallTime start);

// "YYYY-MM-DDTHH:MM:SSZ", seconds truncated.
std::string formatUtc(WallTime t);
// Exactly that format (a valid date and time); nullopt for anything else.
std::optional<WallTime> parseUtc(std::string_view text);

}  // namespace relay::admission
