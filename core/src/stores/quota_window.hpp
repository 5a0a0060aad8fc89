// A quota's calendar window: the hour, day or month (of a fixed offset from UTC) that holds an instant of
// the store's clock. Pure integer functions; lua/lib/quota.lua computes the same on Lua's doubles (every
// value is a whole number of seconds far below 2^53), so every store counts a request in the same window.
#pragma once

#include <cstdint>

#include "policy/policy.hpp"

namespace floodwall {

// floor(a / b) for b > 0 (C++ truncates toward zero; Lua's math.floor does not).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return q - ((a % b) != 0 && (a < 0));
}

// Days since 1970-01-01 of a civil date (proleptic Gregorian), and back: Howard Hinnant's algorithms
// ("chrono-Compatible Low-Level Date Algorithms").
inline int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  int64_t era = floor_div(y, 400);
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct CivilMonth {
  int64_t year, month;
};
inline CivilMonth civil_month(int64_t days) {
  days += 719468;
  int64_t era = floor_div(days, 146097);
  int64_t doe = days - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  return {yoe + era * 400 + (m <= 2), m};
}

struct QuotaWindow {
  int64_t start_s, end_s;  // [start, end), seconds since the epoch (UTC)
};

inline QuotaWindow quota_window(QuotaPeriod period, int32_t utc_offset_s, int64_t now_s) {
  int64_t local = now_s + utc_offset_s;
  int64_t start = 0, end = 0;
  switch (period) {
    case QuotaPeriod::hour:
      start = floor_div(local, 3600) * 3600;
      end = start + 3600;
      break;
    case QuotaPeriod::day:
      start = floor_div(local, 86400) * 86400;
      end = start + 86400;
      break;
    case QuotaPeriod::month: {
      CivilMonth cm = civil_month(floor_div(local, 86400));
      start = days_from_civil(cm.year, cm.month, 1) * 86400;
      end = days_from_civil(cm.year + (cm.month == 12), cm.month % 12 + 1, 1) * 86400;
      break;
    }
  }
  return {start - utc_offset_s, end - utc_offset_s};
}

// The quota's state: the window its count belongs to and the units counted in it. A count of another
// window (an earlier one, or another period after a policy change) is a new window's zero.
struct QuotaState {
  int64_t window_start_s = 0;
  int64_t used = 0;
};

inline int64_t quota_used(const QuotaState &s, const QuotaWindow &w) {
  return s.window_start_s == w.start_s ? s.used : 0;
}

}  // namespace floodwall
