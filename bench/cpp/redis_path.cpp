// redis_path - the first figures of floodwall's Redis path, side by side with the seed's reference
// design, in one run:
//   redis     floodwall admits/s and p50/p99 through the C ABI (fw_admit, one shared client) against the
//             seed's design (a blocking hiredis connection per caller thread, EVAL of the seed script with
//             two keys on every request; and the same by EVALSHA, as a careful user runs it), at several
//             caller counts, alternating contenders, in rounds
//   tls       the same floodwall admit path over TLS (rediss://, the redis-server's --tls-port, verified
//             against --tls-ca) beside plain TCP (redis://) on the same server, at 1, 16 and 64 callers,
//             alternating the two in every round: decisions/s, p99 and the ratios TLS / plain
//   cluster   the same floodwall admit path over a Redis Cluster of 3 masters (redis+cluster://, seeded with
//             --cluster-ports) beside the single node (--port), many tenants, at 1, 4, 16 and 64 callers,
//             alternating the two in every round: decisions/s, p99, the share not answered by the store,
//             and each master's CPU per decision (--cluster-pids)
//   rules     the price of several limits: a tenant with 3 request_rate.limits and 1 month quota that all
//             apply to the request (one script call with its bucket) against its bucket alone, at 1, 4 and 16
//             callers on one redis-server, many tenants, alternating in every round: decisions/s, the share
//             not answered by Redis, the redis-server's CPU per decision; and the script alone, pipelined
//             from one connection set (no client work), with and without the rules
//   ceiling   redis-benchmark EVAL "return 1" 0 with N connections: what Redis itself allows, at the
//             same concurrency (one request in flight per connection, as N callers each waiting for
//             their reply) and pipelined 16 deep
//   embedded  ns per admit + release on the memory store, one and two threads (and two's rate / one's)
//   memory    Redis bytes per tenant after N tenants: floodwall's layout against the seed's two keys
//   failopen  admit latency with Redis blackholed (SIGSTOP), before the breaker opens and after
//   outage    4 processes x 8 threads on one tenant, Redis SIGSTOPped for 2 s mid-run: who decided,
//             what was admitted against the documented bound, and the p99 admit latency
//   hot       4 processes x 8 threads on one hot tenant (rate 5,000, burst 500) for 3 s, with leases and
//             without (today's behaviour, the baseline) in the same run, and both again with a
//             concurrency limit of 20: decisions per Redis command, admitted against burst + rate x
//             time, decisions per second, the most ever in flight
//
// Every floodwall client runs the shipped default policy (deadline, breaker, fallback); beside every
// throughput is the share of decisions that Redis did not answer (the fallback decided them).
//
// Figures are printed, written as JSON (--json) and as a Markdown fragment (--markdown). bench/run.sh
// starts the throwaway redis-server (plain and TLS, with a throwaway CA) and a throwaway Redis Cluster of 3
// masters, and passes --port, --tls-port, --tls-ca, --redis-pid, --cluster-ports and --cluster-pids.
#include <floodwall.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef FW_BENCH_LUA_DIR
#define FW_BENCH_LUA_DIR "lua"
#endif
#ifndef FW_BENCH_SEED_LUA
#define FW_BENCH_SEED_LUA "bench/seed/request_rate_limiter.lua"
#endif

namespace {

// ------------------------------------------------------------------------------------------ options

struct Options {
  int port = 0;
  int tls_port = 0;    // the same redis-server's --tls-port (the tls section)
  std::string tls_ca;  // the CA that signed its certificate (redis.tls.ca_file)
  pid_t redis_pid = 0;
  std::vector<int> callers = {1, 16, 64, 256};
  double seconds = 2;
  int rounds = 5;
  int tenants = 1000;  // the pool every caller rotates over (both contenders)
  int memory_tenants = 100000;
  std::vector<int> tls_callers = {1, 16, 64};  // of the tls section
  std::vector<int> cluster_ports;              // the cluster's masters (the cluster section), its seeds
  std::vector<pid_t> cluster_pids;             // their redis-servers, for the CPU per decision
  std::vector<int> cluster_callers = {1, 4, 16, 64};
  std::vector<int> rules_callers = {1, 4, 16};  // of the rules section
  double rules_seconds = 1.5;                   // its runs are shorter and fewer: the section stays under a minute
  int rules_rounds = 3;
  std::vector<std::string> sections = {"redis", "ceiling", "tls",      "cluster", "rules", "embedded",
                                       "shm",   "memory",  "failopen", "outage",  "hot"};
  std::vector<std::string> contenders = {"floodwall", "seed",
                                         "seed-sha"};  // of the redis section (one alone, to profile it)
  std::string seed_script = FW_BENCH_SEED_LUA;
  std::string json_path, markdown_path;
};

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void usage(const char *why) {
  std::fprintf(
      stderr,
      "redis_path: %s\n"
      "usage: redis_path --port P [--tls-port P --tls-ca FILE] [--redis-pid PID] [--callers 1,16,64,256]\n"
      "                  [--cluster-ports P1,P2,P3 [--cluster-pids PID1,PID2,PID3]] [--cluster-callers "
      "1,4,16,64]\n"
      "                  [--seconds 2] [--rounds 3] [--tenants 1000] [--memory-tenants 100000]\n"
      "                  [--rules-callers 1,4,16] [--rules-seconds 1.5] [--rules-rounds 3]\n"
      "                  [--sections redis,ceiling,tls,cluster,rules,embedded,shm,memory,failopen,outage,hot]\n"
      "                  [--contenders floodwall,seed,seed-sha] [--seed-script FILE] [--json FILE] [--markdown FILE]\n",
      why);
  std::exit(2);
}

Options parse_options(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    std::string v = argv[++i];
    try {
      if (flag == "--port")
        o.port = std::stoi(v);
      else if (flag == "--tls-port")
        o.tls_port = std::stoi(v);
      else if (flag == "--tls-ca")
        o.tls_ca = v;
      else if (flag == "--redis-pid")
        o.redis_pid = static_cast<pid_t>(std::stol(v));
      else if (flag == "--seconds")
        o.seconds = std::stod(v);
      else if (flag == "--rounds")
        o.rounds = std::stoi(v);
      else if (flag == "--tenants")
        o.tenants = std::stoi(v);
      else if (flag == "--memory-tenants")
        o.memory_tenants = std::stoi(v);
      else if (flag == "--rules-seconds")
        o.rules_seconds = std::stod(v);
      else if (flag == "--rules-rounds")
        o.rules_rounds = std::stoi(v);
      else if (flag == "--seed-script")
        o.seed_script = v;
      else if (flag == "--json")
        o.json_path = v;
      else if (flag == "--markdown")
        o.markdown_path = v;
      else if (flag == "--sections")
        o.sections = split(v);
      else if (flag == "--contenders")
        o.contenders = split(v);
      else if (flag == "--callers") {
        o.callers.clear();
        for (const auto &c : split(v)) o.callers.push_back(std::stoi(c));
      } else if (flag == "--cluster-ports") {
        o.cluster_ports.clear();
        for (const auto &c : split(v)) o.cluster_ports.push_back(std::stoi(c));
      } else if (flag == "--cluster-pids") {
        o.cluster_pids.clear();
        for (const auto &c : split(v)) o.cluster_pids.push_back(static_cast<pid_t>(std::stol(c)));
      } else if (flag == "--cluster-callers") {
        o.cluster_callers.clear();
        for (const auto &c : split(v)) o.cluster_callers.push_back(std::stoi(c));
      } else if (flag == "--rules-callers") {
        o.rules_callers.clear();
        for (const auto &c : split(v)) o.rules_callers.push_back(std::stoi(c));
      } else
        usage(("unknown flag " + flag).c_str());
    } catch (const std::logic_error &) {
      usage(("bad value for " + flag).c_str());
    }
  }
  if (o.rounds < 1 || o.seconds <= 0 || o.tenants < 1 || o.memory_tenants < 1 || o.rules_rounds < 1 ||
      o.rules_seconds <= 0)
    usage("bad numbers");
  return o;
}

bool wants(const Options &o, const std::string &section) {
  return std::find(o.sections.begin(), o.sections.end(), section) != o.sections.end();
}

// --------------------------------------------------------------------------------------- helpers

int64_t now_ns() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

// CPU time (user + system) of this process, all threads (the callers and floodwall's I/O thread), in us.
double process_cpu_us() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// CPU time of another process (the redis-server), from /proc/<pid>/stat; -1 when unknown.
double other_cpu_us(pid_t pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; i++) {  // field 3 is the state; 14 utime, 15 stime (clock ticks)
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  return (utime + stime) * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU time of the calling thread, in ns.
int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

pid_t g_redis_pid = 0;  // for the CPU accounting of the Redis runs

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The q-quantile of sorted samples (nearest rank).
double quantile(const std::vector<int64_t> &sorted, double q) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::min(sorted.size() - 1, i == 0 ? 0 : i - 1)]);
}

std::string num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Thousands separators for a Markdown reader: 123456 -> 123,456.
std::string grouped(double v) {
  std::string digits = std::to_string(std::llabs(std::llround(v))), out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); i++) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string tenant_name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "tenant-%06d", i);
  return buf;
}

std::string read_text(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fw_client *new_client(const std::string &policy) {
  fw_client *c = nullptr;
  if (fw_client_new(&c, policy.c_str()) != FW_OK) {
    const fw_error *e = fw_error_last();
    throw std::runtime_error("fw_client_new: " + std::string(e ? e->message : "?") + "\npolicy: " + policy);
  }
  return c;
}

std::string redis_url(const Options &o) {
  return "redis://127.0.0.1:" + std::to_string(o.port) + "/0";
}

// A blocking hiredis connection for the seed's callers and for the harness's own commands.
redisContext *connect_port(int port) {
  redisContext *ctx = redisConnect("127.0.0.1", port);
  if (!ctx || ctx->err)
    throw std::runtime_error("cannot connect to redis on port " + std::to_string(port) + ": " +
                             (ctx ? ctx->errstr : "out of memory"));
  return ctx;
}

redisContext *connect(const Options &o) {
  return connect_port(o.port);
}

struct Conn {
  redisContext *ctx;
  explicit Conn(const Options &o) : ctx(connect(o)) {}
  explicit Conn(int port) : ctx(connect_port(port)) {}
  ~Conn() { redisFree(ctx); }
  Conn(const Conn &) = delete;
  Conn &operator=(const Conn &) = delete;

  // Runs a command given as separate arguments; throws on a transport or Redis error.
  std::string run(std::initializer_list<std::string> args) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) throw std::runtime_error(std::string("redis: ") + ctx->errstr);
    std::string out;
    if (r->type == REDIS_REPLY_ERROR) {
      std::string e(r->str, r->len);
      freeReplyObject(r);
      throw std::runtime_error("redis: " + e);
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
      out.assign(r->str, r->len);
    else if (r->type == REDIS_REPLY_INTEGER)
      out = std::to_string(r->integer);
    freeReplyObject(r);
    return out;
  }

  long long used_memory() {
    std::string info = run({"INFO", "memory"});
    auto at = info.find("used_memory:");
    if (at == std::string::npos) throw std::runtime_error("INFO memory has no used_memory");
    return std::stoll(info.substr(at + 12));
  }
  long long dbsize() { return std::stoll(run({"DBSIZE"})); }
};

// ------------------------------------------------------------------------------ the caller harness

// What one caller saw during a run. Latencies are kept whole (a run is a few hundred thousand calls)
// so that the percentiles are exact.
struct Tally {
  uint64_t ops = 0, failed_open = 0, rejected = 0, errors = 0, not_store = 0;
  std::vector<int64_t> lat_ns;
};

// fallback: allowed, but decided by redis.fallback (the local table) rather than by Redis.
enum Outcome { ok, failed_open, rejected, error, fallback };

struct RunStats {
  double ops_per_s = 0, p50_us = 0, p99_us = 0;
  // CPU per call: the benchmark process (callers + floodwall's I/O thread) and the redis-server. On a
  // shared 2-core box they say what each call costs even when the wall clock is disturbed.
  double client_cpu_us = 0, redis_cpu_us = -1;
  uint64_t ops = 0, failed_open = 0, rejected = 0, errors = 0;
  uint64_t not_store = 0;  // decisions Redis did not answer (failed open or decided by the fallback)
  // CPU per call of each redis-server drive() was given (the cluster's masters); redis_cpu_us is their sum.
  std::vector<double> server_cpu_us;
  // not_store by fw_fail_reason, where the section counts it (the cluster section).
  std::array<uint64_t, FW_FAIL_CLUSTER + 1> by_reason{};
  double not_store_share() const { return ops ? static_cast<double>(not_store) / static_cast<double>(ops) : 0; }
};

// Runs `callers` threads for `seconds`; each calls make(thread)(i) in a loop, which does one request
// and says how it went. Thread setup (connections) happens before the clock starts. The redis-server CPU
// is that of `servers` (summed; each in server_cpu_us), or of --redis-pid when there are none.
RunStats drive(int callers, double seconds, const std::function<std::function<Outcome(uint64_t)>(int)> &make,
               const std::vector<pid_t> &servers = {}) {
  const std::vector<pid_t> pids = servers.empty() ? std::vector<pid_t>{g_redis_pid} : servers;
  std::vector<Tally> tallies(static_cast<size_t>(callers));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; t++) {
    threads.emplace_back([&, t] {
      auto call = make(t);
      Tally &tally = tallies[static_cast<size_t>(t)];
      tally.lat_ns.reserve(1 << 15);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); i++) {
        int64_t t0 = now_ns();
        Outcome o = call(i);
        tally.lat_ns.push_back(now_ns() - t0);
        tally.ops++;
        if (o == failed_open) tally.failed_open++;
        if (o == failed_open || o == fallback) tally.not_store++;
        if (o == rejected) tally.rejected++;
        if (o == error) tally.errors++;
      }
    });
  }
  while (ready.load() < callers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<double> redis0, redis1;
  for (pid_t pid : pids) redis0.push_back(other_cpu_us(pid));
  double cpu0 = process_cpu_us();
  int64_t t0 = now_ns();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto &th : threads) th.join();
  int64_t elapsed = now_ns() - t0;
  double cpu1 = process_cpu_us();
  for (pid_t pid : pids) redis1.push_back(other_cpu_us(pid));

  RunStats s;
  std::vector<int64_t> all;
  for (auto &t : tallies) {
    s.ops += t.ops;
    s.failed_open += t.failed_open;
    s.not_store += t.not_store;
    s.rejected += t.rejected;
    s.errors += t.errors;
    all.insert(all.end(), t.lat_ns.begin(), t.lat_ns.end());
  }
  std::sort(all.begin(), all.end());
  s.ops_per_s = static_cast<double>(s.ops) * 1e9 / static_cast<double>(elapsed);
  s.p50_us = quantile(all, 0.50) / 1e3;
  s.p99_us = quantile(all, 0.99) / 1e3;
  if (s.ops) {
    s.client_cpu_us = (cpu1 - cpu0) / static_cast<double>(s.ops);
    double sum = 0;
    bool known = true;
    for (size_t k = 0; k < pids.size(); k++) {
      bool this_one = redis0[k] >= 0 && redis1[k] >= 0;
      double per = this_one ? (redis1[k] - redis0[k]) / static_cast<double>(s.ops) : -1;
      known = known && this_one;
      s.server_cpu_us.push_back(per);
      sum += per;
    }
    if (known) s.redis_cpu_us = sum;
  }
  return s;
}

// --------------------------------------------------------------------------------- the contenders

// floodwall's policy on the Redis at `url`: a bucket that never rejects, so every admit is one full round
// trip of the real script. The Redis options are the shipped defaults, plus `redis` (a JSON object) when
// it is not empty: the tls section adds redis.tls.ca_file and nothing else.
std::string fw_policy_at(const std::string &url, const std::string &redis = "") {
  return R"({"store": ")" + url + R"(", )" + (redis.empty() ? std::string() : R"("redis": )" + redis + ", ") +
         R"("request_rate": {"rate": 1000000, "burst": 1000000}})";
}

std::string fw_redis_policy(const Options &o) {
  return fw_policy_at(redis_url(o));
}

// Decisions not answered by the store, by fw_fail_reason (a run's, counted by its callers).
using ReasonCounts = std::array<std::atomic<uint64_t>, FW_FAIL_CLUSTER + 1>;

// One request through floodwall's C ABI, on a client shared by every caller; each decision the store did
// not answer counted by its reason in `reasons` when given.
std::function<Outcome(uint64_t)> floodwall_caller(fw_client *client, const std::vector<std::string> &tenants, int t,
                                                  ReasonCounts *reasons = nullptr) {
  return [client, &tenants, t, reasons](uint64_t i) {
    const std::string &tenant = tenants[(static_cast<size_t>(t) * 131 + i) % tenants.size()];
    fw_request rq = FW_REQUEST_INIT;
    rq.tenant = tenant.data();
    rq.tenant_len = tenant.size();
    fw_decision d = FW_DECISION_INIT;
    if (fw_admit(client, &rq, &d) != FW_OK) return error;
    if (reasons && (d.failed_open || d.degraded || d.fail_reason != FW_FAIL_NONE))
      (*reasons)[std::min<size_t>(static_cast<size_t>(d.fail_reason), reasons->size() - 1)].fetch_add(
          1, std::memory_order_relaxed);
    if (d.failed_open) return failed_open;
    if (d.degraded || d.fail_reason != FW_FAIL_NONE) return fallback;
    return d.allowed ? ok : rejected;
  };
}

// {"timeout": 12, "breaker": 3400, ...} of a run's by_reason (every reason but none).
std::string reasons_json(const RunStats &s) {
  std::string out = "{";
  for (size_t k = 1; k < s.by_reason.size(); k++)
    out += (k > 1 ? ", \"" : "\"") + std::string(fw_fail_reason_name(static_cast<fw_fail_reason>(k))) +
           "\": " + std::to_string(s.by_reason[k]);
  return out + "}";
}

// "timeout 12, breaker 3400" of a run's by_reason; empty when the store answered every decision.
std::string reasons_text(const RunStats &s) {
  std::string out;
  for (size_t k = 0; k < s.by_reason.size(); k++)
    if (s.by_reason[k])
      out += (out.empty() ? "" : ", ") + std::string(fw_fail_reason_name(static_cast<fw_fail_reason>(k))) + " " +
             std::to_string(s.by_reason[k]);
  return out;
}

// The seed's reference design: this caller's own blocking connection, EVAL of the script text with the
// tenant's two keys, `now` from this machine's clock in whole seconds; or EVALSHA of the script's SHA (`sha`
// not empty: loaded once before the run), as a careful user runs it.
struct SeedCaller {
  const Options &o;
  const std::string &script;
  std::string sha;
  const std::vector<std::string> &tenants;
  std::string rate, capacity;
  std::vector<std::string> tokens_keys, timestamp_keys;
  redisContext *ctx = nullptr;

  SeedCaller(const Options &opt, const std::string &s, const std::vector<std::string> &ts, int64_t r, int64_t cap)
      : o(opt), script(s), tenants(ts), rate(std::to_string(r)), capacity(std::to_string(cap)) {
    for (const auto &user : tenants) {
      tokens_keys.push_back("request_rate_limiter." + user + ".tokens");
      timestamp_keys.push_back("request_rate_limiter." + user + ".timestamp");
    }
    ctx = connect(o);
  }
  ~SeedCaller() { redisFree(ctx); }
  SeedCaller(const SeedCaller &) = delete;
  SeedCaller &operator=(const SeedCaller &) = delete;

  Outcome call(size_t k) {
    char now[24];
    auto end = std::to_chars(now, now + sizeof now, static_cast<long long>(std::time(nullptr))).ptr;
    const bool by_sha = !sha.empty();
    const std::string &body = by_sha ? sha : script;
    const char *argv[] = {by_sha ? "EVALSHA" : "EVAL",
                          body.data(),
                          "2",
                          tokens_keys[k].data(),
                          timestamp_keys[k].data(),
                          rate.data(),
                          capacity.data(),
                          now,
                          "1"};
    size_t lens[] = {by_sha ? size_t{7} : size_t{4},
                     body.size(),
                     1,
                     tokens_keys[k].size(),
                     timestamp_keys[k].size(),
                     rate.size(),
                     capacity.size(),
                     static_cast<size_t>(end - now),
                     1};
    auto *r = static_cast<redisReply *>(redisCommandArgv(ctx, 9, argv, lens));
    if (!r) return error;
    Outcome out = error;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1)
      out = r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1 ? ok : rejected;
    freeReplyObject(r);
    return out;
  }
};

// ------------------------------------------------------------------------------------ the results

struct RedisRow {
  int callers = 0;
  std::vector<RunStats> fw, seed, seed_sha;  // seed: by EVAL of its text; seed_sha: by EVALSHA
  // redis-benchmark, one per round: EVAL "return 1" 0, and the two scripts alone, pipelined 16 deep;
  // and EVAL "return 1" 0 at the callers' own concurrency (one request in flight per connection).
  std::vector<double> ceiling, fw_script_ceiling, seed_script_ceiling, ceiling_n;
  std::vector<double> ceiling_cpu, fw_script_cpu, seed_script_cpu;  // redis-server CPU per call, us
  RunStats fw_median() const { return med(fw); }
  // floodwall / seed, the median of the rounds' own ratios: the two runs of a round are seconds apart,
  // so drift in what else the box is doing cancels out better than in a ratio of medians.
  double ratio() const { return ratio_to(seed); }
  double ratio_sha() const { return ratio_to(seed_sha); }  // floodwall / the seed by EVALSHA
  double ratio_to(const std::vector<RunStats> &other) const {
    std::vector<double> r;
    for (size_t i = 0; i < fw.size() && i < other.size(); i++)
      if (other[i].ops_per_s > 0) r.push_back(fw[i].ops_per_s / other[i].ops_per_s);
    return median(r);
  }
  RunStats seed_median() const { return med(seed); }
  RunStats seed_sha_median() const { return med(seed_sha); }
  static RunStats med(const std::vector<RunStats> &v) {
    RunStats m;
    std::vector<double> a, b, c, d, e;
    std::vector<std::vector<double>> servers;
    for (const auto &s : v) {
      a.push_back(s.ops_per_s);
      b.push_back(s.p50_us);
      c.push_back(s.p99_us);
      d.push_back(s.client_cpu_us);
      e.push_back(s.redis_cpu_us);
      if (servers.size() < s.server_cpu_us.size()) servers.resize(s.server_cpu_us.size());
      for (size_t k = 0; k < s.server_cpu_us.size(); k++) servers[k].push_back(s.server_cpu_us[k]);
      m.ops += s.ops;
      m.failed_open += s.failed_open;
      m.not_store += s.not_store;
      m.rejected += s.rejected;
      m.errors += s.errors;
      for (size_t k = 0; k < m.by_reason.size(); k++) m.by_reason[k] += s.by_reason[k];
    }
    m.ops_per_s = median(a);
    m.p50_us = median(b);
    m.p99_us = median(c);
    m.client_cpu_us = median(d);
    m.redis_cpu_us = median(e);
    for (const auto &k : servers) m.server_cpu_us.push_back(median(k));
    return m;
  }
};

struct EmbeddedResult {
  double ns_one = 0, ns_two_per_thread = 0, decisions_per_s_two = 0;  // wall clock
  double cpu_ns_one = 0, cpu_ns_two_per_thread = 0;                   // the threads' own CPU time
  double decisions_per_s_one = 0, two_over_one = 0;                   // the scaling: 2 threads' rate / 1's
};

struct MemoryResult {
  int tenants = 0;
  long long fw_bytes = 0, seed_bytes = 0, fw_keys = 0, seed_keys = 0;
  long long fw_key_usage = 0, seed_key_usage = 0;  // MEMORY USAGE of one tenant's keys
  std::string fw_sample_key;
};

struct FailOpenResult {
  int deadline = 50;  // ms, the shipped default (README, policy.hpp)
  uint64_t before_n = 0, after_n = 0, undecided_other = 0;
  double before_p50_us = 0, before_max_us = 0, after_p50_us = 0, after_p99_us = 0, after_max_us = 0;
  bool recovered = false;
};

// A fleet on one tenant through an outage: processes x threads admit in a loop for before_s, Redis is
// SIGSTOPped for outage_s, then runs again for after_s.
struct OutageResult {
  int procs = 4, threads = 8, burst = 100;
  double rate = 1000, before_s = 1, outage_s = 2, after_s = 1;
  uint64_t decisions = 0, by_store = 0, by_fallback = 0, failed_open = 0, refused = 0;
  uint64_t admitted_store = 0, admitted_fallback = 0;
  double p99_us = 0, p999_us = 0, max_us = 0;
  // Redis' one bucket admits at most burst + rate x the whole run; each process's fallback table at most
  // burst + rate x the time it decided (the outage and up to the 1 s it takes the probe to close it).
  double store_bound() const { return burst + rate * (before_s + outage_s + after_s); }
  double fallback_bound() const { return procs * (burst + rate * (outage_s + 1.0)); }
};

// One hot tenant from processes x threads for `seconds`: one policy, leases on or off.
struct HotRun {
  std::string name;
  bool lease = false, conc = false;
  double seconds = 0;  // from the start the children waited for to the end (or the last admit's reply)
  uint64_t decisions = 0, admitted = 0, not_store = 0, failed_open = 0;
  int64_t max_in_flight = 0;
  int64_t commands = 0;  // Redis commands the clients sent (INFO commandstats: EVALSHA, SCRIPT LOAD, PING)
  double redis_cpu_us = -1;
  // The leases, summed over the processes (their metrics JSON at the end of the run).
  int64_t in_process = 0, lease_calls = 0, give_backs = 0, tokens_in_hand_at_end = 0, slots_in_hand_at_end = 0;
  int64_t exact = 0;  // hot, but one exact round trip (the lease calls it waited for said nothing it could use)
  double decisions_per_s() const { return seconds > 0 ? static_cast<double>(decisions) / seconds : 0; }
  double per_command() const {
    return commands > 0 ? static_cast<double>(decisions) / static_cast<double>(commands) : 0;
  }
  double not_store_share() const {
    return decisions ? static_cast<double>(not_store) / static_cast<double>(decisions) : 0;
  }
};

struct HotResult {
  int procs = 4, threads = 8, burst = 500, conc_limit = 20, hold_us = 2000;
  double rate = 5000, seconds = 3;
  int max_tokens = 50, token_ttl_ms = 100, max_slots = 5, slot_ttl_ms = 100;
  std::vector<HotRun> runs;  // lease off, lease on, and both with the concurrency limit
  double bound(const HotRun &r) const { return burst + rate * r.seconds; }
  const HotRun *find(bool lease, bool conc) const {
    for (const auto &r : runs)
      if (r.lease == lease && r.conc == conc) return &r;
    return nullptr;
  }
};

// shm:// against memory:// on one thread, and shm:// from one process against two on other tenants.
struct ShmResult {
  double memory_ns = 0, shm_ns = 0;    // one thread, CPU per decision
  double one_proc = 0, two_procs = 0;  // decisions/s, summed over the processes
};

// The tls section at one caller count: floodwall over plain TCP and over TLS, one run of each per round.
struct TlsRow {
  int callers = 0;
  std::vector<RunStats> plain, tls;
  RunStats plain_median() const { return RedisRow::med(plain); }
  RunStats tls_median() const { return RedisRow::med(tls); }
  // TLS / plain of a figure, the median of the rounds' own ratios (as RedisRow::ratio).
  double ratio(double RunStats::*figure) const {
    std::vector<double> r;
    for (size_t i = 0; i < plain.size() && i < tls.size(); i++)
      if (plain[i].*figure > 0) r.push_back(tls[i].*figure / plain[i].*figure);
    return median(r);
  }
};

// The cluster section at one caller count: floodwall on the single node and on the cluster, one run of each
// per round.
struct ClusterRow {
  int callers = 0;
  std::vector<RunStats> single, cluster;
  RunStats single_median() const { return RedisRow::med(single); }
  RunStats cluster_median() const { return RedisRow::med(cluster); }
  // cluster / single of a figure, the median of the rounds' own ratios (as RedisRow::ratio).
  double ratio(double RunStats::*figure) const {
    std::vector<double> r;
    for (size_t i = 0; i < single.size() && i < cluster.size(); i++)
      if (single[i].*figure > 0) r.push_back(cluster[i].*figure / single[i].*figure);
    return median(r);
  }
};

struct ClusterResult {
  std::vector<int> ports;
  std::vector<ClusterRow> rows;
  std::vector<long long> keys;  // DBSIZE of each master after the runs: the tenants each one served
  uint64_t cold_decisions = 0;  // a fresh cluster client, one admit per tenant in turn, before any warm-up
  uint64_t cold_not_store = 0;  // of those, not answered by the store
  std::string cold_metrics;     // the client's metrics after that pass when some were not
};

// The rules section at one caller count: the tenant's bucket alone and with its limits and quota, one run of
// each per round.
struct RulesRow {
  int callers = 0;
  std::vector<RunStats> bucket, rules;
  RunStats bucket_median() const { return RedisRow::med(bucket); }
  RunStats rules_median() const { return RedisRow::med(rules); }
  // rules / bucket of a figure, the median of the rounds' own ratios (as RedisRow::ratio).
  double ratio(double RunStats::*figure) const {
    std::vector<double> r;
    for (size_t i = 0; i < bucket.size() && i < rules.size(); i++)
      if (bucket[i].*figure > 0 && rules[i].*figure >= 0) r.push_back(rules[i].*figure / bucket[i].*figure);
    return median(r);
  }
};

// tenant_admit.lua alone, pipelined: one run per round of each variant.
struct ScriptRun {
  double calls_per_s = 0, redis_cpu_us = -1;  // the redis-server's CPU per call
  uint64_t calls = 0, bad = 0;                // bad: a reply that was not a committed admit, every rule passing
};

struct RulesResult {
  int limits = 3, quotas = 1;
  int64_t quota_limit = 100'000'000;  // a month: far above what a run spends, so it never refuses
  std::string route = "/api/orders", method = "POST";
  std::string bucket_policy, rules_policy;  // as the clients got them (the store URL elided)
  std::vector<RulesRow> rows;
  int pipeline = 16, connections = 8;
  std::vector<ScriptRun> script_bucket, script_rules;
  // What the quota counted: the sum over the tenants of their month's count, against the rules client's
  // decisions that Redis answered.
  uint64_t quota_counted = 0, rules_answered = 0, rules_decisions = 0;
  uint64_t quota_most = 0;       // the most one tenant's month counted
  uint64_t rule_mismatches = 0;  // decisions of the rules client whose applied rules were not all four
  static double med_of(const std::vector<ScriptRun> &v, double ScriptRun::*f) {
    std::vector<double> x;
    for (const auto &r : v) x.push_back(r.*f);
    return median(x);
  }
};

struct Results {
  RulesResult rules;
  bool have_rules = false;
  ShmResult shm;
  std::vector<TlsRow> tls;
  ClusterResult cluster;
  bool have_cluster = false;
  bool have_shm = false;
  std::vector<RedisRow> redis;
  bool have_embedded = false, have_memory = false, have_failopen = false, have_ceiling = false, have_outage = false;
  bool have_hot = false;
  OutageResult outage;
  HotResult hot;
  EmbeddedResult embedded;
  MemoryResult memory;
  FailOpenResult failopen;
};

// ---------------------------------------------------------------------------- 1. the Redis path

struct Ceiling {
  double ops_per_s = 0;
  double redis_cpu_us = -1;  // the redis-server's CPU per call during the run
};

// Runs redis-benchmark with `command` (arguments passed as they are, no shell): requests per second over
// `callers` connections, `pipeline` requests in flight on each, what Redis itself allows with no client work.

Ceiling redis_benchmark(const Options &o, int callers, int requests, const std::vector<std::string> &command,
                        int pipeline = 16) {
  std::vector<std::string> args = {"redis-benchmark",
                                   "-h",
                                   "127.0.0.1",
                                   "-p",
                                   std::to_string(o.port),
                                   "-c",
                                   std::to_string(callers),
                                   "-n",
                                   std::to_string(requests),
                                   "-P",
                                   std::to_string(pipeline),
                                   "-r",
                                   std::to_string(o.tenants),
                                   "--csv"};
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  double cpu0 = other_cpu_us(g_redis_pid);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  double cpu1 = other_cpu_us(g_redis_pid);
  // A result line: "<command>","<requests/s>","<avg>","<min>","<p50>","<p95>","<p99>","<max>". The
  // command may itself hold quotes and commas, so requests/s is found from the right.
  double rps = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("\"test\"", 0) == 0) continue;
    std::vector<size_t> seps;  // positions of "," from the right
    for (size_t at = line.size(); seps.size() < 7;) {
      at = at == 0 ? std::string::npos : line.rfind("\",\"", at - 1);
      if (at == std::string::npos) break;
      seps.push_back(at);
    }
    if (seps.size() == 7) rps = std::atof(line.c_str() + seps[6] + 3);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rps <= 0)
    throw std::runtime_error("redis-benchmark failed (exit " + std::to_string(status) + "): " + out.substr(0, 300));
  Ceiling c;
  c.ops_per_s = rps;
  if (cpu0 >= 0 && cpu1 >= 0) c.redis_cpu_us = (cpu1 - cpu0) / requests;
  return c;
}

// The redis-benchmark commands of the ceilings: the trivial script, floodwall's own tenant_admit.lua
// (by SHA, the arguments of a request-rate-only admit, as RedisStore sends them) and the seed's script
// (by text). __rand_int__ picks one of --tenants tenants per call.
struct Ceilings {
  std::vector<std::string> trivial = {"EVAL", "return 1", "0"};
  std::vector<std::string> floodwall, seed;
};

Ceilings ceiling_commands(const Options &o, const std::string &seed_script) {
  Ceilings c;
  Conn conn(o);
  std::string sha = conn.run({"SCRIPT", "LOAD", read_text(FW_BENCH_LUA_DIR "/tenant_admit.lua")});
  // The bucket's key and the tenant's control record's (which every admit reads; redis-benchmark picks each
  // __rand_int__ on its own, so the record read is another tenant's: as cheap, absent too), and the tier last
  // ("": none).
  c.floodwall = {"EVALSHA",
                 sha,
                 "2",
                 "floodwall:{__rand_int__}:rate",
                 "floodwall:{__rand_int__}:ctl",
                 "E--",
                 "1000000000000",
                 "1000000000000",
                 "1000000",
                 ""};
  // A check that these are still the script's arguments (a committed rate-only admit replies with the
  // micro-tokens left, an integer >= 0).
  std::vector<std::string> probe = c.floodwall;
  probe[3] = "floodwall:{probe}:rate";
  probe[4] = "floodwall:{probe}:ctl";
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (auto &a : probe) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto *r =
      static_cast<redisReply *>(redisCommandArgv(conn.ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
  bool fits = r && r->type == REDIS_REPLY_INTEGER && r->integer >= 0;
  if (r) freeReplyObject(r);
  if (!fits) {
    std::fprintf(
        stderr,
        "ceiling: lua/tenant_admit.lua no longer takes the arguments this benchmark sends; its ceiling is left out\n");
    c.floodwall.clear();
  }
  c.seed = {"EVAL",
            seed_script,
            "2",
            "request_rate_limiter.__rand_int__.tokens",
            "request_rate_limiter.__rand_int__.timestamp",
            "1000000",
            "1000000",
            std::to_string(static_cast<long long>(std::time(nullptr))),
            "1"};
  return c;
}

void bench_redis(const Options &o, Results &res) {
  std::string script = read_text(o.seed_script);
  std::vector<std::string> tenants;
  for (int i = 0; i < o.tenants; i++) tenants.push_back(tenant_name(i));
  fw_client *client = new_client(fw_redis_policy(o));
  {
    Conn c(o);
    c.run({"FLUSHALL"});
  }
  Ceilings ceilings;
  if (wants(o, "ceiling")) ceilings = ceiling_commands(o, script);
  // The seed by EVALSHA: its script loaded once (FLUSHALL keeps the script cache).
  std::string seed_sha;
  {
    Conn c(o);
    seed_sha = c.run({"SCRIPT", "LOAD", script});
  }
  for (int callers : o.callers) {
    RedisRow row;
    row.callers = callers;
    for (int round = 0; round < o.rounds; round++) {
      // Rotate who goes first, so no contender always runs on a warmer (or more fragmented) Redis.
      static const char *const kNames[3] = {"floodwall", "seed", "seed-sha"};
      for (int turn = 0; turn < 3; turn++) {
        const int who = (turn + round) % 3;
        if (std::find(o.contenders.begin(), o.contenders.end(), kNames[who]) == o.contenders.end()) continue;
        std::vector<RunStats> &runs = who == 0 ? row.fw : who == 1 ? row.seed : row.seed_sha;
        if (who == 0) {
          runs.push_back(drive(callers, o.seconds, [&](int t) { return floodwall_caller(client, tenants, t); }));
        } else {
          runs.push_back(drive(callers, o.seconds, [&](int t) {
            auto seed = std::make_shared<SeedCaller>(o, script, tenants, 1000000, 1000000);
            if (who == 2) seed->sha = seed_sha;
            return [seed, t, n = tenants.size()](uint64_t i) {
              return seed->call((static_cast<size_t>(t) * 131 + i) % n);  // the same rotation as floodwall's
            };
          }));
        }
        const RunStats &s = runs.back();
        std::printf(
            "redis  callers=%-4d round=%d %-9s %10.0f admits/s  p50 %8.1f us  p99 %8.1f us  cpu/admit: "
            "client %5.1f us, redis %5.1f us  not answered by Redis %.4f%% (failed open %" PRIu64 ")%s\n",
            callers, round + 1, kNames[who], s.ops_per_s, s.p50_us, s.p99_us, s.client_cpu_us, s.redis_cpu_us,
            100 * s.not_store_share(), s.failed_open, s.errors || s.rejected ? "  (NOT ALL DECIDED/ALLOWED)" : "");
        std::fflush(stdout);
      }
      if (wants(o, "ceiling")) {
        Ceiling c = redis_benchmark(o, callers, 300000, ceilings.trivial);
        row.ceiling.push_back(c.ops_per_s);
        row.ceiling_cpu.push_back(c.redis_cpu_us);
        row.ceiling_n.push_back(redis_benchmark(o, callers, 40000, ceilings.trivial, 1).ops_per_s);
        if (!ceilings.floodwall.empty()) {
          c = redis_benchmark(o, callers, 60000, ceilings.floodwall);
          row.fw_script_ceiling.push_back(c.ops_per_s);
          row.fw_script_cpu.push_back(c.redis_cpu_us);
        }
        c = redis_benchmark(o, callers, 60000, ceilings.seed);
        row.seed_script_ceiling.push_back(c.ops_per_s);
        row.seed_script_cpu.push_back(c.redis_cpu_us);
        std::printf(
            "redis  callers=%-4d round=%d ceilings (redis-benchmark): EVAL \"return 1\" %.0f/s with %d in "
            "flight; -P 16: EVAL \"return 1\" %.0f/s, tenant_admit.lua %.0f/s, seed script %.0f/s\n",
            callers, round + 1, row.ceiling_n.back(), callers, row.ceiling.back(),
            row.fw_script_ceiling.empty() ? 0.0 : row.fw_script_ceiling.back(), row.seed_script_ceiling.back());
        std::fflush(stdout);
        res.have_ceiling = true;
      }
    }
    res.redis.push_back(std::move(row));
  }
  fw_client_free(client);
}

// ------------------------------------------------------------------- 1b. the Redis path over TLS

// The client's metrics, as JSON (fw_metrics_json); empty if it fails.
std::string metrics_of(fw_client *c) {
  fw_buf b = FW_BUF_INIT;
  if (fw_metrics_json(c, &b) != FW_OK) return "";
  std::string m(b.ptr, b.size);
  fw_buf_dispose(&b);
  return m;
}

// A JSON string literal of s (a file path in a policy).
std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string tls_url(const Options &o) {
  return "rediss://127.0.0.1:" + std::to_string(o.tls_port) + "/0";
}

// The redis section's floodwall policy, over TLS: the same bucket and the same shipped Redis defaults, with
// redis.tls.ca_file the only addition (verification on, as shipped; the server certificate names
// IP:127.0.0.1, the host of the URL).
std::string fw_tls_policy(const Options &o) {
  return fw_policy_at(tls_url(o), R"({"tls": {"ca_file": )" + json_string(o.tls_ca) + "}}");
}

// Admits on `client` until Redis answers one (a new client connects, and over TLS shakes hands, on its first
// calls), for at most 5 s; throws if Redis never does (a wrong port or CA would otherwise show up only as
// a run decided wholly by the fallback). `section` names who asked, in the message.
void first_answer(fw_client *client, const char *what, const char *section = "tls") {
  fw_request rq = FW_REQUEST_INIT;
  rq.tenant = "warm-up";
  rq.tenant_len = 7;
  fw_decision d = FW_DECISION_INIT;
  for (int64_t start = now_ns(); now_ns() - start < 5'000'000'000;) {
    d = fw_decision FW_DECISION_INIT;
    if (fw_admit(client, &rq, &d) != FW_OK) {
      const fw_error *e = fw_error_last();
      throw std::runtime_error(std::string(section) + ": fw_admit over " + what + " failed: " + (e ? e->message : "?"));
    }
    if (!d.failed_open && !d.degraded && d.fail_reason == FW_FAIL_NONE) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error(std::string(section) + ": Redis answered no admit over " + what + " in 5 s (fail reason " +
                           std::to_string(static_cast<int>(d.fail_reason)) +
                           "); client metrics: " + metrics_of(client));
}

void bench_tls(const Options &o, Results &res) {
  std::vector<std::string> tenants;
  for (int i = 0; i < o.tenants; i++) tenants.push_back(tenant_name(i));
  {
    Conn c(o);
    c.run({"FLUSHALL"});
  }
  fw_client *plain = new_client(fw_redis_policy(o));
  fw_client *tls = new_client(fw_tls_policy(o));
  try {
    first_answer(plain, "plain TCP");
    first_answer(tls, "TLS");
  } catch (...) {
    fw_client_free(plain);
    fw_client_free(tls);
    throw;
  }
  auto run = [&](fw_client *client, int callers, double seconds) {
    return drive(callers, seconds, [&](int t) { return floodwall_caller(client, tenants, t); });
  };
  for (int callers : o.tls_callers) {
    // Unrecorded, so that connections (and their handshakes) made for this many callers are made before
    // the clock runs: the rows are the steady state of each transport.
    run(plain, callers, 0.25);
    run(tls, callers, 0.25);
    TlsRow row;
    row.callers = callers;
    for (int round = 0; round < o.rounds; round++) {
      // Alternate who goes first, as the redis section does.
      for (int turn = 0; turn < 2; turn++) {
        bool tls_turn = (turn == 0) == (round % 2 == 1);
        std::vector<RunStats> &runs = tls_turn ? row.tls : row.plain;
        runs.push_back(run(tls_turn ? tls : plain, callers, o.seconds));
        const RunStats &s = runs.back();
        std::printf(
            "tls    callers=%-4d round=%d %-5s %10.0f decisions/s  p50 %8.1f us  p99 %8.1f us  cpu/decision: "
            "client %5.1f us, redis %5.1f us  not answered by Redis %.4f%% (failed open %" PRIu64 ")%s\n",
            callers, round + 1, tls_turn ? "TLS" : "plain", s.ops_per_s, s.p50_us, s.p99_us, s.client_cpu_us,
            s.redis_cpu_us, 100 * s.not_store_share(), s.failed_open,
            s.errors || s.rejected ? "  (NOT ALL DECIDED/ALLOWED)" : "");
        std::fflush(stdout);
      }
    }
    res.tls.push_back(std::move(row));
  }
  fw_client_free(plain);
  fw_client_free(tls);
}

// ------------------------------------------------------------------ 1c. the Redis path on a cluster

// The cluster's seed URL: every master, so that the client finds the map from any one of them.
std::string cluster_url(const Options &o) {
  std::string url = "redis+cluster://";
  for (size_t k = 0; k < o.cluster_ports.size(); k++)
    url += (k ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(o.cluster_ports[k]);
  return url;
}

// The redis section's floodwall policy on the cluster: the same bucket, the same shipped Redis defaults.
std::string fw_cluster_policy(const Options &o) {
  return fw_policy_at(cluster_url(o));
}

void bench_cluster(const Options &o, Results &res) {
  ClusterResult &cr = res.cluster;
  cr.ports = o.cluster_ports;
  std::vector<std::string> tenants;
  for (int i = 0; i < o.tenants; i++) tenants.push_back(tenant_name(i));
  {
    Conn c(o);
    c.run({"FLUSHALL"});
  }
  for (int port : o.cluster_ports) {
    Conn c(port);
    c.run({"FLUSHALL"});
    std::string info = c.run({"CLUSTER", "INFO"});
    if (info.find("cluster_state:ok") == std::string::npos)
      throw std::runtime_error("cluster: the node on port " + std::to_string(port) +
                               " is not in a cluster that is ok: " + info.substr(0, 200));
  }
  // The masters' pids, for their CPU; none (or the wrong count) leaves it unknown.
  std::vector<pid_t> masters = o.cluster_pids;
  if (masters.size() != o.cluster_ports.size()) masters.assign(o.cluster_ports.size(), 0);

  fw_client *single = new_client(fw_redis_policy(o));
  fw_client *cluster = nullptr;
  try {
    cluster = new_client(fw_cluster_policy(o));
    // A fresh client's first admits, one per tenant (all the masters), before anything warmed it: the
    // constructor reads the map and connects to every master, so Redis should answer each of them.
    fw_request rq = FW_REQUEST_INIT;
    for (const auto &tenant : tenants) {
      rq.tenant = tenant.data();
      rq.tenant_len = tenant.size();
      fw_decision d = FW_DECISION_INIT;
      if (fw_admit(cluster, &rq, &d) != FW_OK) {
        const fw_error *e = fw_error_last();
        throw std::runtime_error("cluster: fw_admit failed: " + std::string(e ? e->message : "?"));
      }
      cr.cold_decisions++;
      if (d.failed_open || d.degraded || d.fail_reason != FW_FAIL_NONE) cr.cold_not_store++;
    }
    if (cr.cold_not_store) cr.cold_metrics = metrics_of(cluster);
    std::printf("cluster cold pass: %" PRIu64 " of %" PRIu64
                " first admits (one per tenant, a fresh client) not answered by Redis\n",
                cr.cold_not_store, cr.cold_decisions);
    if (cr.cold_not_store) std::printf("cluster client metrics: %s\n", cr.cold_metrics.c_str());
    std::fflush(stdout);
    first_answer(single, "the single node", "cluster");
    first_answer(cluster, "the cluster", "cluster");
  } catch (...) {
    fw_client_free(single);
    if (cluster) fw_client_free(cluster);
    throw;
  }
  auto run = [&](bool on_cluster, int callers, double seconds) {
    ReasonCounts reasons{};
    RunStats s = drive(
        callers, seconds, [&](int t) { return floodwall_caller(on_cluster ? cluster : single, tenants, t, &reasons); },
        on_cluster ? masters : std::vector<pid_t>{});
    for (size_t k = 0; k < reasons.size(); k++) s.by_reason[k] = reasons[k].load();
    return s;
  };
  for (int callers : o.cluster_callers) {
    // Unrecorded, as in the tls section: the connections made for this many callers are made before the clock
    // runs.
    run(false, callers, 0.25);
    run(true, callers, 0.25);
    ClusterRow row;
    row.callers = callers;
    for (int round = 0; round < o.rounds; round++) {
      // Alternate who goes first, as the redis and tls sections do.
      for (int turn = 0; turn < 2; turn++) {
        bool cluster_turn = (turn == 0) == (round % 2 == 1);
        std::vector<RunStats> &runs = cluster_turn ? row.cluster : row.single;
        runs.push_back(run(cluster_turn, callers, o.seconds));
        const RunStats &s = runs.back();
        std::string per_master;
        if (cluster_turn && s.redis_cpu_us >= 0) {
          per_master = " (masters";
          for (double c : s.server_cpu_us) per_master += " " + num(c, 1);
          per_master += ")";
        }
        std::printf(
            "cluster callers=%-4d round=%d %-7s %10.0f decisions/s  p50 %8.1f us  p99 %8.1f us  cpu/decision: "
            "client %5.1f us, redis %5.1f us%s  not answered by Redis %.4f%% (failed open %" PRIu64 ")%s%s%s\n",
            callers, round + 1, cluster_turn ? "cluster" : "single", s.ops_per_s, s.p50_us, s.p99_us, s.client_cpu_us,
            s.redis_cpu_us, per_master.c_str(), 100 * s.not_store_share(), s.failed_open,
            s.not_store ? ", by reason: " : "", reasons_text(s).c_str(),
            s.errors || s.rejected ? "  (NOT ALL DECIDED/ALLOWED)" : "");
        if (s.not_store)
          std::printf("        %s client metrics: %s\n", cluster_turn ? "cluster" : "single",
                      metrics_of(cluster_turn ? cluster : single).c_str());
        std::fflush(stdout);
      }
    }
    cr.rows.push_back(std::move(row));
  }
  fw_client_free(single);
  fw_client_free(cluster);
  // Where the tenants went: each one's key is on the master of its slot.
  for (int port : o.cluster_ports) {
    Conn c(port);
    cr.keys.push_back(c.dbsize());
  }
  std::string split;
  for (size_t k = 0; k < cr.keys.size(); k++)
    split += (k ? " / " : "") + std::to_string(cr.keys[k]) + " on :" + std::to_string(cr.ports[k]);
  std::printf("cluster keys per master after the runs: %s\n", split.c_str());
  std::fflush(stdout);
  res.have_cluster = true;
}

// ------------------------------------------------------------------- 1d. the price of limits and quotas

// The rules section's policies on the single redis-server: the redis section's bucket that never rejects
// and the shipped Redis defaults; with `rules`, three request_rate.limits whose routes (and methods) all
// match the request (POST /api/orders) and a month quota, all far above what a run spends, so that nothing
// ever refuses and both policies do the same work but for the rules.
std::string fw_rules_policy(const std::string &url, const RulesResult &r, bool rules) {
  std::string limit = R"(, "rate": 1000000, "burst": 1000000})";
  std::string policy = R"({"store": ")" + url + R"(", "request_rate": {"rate": 1000000, "burst": 1000000)";
  if (rules)
    policy += R"(, "limits": [{"name": "api", "routes": ["/api/*"])" + limit +
              R"(, {"name": "orders", "routes": ["/api/orders", "/api/orders/*"])" + limit +
              R"(, {"name": "writes", "routes": ["/api/*"], "methods": ["POST", "PUT", "PATCH", "DELETE"])" + limit +
              R"(]}, "quotas": [{"name": "monthly", "limit": )" + std::to_string(r.quota_limit) +
              R"(, "period": "month"}]})";
  else
    policy += "}}";
  return policy;
}

// One POST /api/orders through the C ABI on a shared client, rotating over the tenants as floodwall_caller
// does; a decision whose applied rules (fw_decision.rules) are not `want_rules` counts in `mismatches`.
std::function<Outcome(uint64_t)> rules_caller(fw_client *client, const RulesResult &r,
                                              const std::vector<std::string> &tenants, int t, uint64_t want_rules,
                                              ReasonCounts *reasons, std::atomic<uint64_t> *mismatches) {
  return [client, &r, &tenants, t, want_rules, reasons, mismatches](uint64_t i) {
    const std::string &tenant = tenants[(static_cast<size_t>(t) * 131 + i) % tenants.size()];
    fw_request rq = FW_REQUEST_INIT;
    rq.tenant = tenant.data();
    rq.tenant_len = tenant.size();
    rq.route = r.route.c_str();
    rq.method = r.method.c_str();
    fw_decision d = FW_DECISION_INIT;
    if (fw_admit(client, &rq, &d) != FW_OK) return error;
    if (mismatches && d.rules != want_rules) mismatches->fetch_add(1, std::memory_order_relaxed);
    if (d.failed_open || d.degraded || d.fail_reason != FW_FAIL_NONE)
      (*reasons)[std::min<size_t>(static_cast<size_t>(d.fail_reason), reasons->size() - 1)].fetch_add(
          1, std::memory_order_relaxed);
    if (d.failed_open) return failed_open;
    if (d.degraded || d.fail_reason != FW_FAIL_NONE) return fallback;
    return d.allowed ? ok : rejected;
  };
}

// One tenant_admit.lua call as RedisStore formats it for POST /api/orders (redis_store.cpp, format_admit):
// the bucket alone sends its key and the control key, the flags, rate, burst and cost (micro-tokens) and the
// tier ("": none); with the rules, the concurrency and fleet keys (not asked: '-'), the rules' keys and the
// control key, the slot arguments, each limit's rate and burst, the quota's limit, period (2: month) and
// offset from UTC, and the tier.
std::vector<std::string> admit_call(const std::string &sha, const std::string &tenant, const RulesResult &r,
                                    bool rules) {
  std::string k = "floodwall:{" + tenant + "}:";
  const std::string m = "1000000000000";  // 1,000,000/s and 1,000,000 tokens, in micro-tokens
  if (!rules) return {"EVALSHA", sha, "2", k + "rate", k + "ctl", "E--", m, m, "1000000", ""};
  return {"EVALSHA",
          sha,
          "8",
          k + "rate",
          k + "conc",
          "floodwall:fleet",
          k + "limit:api",
          k + "limit:orders",
          k + "limit:writes",
          k + "quota:monthly",
          k + "ctl",
          "E--LLLQ",
          m,
          m,
          "1000000",
          "0",
          "0",
          "0",
          "0",
          std::string(16, '\0'),  // the slot id (not asked for: the client sends zeros)
          m,
          m,
          m,
          m,
          m,
          m,
          std::to_string(r.quota_limit),
          "2",
          "0",
          ""};
}

// A reply that says the admit committed: the bucket alone answers the micro-tokens left (an integer >= 0);
// with the rules, {committed, rate_ok, tokens, conc_ok, in_flight, fleet_ok} and four integers per rule,
// the first of which is its ok.
bool committed_reply(const redisReply *rp, bool rules, int n_rules) {
  if (!rp) return false;
  if (!rules) return rp->type == REDIS_REPLY_INTEGER && rp->integer >= 0;
  if (rp->type != REDIS_REPLY_ARRAY || rp->elements != static_cast<size_t>(6 + 4 * n_rules)) return false;
  for (size_t k = 0; k < rp->elements; k++)
    if (rp->element[k]->type != REDIS_REPLY_INTEGER) return false;
  if (rp->element[0]->integer != 1 || rp->element[1]->integer != 1) return false;
  for (int j = 0; j < n_rules; j++)
    if (rp->element[6 + 4 * j]->integer != 1) return false;
  return true;
}

// The script alone for `seconds`: `connections` connections from this thread, `pipeline` calls in flight on
// each, the calls rotating over the tenants; every reply checked. The redis-server's CPU per call is what
// the script costs Redis with no client of floodwall's in the way (and 16 calls per read).
ScriptRun script_pipelined(const Options &o, const std::vector<std::vector<std::string>> &calls, bool rules,
                           int n_rules, int connections, int pipeline, double seconds) {
  // Each call's RESP once, so that this thread only writes and parses.
  std::vector<std::string> resp;
  for (const auto &c : calls) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : c) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char *cmd = nullptr;
    long long n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0) throw std::runtime_error("rules: redisFormatCommandArgv failed");
    resp.emplace_back(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
  }
  std::vector<std::unique_ptr<Conn>> conns;
  for (int k = 0; k < connections; k++) conns.push_back(std::make_unique<Conn>(o));
  ScriptRun run;
  size_t next = 0;
  double cpu0 = other_cpu_us(g_redis_pid);
  int64_t t0 = now_ns(), end = t0 + static_cast<int64_t>(seconds * 1e9);
  while (now_ns() < end) {
    for (auto &c : conns)
      for (int p = 0; p < pipeline; p++) {
        const std::string &cmd = resp[next++ % resp.size()];
        if (redisAppendFormattedCommand(c->ctx, cmd.data(), cmd.size()) != REDIS_OK)
          throw std::runtime_error(std::string("rules: ") + c->ctx->errstr);
      }
    for (auto &c : conns)
      for (int p = 0; p < pipeline; p++) {
        void *reply = nullptr;
        if (redisGetReply(c->ctx, &reply) != REDIS_OK)
          throw std::runtime_error(std::string("rules: ") + c->ctx->errstr);
        auto *rp = static_cast<redisReply *>(reply);
        if (!committed_reply(rp, rules, n_rules)) run.bad++;
        freeReplyObject(rp);
        run.calls++;
      }
  }
  int64_t elapsed = now_ns() - t0;
  double cpu1 = other_cpu_us(g_redis_pid);
  run.calls_per_s = static_cast<double>(run.calls) * 1e9 / static_cast<double>(elapsed);
  if (cpu0 >= 0 && cpu1 >= 0 && run.calls) run.redis_cpu_us = (cpu1 - cpu0) / static_cast<double>(run.calls);
  return run;
}

void bench_rules(const Options &o, Results &res) {
  RulesResult &rr = res.rules;
  std::vector<std::string> tenants;
  for (int i = 0; i < o.tenants; i++) tenants.push_back(tenant_name(i));
  {
    Conn c(o);
    c.run({"FLUSHALL"});
  }
  rr.bucket_policy = fw_rules_policy("redis://127.0.0.1:PORT/0", rr, false);
  rr.rules_policy = fw_rules_policy("redis://127.0.0.1:PORT/0", rr, true);
  fw_client *bucket = new_client(fw_rules_policy(redis_url(o), rr, false));
  fw_client *rules = nullptr;
  std::atomic<uint64_t> mismatches{0};
  const uint64_t want_rules = (uint64_t{1} << (rr.limits + rr.quotas)) - 1;  // every rule of the policy applies
  try {
    rules = new_client(fw_rules_policy(redis_url(o), rr, true));
    for (int j = 0; j < rr.limits + rr.quotas; j++) {
      const char *name = nullptr;
      int is_quota = 0;
      if (fw_client_rule_name(rules, j, &name, &is_quota) != FW_OK || (is_quota != 0) != (j >= rr.limits))
        throw std::runtime_error("rules: the policy does not hold the limits and the quota in the order expected");
    }
    first_answer(bucket, "the bucket alone", "rules");
    first_answer(rules, "the rules", "rules");
  } catch (...) {
    fw_client_free(bucket);
    if (rules) fw_client_free(rules);
    throw;
  }
  auto run = [&](bool with_rules, int callers, double seconds) {
    ReasonCounts reasons{};
    RunStats s = drive(callers, seconds, [&](int t) {
      return rules_caller(with_rules ? rules : bucket, rr, tenants, t, with_rules ? want_rules : 0, &reasons,
                          with_rules ? &mismatches : nullptr);
    });
    for (size_t k = 0; k < reasons.size(); k++) s.by_reason[k] = reasons[k].load();
    if (with_rules) {
      rr.rules_decisions += s.ops;
      rr.rules_answered += s.ops - s.not_store - s.errors;
    }
    return s;
  };
  for (int callers : o.rules_callers) {
    // Unrecorded, as in the tls section: the connections made for this many callers are made before the clock
    // runs.
    run(false, callers, 0.25);
    run(true, callers, 0.25);
    RulesRow row;
    row.callers = callers;
    for (int round = 0; round < o.rules_rounds; round++) {
      // Alternate who goes first, as the other sections do.
      for (int turn = 0; turn < 2; turn++) {
        bool rules_turn = (turn == 0) == (round % 2 == 1);
        std::vector<RunStats> &runs = rules_turn ? row.rules : row.bucket;
        runs.push_back(run(rules_turn, callers, o.rules_seconds));
        const RunStats &s = runs.back();
        std::printf(
            "rules  callers=%-4d round=%d %-10s %10.0f decisions/s  p50 %8.1f us  p99 %8.1f us  cpu/decision: "
            "client %5.1f us, redis %5.1f us  not answered by Redis %.4f%% (failed open %" PRIu64 ")%s%s%s\n",
            callers, round + 1, rules_turn ? "3L+1Q" : "bucket", s.ops_per_s, s.p50_us, s.p99_us, s.client_cpu_us,
            s.redis_cpu_us, 100 * s.not_store_share(), s.failed_open, s.not_store ? ", by reason: " : "",
            reasons_text(s).c_str(), s.errors || s.rejected ? "  (NOT ALL DECIDED/ALLOWED)" : "");
        std::fflush(stdout);
      }
    }
    rr.rows.push_back(std::move(row));
  }
  fw_client_free(bucket);
  fw_client_free(rules);
  rr.rule_mismatches = mismatches.load();

  // The quota is real: every decision Redis answered for the rules client counted in its tenant's month
  // (the first_answer admits were on a tenant of their own).
  {
    Conn c(o);
    for (const auto &tenant : tenants) {
      std::string v = c.run({"GET", "floodwall:{" + tenant + "}:quota:monthly"});
      auto colon = v.find(':');
      if (colon == std::string::npos) continue;
      uint64_t used = std::stoull(v.substr(colon + 1));
      rr.quota_counted += used;
      rr.quota_most = std::max(rr.quota_most, used);
    }
    std::printf("rules  the month quota counted %" PRIu64 " of the %" PRIu64
                " decisions Redis answered for the rules client (%" PRIu64 " decisions; %" PRIu64
                " whose applied rules were not all %d)\n",
                rr.quota_counted, rr.rules_answered, rr.rules_decisions, rr.rule_mismatches, rr.limits + rr.quotas);
    c.run({"FLUSHALL"});
  }

  // The script alone, pipelined: the same calls without a client of floodwall's.
  std::string sha;
  {
    Conn c(o);
    sha = c.run({"SCRIPT", "LOAD", read_text(FW_BENCH_LUA_DIR "/tenant_admit.lua")});
  }
  std::vector<std::vector<std::string>> bucket_calls, rules_calls;
  for (const auto &tenant : tenants) {
    bucket_calls.push_back(admit_call(sha, tenant, rr, false));
    rules_calls.push_back(admit_call(sha, tenant, rr, true));
  }
  int n_rules = rr.limits + rr.quotas;
  // Unrecorded: every tenant's keys made before the clock runs.
  script_pipelined(o, bucket_calls, false, n_rules, rr.connections, rr.pipeline, 0.25);
  script_pipelined(o, rules_calls, true, n_rules, rr.connections, rr.pipeline, 0.25);
  for (int round = 0; round < o.rules_rounds; round++) {
    for (int turn = 0; turn < 2; turn++) {
      bool rules_turn = (turn == 0) == (round % 2 == 1);
      ScriptRun s = script_pipelined(o, rules_turn ? rules_calls : bucket_calls, rules_turn, n_rules, rr.connections,
                                     rr.pipeline, 1.0);
      (rules_turn ? rr.script_rules : rr.script_bucket).push_back(s);
      std::printf("rules  script alone round=%d %-10s %10.0f calls/s  redis %5.2f us/call  (%" PRIu64 " calls, %" PRIu64
                  " not a committed admit)\n",
                  round + 1, rules_turn ? "3L+1Q" : "bucket", s.calls_per_s, s.redis_cpu_us, s.calls, s.bad);
      std::fflush(stdout);
    }
  }
  {
    Conn c(o);
    c.run({"FLUSHALL"});
  }
  res.have_rules = true;
}

// ------------------------------------------------------------------------------ 2. embedded store

struct EmbeddedRun {
  double wall_ns = 0, cpu_ns = 0;  // per decision (an admit and its release), mean over the threads
  double decisions_per_s = 0;      // all threads together
};

// `threads` threads deciding for `seconds`, each rotating over the tenants: an admit and its release, as a
// middleware makes them, into a decision initialized with FW_DECISION_INIT each time (#59 measured so). Wall
// time and the thread's own CPU time are both kept: on a box shared with other work a thread can be descheduled
// mid-run, which lengthens the wall figure but not the CPU one.
EmbeddedRun embedded_run(fw_client *client, const std::vector<std::string> &tenants, int threads, double seconds) {
  std::vector<double> wall(static_cast<size_t>(threads)), cpu(static_cast<size_t>(threads));
  std::vector<uint64_t> counts(static_cast<size_t>(threads));
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  int64_t budget = static_cast<int64_t>(seconds * 1e9);
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fw_request rq = FW_REQUEST_INIT;
      uint64_t n = 0, bad = 0;
      size_t k = static_cast<size_t>(t) * 500;
      int64_t c0 = thread_cpu_ns(), t0 = now_ns(), t1 = t0;
      while (t1 - t0 < budget) {
        for (int j = 0; j < 1024; j++) {  // read the clock once per 1024 decisions
          const std::string &tenant = tenants[k];
          if (++k == tenants.size()) k = 0;
          rq.tenant = tenant.data();
          rq.tenant_len = tenant.size();
          fw_decision d = FW_DECISION_INIT;
          if (fw_admit(client, &rq, &d) != FW_OK || !d.allowed) bad++;
          fw_release(client, d.ticket);
        }
        n += 1024;
        t1 = now_ns();
      }
      int64_t c1 = thread_cpu_ns();
      if (bad) std::fprintf(stderr, "embedded: %" PRIu64 " decisions were not allowed\n", bad);
      wall[static_cast<size_t>(t)] = static_cast<double>(t1 - t0) / static_cast<double>(n);
      cpu[static_cast<size_t>(t)] = static_cast<double>(c1 - c0) / static_cast<double>(n);
      counts[static_cast<size_t>(t)] = n;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  int64_t t0 = now_ns();
  go.store(true, std::memory_order_release);
  for (auto &th : ts) th.join();
  double elapsed = static_cast<double>(now_ns() - t0);
  EmbeddedRun r;
  uint64_t total = 0;
  for (int t = 0; t < threads; t++) {
    total += counts[static_cast<size_t>(t)];
    r.wall_ns += wall[static_cast<size_t>(t)] / threads;
    r.cpu_ns += cpu[static_cast<size_t>(t)] / threads;
  }
  r.decisions_per_s = static_cast<double>(total) * 1e9 / elapsed;
  return r;
}

void bench_embedded(const Options &o, Results &res) {
  fw_client *client = new_client(R"({"request_rate": {"rate": 1000000, "burst": 1000000000}})");
  std::vector<std::string> tenants;
  for (int i = 0; i < 1000; i++) tenants.push_back(tenant_name(i));
  embedded_run(client, tenants, 1, 0.3);  // warm the tables
  std::vector<double> one_wall, one_cpu, two_wall, two_cpu, one_rate, two_rate, scaling;
  for (int round = 0; round < o.rounds; round++) {
    EmbeddedRun one = embedded_run(client, tenants, 1, o.seconds / 2);
    EmbeddedRun two = embedded_run(client, tenants, 2, o.seconds / 2);
    one_wall.push_back(one.wall_ns);
    one_cpu.push_back(one.cpu_ns);
    two_wall.push_back(two.wall_ns);
    two_cpu.push_back(two.cpu_ns);
    one_rate.push_back(one.decisions_per_s);
    two_rate.push_back(two.decisions_per_s);
    scaling.push_back(two.decisions_per_s / one.decisions_per_s);
    std::printf(
        "embedded round=%d  1 thread %6.1f ns/decision (cpu %6.1f), %.0f decisions/s   2 threads %6.1f ns/decision "
        "each (cpu %6.1f), %.0f decisions/s (%.2fx one thread)\n",
        round + 1, one.wall_ns, one.cpu_ns, one.decisions_per_s, two.wall_ns, two.cpu_ns, two.decisions_per_s,
        scaling.back());
    std::fflush(stdout);
  }
  EmbeddedResult &e = res.embedded;
  e.ns_one = median(one_wall);
  e.cpu_ns_one = median(one_cpu);
  e.ns_two_per_thread = median(two_wall);
  e.cpu_ns_two_per_thread = median(two_cpu);
  e.decisions_per_s_one = median(one_rate);
  e.decisions_per_s_two = median(two_rate);
  e.two_over_one = median(scaling);
  res.have_embedded = true;
  fw_client_free(client);
}

// ------------------------------------------------------------------------------- 2b. shm://

// `procs` processes, each on tenants of its own, deciding for `seconds` on one shm segment: the
// decisions per second of all of them together.
double shm_processes(const std::string &url, int procs, double seconds) {
  std::vector<std::pair<pid_t, int>> kids;
  for (int p = 0; p < procs; p++) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("shm: pipe failed");
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      fw_client *c = new_client(R"({"store": ")" + url +
                                R"(", "max_tenants": 100000, "request_rate": {"rate": 1000000, "burst": 1000000000}})");
      std::vector<std::string> tenants;
      for (int i = 0; i < 1000; i++) tenants.push_back(std::to_string(p).append("-").append(tenant_name(i)));
      double rate = embedded_run(c, tenants, 1, seconds).decisions_per_s;
      (void)!write(fds[1], &rate, sizeof rate);
      _exit(0);
    }
    close(fds[1]);
    kids.push_back({pid, fds[0]});
  }
  double total = 0;
  for (auto [pid, fd] : kids) {
    double rate = 0;
    if (read(fd, &rate, sizeof rate) != sizeof rate) throw std::runtime_error("shm: a child failed");
    close(fd);
    waitpid(pid, nullptr, 0);
    total += rate;
  }
  return total;
}

void bench_shm(const Options &o, Results &res) {
  std::string name = "floodwall-bench-" + std::to_string(getpid());
  std::string url = "shm://" + name;
  std::vector<std::string> tenants;
  for (int i = 0; i < 1000; i++) tenants.push_back(tenant_name(i));
  std::vector<double> mem, shm, one, two;
  const std::string bucket = R"("max_tenants": 100000, "request_rate": {"rate": 1000000, "burst": 1000000000})";
  fw_client *m = new_client("{" + bucket + "}");
  fw_client *s = new_client(R"({"store": ")" + url + R"(", )" + bucket + "}");
  embedded_run(m, tenants, 1, 0.2);
  embedded_run(s, tenants, 1, 0.2);
  for (int round = 0; round < o.rounds; round++) {
    mem.push_back(embedded_run(m, tenants, 1, o.seconds / 2).cpu_ns);
    shm.push_back(embedded_run(s, tenants, 1, o.seconds / 2).cpu_ns);
    one.push_back(shm_processes(url, 1, o.seconds / 2));
    two.push_back(shm_processes(url, 2, o.seconds / 2));
    std::printf(
        "shm round=%d  memory:// %.1f ns/decision, shm:// %.1f ns (%.2fx); one process %.0f/s, two on other "
        "tenants %.0f/s (%.2fx)\n",
        round + 1, mem.back(), shm.back(), shm.back() / mem.back(), one.back(), two.back(), two.back() / one.back());
    std::fflush(stdout);
  }
  fw_client_free(m);
  fw_client_free(s);
  shm_unlink(("/floodwall." + name).c_str());
  res.shm = {median(mem), median(shm), median(one), median(two)};
  res.have_shm = true;
}

// ------------------------------------------------------------------------------- 3. memory/tenant

// Runs fn(i) for i in [0, n) on `threads` threads.
void parallel_for(int n, int threads, const std::function<void(int thread, int i)> &fn) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) fn(t, i);
    });
  for (auto &th : ts) th.join();
}

void bench_memory(const Options &o, Results &res) {
  MemoryResult &m = res.memory;
  m.tenants = o.memory_tenants;
  const int threads = 8;
  Conn admin(o);
  // A slow bucket (a full refill takes 10,000 s), so that no key expires while we count; the same
  // numbers for both layouts.
  const std::string rate = "0.01", burst = "100";

  // floodwall: one admit per tenant.
  admin.run({"FLUSHALL"});
  fw_client *client = new_client(R"({"store": ")" + redis_url(o) + R"(", )" + R"("request_rate": {"rate": )" + rate +
                                 R"(, "burst": )" + burst + "}}");
  auto fw_admit_one = [&](const std::string &tenant) {
    fw_request rq = FW_REQUEST_INIT;
    rq.tenant = tenant.data();
    rq.tenant_len = tenant.size();
    fw_decision d = FW_DECISION_INIT;
    if (fw_admit(client, &rq, &d) != FW_OK || d.failed_open || d.degraded || !d.allowed)
      throw std::runtime_error("memory: an admit was not decided by Redis");
  };
  fw_admit_one("warm-up");  // the scripts are loaded and the connections set up before we measure
  long long before = admin.used_memory(), keys_before = admin.dbsize();
  std::atomic<int> failures{0};
  parallel_for(m.tenants, threads, [&](int, int i) {
    try {
      fw_admit_one(tenant_name(i));
    } catch (const std::exception &) {
      failures++;
    }
  });
  if (failures) throw std::runtime_error("memory: " + std::to_string(failures.load()) + " admits failed");
  long long after = admin.used_memory();
  m.fw_keys = admin.dbsize() - keys_before;
  m.fw_bytes = after - before;
  // One tenant's key, named as ARCHITECTURE.md section 4 says (<prefix>:{<tenant>}:rate; an id of
  // [A-Za-z0-9._:@-] only is written as it is).
  m.fw_sample_key = "floodwall:{" + tenant_name(0) + "}:rate";
  std::string usage = admin.run({"MEMORY", "USAGE", m.fw_sample_key});
  m.fw_key_usage = usage.empty() ? -1 : std::stoll(usage);  // -1: the layout changed, the key is not there
  fw_client_free(client);

  // The seed: its script once for each tenant, on its two keys.
  admin.run({"FLUSHALL"});
  std::string script = read_text(o.seed_script);
  auto seed_one = [&](redisContext *ctx, const std::string &user) {
    std::string k1 = "request_rate_limiter." + user + ".tokens", k2 = "request_rate_limiter." + user + ".timestamp";
    std::string now = std::to_string(static_cast<long long>(std::time(nullptr)));
    const char *argv[] = {"EVAL", script.data(), "2", k1.data(), k2.data(), rate.data(), burst.data(), now.data(), "1"};
    size_t lens[] = {4, script.size(), 1, k1.size(), k2.size(), rate.size(), burst.size(), now.size(), 1};
    auto *r = static_cast<redisReply *>(redisCommandArgv(ctx, 9, argv, lens));
    bool good = r && r->type == REDIS_REPLY_ARRAY;
    if (r) freeReplyObject(r);
    return good;
  };
  if (!seed_one(admin.ctx, "warm-up")) throw std::runtime_error("memory: the seed script failed");
  // The seed's callers hold one connection each; open them before measuring, as floodwall's are.
  std::vector<std::unique_ptr<Conn>> conns;
  for (int t = 0; t < threads; t++) conns.push_back(std::make_unique<Conn>(o));
  before = admin.used_memory();
  keys_before = admin.dbsize();
  parallel_for(m.tenants, threads, [&](int t, int i) {
    if (!seed_one(conns[static_cast<size_t>(t)]->ctx, tenant_name(i))) failures++;
  });
  if (failures) throw std::runtime_error("memory: " + std::to_string(failures.load()) + " seed calls failed");
  after = admin.used_memory();
  m.seed_keys = admin.dbsize() - keys_before;
  m.seed_bytes = after - before;
  for (const char *suffix : {".tokens", ".timestamp"})
    m.seed_key_usage +=
        std::stoll(admin.run({"MEMORY", "USAGE", std::string("request_rate_limiter.tenant-000000") + suffix}));
  conns.clear();
  admin.run({"FLUSHALL"});
  res.have_memory = true;
  std::printf("memory %d tenants: floodwall %.1f bytes/tenant (%lld keys), seed %.1f bytes/tenant (%lld keys)\n",
              m.tenants, static_cast<double>(m.fw_bytes) / m.tenants, m.fw_keys,
              static_cast<double>(m.seed_bytes) / m.tenants, m.seed_keys);
  std::fflush(stdout);
}

// ------------------------------------------------------------------------------- 4. fail-open

// SIGCONT on every way out, so a failing benchmark never leaves the server frozen.
struct Frozen {
  pid_t pid;
  explicit Frozen(pid_t p) : pid(p) {
    if (kill(pid, SIGSTOP) != 0) throw std::runtime_error("cannot SIGSTOP redis-server pid " + std::to_string(pid));
  }
  ~Frozen() { kill(pid, SIGCONT); }
  Frozen(const Frozen &) = delete;
  Frozen &operator=(const Frozen &) = delete;
};

void bench_failopen(const Options &o, Results &res) {
  if (o.redis_pid <= 0) throw std::runtime_error("failopen needs --redis-pid");
  FailOpenResult &f = res.failopen;
  const int open_ms = 1000;  // how long the breaker stays open: the shipped default
  fw_client *client =
      new_client(R"({"store": ")" + redis_url(o) + R"(", "request_rate": {"rate": 1000000, "burst": 1000000}})");
  auto admit = [&](fw_decision &d) {
    fw_request rq = FW_REQUEST_INIT;
    rq.tenant = "blackhole";
    rq.tenant_len = 9;
    d = fw_decision FW_DECISION_INIT;
    int64_t t0 = now_ns();
    if (fw_admit(client, &rq, &d) != FW_OK) throw std::runtime_error("failopen: fw_admit failed");
    return now_ns() - t0;
  };
  fw_decision d;
  for (int i = 0; i < 100; i++) admit(d);
  if (d.failed_open || d.degraded) throw std::runtime_error("failopen: Redis did not decide before the blackhole");

  std::vector<int64_t> before, after;
  {
    Frozen frozen(o.redis_pid);
    int64_t start = now_ns();
    // Well inside the open period: every admit after the breaker opens is answered without Redis.
    while (now_ns() - start < static_cast<int64_t>(open_ms) * 1'000'000 / 3) {
      int64_t ns = admit(d);
      if (d.fail_reason == FW_FAIL_TIMEOUT)
        before.push_back(ns);
      else if (d.fail_reason == FW_FAIL_BREAKER)
        after.push_back(ns);
      else
        f.undecided_other++;
    }
  }  // SIGCONT
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  f.before_n = before.size();
  f.after_n = after.size();
  f.before_p50_us = quantile(before, 0.5) / 1e3;
  f.before_max_us = before.empty() ? 0 : static_cast<double>(before.back()) / 1e3;
  f.after_p50_us = quantile(after, 0.5) / 1e3;
  f.after_p99_us = quantile(after, 0.99) / 1e3;
  f.after_max_us = after.empty() ? 0 : static_cast<double>(after.back()) / 1e3;

  // After the open period the probe goes through and Redis decides again.
  std::this_thread::sleep_for(std::chrono::milliseconds(open_ms + 200));
  for (int i = 0; i < 50 && !f.recovered; i++) {
    admit(d);
    f.recovered = !d.failed_open && !d.degraded && d.fail_reason == FW_FAIL_NONE;
    if (!f.recovered) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fw_client_free(client);
  res.have_failopen = true;
  std::printf("failopen deadline %d ms: %" PRIu64 " timed-out admits p50 %.0f us max %.0f us; %" PRIu64
              " breaker admits p50 %.2f us p99 %.2f us max %.1f us; recovered=%s\n",
              f.deadline, f.before_n, f.before_p50_us, f.before_max_us, f.after_n, f.after_p50_us, f.after_p99_us,
              f.after_max_us, f.recovered ? "yes" : "NO");
  std::fflush(stdout);
}

// ----------------------------------------------------------------------- 5. a fleet through an outage

// What one child process reports through its pipe: counts, and its latencies as a histogram of 10 us
// buckets up to 200 ms (the last bucket holds everything slower).
struct OutageChild {
  uint64_t decisions = 0, by_store = 0, by_fallback = 0, failed_open = 0, refused = 0;
  uint64_t admitted_store = 0, admitted_fallback = 0;
  int64_t max_ns = 0;
  static constexpr size_t kBuckets = 20000;
  uint64_t hist[kBuckets] = {};
};

void outage_child(const Options &o, const OutageResult &f, int64_t start_ns, int64_t end_ns, int fd) {
  auto *out = new OutageChild();
  // Made in the child: a client made before fork() is the preforking issue's, not this one's.
  fw_client *client = new_client(R"({"store": ")" + redis_url(o) + R"(", "request_rate": {"rate": )" + num(f.rate) +
                                 R"(, "burst": )" + std::to_string(f.burst) + "}}");
  std::mutex mu;
  std::vector<std::thread> ts;
  for (int t = 0; t < f.threads; t++) {
    ts.emplace_back([&] {
      auto mine = std::make_unique<OutageChild>();
      while (now_ns() < start_ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
      fw_request rq = FW_REQUEST_INIT;
      rq.tenant = "fleet-hot";
      rq.tenant_len = 9;
      for (int64_t t0 = now_ns(); t0 < end_ns; t0 = now_ns()) {
        fw_decision d = FW_DECISION_INIT;
        if (fw_admit(client, &rq, &d) != FW_OK) std::abort();
        int64_t ns = now_ns() - t0;
        mine->decisions++;
        mine->max_ns = std::max(mine->max_ns, ns);
        mine->hist[std::min<size_t>(static_cast<size_t>(ns / 10'000), OutageChild::kBuckets - 1)]++;
        if (d.failed_open) {
          mine->failed_open++;
        } else if (d.degraded) {
          mine->by_fallback++;
          mine->admitted_fallback += d.allowed != 0;
        } else if (d.fail_reason != FW_FAIL_NONE) {
          mine->refused++;
        } else {
          mine->by_store++;
          mine->admitted_store += d.allowed != 0;
        }
      }
      std::lock_guard lock(mu);
      out->decisions += mine->decisions;
      out->by_store += mine->by_store;
      out->by_fallback += mine->by_fallback;
      out->failed_open += mine->failed_open;
      out->refused += mine->refused;
      out->admitted_store += mine->admitted_store;
      out->admitted_fallback += mine->admitted_fallback;
      out->max_ns = std::max(out->max_ns, mine->max_ns);
      for (size_t i = 0; i < OutageChild::kBuckets; i++) out->hist[i] += mine->hist[i];
    });
  }
  for (auto &th : ts) th.join();
  fw_client_free(client);
  const char *p = reinterpret_cast<const char *>(out);
  for (size_t done = 0; done < sizeof *out;) {
    ssize_t n = write(fd, p + done, sizeof *out - done);
    if (n <= 0) _exit(3);
    done += static_cast<size_t>(n);
  }
  _exit(0);
}

void bench_outage(const Options &o, Results &res) {
  if (o.redis_pid <= 0) throw std::runtime_error("outage needs --redis-pid");
  OutageResult &f = res.outage;
  {
    Conn c(o);
    c.run({"DEL", "floodwall:{fleet-hot}:rate"});
  }
  int64_t start_ns = now_ns() + 500'000'000;  // the children connect first
  int64_t end_ns = start_ns + static_cast<int64_t>((f.before_s + f.outage_s + f.after_s) * 1e9);
  std::vector<std::pair<pid_t, int>> kids;
  for (int p = 0; p < f.procs; p++) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("outage: pipe failed");
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      outage_child(o, f, start_ns, end_ns, fds[1]);
    }
    close(fds[1]);
    kids.push_back({pid, fds[0]});
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(start_ns - now_ns() + static_cast<int64_t>(f.before_s * 1e9)));
  {
    Frozen frozen(o.redis_pid);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.outage_s));
  }  // SIGCONT
  std::vector<uint64_t> hist(OutageChild::kBuckets);
  auto child = std::make_unique<OutageChild>();
  for (auto [pid, fd] : kids) {
    char *p = reinterpret_cast<char *>(child.get());
    size_t got = 0;
    while (got < sizeof *child) {
      ssize_t n = read(fd, p + got, sizeof *child - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != sizeof *child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("outage: a child process failed");
    f.decisions += child->decisions;
    f.by_store += child->by_store;
    f.by_fallback += child->by_fallback;
    f.failed_open += child->failed_open;
    f.refused += child->refused;
    f.admitted_store += child->admitted_store;
    f.admitted_fallback += child->admitted_fallback;
    f.max_us = std::max(f.max_us, static_cast<double>(child->max_ns) / 1e3);
    for (size_t i = 0; i < hist.size(); i++) hist[i] += child->hist[i];
  }
  auto pct = [&](double q) {
    uint64_t want = static_cast<uint64_t>(q * static_cast<double>(f.decisions)), seen = 0;
    for (size_t i = 0; i < hist.size(); i++)
      if ((seen += hist[i]) > want) return static_cast<double>(i + 1) * 10.0;  // the bucket's upper edge, us
    return f.max_us;
  };
  f.p99_us = pct(0.99);
  f.p999_us = pct(0.999);
  res.have_outage = true;
  std::printf(
      "outage %d processes x %d threads, one tenant (rate %g, burst %d), Redis stopped %.0f s: %" PRIu64
      " decisions, %" PRIu64 " by Redis, %" PRIu64 " by the fallback, %" PRIu64 " failed open; admitted %" PRIu64
      " by Redis (bound %.0f) + %" PRIu64 " by the fallback (bound %.0f); p99 %.0f us, p99.9 %.0f us, max %.1f ms\n",
      f.procs, f.threads, f.rate, f.burst, f.outage_s, f.decisions, f.by_store, f.by_fallback, f.failed_open,
      f.admitted_store, f.store_bound(), f.admitted_fallback, f.fallback_bound(), f.p99_us, f.p999_us, f.max_us / 1000);
  std::fflush(stdout);
}

// -------------------------------------------------------------------- 6. hot tenants: leases

// What the children of a hot run count, in shared memory.
struct HotShared {
  std::atomic<uint64_t> decisions{0}, admitted{0}, not_store{0}, failed_open{0};
  std::atomic<int64_t> in_flight{0}, max_in_flight{0};
  std::atomic<int64_t> in_process{0}, lease_calls{0}, give_backs{0}, tokens_in_hand{0}, slots_in_hand{0};
  std::atomic<int64_t> exact{0}, after_call{0}, rejected_rate{0}, rejected_conc{0};
  std::atomic<int64_t> last_admit_ns{0};  // when the last admitted decision of any thread completed
  std::atomic<int> failed{0};
};

int64_t json_number(const std::string &json, const std::string &name) {
  auto at = json.find("\"" + name + "\":");
  return at == std::string::npos ? 0 : std::stoll(json.substr(at + name.size() + 3));
}

// The commands clients sent Redis: every floodwall call is an EVALSHA (a script's own commands show
// under their names in commandstats and are not counted), plus SCRIPT LOAD and PING.
int64_t client_commands(Conn &c) {
  std::string info = c.run({"INFO", "commandstats"});
  int64_t total = 0;
  for (const char *name : {"cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_script|load:", "cmdstat_ping:"}) {
    auto at = info.find(name);
    if (at != std::string::npos) total += std::stoll(info.substr(info.find("calls=", at) + 6));
  }
  return total;
}

void hot_child(const std::string &policy, const HotResult &h, bool conc, int64_t start_ns, int64_t end_ns,
               HotShared *sh) {
  // Made in the child, as a preforking server's worker would.
  fw_client *client = new_client(policy);
  std::vector<std::thread> ts;
  for (int t = 0; t < h.threads; t++) {
    ts.emplace_back([&] {
      uint64_t decisions = 0, admitted = 0, not_store = 0, failed_open = 0;
      int64_t last_admit = 0;
      fw_request rq = FW_REQUEST_INIT;
      rq.tenant = "hot-bench";
      rq.tenant_len = 9;
      while (now_ns() < start_ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
      while (now_ns() < end_ns) {
        fw_decision d = FW_DECISION_INIT;
        if (fw_admit(client, &rq, &d) != FW_OK) std::abort();
        decisions++;
        if (d.failed_open) failed_open++;
        if (d.failed_open || d.degraded || d.fail_reason != FW_FAIL_NONE) not_store++;
        if (d.limiter == FW_LIMITER_REQUEST_RATE) sh->rejected_rate.fetch_add(1, std::memory_order_relaxed);
        if (d.limiter == FW_LIMITER_CONCURRENCY) sh->rejected_conc.fetch_add(1, std::memory_order_relaxed);
        if (!d.allowed) continue;
        admitted++;
        last_admit = now_ns();
        if (conc) {
          int64_t now = ++sh->in_flight;
          int64_t seen = sh->max_in_flight.load();
          while (now > seen && !sh->max_in_flight.compare_exchange_weak(seen, now)) {
          }
          // The request's work: long enough that the limit binds (rate x hold = 10 in flight on average).
          std::this_thread::sleep_for(std::chrono::microseconds(h.hold_us));
          --sh->in_flight;
        }
        fw_release(client, d.ticket);
      }
      // An admit sent just before the end completes a round trip after it: the bucket refills until then.
      int64_t seen = sh->last_admit_ns.load();
      while (last_admit > seen && !sh->last_admit_ns.compare_exchange_weak(seen, last_admit)) {
      }
      sh->decisions += decisions;
      sh->admitted += admitted;
      sh->not_store += not_store;
      sh->failed_open += failed_open;
    });
  }
  for (auto &th : ts) th.join();
  // What a SIGKILL now would strand, before the client gives it back as it closes.
  std::string m = metrics_of(client);
  if (getenv("FW_BENCH_DEBUG")) std::fprintf(stderr, "child %d: %s\n", static_cast<int>(getpid()), m.c_str());
  sh->in_process += json_number(m, "decisions_in_process");
  sh->lease_calls += json_number(m, "lease_calls");
  sh->give_backs += json_number(m, "give_backs");
  sh->tokens_in_hand += json_number(m, "tokens_in_hand");
  sh->slots_in_hand += json_number(m, "slots_in_hand");
  sh->exact += json_number(m, "exact_admits");
  sh->after_call += json_number(m, "decisions_after_lease_call");
  fw_client_free(client);
  _exit(0);
}

HotRun hot_run(const Options &o, const HotResult &h, bool lease, bool conc) {
  HotRun run;
  run.lease = lease;
  run.conc = conc;
  run.name = std::string(lease ? "lease on" : "lease off (today)") + (conc ? ", concurrency 20" : "");
  std::string rr = R"("request_rate": {"rate": )" + num(h.rate, 0) + R"(, "burst": )" + std::to_string(h.burst);
  if (lease)
    rr += R"(, "lease": {"max_tokens": )" + std::to_string(h.max_tokens) + R"(, "ttl_ms": )" +
          std::to_string(h.token_ttl_ms) + "}";
  rr += "}";
  if (conc) {
    rr += R"(, "concurrency": {"limit": )" + std::to_string(h.conc_limit);
    if (lease)
      rr += R"(, "lease": {"max_slots": )" + std::to_string(h.max_slots) + R"(, "ttl_ms": )" +
            std::to_string(h.slot_ttl_ms) + "}";
    rr += "}";
  }
  std::string policy = R"({"store": ")" + redis_url(o) + R"(", )" + rr + "}";
  auto *sh = static_cast<HotShared *>(
      mmap(nullptr, sizeof(HotShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) throw std::runtime_error("hot: mmap failed");
  new (sh) HotShared();
  Conn c(o);
  c.run({"DEL", "floodwall:{hot-bench}:rate", "floodwall:{hot-bench}:conc"});  // a full bucket, no slot held
  int64_t start_ns = now_ns() + 500'000'000;                                   // the children connect first
  int64_t end_ns = start_ns + static_cast<int64_t>(h.seconds * 1e9);
  std::vector<pid_t> kids;
  for (int p = 0; p < h.procs; p++) {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) hot_child(policy, h, conc, start_ns, end_ns, sh);
    kids.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(start_ns - now_ns()));
  int64_t commands0 = client_commands(c);
  double cpu0 = other_cpu_us(o.redis_pid);
  std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(0, end_ns - now_ns())));
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("hot: a child process failed");
  }
  // Counted until every child closed: the give-backs at the end are part of the run's cost.
  run.commands = client_commands(c) - commands0;
  double cpu1 = other_cpu_us(o.redis_pid);
  run.redis_cpu_us = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
  run.seconds = static_cast<double>(std::max(end_ns, sh->last_admit_ns.load()) - start_ns) / 1e9;
  run.decisions = sh->decisions;
  run.admitted = sh->admitted;
  run.not_store = sh->not_store;
  run.failed_open = sh->failed_open;
  run.max_in_flight = sh->max_in_flight;
  run.in_process = sh->in_process;
  run.lease_calls = sh->lease_calls;
  run.give_backs = sh->give_backs;
  run.tokens_in_hand_at_end = sh->tokens_in_hand;
  run.slots_in_hand_at_end = sh->slots_in_hand;
  run.exact = sh->exact;
  std::printf("hot %-32s %10.0f decisions/s, %.4f%% not answered by Redis, %" PRIu64
              " admitted (%.3f of burst + rate x "
              "time), %" PRId64 " Redis commands (%.1f decisions each), max in flight %" PRId64 "\n",
              run.name.c_str(), run.decisions_per_s(), 100 * run.not_store_share(), run.admitted,
              static_cast<double>(run.admitted) / h.bound(run), run.commands, run.per_command(), run.max_in_flight);
  std::printf("    in process %" PRId64 ", after a lease call %" PRId64 ", exact %" PRId64 ", lease calls %" PRId64
              ", give-backs %" PRId64 ", rejected by rate %" PRId64 ", by concurrency %" PRId64 "\n",
              run.in_process, sh->after_call.load(), sh->exact.load(), run.lease_calls, run.give_backs,
              sh->rejected_rate.load(), sh->rejected_conc.load());
  std::fflush(stdout);
  munmap(sh, sizeof(HotShared));
  return run;
}

void bench_hot(const Options &o, Results &res) {
  HotResult &h = res.hot;
  // Lease off first, then on: the baseline of the same run, a few seconds apart.
  for (bool conc : {false, true})
    for (bool lease : {false, true}) h.runs.push_back(hot_run(o, h, lease, conc));
  res.have_hot = true;
}

// ---------------------------------------------------------------------------------- the report

// What the cluster's measured script cost says about masters on machines of their own: at the row with the
// most callers (the busiest Redis), the masters' CPU per decision (their sum: each decision is one script
// on one master) and the single node's; one core of script work a second per master.
struct ClusterProjection {
  bool known = false;
  int callers = 0;
  double master_cpu_us = 0, single_cpu_us = 0;
  double per_master = 0;  // decisions/s one master on a core of its own would serve: 1e6 / master_cpu_us
  int masters = 10;
  double masters_ceiling() const { return masters * per_master; }
};

ClusterProjection cluster_projection(const ClusterResult &c) {
  ClusterProjection p;
  const ClusterRow *busiest = nullptr;
  for (const auto &row : c.rows)
    if (!busiest || row.callers > busiest->callers) busiest = &row;
  if (!busiest) return p;
  RunStats cl = busiest->cluster_median(), si = busiest->single_median();
  p.callers = busiest->callers;
  p.master_cpu_us = cl.redis_cpu_us;
  p.single_cpu_us = si.redis_cpu_us;
  p.known = cl.redis_cpu_us > 0;
  if (p.known) p.per_master = 1e6 / cl.redis_cpu_us;
  return p;
}

long cores() {
  return sysconf(_SC_NPROCESSORS_ONLN);
}

struct Goals {
  // Each: evaluated?, met?, what was measured.
  struct Goal {
    bool evaluated = false, met = false, partly = false;  // partly: some of its conditions hold
    std::string text;
  } g1, g2, g3, g4, g5;
};

Goals evaluate(const Results &r) {
  Goals g;
  for (const auto &row : r.redis) {
    if (row.callers != 64) continue;
    // Against the seed by EVALSHA when it ran (the issue's baseline: a careful user's seed), else by EVAL.
    const bool sha = !row.seed_sha.empty();
    RunStats fw = row.fw_median(), seed = sha ? row.seed_sha_median() : row.seed_median();
    double ratio = sha ? row.ratio_sha() : row.ratio();
    bool lower_p99 = fw.p99_us < seed.p99_us;
    // The ceiling "at the same concurrency" is redis-benchmark with as many requests in flight as there
    // are callers (-c 64 -P 1); the pipelined one (-P 16, 1024 in flight) is reported beside it.
    double ceil = median(row.ceiling), ceil_n = median(row.ceiling_n);
    bool near_ceiling = ceil_n > 0 && fw.ops_per_s * 2 >= ceil_n;
    g.g1.evaluated = true;
    g.g1.met = ratio >= 2 && lower_p99 && (ceil_n == 0 || near_ceiling);
    g.g1.partly = !g.g1.met && (ratio >= 2 || lower_p99 || near_ceiling);
    g.g1.text = "64 callers: " + num(ratio, 2) + "x the seed" + (sha ? " by EVALSHA" : "") + " (goal >= 2x); p99 " +
                num(fw.p99_us) + " us vs " + num(seed.p99_us) + " us (goal: lower)";
    if (ceil_n > 0)
      g.g1.text += "; " + num(fw.ops_per_s / ceil_n, 2) +
                   " of the trivial script's throughput at the same concurrency (64 in flight; goal >= 0.5)";
    if (ceil > 0) g.g1.text += "; " + num(fw.ops_per_s / ceil, 2) + " of it pipelined 16 deep (1024 in flight)";
    double fw_total = fw.client_cpu_us + fw.redis_cpu_us, seed_total = seed.client_cpu_us + seed.redis_cpu_us;
    if (fw.redis_cpu_us >= 0 && fw_total > 0)
      g.g1.text += "; CPU per admit (client + Redis) " + num(fw_total) + " us vs " + num(seed_total) +
                   " us = " + num(seed_total / fw_total, 2) + "x";
    double fwc = median(row.fw_script_ceiling);
    if (fwc > 0) g.g1.text += "; " + num(fw.ops_per_s / fwc, 2) + " of tenant_admit.lua's own ceiling";
  }
  if (r.have_embedded) {
    g.g2.evaluated = true;
    // Judged on the thread's CPU time, the cost of a decision; the wall figure is shown beside it (it
    // also counts the time the thread was descheduled by other work on the box).
    g.g2.met = r.embedded.cpu_ns_one < 80;
    g.g2.text = num(r.embedded.cpu_ns_one) + " ns of CPU (" + num(r.embedded.ns_one) +
                " ns wall) per admit + release on one thread (goal < 80 ns, #59); two threads " +
                num(r.embedded.two_over_one, 2) + "x one thread's decisions/s";
  }
  if (r.have_memory) {
    double fw = static_cast<double>(r.memory.fw_bytes) / r.memory.tenants;
    double seed = static_cast<double>(r.memory.seed_bytes) / r.memory.tenants;
    g.g3.evaluated = true;
    g.g3.met = fw * 2 <= seed;
    g.g3.text =
        num(fw) + " vs " + num(seed) + " bytes per tenant = " + num(fw / seed, 2) + " of the seed (goal <= 0.5)";
  }
  if (r.have_hot) {
    const HotResult &h = r.hot;
    const HotRun *off = h.find(false, false), *on = h.find(true, false), *coff = h.find(false, true),
                 *con = h.find(true, true);
    if (off && on && coff && con) {
      g.g5.evaluated = true;
      double ratio = on->admitted / h.bound(*on);
      bool per_command = on->per_command() >= 10 && con->per_command() >= 10;
      bool admitted = ratio >= 0.85 && ratio <= 1.0;
      bool limit = con->max_in_flight <= h.conc_limit && coff->max_in_flight <= h.conc_limit;
      double faster = off->decisions_per_s() > 0 ? on->decisions_per_s() / off->decisions_per_s() : 0;
      double faster_conc = coff->decisions_per_s() > 0 ? con->decisions_per_s() / coff->decisions_per_s() : 0;
      bool speed = faster >= 5 && faster_conc >= 5;
      g.g5.met = per_command && admitted && limit && speed;
      g.g5.partly = !g.g5.met && (per_command || admitted || limit || speed);
      g.g5.text = num(on->per_command(), 1) + " and " + num(con->per_command(), 1) +
                  " decisions per Redis command without and with concurrency 20 (goal >= 10; lease off: " +
                  num(off->per_command(), 2) + ", " + num(coff->per_command(), 2) + "); admitted " +
                  num(100 * ratio, 1) + "% of burst + rate x time (goal 85-100%; with concurrency " +
                  num(100 * con->admitted / h.bound(*con), 1) + "%); max in flight " +
                  std::to_string(con->max_in_flight) + " of 20; " + num(faster, 1) + "x and " + num(faster_conc, 1) +
                  "x the decisions/s of lease off in the same run (goal >= 5x)";
    }
  }
  if (r.have_failopen) {
    const auto &f = r.failopen;
    g.g4.evaluated = true;
    bool before = f.before_n > 0 && f.before_max_us < f.deadline * 1000.0;
    bool after = f.after_n > 0 && f.after_p99_us < 5;
    g.g4.met = before && after;
    g.g4.partly = !g.g4.met && (before || after);
    g.g4.text = "before the breaker opens: max " + num(f.before_max_us / 1000, 2) + " ms (p50 " +
                num(f.before_p50_us / 1000, 2) + " ms) vs a " + std::to_string(f.deadline) +
                " ms deadline; after: p99 " + num(f.after_p99_us, 2) + " us (goal < 5 us)";
  }
  return g;
}

std::string stats_json(const RunStats &s) {
  std::ostringstream j;
  j << "{\"admits_per_s\": " << num(s.ops_per_s) << ", \"p50_us\": " << num(s.p50_us, 2)
    << ", \"p99_us\": " << num(s.p99_us, 2) << ", \"client_cpu_us_per_call\": " << num(s.client_cpu_us, 2)
    << ", \"redis_cpu_us_per_call\": " << num(s.redis_cpu_us, 2) << ", \"ops\": " << s.ops
    << ", \"failed_open\": " << s.failed_open << ", \"not_answered_by_redis\": " << s.not_store
    << ", \"rejected\": " << s.rejected << ", \"errors\": " << s.errors << "}";
  return j.str();
}

std::string goal_json(const Goals::Goal &g) {
  if (!g.evaluated) return "null";
  std::string text;
  for (char c : g.text) {
    if (c == '"' || c == '\\') text += '\\';
    text += c;
  }
  return std::string("{\"met\": ") +
         (g.met      ? "true"
          : g.partly ? "\"partly\""
                     : "false") +
         ", \"measured\": \"" + text + "\"}";
}

std::string to_json(const Options &o, const Results &r, const Goals &g) {
  std::ostringstream j;
  j << "{\n  \"floodwall_version\": \"" << fw_version() << "\",\n  \"settings\": {\"seconds\": " << o.seconds
    << ", \"rounds\": " << o.rounds << ", \"tenants\": " << o.tenants << ", \"memory_tenants\": " << o.memory_tenants
    << "},\n";
  j << "  \"redis_path\": [";
  for (size_t i = 0; i < r.redis.size(); i++) {
    const auto &row = r.redis[i];
    RunStats fw = row.fw_median(), seed = row.seed_median();
    j << (i ? "," : "") << "\n    {\"callers\": " << row.callers << ", \"floodwall\": " << stats_json(fw)
      << ", \"seed\": " << stats_json(seed) << ", \"ratio_floodwall_over_seed\": " << num(row.ratio(), 3);
    if (!row.seed_sha.empty())
      j << ", \"seed_evalsha\": " << stats_json(row.seed_sha_median())
        << ", \"ratio_floodwall_over_seed_evalsha\": " << num(row.ratio_sha(), 3);
    if (!row.ceiling.empty())
      j << ", \"ceiling_ops_per_s\": " << num(median(row.ceiling))
        << ", \"floodwall_over_ceiling\": " << num(fw.ops_per_s / median(row.ceiling), 3);
    if (!row.ceiling.empty()) j << ", \"ceiling_redis_cpu_us_per_call\": " << num(median(row.ceiling_cpu), 2);
    if (!row.ceiling_n.empty())
      j << ", \"ceiling_same_concurrency_ops_per_s\": " << num(median(row.ceiling_n))
        << ", \"floodwall_over_ceiling_same_concurrency\": " << num(fw.ops_per_s / median(row.ceiling_n), 3);
    if (!row.fw_script_ceiling.empty())
      j << ", \"tenant_admit_script_ceiling_ops_per_s\": " << num(median(row.fw_script_ceiling))
        << ", \"tenant_admit_script_redis_cpu_us_per_call\": " << num(median(row.fw_script_cpu), 2);
    if (!row.seed_script_ceiling.empty())
      j << ", \"seed_script_ceiling_ops_per_s\": " << num(median(row.seed_script_ceiling))
        << ", \"seed_script_redis_cpu_us_per_call\": " << num(median(row.seed_script_cpu), 2);
    j << ", \"rounds\": {\"floodwall\": [";
    for (size_t k = 0; k < row.fw.size(); k++) j << (k ? ", " : "") << stats_json(row.fw[k]);
    j << "], \"seed\": [";
    for (size_t k = 0; k < row.seed.size(); k++) j << (k ? ", " : "") << stats_json(row.seed[k]);
    j << "], \"seed_evalsha\": [";
    for (size_t k = 0; k < row.seed_sha.size(); k++) j << (k ? ", " : "") << stats_json(row.seed_sha[k]);
    j << "], \"ceiling\": [";
    for (size_t k = 0; k < row.ceiling.size(); k++) j << (k ? ", " : "") << num(row.ceiling[k]);
    j << "], \"ceiling_same_concurrency\": [";
    for (size_t k = 0; k < row.ceiling_n.size(); k++) j << (k ? ", " : "") << num(row.ceiling_n[k]);
    j << "]}}";
  }
  j << "\n  ],\n";
  if (!r.tls.empty()) {
    j << "  \"tls\": [";
    for (size_t i = 0; i < r.tls.size(); i++) {
      const auto &row = r.tls[i];
      j << (i ? "," : "") << "\n    {\"callers\": " << row.callers << ", \"plain\": " << stats_json(row.plain_median())
        << ", \"tls\": " << stats_json(row.tls_median())
        << ", \"ratio_tls_over_plain_admits_per_s\": " << num(row.ratio(&RunStats::ops_per_s), 3)
        << ", \"ratio_tls_over_plain_p99\": " << num(row.ratio(&RunStats::p99_us), 3) << ", \"rounds\": {\"plain\": [";
      for (size_t k = 0; k < row.plain.size(); k++) j << (k ? ", " : "") << stats_json(row.plain[k]);
      j << "], \"tls\": [";
      for (size_t k = 0; k < row.tls.size(); k++) j << (k ? ", " : "") << stats_json(row.tls[k]);
      j << "]}}";
    }
    j << "\n  ],\n";
  }
  if (r.have_cluster) {
    const auto &c = r.cluster;
    ClusterProjection pr = cluster_projection(c);
    auto ints = [](const auto &v) {
      std::ostringstream a;
      a << "[";
      for (size_t k = 0; k < v.size(); k++) a << (k ? ", " : "") << v[k];
      a << "]";
      return a.str();
    };
    j << "  \"cluster\": {\"masters\": " << c.ports.size() << ", \"replicas\": 0, \"cores\": " << cores()
      << ", \"ports\": " << ints(c.ports) << ", \"keys_per_master\": " << ints(c.keys)
      << ", \"cold_pass_decisions\": " << c.cold_decisions
      << ", \"cold_pass_not_answered_by_redis\": " << c.cold_not_store;
    if (pr.known)
      j << ", \"projection\": {\"at_callers\": " << pr.callers
        << ", \"masters_cpu_us_per_decision\": " << num(pr.master_cpu_us, 2)
        << ", \"single_node_cpu_us_per_decision\": " << num(pr.single_cpu_us, 2)
        << ", \"one_master_decisions_per_s\": " << num(pr.per_master, 0) << ", \"masters\": " << pr.masters
        << ", \"masters_decisions_per_s\": " << num(pr.masters_ceiling(), 0) << "}";
    j << ", \"rows\": [";
    for (size_t i = 0; i < c.rows.size(); i++) {
      const auto &row = c.rows[i];
      RunStats cl = row.cluster_median();
      j << (i ? "," : "") << "\n    {\"callers\": " << row.callers
        << ", \"single\": " << stats_json(row.single_median()) << ", \"cluster\": " << stats_json(cl)
        << ", \"cluster_masters_cpu_us_per_decision\": [";
      for (size_t k = 0; k < cl.server_cpu_us.size(); k++) j << (k ? ", " : "") << num(cl.server_cpu_us[k], 2);
      j << "], \"not_answered_by_reason\": {\"single\": " << reasons_json(row.single_median())
        << ", \"cluster\": " << reasons_json(cl) << "}";
      j << ", \"ratio_cluster_over_single_admits_per_s\": " << num(row.ratio(&RunStats::ops_per_s), 3)
        << ", \"ratio_cluster_over_single_p99\": " << num(row.ratio(&RunStats::p99_us), 3)
        << ", \"rounds\": {\"single\": [";
      for (size_t k = 0; k < row.single.size(); k++) j << (k ? ", " : "") << stats_json(row.single[k]);
      j << "], \"cluster\": [";
      for (size_t k = 0; k < row.cluster.size(); k++) j << (k ? ", " : "") << stats_json(row.cluster[k]);
      j << "]}}";
    }
    j << "\n  ]},\n";
  }
  if (r.have_rules) {
    const auto &x = r.rules;
    auto script = [](const std::vector<ScriptRun> &v) {
      std::ostringstream a;
      a << "{\"calls_per_s\": " << num(RulesResult::med_of(v, &ScriptRun::calls_per_s), 0)
        << ", \"redis_cpu_us_per_call\": " << num(RulesResult::med_of(v, &ScriptRun::redis_cpu_us), 2)
        << ", \"rounds\": [";
      for (size_t k = 0; k < v.size(); k++)
        a << (k ? ", " : "") << "{\"calls\": " << v[k].calls << ", \"calls_per_s\": " << num(v[k].calls_per_s, 0)
          << ", \"redis_cpu_us_per_call\": " << num(v[k].redis_cpu_us, 2) << ", \"not_committed\": " << v[k].bad << "}";
      a << "]}";
      return a.str();
    };
    j << "  \"rules\": {\"limits\": " << x.limits << ", \"quotas\": " << x.quotas << ", \"request\": \"" << x.method
      << " " << x.route << "\", \"seconds\": " << o.rules_seconds << ", \"rounds\": " << o.rules_rounds
      << ", \"quota_limit\": " << x.quota_limit << ", \"quota_counted\": " << x.quota_counted
      << ", \"quota_most_one_tenant\": " << x.quota_most
      << ", \"rules_decisions_answered_by_redis\": " << x.rules_answered
      << ", \"rules_decisions\": " << x.rules_decisions << ", \"rule_mismatches\": " << x.rule_mismatches
      << ", \"script_alone\": {\"connections\": " << x.connections << ", \"pipeline\": " << x.pipeline
      << ", \"bucket\": " << script(x.script_bucket) << ", \"rules\": " << script(x.script_rules) << "}, \"rows\": [";
    for (size_t i = 0; i < x.rows.size(); i++) {
      const auto &row = x.rows[i];
      j << (i ? "," : "") << "\n    {\"callers\": " << row.callers
        << ", \"bucket\": " << stats_json(row.bucket_median()) << ", \"rules\": " << stats_json(row.rules_median())
        << ", \"not_answered_by_reason\": {\"bucket\": " << reasons_json(row.bucket_median())
        << ", \"rules\": " << reasons_json(row.rules_median()) << "}"
        << ", \"ratio_rules_over_bucket_admits_per_s\": " << num(row.ratio(&RunStats::ops_per_s), 3)
        << ", \"ratio_rules_over_bucket_redis_cpu\": " << num(row.ratio(&RunStats::redis_cpu_us), 3)
        << ", \"rounds\": {\"bucket\": [";
      for (size_t k = 0; k < row.bucket.size(); k++) j << (k ? ", " : "") << stats_json(row.bucket[k]);
      j << "], \"rules\": [";
      for (size_t k = 0; k < row.rules.size(); k++) j << (k ? ", " : "") << stats_json(row.rules[k]);
      j << "]}}";
    }
    j << "\n  ]},\n";
  }
  if (r.have_embedded)
    j << "  \"embedded\": {\"ns_per_decision_1_thread\": " << num(r.embedded.ns_one, 2)
      << ", \"cpu_ns_per_decision_1_thread\": " << num(r.embedded.cpu_ns_one, 2)
      << ", \"ns_per_decision_per_thread_2_threads\": " << num(r.embedded.ns_two_per_thread, 2)
      << ", \"cpu_ns_per_decision_per_thread_2_threads\": " << num(r.embedded.cpu_ns_two_per_thread, 2)
      << ", \"decisions_per_s_1_thread\": " << num(r.embedded.decisions_per_s_one, 0)
      << ", \"decisions_per_s_2_threads\": " << num(r.embedded.decisions_per_s_two, 0)
      << ", \"two_threads_over_one\": " << num(r.embedded.two_over_one, 2) << "},\n";
  if (r.have_memory) {
    const auto &m = r.memory;
    j << "  \"memory\": {\"tenants\": " << m.tenants
      << ", \"floodwall_bytes_per_tenant\": " << num(static_cast<double>(m.fw_bytes) / m.tenants)
      << ", \"seed_bytes_per_tenant\": " << num(static_cast<double>(m.seed_bytes) / m.tenants)
      << ", \"floodwall_keys\": " << m.fw_keys << ", \"seed_keys\": " << m.seed_keys
      << ", \"floodwall_memory_usage_one_tenant\": " << m.fw_key_usage
      << ", \"seed_memory_usage_one_tenant\": " << m.seed_key_usage << ", \"floodwall_sample_key\": \""
      << m.fw_sample_key << "\"},\n";
  }
  if (r.have_failopen) {
    const auto &f = r.failopen;
    j << "  \"fail_open\": {\"default_deadline\": " << f.deadline << ", \"timed_out_admits\": " << f.before_n
      << ", \"before_open_p50_us\": " << num(f.before_p50_us) << ", \"before_open_max_us\": " << num(f.before_max_us)
      << ", \"breaker_admits\": " << f.after_n << ", \"after_open_p50_us\": " << num(f.after_p50_us, 3)
      << ", \"after_open_p99_us\": " << num(f.after_p99_us, 3) << ", \"after_open_max_us\": " << num(f.after_max_us, 1)
      << ", \"other_outcomes\": " << f.undecided_other
      << ", \"recovered_after_sigcont\": " << (f.recovered ? "true" : "false") << "},\n";
  }
  if (r.have_outage) {
    const auto &f = r.outage;
    j << "  \"outage\": {\"processes\": " << f.procs << ", \"threads\": " << f.threads << ", \"rate\": " << num(f.rate)
      << ", \"burst\": " << f.burst << ", \"redis_stopped_s\": " << num(f.outage_s)
      << ", \"decisions\": " << f.decisions << ", \"by_redis\": " << f.by_store
      << ", \"by_fallback\": " << f.by_fallback << ", \"failed_open\": " << f.failed_open
      << ", \"refused\": " << f.refused << ", \"admitted_by_redis\": " << f.admitted_store
      << ", \"redis_bound\": " << num(f.store_bound()) << ", \"admitted_by_fallback\": " << f.admitted_fallback
      << ", \"fallback_bound\": " << num(f.fallback_bound()) << ", \"p99_us\": " << num(f.p99_us)
      << ", \"p999_us\": " << num(f.p999_us) << ", \"max_us\": " << num(f.max_us) << "},\n";
  }
  if (r.have_hot) {
    const auto &h = r.hot;
    j << "  \"hot_tenant\": {\"processes\": " << h.procs << ", \"threads\": " << h.threads
      << ", \"rate\": " << num(h.rate) << ", \"burst\": " << h.burst << ", \"seconds\": " << num(h.seconds)
      << ", \"lease\": {\"max_tokens\": " << h.max_tokens << ", \"ttl_ms\": " << h.token_ttl_ms
      << "}, \"concurrency_lease\": {\"max_slots\": " << h.max_slots << ", \"ttl_ms\": " << h.slot_ttl_ms
      << "}, \"hold_us\": " << h.hold_us << ", \"runs\": [";
    for (size_t i = 0; i < h.runs.size(); i++) {
      const auto &x = h.runs[i];
      j << (i ? ", " : "") << "{\"name\": \"" << x.name << "\", \"lease\": " << (x.lease ? "true" : "false")
        << ", \"concurrency\": " << (x.conc ? "true" : "false") << ", \"seconds\": " << num(x.seconds, 3)
        << ", \"decisions\": " << x.decisions << ", \"decisions_per_s\": " << num(x.decisions_per_s(), 0)
        << ", \"not_answered_by_redis\": " << x.not_store << ", \"failed_open\": " << x.failed_open
        << ", \"admitted\": " << x.admitted << ", \"bound\": " << num(h.bound(x), 0)
        << ", \"admitted_over_bound\": " << num(x.admitted / h.bound(x), 4) << ", \"redis_commands\": " << x.commands
        << ", \"decisions_per_command\": " << num(x.per_command(), 2) << ", \"redis_cpu_us_per_decision\": "
        << (x.redis_cpu_us >= 0 && x.decisions ? num(x.redis_cpu_us / x.decisions, 3) : "null")
        << ", \"max_in_flight\": " << x.max_in_flight << ", \"decisions_in_process\": " << x.in_process
        << ", \"lease_calls\": " << x.lease_calls << ", \"give_backs\": " << x.give_backs
        << ", \"exact_admits_hot\": " << x.exact << ", \"tokens_in_hand_at_end\": " << x.tokens_in_hand_at_end
        << ", \"slots_in_hand_at_end\": " << x.slots_in_hand_at_end << "}";
    }
    j << "]},\n";
  }
  j << "  \"goals\": {\"1_redis_throughput\": " << goal_json(g.g1) << ", \"2_embedded_ns\": " << goal_json(g.g2)
    << ", \"3_memory_per_tenant\": " << goal_json(g.g3) << ", \"4_fail_open\": " << goal_json(g.g4)
    << ", \"5_hot_tenant\": " << goal_json(g.g5) << "}\n}\n";
  return j.str();
}

std::string to_markdown(const Options &o, const Results &r, const Goals &g) {
  std::ostringstream md;
  if (!r.redis.empty()) {
    md << "### 1. Redis path: floodwall against the seed's reference design\n\n"
       << "Each figure is the median over " << o.rounds << " rounds of " << num(o.seconds, 1)
       << " s per contender, contenders alternating (floodwall / seed: the median of the rounds' own ratios). Every "
          "caller is a thread; callers rotate over "
       << o.tenants
       << " tenants of a bucket that never rejects (rate 1,000,000/s, burst 1,000,000), so every admit is one full "
          "decision by the Redis script. floodwall: one shared `fw_client`, `fw_admit` (blocking) through the C ABI. "
          "Seed: each caller thread its own blocking hiredis connection, `EVAL` of the seed script text with 2 keys; "
          "seed by SHA: the same with `EVALSHA` of the script loaded once (the issue's baseline). "
          "Ceilings, a script that does nothing: `redis-benchmark -c N EVAL \"return 1\" 0` at the callers' own "
          "concurrency (N connections, one request in flight on each, as N callers each waiting for their reply; "
          "goal 1 is judged on this one), and the same pipelined 16 deep (`-P 16`, 16 N in flight).\n\n"
       << "| callers | floodwall admits/s | not answered by Redis | p50 µs | p99 µs | seed admits/s | p50 µs | p99 µs "
          "| "
          "floodwall / seed | seed by SHA admits/s | p99 µs | floodwall / seed by SHA | "
          "ceiling, N in flight | floodwall / it | ceiling, 16 N in flight | floodwall / it |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::ostringstream cpu;
    cpu << "CPU per admit (µs), medians: the benchmark process (callers, plus floodwall's I/O thread) and the "
           "redis-server (from /proc/PID/stat, 10 ms ticks). When the box is shared these are steadier than the "
           "wall-clock figures: the last column is how many admits floodwall makes of the CPU one seed admit "
           "takes.\n\n"
        << "| callers | floodwall client | floodwall redis-server | seed client | seed redis-server | "
           "seed total / floodwall total | seed by SHA client | seed by SHA redis-server | its total / floodwall "
           "total |\n"
        << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &row : r.redis) {
      RunStats fw = row.fw_median(), seed = row.seed_median(), sha = row.seed_sha_median();
      double ceil = median(row.ceiling), ceil_n = median(row.ceiling_n);
      md << "| " << row.callers << " | " << grouped(fw.ops_per_s) << " | " << num(100 * fw.not_store_share(), 4)
         << "% (" << fw.not_store << ", failed open " << fw.failed_open << ") | " << num(fw.p50_us) << " | "
         << num(fw.p99_us) << " | " << grouped(seed.ops_per_s) << " | " << num(seed.p50_us) << " | " << num(seed.p99_us)
         << " | **" << num(row.ratio(), 2) << "x** | ";
      if (row.seed_sha.empty())
        md << "- | - | - | ";
      else
        md << grouped(sha.ops_per_s) << " | " << num(sha.p99_us) << " | **" << num(row.ratio_sha(), 2) << "x** | ";
      md << (ceil_n > 0 ? grouped(ceil_n) : "-") << " | " << (ceil_n > 0 ? num(fw.ops_per_s / ceil_n, 2) : "-") << " | "
         << (ceil > 0 ? grouped(ceil) : "-") << " | " << (ceil > 0 ? num(fw.ops_per_s / ceil, 2) : "-") << " |\n";
      double fw_total = fw.client_cpu_us + fw.redis_cpu_us, seed_total = seed.client_cpu_us + seed.redis_cpu_us;
      cpu << "| " << row.callers << " | " << num(fw.client_cpu_us, 1) << " | " << num(fw.redis_cpu_us, 1) << " | "
          << num(seed.client_cpu_us, 1) << " | " << num(seed.redis_cpu_us, 1) << " | "
          << (fw_total > 0 ? num(seed_total / fw_total, 2) + "x" : "-") << " | ";
      double sha_total = sha.client_cpu_us + sha.redis_cpu_us;
      if (row.seed_sha.empty())
        cpu << "- | - | - |\n";
      else
        cpu << num(sha.client_cpu_us, 1) << " | " << num(sha.redis_cpu_us, 1) << " | "
            << (fw_total > 0 ? num(sha_total / fw_total, 2) + "x" : "-") << " |\n";
    }
    md << "\n" << cpu.str();
    if (r.have_ceiling) {
      md << "\nCeilings, `redis-benchmark -c N -P 16 -r " << o.tenants
         << "` (no client work, 16 commands per round trip): the trivial script, floodwall's own "
            "`lua/tenant_admit.lua` by SHA with a request-rate-only admit's arguments, and the seed script by text. "
            "Ops/s, with the redis-server's CPU per call in parentheses (µs). The last column is how much of its "
            "own script's ceiling floodwall's client reaches.\n\n"
         << "| callers | EVAL \"return 1\" 0 | tenant_admit.lua (EVALSHA) | seed script (EVAL) | floodwall admits / "
            "tenant_admit.lua ceiling |\n|---:|---:|---:|---:|---:|\n";
      for (const auto &row : r.redis) {
        double fwc = median(row.fw_script_ceiling);
        md << "| " << row.callers << " | " << grouped(median(row.ceiling)) << " (" << num(median(row.ceiling_cpu))
           << ") | " << (fwc > 0 ? grouped(fwc) + " (" + num(median(row.fw_script_cpu)) + ")" : "-") << " | "
           << grouped(median(row.seed_script_ceiling)) << " (" << num(median(row.seed_script_cpu)) << ") | "
           << (fwc > 0 ? num(row.fw_median().ops_per_s / fwc, 2) : "-") << " |\n";
      }
    }
    uint64_t undecided = 0;
    for (const auto &row : r.redis) {
      RunStats fw = row.fw_median(), seed = row.seed_median(), sha = row.seed_sha_median();
      undecided += fw.failed_open + fw.errors + fw.rejected + seed.errors + seed.rejected + sha.errors + sha.rejected;
    }
    md << "\n"
       << (undecided ? "**Warning: " + std::to_string(undecided) + " calls failed open, errored or were rejected.**"
                     : "Every call of every round was decided by Redis and allowed (no fail-open, no error).")
       << "\n\n";
  }
  if (!r.tls.empty()) {
    md << "### 1b. The Redis path over TLS (`rediss://`) beside plain TCP\n\n"
       << "floodwall alone, section 1's policy and callers (threads, blocking `fw_admit` through the C ABI on one "
          "shared `fw_client` per transport, rotating over "
       << o.tenants
       << " tenants of a bucket that never rejects, the shipped Redis defaults), on the same redis-server: plain "
          "TCP (`redis://127.0.0.1:PORT/0`) and TLS on its `--tls-port` (`rediss://127.0.0.1:TLSPORT/0` with "
          "`\"redis\": {\"tls\": {\"ca_file\": ...}}`: verification on, as shipped; the server certificate is "
          "EC P-256 from a throwaway CA, no client certificate). Each figure is the median over "
       << o.rounds << " rounds of " << num(o.seconds, 1)
       << " s per transport, the two alternating (which goes first alternates too); TLS / plain is the median of "
          "the rounds' own ratios. Before the rounds at each caller count, each transport runs 0.25 s unrecorded, "
          "so that connections and handshakes are made before the clock starts: these are the steady state.\n\n"
       << "| callers | plain decisions/s | not answered by Redis | p99 µs | TLS decisions/s | not answered by Redis "
          "| p99 µs | TLS / plain decisions/s | TLS / plain p99 |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::ostringstream cpu;
    cpu << "CPU per decision (µs), medians: the benchmark process (callers, plus floodwall's I/O thread) and the "
           "redis-server (from /proc/PID/stat, 10 ms ticks): what TLS costs each side, steadier than the wall "
           "clock when the box is shared.\n\n"
        << "| callers | plain client | plain redis-server | TLS client | TLS redis-server | TLS total / plain "
           "total |\n"
        << "|---:|---:|---:|---:|---:|---:|\n";
    uint64_t undecided = 0;
    for (const auto &row : r.tls) {
      RunStats p = row.plain_median(), t = row.tls_median();
      auto share = [](const RunStats &s) {
        return num(100 * s.not_store_share(), 4) + "% (" + std::to_string(s.not_store) + ", failed open " +
               std::to_string(s.failed_open) + ")";
      };
      md << "| " << row.callers << " | " << grouped(p.ops_per_s) << " | " << share(p) << " | " << num(p.p99_us) << " | "
         << grouped(t.ops_per_s) << " | " << share(t) << " | " << num(t.p99_us) << " | **"
         << num(row.ratio(&RunStats::ops_per_s), 2) << "x** | **" << num(row.ratio(&RunStats::p99_us), 2) << "x** |\n";
      double p_total = p.client_cpu_us + p.redis_cpu_us, t_total = t.client_cpu_us + t.redis_cpu_us;
      cpu << "| " << row.callers << " | " << num(p.client_cpu_us, 1) << " | " << num(p.redis_cpu_us, 1) << " | "
          << num(t.client_cpu_us, 1) << " | " << num(t.redis_cpu_us, 1) << " | "
          << (p.redis_cpu_us >= 0 && t.redis_cpu_us >= 0 && p_total > 0 ? num(t_total / p_total, 2) + "x" : "-")
          << " |\n";
      for (const auto *runs : {&row.plain, &row.tls})
        for (const auto &s : *runs) undecided += s.not_store + s.errors + s.rejected;
    }
    md << "\n"
       << cpu.str() << "\n"
       << (undecided ? "**Warning: " + std::to_string(undecided) +
                           " calls were not answered by Redis, errored or were rejected.**"
                     : "Every call of every round, plain and TLS, was decided by Redis and allowed (no fail-open, no "
                       "fallback, no error).")
       << "\n\n";
  }
  if (r.have_cluster) {
    const auto &c = r.cluster;
    ClusterProjection pr = cluster_projection(c);
    md << "### 1c. The Redis path on a Redis Cluster (" << c.ports.size()
       << " masters, no replicas) beside the single node\n\n"
       << "floodwall alone, section 1's policy (the same bucket that never rejects, the shipped Redis defaults) and "
          "callers (threads, blocking `fw_admit` through the C ABI on one shared `fw_client` per store), rotating "
          "over "
       << o.tenants
       << " tenants: on the single redis-server of section 1 (`redis://127.0.0.1:PORT/0`) and on a Redis Cluster "
          "of "
       << c.ports.size()
       << " masters and no replicas (`redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: each tenant's "
          "admits go to the master of its slot, one pipelined connection set and I/O thread per master). After "
          "the runs the masters held ";
    for (size_t k = 0; k < c.keys.size(); k++) md << (k ? " / " : "") << grouped(static_cast<double>(c.keys[k]));
    md << " tenants' keys. Each figure is the median over " << o.rounds << " rounds of " << num(o.seconds, 1)
       << " s per store, the two alternating (which goes first alternates too); cluster / single is the median of "
          "the rounds' own ratios. Before the rounds at each caller count, each store runs 0.25 s unrecorded. A "
          "fresh cluster client's first admit of every tenant, before any of that: "
       << c.cold_not_store << " of " << c.cold_decisions << " not answered by Redis.\n\n"
       << "| callers | single decisions/s | not answered by Redis | p99 µs | cluster decisions/s | not answered by "
          "Redis | p99 µs | cluster / single decisions/s | cluster / single p99 |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::ostringstream cpu;
    cpu << "CPU per decision (µs), medians: the benchmark process (callers, plus floodwall's I/O threads: one for "
           "the single node, one per master for the cluster) and the redis-servers (from /proc/PID/stat, 10 ms "
           "ticks; for the cluster the masters' sum, each decision being one script on one master, and each "
           "master's CPU over all the cluster's decisions).\n\n"
        << "| callers | single client | single redis-server | cluster client | cluster masters (sum) | each master "
           "|\n"
        << "|---:|---:|---:|---:|---:|---|\n";
    uint64_t undecided = 0;
    for (const auto &row : c.rows) {
      RunStats si = row.single_median(), cl = row.cluster_median();
      auto share = [](const RunStats &s) {
        std::string why = reasons_text(s);
        return num(100 * s.not_store_share(), 4) + "% (" + std::to_string(s.not_store) + ", failed open " +
               std::to_string(s.failed_open) + (why.empty() ? "" : "; " + why) + ")";
      };
      md << "| " << row.callers << " | " << grouped(si.ops_per_s) << " | " << share(si) << " | " << num(si.p99_us)
         << " | " << grouped(cl.ops_per_s) << " | " << share(cl) << " | " << num(cl.p99_us) << " | **"
         << num(row.ratio(&RunStats::ops_per_s), 2) << "x** | **" << num(row.ratio(&RunStats::p99_us), 2) << "x** |\n";
      std::string each;
      for (size_t k = 0; k < cl.server_cpu_us.size(); k++) each += (k ? " / " : "") + num(cl.server_cpu_us[k], 1);
      cpu << "| " << row.callers << " | " << num(si.client_cpu_us, 1) << " | " << num(si.redis_cpu_us, 1) << " | "
          << num(cl.client_cpu_us, 1) << " | " << num(cl.redis_cpu_us, 1) << " | "
          << (cl.redis_cpu_us >= 0 ? each : std::string("-")) << " |\n";
      for (const auto *runs : {&row.single, &row.cluster})
        for (const auto &s : *runs) undecided += s.not_store + s.errors + s.rejected;
    }
    md << "\n" << cpu.str() << "\n";
    md << "**This machine's " << cores() << " cores bound what the cluster can show here.** The " << c.ports.size()
       << " masters, the single node, the callers and floodwall's I/O threads all share them, so the masters "
          "cannot each have a core: on this box the cluster's advantage over the single node is bounded by CPU, "
          "not by what Redis Cluster scales to.";
    if (pr.known)
      md << " At " << pr.callers << " callers a decision cost the masters " << num(pr.master_cpu_us, 1)
         << " µs of CPU (the single node: " << num(pr.single_cpu_us, 1) << " µs), so one master with a core of its "
         << "own would serve up to 1e6 / " << num(pr.master_cpu_us, 1) << " = " << grouped(pr.per_master)
         << " decisions/s, and " << pr.masters << " masters on machines of their own up to " << pr.masters
         << " x 1e6 / " << num(pr.master_cpu_us, 1) << " = **" << grouped(pr.masters_ceiling())
         << " decisions/s** (the ceiling of Redis' side, with tenants spread evenly over the slots and callers "
            "elsewhere with CPU to spare; a master that busy batches more replies per read than these did, and "
            "spends less per decision, so this errs low).";
    md << "\n\n"
       << (undecided ? "**Warning: " + std::to_string(undecided) +
                           " calls were not answered by Redis, errored or were rejected.**"
                     : "Every call of every round, single node and cluster, was decided by Redis and allowed (no "
                       "fail-open, no fallback, no error).")
       << "\n\n";
  }
  if (r.have_rules) {
    const auto &x = r.rules;
    double busiest = 0;
    for (const auto &row : x.rows)
      for (const auto *runs : {&row.bucket, &row.rules})
        for (const auto &s : *runs) busiest = std::max(busiest, s.ops_per_s);
    md << "### 1d. The price of limits and quotas: " << x.limits << " limits and " << x.quotas
       << " quota beside the tenant's bucket\n\n"
       << "floodwall alone on section 1's redis-server, with the shipped Redis defaults (deadline, breaker, local "
          "fallback; no leases), callers (threads, blocking `fw_admit` through the C ABI on one shared `fw_client` "
          "per policy) rotating over "
       << o.tenants << " tenants, every request `" << x.method << " " << x.route
       << "`. One bucket: section 1's policy, `" << x.bucket_policy << "`. Rules: the same bucket with " << x.limits
       << " `request_rate.limits` whose routes (and methods) all match the request and a month quota, `"
       << x.rules_policy
       << "`. Every admit is one call of `lua/tenant_admit.lua` (one round trip) that also reads the tenant's "
          "control record (absent here); with the rules that call checks and writes the "
       << x.limits
       << " limits' buckets and the quota's count beside the tenant's bucket. Nothing comes near a limit (the "
          "busiest run gave a tenant about "
       << grouped(busiest / o.tenants)
       << " requests a second, against 1,000,000/s and a burst of 1,000,000; the most one tenant's month counted "
          "was "
       << grouped(static_cast<double>(x.quota_most)) << " of " << grouped(static_cast<double>(x.quota_limit))
       << "), so nothing refuses and both policies do the same work but for the rules. Each figure is the median "
          "over "
       << o.rules_rounds << " rounds of " << num(o.rules_seconds, 1)
       << " s per policy, the two alternating (which goes first alternates too); rules / one bucket is the median "
          "of the rounds' own ratios. Before the rounds at each caller count, each policy runs 0.25 s "
          "unrecorded.\n\n"
       << "| callers | one bucket decisions/s | not answered by Redis | p99 µs | " << x.limits << " limits + "
       << x.quotas << " quota decisions/s | not answered by Redis | p99 µs | rules / one bucket decisions/s |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::ostringstream cpu;
    cpu << "CPU per decision (µs), medians: the benchmark process (callers, plus floodwall's I/O thread) and the "
           "redis-server (utime + stime from /proc/PID/stat before and after each run, 10 ms ticks, divided by "
           "the run's decisions).\n\n"
        << "| callers | one bucket client | one bucket redis-server | rules client | rules redis-server | rules / "
           "one bucket, redis-server |\n"
        << "|---:|---:|---:|---:|---:|---:|\n";
    uint64_t undecided = 0;
    for (const auto &row : x.rows) {
      RunStats b = row.bucket_median(), q = row.rules_median();
      auto share = [](const RunStats &s) {
        std::string why = reasons_text(s);
        return num(100 * s.not_store_share(), 4) + "% (" + std::to_string(s.not_store) + ", failed open " +
               std::to_string(s.failed_open) + (why.empty() ? "" : "; " + why) + ")";
      };
      md << "| " << row.callers << " | " << grouped(b.ops_per_s) << " | " << share(b) << " | " << num(b.p99_us) << " | "
         << grouped(q.ops_per_s) << " | " << share(q) << " | " << num(q.p99_us) << " | **"
         << num(row.ratio(&RunStats::ops_per_s), 2) << "x** |\n";
      cpu << "| " << row.callers << " | " << num(b.client_cpu_us, 1) << " | " << num(b.redis_cpu_us, 1) << " | "
          << num(q.client_cpu_us, 1) << " | " << num(q.redis_cpu_us, 1) << " | "
          << (b.redis_cpu_us > 0 && q.redis_cpu_us >= 0 ? num(row.ratio(&RunStats::redis_cpu_us), 2) + "x" : "-")
          << " |\n";
      for (const auto *runs : {&row.bucket, &row.rules})
        for (const auto &s : *runs) undecided += s.not_store + s.errors + s.rejected;
    }
    double sb = RulesResult::med_of(x.script_bucket, &ScriptRun::redis_cpu_us),
           sr = RulesResult::med_of(x.script_rules, &ScriptRun::redis_cpu_us);
    uint64_t bad = 0;
    for (const auto *v : {&x.script_bucket, &x.script_rules})
      for (const auto &s : *v) bad += s.bad;
    md << "\n"
       << cpu.str() << "\n"
       << "The script alone, pipelined (no floodwall client: the calls RedisStore makes for this request, "
          "formatted once, from "
       << x.connections << " connections of one thread, " << x.pipeline
       << " in flight on each, rotating over the same tenants, every reply checked): the redis-server's CPU per "
          "call, what the rules cost Redis itself. Medians of "
       << o.rules_rounds << " rounds of 1 s per variant, alternating.\n\n"
       << "| `tenant_admit.lua` call | keys, arguments | calls/s | redis-server CPU per call (µs) | / one bucket |\n"
       << "|---|---:|---:|---:|---:|\n"
       << "| one bucket | 2, 5 | " << grouped(RulesResult::med_of(x.script_bucket, &ScriptRun::calls_per_s)) << " | "
       << num(sb, 2) << " | 1x |\n"
       << "| " << x.limits << " limits + " << x.quotas << " quota | 8, 20 | "
       << grouped(RulesResult::med_of(x.script_rules, &ScriptRun::calls_per_s)) << " | " << num(sr, 2) << " | **"
       << (sb > 0 ? num(sr / sb, 2) : std::string("-")) << "x** |\n\n";
    if (sb > 0 && sr > 0)
      md << "Each rule costs the redis-server about (" << num(sr, 2) << " - " << num(sb, 2) << ") / "
         << x.limits + x.quotas << " = " << num((sr - sb) / (x.limits + x.quotas), 2)
         << " µs of CPU per decision with no client in the way. ";
    md << "The month quota counted " << grouped(static_cast<double>(x.quota_counted)) << " of the "
       << grouped(static_cast<double>(x.rules_answered))
       << " decisions Redis answered for the rules client (the sum of the tenants' counts after the runs); "
       << (x.rule_mismatches ? "**" + std::to_string(x.rule_mismatches) + " decisions did not apply all " +
                                   std::to_string(x.limits + x.quotas) + " rules.** "
                             : "every one of its decisions applied all " + std::to_string(x.limits + x.quotas) +
                                   " rules (`fw_decision.rules`). ")
       << (undecided ? "**Warning: " + std::to_string(undecided) +
                           " calls were not answered by Redis, errored or were rejected.**"
                     : "Every call of every round, one bucket and rules, was decided by Redis and allowed (no "
                       "fail-open, no fallback, no error).")
       << (bad ? " **" + std::to_string(bad) + " pipelined calls did not answer a committed admit.**"
               : " Every pipelined call answered a committed admit, every rule passing.")
       << "\n\n";
  }
  if (r.have_embedded)
    md << "### 2. Embedded store (`memory://`), through the C ABI\n\n"
       << "`fw_admit` and `fw_release` on `{\"request_rate\": {\"rate\": 1000000, \"burst\": 1000000000}}`, "
          "rotating over 1000 tenants, each decision initialized with `FW_DECISION_INIT`; medians of "
       << o.rounds
       << " rounds. Wall time per decision and the calling thread's own CPU time per decision "
          "(CLOCK_THREAD_CPUTIME_ID; it does not count the time the thread was descheduled). Two threads decide "
       << num(r.embedded.two_over_one, 2) << "x one thread's decisions/s (median of the rounds' ratios).\n\n"
       << "| threads | ns per decision, wall (per thread) | ns per decision, CPU (per thread) | decisions/s |\n"
       << "|---:|---:|---:|---:|\n"
       << "| 1 | " << num(r.embedded.ns_one) << " | " << num(r.embedded.cpu_ns_one) << " | "
       << grouped(r.embedded.decisions_per_s_one) << " |\n"
       << "| 2 | " << num(r.embedded.ns_two_per_thread) << " | " << num(r.embedded.cpu_ns_two_per_thread) << " | "
       << grouped(r.embedded.decisions_per_s_two) << " |\n\n";
  if (r.have_memory) {
    const auto &m = r.memory;
    md << "### 3. Redis memory per tenant\n\n"
       << "`INFO memory` used_memory after minus before, on a FLUSHALL'd server, divided by " << grouped(m.tenants)
       << " tenants (`tenant-000000` ...), bucket rate 0.01/s burst 100 for both (no key expires during the count).\n\n"
       << "| layout | keys | bytes per tenant | MEMORY USAGE of one tenant's keys |\n|---|---:|---:|---:|\n"
       << "| floodwall (`" << m.fw_sample_key << "`: one string) | " << grouped(static_cast<double>(m.fw_keys)) << " | "
       << num(static_cast<double>(m.fw_bytes) / m.tenants) << " | " << m.fw_key_usage << " |\n"
       << "| seed (`request_rate_limiter.<user>.tokens` + `.timestamp`) | " << grouped(static_cast<double>(m.seed_keys))
       << " | " << num(static_cast<double>(m.seed_bytes) / m.tenants) << " | " << m.seed_key_usage << " |\n\n";
  }
  if (r.have_failopen) {
    const auto &f = r.failopen;
    md << "### 4. The cost of an outage to one caller (Redis blackholed with SIGSTOP)\n\n"
       << "One caller, the shipped defaults (deadline " << f.deadline
       << " ms, fallback local). The first admit waits for its deadline: no reply byte within it opens the breaker at "
          "once, and the local fallback decides (reason `timeout`); after, the fallback decides at once (reason "
          "`breaker`).\n\n"
       << "| phase | admits | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n"
       << "| before the breaker opens (timeout) | " << f.before_n << " | " << num(f.before_p50_us / 1000, 2)
       << " ms | - | " << num(f.before_max_us / 1000, 2) << " ms |\n"
       << "| after (breaker) | " << grouped(static_cast<double>(f.after_n)) << " | " << num(f.after_p50_us, 2)
       << " µs | " << num(f.after_p99_us, 2) << " µs | " << num(f.after_max_us, 1) << " µs |\n\n"
       << "After SIGCONT and the open period, the probe closed the breaker and Redis decided again: "
       << (f.recovered ? "yes" : "**no**") << ".\n\n";
  }
  if (r.have_shm) {
    const auto &h = r.shm;
    md << "### 2b. `shm://` (the processes of one machine)\n\n"
       << "The embedded loop above on `shm://NAME` against `memory://`, one thread, 1000 tenants (CPU per decision, "
          "medians), and on `shm://` from one process against two at once on tenants of their own (decisions/s of "
          "all of them).\n\n"
       << "| memory:// ns | shm:// ns | shm / memory (goal <= 2) | one process/s | two processes/s | two / one (goal "
          ">= "
          "1.5) |\n|---:|---:|---:|---:|---:|---:|\n"
       << "| " << num(h.memory_ns) << " | " << num(h.shm_ns) << " | " << num(h.shm_ns / h.memory_ns, 2) << " | "
       << grouped(h.one_proc) << " | " << grouped(h.two_procs) << " | " << num(h.two_procs / h.one_proc, 2) << " |\n\n";
  }
  if (r.have_outage) {
    const auto &f = r.outage;
    md << "### 5. A fleet through an outage\n\n"
       << f.procs << " processes x " << f.threads << " threads admit in a loop on one tenant (rate " << num(f.rate)
       << "/s, burst " << f.burst << "), shipped defaults; Redis is SIGSTOPped for " << num(f.outage_s) << " s after "
       << num(f.before_s) << " s and runs " << num(f.after_s) << " s more.\n\n"
       << "| decisions | by Redis | by the fallback | failed open | admitted by Redis (bound) | admitted by the "
          "fallback (bound: processes x (burst + rate x (outage + 1 s))) | p99 | p99.9 | max |\n"
       << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
       << "| " << grouped(static_cast<double>(f.decisions)) << " | " << grouped(static_cast<double>(f.by_store))
       << " | " << grouped(static_cast<double>(f.by_fallback)) << " | " << f.failed_open << " | " << f.admitted_store
       << " (" << num(f.store_bound()) << ") | " << f.admitted_fallback << " (" << num(f.fallback_bound()) << ") | "
       << num(f.p99_us) << " µs | " << num(f.p999_us) << " µs | " << num(f.max_us / 1000, 1) << " ms |\n\n";
  }
  if (r.have_hot) {
    const auto &h = r.hot;
    md << "### 6. A hot tenant: leases and the over-limit cache\n\n"
       << h.procs << " processes x " << h.threads << " threads admit in a loop on one tenant (rate " << grouped(h.rate)
       << "/s, burst " << h.burst << ") for " << num(h.seconds, 0)
       << " s, each process with its own client made after the fork, shipped defaults otherwise. Lease on: "
          "`\"lease\": {\"max_tokens\": "
       << h.max_tokens << ", \"ttl_ms\": " << h.token_ttl_ms
       << "}`; lease off is today's behaviour, run a few seconds before it (the baseline). The concurrency runs add "
          "`\"concurrency\": {\"limit\": "
       << h.conc_limit << "}` (lease on: `\"lease\": {\"max_slots\": " << h.max_slots
       << ", \"ttl_ms\": " << h.slot_ttl_ms << "}`), and each admitted request holds its slot for " << h.hold_us / 1000
       << " ms (rate x hold = " << num(h.rate * h.hold_us / 1e6, 0)
       << " in flight on average), counted across the processes. Redis commands: what the clients sent (INFO "
          "commandstats: EVALSHA, SCRIPT LOAD, PING), until every client closed. The bound is burst + rate x time "
          "from a full bucket.\n\n"
       << "| run | decisions/s | not answered by Redis | admitted (of the bound) | Redis commands | decisions per "
          "command | decisions/s vs lease off | decided in process | Redis CPU per decision | max in flight |\n"
       << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &x : h.runs) {
      const HotRun *base = h.find(false, x.conc);
      double vs = base && base->decisions_per_s() > 0 ? x.decisions_per_s() / base->decisions_per_s() : 0;
      md << "| " << x.name << " | " << grouped(x.decisions_per_s()) << " | " << num(100 * x.not_store_share(), 4)
         << "% (failed open " << x.failed_open << ") | " << grouped(static_cast<double>(x.admitted)) << " of "
         << grouped(h.bound(x)) << " (" << num(100 * x.admitted / h.bound(x), 1) << "%) | "
         << grouped(static_cast<double>(x.commands)) << " | **" << num(x.per_command(), 1) << "** | "
         << (x.lease ? "**" + num(vs, 1) + "x**" : std::string("1x")) << " | "
         << (x.decisions ? num(100.0 * static_cast<double>(x.in_process) / static_cast<double>(x.decisions), 2) + "%"
                         : std::string("-"))
         << " | "
         << (x.redis_cpu_us >= 0 && x.decisions ? num(x.redis_cpu_us / static_cast<double>(x.decisions), 3) + " µs"
                                                : std::string("-"))
         << " | " << (x.conc ? std::to_string(x.max_in_flight) + " of " + std::to_string(h.conc_limit) : "-") << " |\n";
    }
    const HotRun *on = h.find(true, false);
    if (on)
      md << "\nThe price of a lease: a process killed while it holds one strands at most that lease, here "
         << h.max_tokens << " tokens (" << num(1000.0 * h.max_tokens / h.rate, 0)
         << " ms of this tenant's refill; a lease never holds more than ttl_ms of it), debited and never spent; "
         << h.procs << " processes strand at most " << h.procs * h.max_tokens << " tokens, "
         << num(100.0 * h.procs * h.max_tokens / h.bound(*on), 2)
         << "% of the run's bound. When the lease-on run stopped, its processes held " << on->tokens_in_hand_at_end
         << " tokens (what a SIGKILL at that instant would have stranded; a hot tenant over its limit spends a "
            "lease within microseconds, and the clients gave back what they held as they closed). "
         << "Its Redis commands were " << grouped(static_cast<double>(on->lease_calls)) << " lease calls, "
         << grouped(static_cast<double>(on->give_backs)) << " give-backs, " << grouped(static_cast<double>(on->exact))
         << " exact admits of the hot tenant (after three lease calls with nothing it could use), each process's "
            "first admits before the tenant was hot, and the flag polls.\n\n";
  }
  md << "### Goals\n\n| goal | met | measured |\n|---|---|---|\n";
  const char *names[] = {
      "1. >= 2x the seed at 64 callers, lower p99, within 2x of the ceiling at the same concurrency",
      "2. < 80 ns per admit + release, one thread, C ABI", "3. <= half the seed's bytes per tenant",
      "4. outage: under the deadline before the breaker opens, < 5 µs after",
      "5. hot tenant: >= 10 decisions per Redis command (with and without concurrency 20), admitted "
      "85-100% of burst + rate x time, the limit never exceeded, >= 5x the decisions/s of lease off"};
  const Goals::Goal *gs[] = {&g.g1, &g.g2, &g.g3, &g.g4, &g.g5};
  for (int i = 0; i < 5; i++)
    if (gs[i]->evaluated)
      md << "| " << names[i] << " | "
         << (gs[i]->met      ? "yes"
             : gs[i]->partly ? "**partly**"
                             : "**no**")
         << " | " << gs[i]->text << " |\n";
  md << "\n";
  return md.str();
}

void write_file(const std::string &path, const std::string &text) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char **argv) {
  Options o = parse_options(argc, argv);
  g_redis_pid = o.redis_pid;
  bool needs_redis = wants(o, "redis") || wants(o, "tls") || wants(o, "cluster") || wants(o, "rules") ||
                     wants(o, "memory") || wants(o, "failopen") || wants(o, "outage") || wants(o, "hot");
  if (needs_redis && o.port <= 0)
    usage("--port is required for the redis, tls, cluster, rules, memory, failopen, outage and hot sections");
  if (wants(o, "tls") && (o.tls_port <= 0 || o.tls_ca.empty()))
    usage("the tls section needs --tls-port (the redis-server's TLS port) and --tls-ca (the CA of its certificate)");
  if (wants(o, "cluster") && o.cluster_ports.empty())
    usage("the cluster section needs --cluster-ports (the Redis Cluster's masters, bench/run.sh starts them)");
  try {
    Results r;
    if (wants(o, "redis")) bench_redis(o, r);
    if (wants(o, "tls")) bench_tls(o, r);
    if (wants(o, "cluster")) bench_cluster(o, r);
    if (wants(o, "rules")) bench_rules(o, r);
    if (wants(o, "embedded")) bench_embedded(o, r);
    if (wants(o, "shm")) bench_shm(o, r);
    if (wants(o, "memory")) bench_memory(o, r);
    if (wants(o, "failopen")) bench_failopen(o, r);
    if (wants(o, "outage")) bench_outage(o, r);
    if (wants(o, "hot")) bench_hot(o, r);
    Goals g = evaluate(r);
    std::string md = to_markdown(o, r, g);
    std::cout << "\n" << md;
    write_file(o.json_path, to_json(o, r, g));
    write_file(o.markdown_path, md);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "redis_path: %s\n", e.what());
    return 1;
  }
  return 0;
}
