#include "engine/fleet_summary.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "util/errors.hpp"

namespace floodwall {

using nlohmann::json;

namespace {

constexpr size_t kTopRefused = 5;  // the tenants a summary names

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  static const char kHex[] = "0123456789abcdef";
  std::string id(16, '0');
  for (size_t i = 0; i < 16; i++) id[i] = kHex[(v >> (60 - 4 * i)) & 0xf];
  return id;
}

std::string host_name() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "";
  return h;
}

uint64_t count_of(const json &j, const char *a, const char *b) {
  if (!j.contains(a) || !j[a].is_object() || !j[a].contains(b) || !j[a][b].is_number_unsigned()) return 0;
  return j[a][b].get<uint64_t>();
}

// The tenants refused most, from the metrics' top tenants (the highest rejection rates it tracks).
json top_refused(const json &metrics) {
  json rows = json::array();
  if (!metrics.contains("top_tenants") || !metrics["top_tenants"].is_array()) return rows;
  std::vector<json> refused;
  for (const json &t : metrics["top_tenants"])
    if (t.value("rejections", uint64_t{0}) > 0) refused.push_back(t);
  std::stable_sort(refused.begin(), refused.end(), [](const json &a, const json &b) {
    return a.value("rejections", uint64_t{0}) > b.value("rejections", uint64_t{0});
  });
  for (size_t i = 0; i < refused.size() && i < kTopRefused; i++)
    rows.push_back({{"tenant", refused[i]["tenant"]},
                    {"rejections", refused[i]["rejections"]},
                    {"requests", refused[i]["requests"]}});
  return rows;
}

}  // namespace

SummaryWriter::SummaryWriter(Guard &guard, std::shared_ptr<ClientLabel> label)
    : guard_(guard),
      label_(std::move(label)),
      id_(random_id()),
      started_ms_(wall_ms()),
      period_ms_(static_cast<int64_t>(guard.policy().summary_period_s * 1000)) {
  last_ms_ = started_ms_;
  if (period_ms_ > 0) thread_ = std::thread([this] { run(); });
}

SummaryWriter::~SummaryWriter() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (!last_ok_) return;  // a store that failed the last write would hold up the close: it expires by itself
  try {
    guard_.store().put_summary(id_, "", 0);  // gone at once, not after its TTL
  } catch (...) {
    // Unreachable: it expires by itself.
  }
}

void SummaryWriter::run() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(period_ms_), [this] { return stop_; })) {
    lock.unlock();
    write();
    lock.lock();
  }
}

std::string SummaryWriter::summary() {
  json m = json::parse(guard_.metrics_json());
  int64_t now = wall_ms();
  json s = {{"v", 1}, {"id", id_}, {"host", host_name()}, {"pid", static_cast<int64_t>(getpid())}};
  {
    std::lock_guard lock(label_->mu);
    s["language"] = label_->language;
    s["version"] = label_->version;
  }
  s["started_at_ms"] = started_ms_;
  s["written_at_ms"] = now;
  s["period_s"] = static_cast<double>(period_ms_) / 1000;
  s["decisions"] = m["decisions"];
  s["sources"] = m["sources"];
  uint64_t reached = 0;  // requests that reached the store's step, whoever decided them
  for (const auto &[source, n] : m["sources"].items()) reached += n.get<uint64_t>();
  // Requests the local shedders refused never reach it: a request is one decision either way.
  uint64_t total =
      reached + count_of(m["decisions"], "utilization", "rejected") + count_of(m["decisions"], "adaptive", "rejected");
  s["decisions_total"] = total;
  json refused = json::object();
  for (const auto &[limiter, outcomes] : m["decisions"].items())
    if (outcomes.value("rejected", uint64_t{0}) > 0) refused[limiter] = outcomes["rejected"];
  s["refused"] = refused;
  s["fallback_share"] = reached ? static_cast<double>(count_of(m, "sources", "fallback")) / reached : 0.0;
  s["top_refused"] = top_refused(m);
  s["breaker"] = m["breaker"];
  // Per second over the last period (since the previous write, or the start).
  std::lock_guard lock(mu_);
  double dt = std::max<double>(1, static_cast<double>(now - last_ms_)) / 1000;
  json before = last_refused_.empty() ? json::object() : json::parse(last_refused_);
  json refused_per_s = json::object();
  for (const auto &[limiter, n] : refused.items())
    refused_per_s[limiter] = static_cast<double>(n.get<uint64_t>() - before.value(limiter, uint64_t{0})) / dt;
  s["per_s"] = {{"decisions", static_cast<double>(total - std::min(total, last_decisions_)) / dt},
                {"refused", refused_per_s},
                {"seconds", dt}};
  return s.dump();
}

bool SummaryWriter::write() {
  std::string text = summary();
  bool ok = true;
  try {
    guard_.store().put_summary(id_, text, period_ms_ > 0 ? period_ms_ * 3 : 15'000);
  } catch (...) {
    ok = false;  // the store cannot be reached now: counted, tried again at the next period
  }
  guard_.metrics().summary_written(ok);
  json s = json::parse(text);
  std::lock_guard lock(mu_);
  last_ms_ = s["written_at_ms"].get<int64_t>();
  last_decisions_ = s["decisions_total"].get<uint64_t>();
  last_refused_ = s["refused"].dump();
  last_ok_ = ok;
  return ok;
}

std::string fleet_clients_json(Store &store) {
  std::vector<json> all;
  for (const std::string &text : store.summaries()) {
    json s = json::parse(text, nullptr, false);
    if (s.is_object() && s.contains("id") && s["id"].is_string()) all.push_back(std::move(s));
  }
  std::sort(all.begin(), all.end(),
            [](const json &a, const json &b) { return a["id"].get<std::string>() < b["id"].get<std::string>(); });
  return json(all).dump();
}

}  // namespace floodwall
