#include "http/backoff.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "util/errors.hpp"

namespace floodwall {

double backoff_delay(const Backoff &b, unsigned attempt, double retry_after_s, double random01) {
  if (!std::isfinite(b.base_s) || !(b.base_s > 0)) throw BadRequest("backoff.base_s: must be a finite number > 0");
  if (!std::isfinite(b.cap_s) || !(b.cap_s >= b.base_s))
    throw BadRequest("backoff.cap_s: must be a finite number >= backoff.base_s");
  if (b.attempts < 1) throw BadRequest("backoff.attempts: must be at least 1");
  // Written so that a NaN fails too.
  if (!(random01 >= 0 && random01 < 1)) throw BadRequest("random: must be in [0, 1)");
  if (!std::isfinite(retry_after_s)) throw BadRequest("retry_after_s: must be a finite number (negative for none)");
  // ldexp is exact (a power of two), so every language that computes base * 2^n gets the same double.
  double window = std::min(b.cap_s, std::ldexp(b.base_s, static_cast<int>(std::min(attempt, 64u))));
  return (retry_after_s >= 0 ? retry_after_s : 0) + random01 * window;
}

namespace {

constexpr double kMaxDelaySeconds = 1e12;

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

constexpr std::string_view kDays[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
constexpr std::string_view kLongDays[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
constexpr std::string_view kMonths[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                        "jul", "aug", "sep", "oct", "nov", "dec"};

// A left-to-right reader of one date format; every step either consumes what it expects or fails.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return i_ == s_.size(); }
  bool lit(char c) {
    if (i_ >= s_.size() || s_[i_] != c) return false;
    i_++;
    return true;
  }
  bool word(std::string_view lower_word) {
    if (s_.size() - i_ < lower_word.size()) return false;
    for (size_t k = 0; k < lower_word.size(); k++)
      if (lower(s_[i_ + k]) != lower_word[k]) return false;
    i_ += lower_word.size();
    return true;
  }
  template <size_t N>
  bool one_of(const std::string_view (&words)[N], int *index = nullptr) {
    for (size_t k = 0; k < N; k++) {
      if (word(words[k])) {
        if (index) *index = static_cast<int>(k);
        return true;
      }
    }
    return false;
  }
  bool digits(int n, int &out) {
    if (s_.size() - i_ < static_cast<size_t>(n)) return false;
    out = 0;
    for (int k = 0; k < n; k++) {
      char c = s_[i_ + static_cast<size_t>(k)];
      if (!is_digit(c)) return false;
      out = out * 10 + (c - '0');
    }
    i_ += static_cast<size_t>(n);
    return true;
  }
  // asctime's day: two digits, or a space and one digit.
  bool day_sp(int &out) { return lit(' ') ? digits(1, out) : digits(2, out); }
  // "HH:MM:SS"
  bool time(int &h, int &m, int &s) { return digits(2, h) && lit(':') && digits(2, m) && lit(':') && digits(2, s); }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

struct Civil {
  int64_t year = 0;
  int month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

bool leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

bool valid(const Civil &c) {
  static constexpr int kMonthDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (c.month < 1 || c.month > 12 || c.day < 1) return false;
  int days = kMonthDays[c.month - 1] + (c.month == 2 && leap(c.year) ? 1 : 0);
  // 60 seconds: a leap second, which an IMF-fixdate may name.
  return c.day <= days && c.hour <= 23 && c.minute <= 59 && c.second <= 60;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// The year of a day count since 1970-01-01 (civil_from_days, year only).
int64_t year_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  return yoe + era * 400 + (mp >= 10 ? 1 : 0);
}

// "Sun, 06 Nov 1994 08:49:37 GMT"
bool imf_fixdate(std::string_view s, Civil &c) {
  Cursor r(s);
  int y;
  return r.one_of(kDays) && r.lit(',') && r.lit(' ') && r.digits(2, c.day) && r.lit(' ') &&
         r.one_of(kMonths, &c.month) && r.lit(' ') && r.digits(4, y) && r.lit(' ') &&
         r.time(c.hour, c.minute, c.second) && r.lit(' ') && r.word("gmt") && r.done() && (c.year = y, c.month++, true);
}

// "Sunday, 06-Nov-94 08:49:37 GMT"; the two-digit year is resolved by the caller.
bool rfc850_date(std::string_view s, Civil &c) {
  Cursor r(s);
  int y;
  return r.one_of(kLongDays) && r.lit(',') && r.lit(' ') && r.digits(2, c.day) && r.lit('-') &&
         r.one_of(kMonths, &c.month) && r.lit('-') && r.digits(2, y) && r.lit(' ') &&
         r.time(c.hour, c.minute, c.second) && r.lit(' ') && r.word("gmt") && r.done() && (c.year = y, c.month++, true);
}

// "Sun Nov  6 08:49:37 1994"
bool asctime_date(std::string_view s, Civil &c) {
  Cursor r(s);
  int y;
  return r.one_of(kDays) && r.lit(' ') && r.one_of(kMonths, &c.month) && r.lit(' ') && r.day_sp(c.day) && r.lit(' ') &&
         r.time(c.hour, c.minute, c.second) && r.lit(' ') && r.digits(4, y) && r.done() &&
         (c.year = y, c.month++, true);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<double> parse_retry_after(std::string_view value, double now_unix_s) {
  value = trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), is_digit)) {
    // Saturating, so a thousand digits are as cheap as ten and never overflow.
    uint64_t n = 0;
    for (char c : value) n = std::min<uint64_t>(n * 10 + static_cast<uint64_t>(c - '0'), 1'000'000'000'000);
    return static_cast<double>(n);
  }
  // Beyond a million years either way the year below would not fit the arithmetic; no clock says that.
  if (!std::isfinite(now_unix_s) || std::fabs(now_unix_s) > 3e13) return std::nullopt;
  Civil c;
  if (!imf_fixdate(value, c) && !asctime_date(value, c)) {
    if (!rfc850_date(value, c)) return std::nullopt;
    int64_t now_year = year_from_days(static_cast<int64_t>(std::floor(now_unix_s / 86400)));
    int64_t century = now_year - ((now_year % 100) + 100) % 100;
    c.year += century;
    if (c.year > now_year + 50) c.year -= 100;
  }
  if (!valid(c)) return std::nullopt;
  int64_t t = days_from_civil(c.year, c.month, c.day) * 86400 + c.hour * 3600 + c.minute * 60 + c.second;
  double d = static_cast<double>(t) - now_unix_s;
  return d > 0 ? std::min(d, kMaxDelaySeconds) : 0.0;
}

}  // namespace floodwall
