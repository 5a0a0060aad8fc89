// The parser's parts that the policy's files share (policy.cpp: the document and its sections; policy_rules.cpp:
// limits, quotas, tiers and route globs): a section of the document that names its fields in every error, and
// the checks more than one section makes. Internal to policy/.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policy/policy.hpp"

namespace floodwall::policy_parse {

using nlohmann::json;

// A value as an error quotes it: at most 40 characters.
std::string show(const json &v);
std::string format_seconds(double s);

class Section {
 public:
  Section(const json &obj, std::string path, std::set<std::string> allowed) : obj_(obj), path_(std::move(path)) {
    if (!obj_.is_object())
      throw PolicyError(path_.empty() ? "policy" : path_, "must be an object (got " + show(obj_) + ")");
    for (const auto &[k, v] : obj_.items()) {
      (void)v;
      if (!allowed.count(k)) throw PolicyError(field(k), "unknown key");
    }
  }

  // An empty key is shown as "" so that the error still names something (found by fuzz/policy_fuzz).
  std::string field(const std::string &k) const {
    std::string name = k.empty() ? "\"\"" : k;
    return path_.empty() ? name : path_ + "." + name;
  }
  bool has(const char *k) const { return obj_.contains(k); }
  const json &at(const char *k) const { return obj_.at(k); }

  // A finite number; min is exclusive when `open`.
  double number(const char *k, std::optional<double> dflt, double min, bool open, double max) const {
    if (!has(k)) {
      if (dflt) return *dflt;
      throw PolicyError(field(k), "is required");
    }
    const json &v = at(k);
    if (!v.is_number()) throw PolicyError(field(k), "must be a finite number (got " + show(v) + ")");
    double d = v.get<double>();
    if (!std::isfinite(d)) throw PolicyError(field(k), "must be a finite number");
    if (open ? !(d > min) : !(d >= min)) {
      std::ostringstream o;
      o << "must be " << (open ? "> " : ">= ") << min << " (got " << show(v) << ")";
      throw PolicyError(field(k), o.str());
    }
    if (d > max) {
      std::ostringstream o;
      o << "must be at most " << max << " (got " << show(v) << ")";
      throw PolicyError(field(k), o.str());
    }
    return d;
  }

  int64_t integer(const char *k, std::optional<int64_t> dflt, int64_t min, int64_t max) const {
    if (!has(k)) {
      if (dflt) return *dflt;
      throw PolicyError(field(k), "is required");
    }
    const json &v = at(k);
    bool whole =
        v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                  std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 9e15);
    if (!whole) throw PolicyError(field(k), "must be a whole number (got " + show(v) + ")");
    double d = v.get<double>();
    if (d < static_cast<double>(min) || d > static_cast<double>(max) ||
        (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))) {
      throw PolicyError(field(k), "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
                                      show(v) + ")");
    }
    return v.is_number_float() ? static_cast<int64_t>(d) : v.get<int64_t>();
  }

  bool boolean(const char *k, bool dflt) const {
    if (!has(k)) return dflt;
    const json &v = at(k);
    if (!v.is_boolean()) throw PolicyError(field(k), "must be true or false (got " + show(v) + ")");
    return v.get<bool>();
  }

  std::string string(const char *k, const std::string &dflt) const {
    if (!has(k)) return dflt;
    const json &v = at(k);
    if (!v.is_string()) throw PolicyError(field(k), "must be a string (got " + show(v) + ")");
    return v.get<std::string>();
  }

  // One of a few names, as the value it stands for (dflt when the key is absent); any other value is an
  // error that lists them: must be "a", "b" or "c" (got ...).
  template <typename E>
  E choice(const char *k, E dflt, std::initializer_list<std::pair<const char *, E>> names) const {
    if (!has(k)) return dflt;
    std::string v = string(k, "");
    for (const auto &[name, value] : names)
      if (v == name) return value;
    std::string list;
    size_t i = 0;
    for (const auto &[name, value] : names) {
      (void)value;
      if (i++) list += i == names.size() ? " or " : ", ";
      list.append(1, '"').append(name).append(1, '"');  // appends: GCC 12 at -O3 warns on "\"" + std::string
    }
    throw PolicyError(field(k), "must be " + list + " (got " + show(at(k)) + ")");
  }

  Mode mode() const {
    return choice("mode", Mode::enforce, {{"enforce", Mode::enforce}, {"dark", Mode::dark}, {"off", Mode::off}});
  }

 private:
  const json &obj_;
  std::string path_;
};

// "rate" and "burst": a bucket, checked so that the arithmetic stays exact (util/token_bucket.hpp).
BucketLimits bucket(const Section &s);
// A tier's or a rule's name: 1-32 characters of [A-Za-z0-9_.-].
bool valid_name(const std::string &n);

// policy_rules.cpp
std::vector<std::string> route_families(const json &r, const std::string &field);
void parse_limits(const json &v, Policy &p, std::set<std::string> &seen, const std::string &where, int tier);
void parse_quotas(const json &v, Policy &p, std::set<std::string> &seen, const std::string &where, int tier);
void parse_tiers(const json &v, Policy &p);
void collect_route_globs(Policy &p);

}  // namespace floodwall::policy_parse
