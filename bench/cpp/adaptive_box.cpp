// The adaptive concurrency limit on a real box, in wall-clock time (make bench; the simulated version with
// its assertions is tests/core/engine/adaptive_test.cpp): a service of W workers, each request 5 ms +-20%
// of work on one of them (a request beyond W waits for a worker), and 64 callers in a closed loop, each
// sending its next request when the last one ends, or 5 ms after a 503. Every request goes through the C
// ABI (memory://, the shipped defaults of {"adaptive": {"enabled": true}}) before it queues for a worker
// and is released when its work ends. A shed caller backs off 5 ms (in the simulation, 1 ms: there a
// retry costs nothing; here 60 threads waking each millisecond would crowd the two cores).
//
//   adaptive_box [--seconds S] [--markdown FILE] [--json FILE]
//
// Prints, per contender (no limiter, gradient2, vegas): goodput, its ratio to no limiter's, the admitted
// requests' p50 and p99 latency (admit to release), 503s per second and the limit at the end; then the
// capacity halving (4 workers -> 2 at half time): the limit before, 2 s after, and the p99 from then on.
#include <floodwall.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <floodwall.hpp>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// W workers: a request takes one for its work, or waits for one, first come first served (as a server's
// accept queue serves them; a condition variable alone lets late arrivals overtake, and starves some).
class Workers {
 public:
  explicit Workers(int n) : capacity_(n) {}
  void set(int n) {
    std::lock_guard lock(mu_);
    capacity_ = n;
    cv_.notify_all();
  }
  void work(std::chrono::microseconds us) {
    {
      std::unique_lock lock(mu_);
      uint64_t ticket = next_++;
      cv_.wait(lock, [&] { return ticket == head_ && busy_ < capacity_; });
      head_++;
      busy_++;
      cv_.notify_all();  // the next in line may start too
    }
    std::this_thread::sleep_for(us);
    std::lock_guard lock(mu_);
    busy_--;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int capacity_;
  int busy_ = 0;
  uint64_t next_ = 0, head_ = 0;
};

double limit_of(floodwall::Client &fw) {
  std::string m = fw.metrics_json();
  size_t at = m.find("\"adaptive\":{\"");
  if (at == std::string::npos) return 0;
  at = m.find("\"limit\":", at);
  return at == std::string::npos ? 0 : std::strtod(m.c_str() + at + 8, nullptr);
}

struct Stats {
  std::vector<double> latencies_ms;
  int64_t shed = 0, not_by_store = 0, decisions = 0;
  double seconds = 0;
  double goodput() const { return static_cast<double>(latencies_ms.size()) / seconds; }
  double percentile(double p) {
    if (latencies_ms.empty()) return 0;
    std::sort(latencies_ms.begin(), latencies_ms.end());
    return latencies_ms[static_cast<size_t>(p * static_cast<double>(latencies_ms.size() - 1))];
  }
};

// Runs the box for `seconds` (after 2 s of warm-up, not counted). `at_half` is called once at half time;
// the Stats in `after` count what ends from `after_from_s` of the measured time on (when given).
struct Run {
  Stats measured, after;
  std::vector<std::pair<double, double>> limits;  // (s, limit), every 100 ms
};

Run run_box(const std::string &policy, int workers, double seconds, int halve_to = 0, double after_from_s = 0) {
  floodwall::Client fw(policy);
  Workers box(workers);
  Run out;
  std::mutex mu;
  std::atomic<bool> stop{false};
  auto start = Clock::now();
  const double warm = 2;
  std::vector<std::thread> callers;
  for (int i = 0; i < 64; i++) {
    callers.emplace_back([&, i] {
      std::mt19937 rng(static_cast<unsigned>(i + 1));
      std::uniform_int_distribution<int> work(4000, 6000);
      std::vector<double> mine, mine_after;
      int64_t shed = 0, degraded = 0, decisions = 0;
      std::string tenant = "caller-" + std::to_string(i);
      while (!stop.load(std::memory_order_relaxed)) {
        auto t0 = Clock::now();
        auto a = fw.admit(tenant);
        double t = seconds_since(start) - warm;
        if (t >= 0) {
          decisions++;
          if (a.decision().degraded || a.decision().failed_open) degraded++;
        }
        if (!a.allowed()) {
          if (t >= 0) shed++;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        box.work(std::chrono::microseconds(work(rng)));
        a.release();
        double ended = seconds_since(start) - warm;
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (ended >= 0) mine.push_back(ms);
        if (halve_to > 0 && ended >= after_from_s) mine_after.push_back(ms);
      }
      std::lock_guard lock(mu);
      out.measured.latencies_ms.insert(out.measured.latencies_ms.end(), mine.begin(), mine.end());
      out.after.latencies_ms.insert(out.after.latencies_ms.end(), mine_after.begin(), mine_after.end());
      out.measured.shed += shed;
      out.measured.not_by_store += degraded;
      out.measured.decisions += decisions;
    });
  }
  bool halved = false;
  while (seconds_since(start) < warm + seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    double t = seconds_since(start) - warm;
    out.limits.push_back({t, limit_of(fw)});
    if (halve_to > 0 && !halved && t >= seconds / 2) {
      box.set(halve_to);
      halved = true;
    }
  }
  stop = true;
  for (auto &c : callers) c.join();
  out.measured.seconds = seconds;
  out.after.seconds = seconds - after_from_s;
  return out;
}

double limit_at(const Run &r, double t) {
  for (auto &[at, l] : r.limits)
    if (at >= t) return l;
  return r.limits.empty() ? 0 : r.limits.back().second;
}

}  // namespace

int main(int argc, char **argv) {
  double seconds = 10;
  std::string markdown, json;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc)
      seconds = std::max(2.0, std::atof(argv[++i]));
    else if (a == "--markdown" && i + 1 < argc)
      markdown = argv[++i];
    else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else {
      std::fprintf(stderr, "usage: adaptive_box [--seconds S] [--markdown FILE] [--json FILE]\n");
      return 2;
    }
  }
  std::printf("adaptive_box: 4 workers, 5 ms +-20%% of work each, 64 callers in a closed loop, %.0f s each\n", seconds);
  struct Contender {
    const char *name, *policy;
    Run run;
  };
  std::vector<Contender> cs = {{"no limiter", "{}", {}},
                               {"adaptive, gradient2 (the default)", R"({"adaptive": {"enabled": true}})", {}},
                               {"adaptive, vegas", R"({"adaptive": {"enabled": true, "algorithm": "vegas"}})", {}}};
  for (auto &c : cs) {
    c.run = run_box(c.policy, 4, seconds);
    std::printf("  %-36s %6.0f/s  p50 %6.1f ms  p99 %6.1f ms  %7.0f 503/s  limit %5.1f\n", c.name,
                c.run.measured.goodput(), c.run.measured.percentile(0.5), c.run.measured.percentile(0.99),
                static_cast<double>(c.run.measured.shed) / seconds, limit_at(c.run, seconds));
  }
  // Capacity halves after `seconds` (of 2 x seconds); the p99 counted from 2 s after it.
  Run halving = run_box(R"({"adaptive": {"enabled": true}})", 4, seconds * 2, 2, seconds + 2);
  double before = limit_at(halving, seconds - 0.1), after2 = limit_at(halving, seconds + 2);
  std::printf(
      "  capacity halved (4 -> 2 workers at %.0f s): limit %.1f before, %.1f 2 s after; p99 from then on "
      "%.1f ms (%.0f/s)\n",
      seconds, before, after2, halving.after.percentile(0.99), halving.after.goodput());

  double base = cs[0].run.measured.goodput();
  std::string md =
      "| contender | goodput | of no limiter's | admitted p50 | admitted p99 | 503/s | limit at the end | not "
      "decided by the store |\n|---|---|---|---|---|---|---|---|\n";
  char line[512];
  for (auto &c : cs) {
    Stats &s = c.run.measured;
    std::snprintf(line, sizeof line, "| %s | %.0f/s | %.1f%% | %.1f ms | %.1f ms | %.0f | %s | %.4f%% |\n", c.name,
                  s.goodput(), 100 * s.goodput() / base, s.percentile(0.5), s.percentile(0.99),
                  static_cast<double>(s.shed) / seconds,
                  limit_at(c.run, seconds) > 0 ? std::to_string(limit_at(c.run, seconds)).substr(0, 5).c_str() : "-",
                  s.decisions ? 100.0 * static_cast<double>(s.not_by_store) / static_cast<double>(s.decisions) : 0.0);
    md += line;
  }
  std::snprintf(line, sizeof line,
                "\nCapacity halved (4 -> 2 workers after %.0f s, gradient2): the limit went from %.1f to %.1f in 2 s; "
                "the admitted requests' p99 from 2 s after the change: %.1f ms at %.0f/s.\n",
                seconds, before, after2, halving.after.percentile(0.99), halving.after.goodput());
  md += line;
  if (!markdown.empty()) std::ofstream(markdown) << md;
  if (!json.empty()) {
    std::ofstream j(json);
    j << "{\"seconds\": " << seconds << ", \"contenders\": [";
    for (size_t i = 0; i < cs.size(); i++) {
      Stats &s = cs[i].run.measured;
      j << (i ? ", " : "") << "{\"name\": \"" << cs[i].name << "\", \"goodput\": " << s.goodput()
        << ", \"p50_ms\": " << s.percentile(0.5) << ", \"p99_ms\": " << s.percentile(0.99)
        << ", \"shed_per_s\": " << static_cast<double>(s.shed) / seconds
        << ", \"limit\": " << limit_at(cs[i].run, seconds) << "}";
    }
    j << "], \"halving\": {\"limit_before\": " << before << ", \"limit_2s_after\": " << after2
      << ", \"p99_ms_after\": " << halving.after.percentile(0.99) << ", \"goodput_after\": " << halving.after.goodput()
      << "}}\n";
  }
  bool ok = cs[1].run.measured.percentile(0.99) < cs[0].run.measured.percentile(0.99);
  if (!ok) std::printf("adaptive_box: the adaptive limit did not lower the p99 latency\n");
  return ok ? 0 : 1;
}
