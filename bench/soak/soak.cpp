// The soak (make soak; packaging/test-soak.sh runs a short one): millions of admits through the C ABI on
// memory:// and then on a throwaway redis-server, with what a real service mixes in: allowed requests,
// rejections (a tenant over its rate, a tenant holding its concurrency slots), slots released, far more
// tenants than the memory store keeps (so that its eviction runs), tenants derived from headers, fleet
// slots, sync fw_admit and fw_admit_async, the formatter, the metrics, and the client's summary written to
// the store for the fleet view (every 0.5 s here, so that its first write, and on Redis the connection it
// opens, come within the warm-up like the other first uses; the default 5 s would put them after it).
//
// It samples the resident set (/proc/self/statm) and the open descriptors (/proc/self/fd) every second
// and at every 2% of a phase's admits (a short phase may take less than a second). After a warm-up, the
// first 20% of a phase's admits, in which pools, tables and malloc's arenas reach their size, it fails
// (exit 1, saying which) when RSS grows more than 5% above its level at the end of the warm-up, when the
// descriptors grow at all, or when freeing the client does not give back every descriptor it opened.
// On the redis-server it starts, the warm-up includes an outage (the server stopped by SIGSTOP from 5% to
// 10% of the admits): the local fallback decides and its table reaches its size before the level is
// taken, so that a machine slow enough to miss deadlines later (a CI machine running other suites) does
// not show the fallback's first use as growth, and the fallback's own path is soaked too.
//
//   floodwall_soak [--memory N] [--redis N] [--redis-url redis://host:port/db]
//
// Defaults: 10,000,000 admits on memory://, 2,000,000 on Redis. Without --redis-url it starts
// redis-server on a free port (PATH), and stops it by its pid at the end.
#include <dirent.h>
#include <fcntl.h>
#include <floodwall.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

long rss_kib() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// Open descriptors, not counting the one this count itself opens.
int open_fds() {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;
}

// ------------------------------------------------------------------------------- throwaway Redis

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool redis_pongs(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 && write(fd, "PING\r\n", 6) == 6) {
    char buf[16] = {};
    ok = read(fd, buf, sizeof buf - 1) > 0 && std::strncmp(buf, "+PONG", 5) == 0;
  }
  close(fd);
  return ok;
}

// redis-server on a free port; it dies with this process even if this one is killed (PDEATHSIG).
pid_t start_redis(int port) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Its start-up banner and warnings are not the soak's output; a failure to start is reported below.
    if (int null = open("/dev/null", O_WRONLY); null >= 0) dup2(null, STDOUT_FILENO);
    std::string p = std::to_string(port);
    execlp("redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly",
           "no", "--loglevel", "warning", static_cast<char *>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 400; i++) {
    if (redis_pongs(port)) return pid;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::fprintf(stderr, "soak: redis-server did not start on port %d (is Debian's redis-server installed?)\n", port);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::exit(1);
}

void stop_redis(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// ----------------------------------------------------------------------------------------- phase

struct Sample {
  uint64_t admits;
  double t;
  long rss;
  int fds;
};

// Updated from the store's I/O thread too (async callbacks).
struct Tally {
  std::atomic<uint64_t> allowed{0}, rate{0}, concurrency{0}, shed{0}, degraded{0}, errors{0};
  std::atomic<int> inflight{0};
  fw_client *client = nullptr;

  void count(int status, const fw_decision &d) {
    if (status != FW_OK) {
      errors.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (d.degraded || d.failed_open) degraded.fetch_add(1, std::memory_order_relaxed);
    if (d.allowed)
      allowed.fetch_add(1, std::memory_order_relaxed);
    else if (d.limiter == FW_LIMITER_REQUEST_RATE)
      rate.fetch_add(1, std::memory_order_relaxed);
    else if (d.limiter == FW_LIMITER_CONCURRENCY)
      concurrency.fetch_add(1, std::memory_order_relaxed);
    else
      shed.fetch_add(1, std::memory_order_relaxed);
  }
};

void on_async(void *payload, int status, const fw_decision *d) {
  auto *t = static_cast<Tally *>(payload);
  t->count(status, *d);
  fw_release(t->client, d->ticket);  // the request ended: its slots go back (callbacks may release)
  t->inflight.fetch_sub(1, std::memory_order_release);
  t->inflight.notify_one();
}

// Admits waiting on Redis at once: enough to pipeline, few enough to stay inside the deadline.
constexpr int kMaxInflight = 256;
constexpr int kNormalTenants = 50'000;  // ten times max_tenants: the memory store keeps evicting
constexpr size_t kBusyHolds = 4;        // the busy tenant's concurrency limit: it holds all of them

struct Result {
  bool ok = true;
  std::string why;
};

// pause: a redis-server to stop during the warm-up (-1: none).
Result run_phase(const char *name, const std::string &store, uint64_t admits, pid_t pause = -1) {
  std::string policy = R"({"store": ")" + store + R"(", "max_tenants": 5000,
    "request_rate": {"rate": 1000, "burst": 1000, "overrides": {"hot": {"rate": 1, "burst": 5}, "busy": {"rate": 1000000, "burst": 1000000}}},
    "concurrency": {"limit": 4}, "fleet": {"capacity": 100000},
    "tenant": {"from": ["x-api-key", "ip"]}, "summary": {"period_s": 0.5}})";
  int fds_before = open_fds();
  Tally tally;
  if (fw_client_new(&tally.client, policy.c_str()) != FW_OK) {
    std::fprintf(stderr, "soak: fw_client_new: %s\n", fw_error_last()->message);
    std::exit(1);
  }
  fw_client *c = tally.client;
  std::vector<Sample> samples;
  std::deque<fw_ticket> busy;  // the concurrency-limited tenant's held slots, released oldest first
  const char *routes[] = {"/v1/routes", "/v1/analytics", ""};
  char tenant[32], api_key[32];
  const uint64_t every = std::max<uint64_t>(1, admits / 50);
  auto t0 = Clock::now();
  double next_sample = 0;
  auto sample = [&](uint64_t n) {
    fw_buf m = FW_BUF_INIT;  // the metrics, as a scrape would read them (its first use allocates: in the warm-up)
    fw_metrics_json(c, &m);
    fw_buf_dispose(&m);
    samples.push_back({n, seconds_since(t0), rss_kib(), open_fds()});
  };
  sample(0);

  for (uint64_t i = 0; i < admits; i++) {
    if (pause > 0 && i == admits / 20) kill(pause, SIGSTOP);
    if (pause > 0 && i == admits / 10) {
      kill(pause, SIGCONT);
      // Back to Redis before going on: the breaker lets a probe through once it has been open a while.
      auto until = Clock::now() + std::chrono::seconds(30);
      for (bool back = false; !back && Clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        fw_request probe = FW_REQUEST_INIT;
        probe.tenant = "probe";
        probe.tenant_len = 5;
        fw_decision d = FW_DECISION_INIT;
        back = fw_admit(c, &probe, &d) == FW_OK && !d.degraded && !d.failed_open;
        fw_release(c, d.ticket);
      }
    }
    fw_request req = FW_REQUEST_INIT;
    fw_header header{"X-API-Key", 9, api_key, 0};
    req.route = routes[i % 3];
    req.critical = (i & 1) != 0;  // the others take a fleet slot
    enum { normal, hot, holder } kind = i % 10 == 3 ? hot : i % 10 == 7 ? holder : normal;
    if (kind == hot) {
      req.tenant = "hot";  // 1 token/s: nearly every request is a 429 from the request rate
      req.tenant_len = 3;
    } else if (kind == holder) {
      req.tenant = "busy";  // holds its 4 slots: a 429 from concurrency until it releases one (its rate is no limit)
      req.tenant_len = 4;
    } else if (i % 16 == 5) {
      // Derived from the request: the header's key, which the app's verify hook vouched for, hashed by the core.
      header.value_len = static_cast<size_t>(
          std::snprintf(api_key, sizeof api_key, "sk_%llu", static_cast<unsigned long long>(i * 31 % kNormalTenants)));
      req.headers = &header;
      req.header_count = 1;
      req.peer = "198.51.100.7";
      req.peer_len = 12;
      req.credential = FW_CREDENTIAL_VERIFIED;
    } else {
      int n = std::snprintf(tenant, sizeof tenant, "tenant-%llu",
                            static_cast<unsigned long long>(i * 7919 % kNormalTenants));
      req.tenant = tenant;
      req.tenant_len = static_cast<size_t>(n);
    }

    if (kind == holder || i % 4 == 0) {
      fw_decision d = FW_DECISION_INIT;
      int rc = fw_admit(c, &req, &d);
      tally.count(rc, d);
      if (rc == FW_OK && !d.allowed && i % 97 == 0) {
        // A rejection answered as a middleware would: headers and body, built and freed.
        fw_response r = FW_RESPONSE_INIT;
        fw_format_response(c, &d, &r);
        fw_response_dispose(&r);
      }
      if (kind == holder) {
        if (d.ticket) busy.push_back(d.ticket);
        if (busy.size() >= kBusyHolds && i % 3 == 0) {  // now and then one of its requests ends
          fw_release(c, busy.front());
          busy.pop_front();
        }
      } else {
        fw_release(c, d.ticket);
      }
    } else {
      // Async: wait while kMaxInflight are out (the memory store calls back inline, so never there).
      for (int v = tally.inflight.load(std::memory_order_acquire); v >= kMaxInflight;
           v = tally.inflight.load(std::memory_order_acquire))
        tally.inflight.wait(v);
      tally.inflight.fetch_add(1, std::memory_order_relaxed);
      if (fw_admit_async(c, &req, on_async, &tally) != FW_OK) {
        tally.inflight.fetch_sub(1, std::memory_order_relaxed);
        tally.errors.fetch_add(1, std::memory_order_relaxed);
      }
    }

    if ((i + 1) % every == 0) {
      sample(i + 1);
    } else if ((i & 1023) == 0 && seconds_since(t0) >= next_sample) {
      sample(i);
      next_sample = samples.back().t + 1.0;
    }
  }
  for (int v = tally.inflight.load(std::memory_order_acquire); v > 0;
       v = tally.inflight.load(std::memory_order_acquire))
    tally.inflight.wait(v);
  double elapsed = seconds_since(t0);
  sample(admits);
  for (fw_ticket t : busy) fw_release(c, t);
  fw_client_free(c);
  int fds_after = open_fds();

  // After the warm-up: the first sample at or beyond 20% of the admits is the level to hold.
  size_t warm = 0;
  while (warm + 1 < samples.size() && samples[warm].admits < admits / 5) warm++;
  const Sample &base = samples[warm];
  long rss_max = base.rss;
  int fds_max = base.fds;
  for (size_t k = warm; k < samples.size(); k++) {
    rss_max = std::max(rss_max, samples[k].rss);
    fds_max = std::max(fds_max, samples[k].fds);
  }
  double growth = base.rss > 0 ? 100.0 * static_cast<double>(rss_max - base.rss) / static_cast<double>(base.rss) : 0;

  std::printf("soak %s: %llu admits in %.1f s, %.0f admits/s\n", name, static_cast<unsigned long long>(admits), elapsed,
              static_cast<double>(admits) / elapsed);
  std::printf(
      "  allowed %llu, 429 request_rate %llu, 429 concurrency %llu, 503 %llu, degraded or failed open %llu, "
      "errors %llu\n",
      static_cast<unsigned long long>(tally.allowed.load()), static_cast<unsigned long long>(tally.rate.load()),
      static_cast<unsigned long long>(tally.concurrency.load()), static_cast<unsigned long long>(tally.shed.load()),
      static_cast<unsigned long long>(tally.degraded.load()), static_cast<unsigned long long>(tally.errors.load()));
  std::printf("  rss KiB: start %ld, after warm-up (%llu admits) %ld, max after %ld (%+.1f%%), end %ld; %zu samples\n",
              samples.front().rss, static_cast<unsigned long long>(base.admits), base.rss, rss_max, growth,
              samples.back().rss, samples.size());
  std::printf("  fds: before the client %d, after warm-up %d, max after %d, after fw_client_free %d\n", fds_before,
              base.fds, fds_max, fds_after);
  std::printf("  series (admits: rss KiB / fds):");
  size_t step = std::max<size_t>(1, samples.size() / 12);
  for (size_t k = 0; k < samples.size(); k += step)
    std::printf(" %.1fM: %ld/%d", static_cast<double>(samples[k].admits) / 1e6, samples[k].rss, samples[k].fds);
  std::printf("\n");

  Result r;
  char why[256];
  if (growth > 5.0) {
    std::snprintf(why, sizeof why, "%s: RSS grew %.1f%% after the warm-up (%ld -> %ld KiB; the limit is 5%%)", name,
                  growth, base.rss, rss_max);
    r = {false, why};
  } else if (fds_max > base.fds) {
    std::snprintf(why, sizeof why, "%s: open fds grew after the warm-up (%d -> %d)", name, base.fds, fds_max);
    r = {false, why};
  } else if (fds_after != fds_before) {
    std::snprintf(why, sizeof why, "%s: fw_client_free left %d fds open (%d before the client, %d after)", name,
                  fds_after - fds_before, fds_before, fds_after);
    r = {false, why};
  } else if (tally.errors.load() > 0) {
    std::snprintf(why, sizeof why, "%s: %llu admits returned an error", name,
                  static_cast<unsigned long long>(tally.errors.load()));
    r = {false, why};
  } else if (tally.rate.load() == 0 || tally.concurrency.load() == 0) {
    std::snprintf(why, sizeof why, "%s: the mix did not happen (no request-rate or no concurrency rejection)", name);
    r = {false, why};
  }
  std::printf("  %s\n", r.ok ? "passed" : ("FAILED: " + r.why).c_str());
  std::fflush(stdout);
  return r;
}

uint64_t count_arg(const char *flag, const char *v) {
  char *end = nullptr;
  unsigned long long n = v ? std::strtoull(v, &end, 10) : 0;
  if (!v || *end != '\0') {
    std::fprintf(stderr, "soak: %s wants a number of admits\n", flag);
    std::exit(2);
  }
  return n;
}

}  // namespace

int main(int argc, char **argv) {
  uint64_t memory_admits = 10'000'000, redis_admits = 2'000'000;
  std::string redis_url;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--memory") {
      memory_admits = count_arg("--memory", v);
      i++;
    } else if (a == "--redis") {
      redis_admits = count_arg("--redis", v);
      i++;
    } else if (a == "--redis-url" && v) {
      redis_url = v;
      i++;
    } else {
      std::fprintf(stderr, "usage: floodwall_soak [--memory N] [--redis N] [--redis-url redis://host:port/db]\n");
      return 2;
    }
  }
  // Started before any client exists, so that no floodwall thread is running at the fork.
  pid_t redis_pid = -1;
  if (redis_admits > 0 && redis_url.empty()) {
    int port = free_port();
    redis_pid = start_redis(port);
    redis_url = "redis://127.0.0.1:" + std::to_string(port) + "/0";
    std::printf("soak: redis-server pid %d on port %d\n", static_cast<int>(redis_pid), port);
  }
  std::vector<std::string> failures;
  if (memory_admits > 0) {
    Result r = run_phase("memory://", "memory://", memory_admits);
    if (!r.ok) failures.push_back(r.why);
  }
  if (redis_admits > 0) {
    Result r = run_phase(redis_url.c_str(), redis_url, redis_admits, redis_pid);
    if (!r.ok) failures.push_back(r.why);
  }
  stop_redis(redis_pid);
  for (const auto &f : failures) std::printf("soak: FAILED: %s\n", f.c_str());
  if (failures.empty()) std::printf("soak: passed: RSS within 5%% after the warm-up and no fd growth\n");
  return failures.empty() ? 0 : 1;
}
