// The floodwall command, run as the executable it is (FW_CLI) against real redis-servers (a single node,
// a cluster, sentinels, TLS): every command, its --json read back, its exit status, its messages; and each
// change seen by a client in another process (this test process, through the C ABI) at its next request,
// a mode at its next flags poll.
#include <fcntl.h>
#include <floodwall.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../core/cluster_redis.hpp"
#include "../core/redis_server.hpp"
#include "../core/sentinel_redis.hpp"
#include "../core/tls_redis.hpp"

namespace {

using floodwall::testing::free_port;
using floodwall::testing::RedisServer;
using nlohmann::json;

struct Ran {
  int code = -1;
  std::string out, err;
  json parsed() const {
    try {
      return json::parse(out);
    } catch (const json::exception &e) {
      ADD_FAILURE() << "not JSON: " << e.what() << "\n" << out;
      return nullptr;
    }
  }
};

std::ostream &operator<<(std::ostream &os, const Ran &r) {
  return os << "exit " << r.code << "\nstdout:\n" << r.out << "stderr:\n" << r.err;
}

// Runs the floodwall executable with `args`; FLOODWALL_STORE is `store` when given, else unset.
Ran floodwall_cmd(const std::vector<std::string> &args, const std::optional<std::string> &store = std::nullopt) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (store)
      setenv("FLOODWALL_STORE", store->c_str(), 1);
    else
      unsetenv("FLOODWALL_STORE");
    std::vector<char *> argv = {const_cast<char *>(FW_CLI)};
    for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(FW_CLI, argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  Ran r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int open = 2;
  while (open > 0 && std::chrono::steady_clock::now() < until) {
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open--;
        continue;
      }
      (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
  if (open > 0) {
    kill(pid, SIGKILL);
    ADD_FAILURE() << "floodwall did not finish within 30 s";
  }
  for (auto &f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string write_temp(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + "fw_cli_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

// A client of the store, in this process: what the fleet's services see.
struct Client {
  fw_client *c = nullptr;
  explicit Client(const json &policy) {
    if (fw_client_new(&c, policy.dump().c_str()) != FW_OK) ADD_FAILURE() << fw_error_last()->message;
  }
  ~Client() { fw_client_free(c); }
  fw_decision admit(const std::string &tenant) {
    fw_request r = FW_REQUEST_INIT;
    r.tenant = tenant.data();
    r.tenant_len = tenant.size();
    return admit(r);
  }
  fw_decision admit(const fw_request &r) {
    fw_decision d = FW_DECISION_INIT;
    EXPECT_EQ(fw_admit(c, &r, &d), FW_OK);
    fw_release(c, d.ticket);
    return d;
  }
};

json fleet_policy(const std::string &store) {
  return {{"store", store},
          {"request_rate",
           {{"rate", 1},
            {"burst", 5},
            {"limits", json::array({{{"name", "search"}, {"routes", {"/search*"}}, {"rate", 1}, {"burst", 2}}})}}},
          {"concurrency", {{"limit", 4}}},
          {"quotas", json::array({{{"name", "monthly"}, {"limit", 1000}, {"period", "month"}}})},
          {"tiers", {{"pro", {{"rate", 10}, {"burst", 50}}}}}};
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(Cli, HelpFollowsTheConventions) {
  Ran h = floodwall_cmd({"--help"});
  EXPECT_EQ(h.code, 0) << h;
  EXPECT_EQ(h.out.rfind("Usage: floodwall [OPTIONS] COMMAND [ARGS]\n", 0), 0u) << h;
  for (const char *s : {"Commands:", "status", "mode LIMITER", "override set TENANT", "block TENANT [--for DURATION]",
                        "tenant show TENANT", "check --policy FILE", "--store URL", "FLOODWALL_STORE", "--json",
                        "Exit status: 0", "Examples:"})
    EXPECT_NE(h.out.find(s), std::string::npos) << s << "\n" << h;
  EXPECT_TRUE(h.err.empty()) << h;
  // Each command's own help, however it is asked for.
  for (std::vector<std::string> args : {std::vector<std::string>{"status", "--help"},
                                        {"mode", "-h"},
                                        {"override", "set", "--help"},
                                        {"help", "override", "rm"},
                                        {"override", "list", "--help"},
                                        {"block", "--help"},
                                        {"unblock", "--help"},
                                        {"tenant", "show", "--help"},
                                        {"tenant", "reset", "--help"},
                                        {"check", "--help"}}) {
    Ran c = floodwall_cmd(args);
    EXPECT_EQ(c.code, 0) << args[0] << "\n" << c;
    EXPECT_EQ(c.out.rfind("Usage: floodwall ", 0), 0u) << c;
    EXPECT_NE(c.out.find("--store URL"), std::string::npos) << c;
  }
  Ran group = floodwall_cmd({"override", "--help"});
  EXPECT_EQ(group.code, 0) << group;
  EXPECT_NE(group.out.find("override set TENANT"), std::string::npos) << group;
  Ran v = floodwall_cmd({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, std::string("floodwall ") + fw_version() + "\n");
  // No command, an unknown one, an unknown option: usage errors (2), said on stderr.
  Ran none = floodwall_cmd({});
  EXPECT_EQ(none.code, 2) << none;
  EXPECT_NE(none.err.find("Usage: floodwall"), std::string::npos) << none;
  Ran unknown = floodwall_cmd({"frobnicate"});
  EXPECT_EQ(unknown.code, 2) << unknown;
  EXPECT_NE(unknown.err.find("unknown command \"frobnicate\""), std::string::npos) << unknown;
  Ran option = floodwall_cmd({"status", "--colour"});
  EXPECT_EQ(option.code, 2) << option;
  EXPECT_NE(option.err.find("unknown option --colour"), std::string::npos) << option;
  Ran sub = floodwall_cmd({"override", "frob", "x"});
  EXPECT_EQ(sub.code, 2) << sub;
  EXPECT_NE(sub.err.find("override set TENANT"), std::string::npos) << sub;  // the group's commands
}

TEST(Cli, EveryCommandOnRedisSeenByAnotherProcess) {
  RedisServer redis;
  std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());
  json policy = fleet_policy(url);
  std::string policy_file = write_temp("policy.json", policy.dump(2));
  Client fleet(policy);  // another process than the command's

  Ran st = floodwall_cmd({"status", "--json"}, url);
  ASSERT_EQ(st.code, 0) << st;
  json s = st.parsed();
  EXPECT_EQ(s["store"], url);
  EXPECT_EQ(s["topology"], "standalone");
  EXPECT_TRUE(s["modes_fleet_wide"].get<bool>());
  EXPECT_EQ(s["server"].get<std::string>().rfind("redis ", 0), 0u) << s;
  EXPECT_TRUE(s["round_trip_ms"].is_number());
  for (const char *l : {"request_rate", "concurrency", "fleet", "utilization", "adaptive"})
    EXPECT_TRUE(s["modes"][l].is_null()) << l;
  EXPECT_EQ(s["controlled"], 0);
  EXPECT_EQ(s["fleet"]["in_flight"], 0);

  // override set: the tenant's own bucket from its next request. A token every 20 s: what tenant show says
  // below may not refill between the commands, however slow the machine (at 2/s it did under ASan).
  EXPECT_EQ(fleet.admit("zeta").limit, 5);  // the policy's bucket
  Ran set = floodwall_cmd({"override", "set", "acme", "--rate", "0.05", "--burst", "3", "--json"}, url);
  ASSERT_EQ(set.code, 0) << set;
  EXPECT_EQ(set.parsed()["override"], (json{{"rate", 0.05}, {"burst", 3}}));
  fw_decision d = fleet.admit("acme");
  EXPECT_EQ(d.limit, 3);
  EXPECT_EQ(d.remaining, 2);
  Ran text = floodwall_cmd({"override", "set", "beta", "--rate=4", "--burst=8"}, url);
  EXPECT_EQ(text.code, 0) << text;
  EXPECT_EQ(text.out, "beta: now rate 4/s, burst 8, from its next request\n");

  Ran list = floodwall_cmd({"override", "list", "--json"}, url);
  ASSERT_EQ(list.code, 0) << list;
  std::map<std::string, json> listed;
  for (const json &e : list.parsed()) listed[e["tenant"]] = e["override"];
  EXPECT_EQ(listed.size(), 2u) << list;
  EXPECT_EQ(listed["acme"]["burst"], 3);
  EXPECT_EQ(listed["beta"]["burst"], 8);

  // tenant show (with the fleet's policy: its limits and quotas) and reset.
  Ran show = floodwall_cmd({"--policy", policy_file, "tenant", "show", "acme", "--json"}, url);
  ASSERT_EQ(show.code, 0) << show;
  json t = show.parsed();
  EXPECT_EQ(t["tenant"], "acme");
  EXPECT_EQ(t["request_rate"]["limit"], 3);
  EXPECT_EQ(t["request_rate"]["remaining"], 2);
  EXPECT_EQ(t["concurrency"], (json{{"limit", 4}, {"in_flight", 0}}));
  ASSERT_EQ(t["limits"].size(), 1u);
  EXPECT_EQ(t["limits"][0]["name"], "search");
  ASSERT_EQ(t["quotas"].size(), 1u);
  EXPECT_EQ(t["quotas"][0]["remaining"], 999);
  EXPECT_FALSE(t["blocked"].get<bool>());
  Ran shown_text = floodwall_cmd({"--policy", policy_file, "tenant", "show", "acme"}, url);
  EXPECT_EQ(shown_text.code, 0) << shown_text;
  EXPECT_NE(shown_text.out.find("request_rate  2 of 3 tokens left"), std::string::npos) << shown_text;
  EXPECT_NE(shown_text.out.find("quota         monthly: 999 of 1000 left this month"), std::string::npos) << shown_text;
  Ran reset = floodwall_cmd({"--policy", policy_file, "tenant", "reset", "acme", "--json"}, url);
  ASSERT_EQ(reset.code, 0) << reset;
  EXPECT_EQ(reset.parsed()["request_rate"]["remaining"], 3);
  EXPECT_EQ(reset.parsed()["quotas"][0]["remaining"], 1000);
  EXPECT_EQ(fleet.admit("acme").remaining, 2);  // full again: 3 - 1

  // A tier of the policy (which needs the policy), then both taken away.
  Ran tier = floodwall_cmd({"--policy", policy_file, "override", "set", "acme", "--tier", "pro", "--json"}, url);
  ASSERT_EQ(tier.code, 0) << tier;
  EXPECT_EQ(tier.parsed()["tier"], "pro");
  Ran rm_rate = floodwall_cmd({"override", "rm", "acme"}, url);
  EXPECT_EQ(rm_rate.code, 0) << rm_rate;
  // The override's slow bucket is still in debt; the requests below are about the policy's bucket.
  ASSERT_EQ(floodwall_cmd({"--policy", policy_file, "tenant", "reset", "acme"}, url).code, 0);
  EXPECT_EQ(fleet.admit("acme").limit, 5);  // the policy's bucket (no override, no tier)
  ASSERT_EQ(floodwall_cmd({"--policy", policy_file, "override", "set", "acme", "--tier", "pro"}, url).code, 0);
  EXPECT_EQ(fleet.admit("acme").limit, 50);  // the tier's
  Ran rm = floodwall_cmd({"override", "rm", "acme", "--json"}, url);
  ASSERT_EQ(rm.code, 0) << rm;
  EXPECT_TRUE(rm.parsed()["tier"].is_null());
  EXPECT_TRUE(rm.parsed()["override"].is_null());
  EXPECT_EQ(fleet.admit("acme").limit, 5);

  // block for a while, then unblock: the very next request of the other process each time.
  Ran block = floodwall_cmd({"block", "acme", "--for", "1h30m", "--json"}, url);
  ASSERT_EQ(block.code, 0) << block;
  EXPECT_TRUE(block.parsed()["blocked"].get<bool>());
  d = fleet.admit("acme");
  EXPECT_EQ(d.status, 403);
  EXPECT_TRUE(d.blocked);
  EXPECT_NEAR(static_cast<double>(d.blocked_until_s), static_cast<double>(now_s() + 5400), 5);
  Ran st2 = floodwall_cmd({"status", "--json"}, url);
  ASSERT_EQ(st2.code, 0) << st2;
  ASSERT_EQ(st2.parsed()["blocks"].size(), 1u) << st2;
  EXPECT_EQ(st2.parsed()["blocks"][0]["tenant"], "acme");
  EXPECT_EQ(st2.parsed()["controlled"], 2);  // acme (blocked), beta (override)
  Ran status_text = floodwall_cmd({"status"}, url);
  EXPECT_NE(status_text.out.find("blocks        acme  until "), std::string::npos) << status_text;
  Ran unblock = floodwall_cmd({"unblock", "acme"}, url);
  ASSERT_EQ(unblock.code, 0) << unblock;
  EXPECT_EQ(unblock.out, "acme: unblocked, from its next request\n");
  EXPECT_EQ(fleet.admit("acme").status, 200);

  // --api-key: the key hashed as the middleware hashes it (the request carries it, names no tenant, and the
  // app's verify hook vouched for it).
  Ran by_key = floodwall_cmd({"block", "--api-key", "sk_live_abc123", "--json"}, url);
  ASSERT_EQ(by_key.code, 0) << by_key;
  std::string key = "sk_live_abc123";
  fw_header h = {"X-API-Key", 9, key.data(), key.size()};
  fw_request r = FW_REQUEST_INIT;
  r.headers = &h;
  r.header_count = 1;
  r.credential = FW_CREDENTIAL_VERIFIED;
  fw_buf derived = FW_BUF_INIT;
  ASSERT_EQ(fw_tenant_key(fleet.c, &r, &derived), FW_OK);
  EXPECT_EQ(by_key.parsed()["tenant"], std::string(derived.ptr, derived.size));
  fw_buf_dispose(&derived);
  EXPECT_EQ(fleet.admit(r).status, 403);
  ASSERT_EQ(floodwall_cmd({"unblock", "--api-key", "sk_live_abc123"}, url).code, 0);
  EXPECT_EQ(fleet.admit(r).status, 200);

  // mode: every client at its next flags poll (1 s by default). Measured, not asserted: printed.
  for (int i = 0; i < 5; i++) fleet.admit("moded");
  EXPECT_EQ(fleet.admit("moded").status, 429);
  auto t0 = std::chrono::steady_clock::now();
  Ran dark = floodwall_cmd({"mode", "request_rate", "dark", "--json"}, url);
  ASSERT_EQ(dark.code, 0) << dark;
  EXPECT_EQ(dark.parsed(), (json{{"limiter", "request_rate"}, {"mode", "dark"}}));
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    fw_decision x = fleet.admit("moded");
    seen = x.allowed && x.dark_limiter == FW_LIMITER_REQUEST_RATE;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen) << "the other process never took the fleet-wide dark mode";
  std::printf("[ mode ] dark seen by the other process %.0f ms after the command started\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(floodwall_cmd({"status", "--json"}, url).parsed()["modes"]["request_rate"], "dark");
  ASSERT_EQ(floodwall_cmd({"mode", "request_rate", "default"}, url).code, 0);
  bool back = false;
  t0 = std::chrono::steady_clock::now();
  while (!back && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    back = fleet.admit("moded").status == 429;
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(back) << "the other process kept the dark mode after `mode request_rate default`";
  EXPECT_TRUE(floodwall_cmd({"status", "--json"}, url).parsed()["modes"]["request_rate"].is_null());

  // The store from --store, over FLOODWALL_STORE; and from the policy when neither is given.
  Ran flag = floodwall_cmd({"--store", url, "status"}, "redis://127.0.0.1:1");
  EXPECT_EQ(flag.code, 0) << flag;
  Ran from_policy = floodwall_cmd({"--policy", policy_file, "status"});
  EXPECT_EQ(from_policy.code, 0) << from_policy;
  // A prefix other than the fleet's is another fleet: nothing of this one is seen.
  Ran other = floodwall_cmd({"--prefix", "elsewhere", "status", "--json"}, url);
  ASSERT_EQ(other.code, 0) << other;
  EXPECT_EQ(other.parsed()["controlled"], 0);
}

TEST(Cli, BadInputIsNamedAndNothingIsWritten) {
  RedisServer redis;
  std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());
  std::string policy_file = write_temp("bad_input_policy.json", fleet_policy(url).dump());
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case &c : std::vector<Case>{
           {{"override", "set", "t", "--rate", "-5", "--burst", "3"}, "--rate: must be a positive number"},
           {{"override", "set", "t", "--rate", "5", "--burst", "2.5"}, "--burst: must be a positive whole number"},
           {{"override", "set", "t", "--rate", "5"}, "needs --burst B"},
           {{"override", "set", "t", "--rate", "5", "--burst", "5", "--tier", "pro"}, "not both"},
           {{"override", "set", "t"}, "--rate R --burst B, or --tier NAME"},
           {{"--policy", policy_file, "override", "set", "t", "--tier", "gold"},
            "tier: the policy has no tier named \"gold\" (it has: pro)"},
           {{"override", "set", "t", "--tier", "pro"}, "--policy FILE names the fleet's tiers"},
           {{"mode", "bucket", "dark"}, "LIMITER: unknown limiter \"bucket\""},
           {{"mode", "fleet", "loud"}, "MODE: unknown mode \"loud\""},
           {{"mode", "fleet"}, "mode: needs LIMITER and MODE"},
           {{"block", "t", "--for", "soon"}, "--for: \"soon\" is not a duration"},
           {{"block", "t", "--for", "5x"}, "--for: \"5x\" is not a duration"},
           {{"block", "t", "--for", "0s"}, "--for: must be more than 0"},
           {{"block", "t", "--for", "11000d"}, "--for: must be at most ten years"},
           {{"block", "t", "--rate", "3"}, "--rate: not an option of block"},
           {{"unblock"}, "unblock: missing TENANT"},
           {{"unblock", "a", "b"}, "unexpected argument \"b\""},
           {{"block", "bad\x01tenant"}, "tenant: contains a control character"},
           {{"block", "--api-key", " "}, "--api-key: the key must not be empty"},
           {{"status", "--for", "1s"}, "--for: not an option of status"},
           {{"--store", "memory://", "status"}, "memory:// is one process's own store"},
           {{"--store", "mysql://x", "status"}, "--store"},
           {{"--prefix", "has space", "status"}, "--prefix"},
           {{"--policy", "/nonexistent/policy.json", "status"}, "--policy: cannot read"},
           {{"status", "--store"}, "--store: needs a value"},
       }) {
    Ran r = floodwall_cmd(c.args, url);
    EXPECT_EQ(r.code, 2) << c.args[0] << " " << c.says << "\n" << r;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.says << "\n" << r;
    EXPECT_TRUE(r.out.empty()) << r;
  }
  Ran no_store = floodwall_cmd({"status"});
  EXPECT_EQ(no_store.code, 2) << no_store;
  EXPECT_NE(no_store.err.find("give --store URL or set FLOODWALL_STORE"), std::string::npos) << no_store;
  // Nothing reached the store.
  Ran st = floodwall_cmd({"status", "--json"}, url);
  ASSERT_EQ(st.code, 0) << st;
  EXPECT_EQ(st.parsed()["controlled"], 0) << st;

  // An unreachable store: said within the connect time-out, exit 1, the password never printed.
  int closed = free_port();
  std::string secret_url = "redis://ops:hunter2@127.0.0.1:" + std::to_string(closed);
  for (std::vector<std::string> args : {std::vector<std::string>{"status"},
                                        {"block", "t"},
                                        {"tenant", "show", "t"},
                                        {"mode", "fleet", "dark"},
                                        {"override", "list"}}) {
    Ran r = floodwall_cmd(args, secret_url);
    EXPECT_EQ(r.code, 1) << args[0] << "\n" << r;
    EXPECT_NE(r.err.find("cannot reach redis://ops:***@127.0.0.1:" + std::to_string(closed) + " (connection refused)"),
              std::string::npos)
        << r;
    EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r;
    EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r;
  }
  // A status through a password never shows it either.
  Ran shown = floodwall_cmd({"--store", "redis://:hunter2@127.0.0.1:" + std::to_string(redis.port()), "status"});
  EXPECT_EQ(shown.out.find("hunter2"), std::string::npos) << shown;
  EXPECT_EQ(shown.err.find("hunter2"), std::string::npos) << shown;

  // fw_cli_run itself: NULL arguments are FW_EINVAL, never a crash.
  int code = 0;
  fw_buf out = FW_BUF_INIT, err = FW_BUF_INIT;
  EXPECT_EQ(fw_cli_run(1, nullptr, &code, &out, &err), FW_EINVAL);
  const char *argv[] = {"floodwall", "--version"};
  EXPECT_EQ(fw_cli_run(2, argv, nullptr, &out, &err), FW_EINVAL);
  ASSERT_EQ(fw_cli_run(2, argv, &code, &out, &err), FW_OK);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(std::string(out.ptr, out.size), std::string("floodwall ") + fw_version() + "\n");
  fw_buf_dispose(&out);
  fw_buf_dispose(&err);
}

// shm://: control records for the machine's processes, but no fleet-wide mode (each process keeps its own):
// status says so (from the core: modes_fleet_wide), `mode` refuses, a block reaches another process.
TEST(Cli, ShmKeepsControlRecordsButNoFleetWideModes) {
  std::string name = "fw-cli-" + std::to_string(getpid());
  std::string url = "shm://" + name;
  {
    Client fleet({{"store", url}, {"request_rate", {{"rate", 1}, {"burst", 5}}}});
    Ran st = floodwall_cmd({"status", "--json"}, url);
    ASSERT_EQ(st.code, 0) << st;
    EXPECT_FALSE(st.parsed()["modes_fleet_wide"].get<bool>());
    Ran text = floodwall_cmd({"status"}, url);
    EXPECT_NE(text.out.find("per process (the store keeps no fleet-wide mode)"), std::string::npos) << text;
    Ran mode = floodwall_cmd({"mode", "fleet", "dark"}, url);
    EXPECT_EQ(mode.code, 1) << mode;
    EXPECT_NE(mode.err.find("shm:// keeps no fleet-wide mode"), std::string::npos) << mode;
    ASSERT_EQ(floodwall_cmd({"block", "shm-t"}, url).code, 0);
    EXPECT_EQ(fleet.admit("shm-t").status, 403);
  }
  std::remove(("/dev/shm/floodwall." + name).c_str());
}

TEST(Cli, CheckSaysEveryErrorWithItsPath) {
  std::string good = write_temp("good.json", fleet_policy("redis://127.0.0.1:6379").dump());
  Ran ok = floodwall_cmd({"check", "--policy", good});
  EXPECT_EQ(ok.code, 0) << ok;
  EXPECT_EQ(ok.out, good + ": valid\n");
  std::string bad = write_temp("bad.json", R"({"request_rate": {"rate": -1, "burst": 10}, "concurency": {"limit": 3},
      "fleet": {"capacity": 0}, "quotas": [{"name": "m", "limit": 10, "period": "year"}]})");
  Ran no = floodwall_cmd({"check", "--policy", bad});
  EXPECT_EQ(no.code, 1) << no;
  for (const char *path : {"concurency: unknown key", "request_rate.rate: must be > 0", "fleet.capacity: must be",
                           "quotas[0].period: must be \"hour\", \"day\" or \"month\""})
    EXPECT_NE(no.out.find(bad + ": " + path), std::string::npos) << path << "\n" << no;
  EXPECT_NE(no.out.find("4 errors"), std::string::npos) << no;
  Ran js = floodwall_cmd({"check", "--policy", bad, "--json"});
  EXPECT_EQ(js.code, 1) << js;
  json j = js.parsed();
  EXPECT_FALSE(j["valid"].get<bool>());
  std::vector<std::string> paths;
  for (const json &e : j["errors"]) paths.push_back(e["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"concurency", "request_rate.rate", "fleet.capacity", "quotas[0].period"}));
  EXPECT_EQ(j["errors"][1]["message"], "must be > 0 (got -1)");
  std::string not_json = write_temp("not.json", "{\"request_rate\": ");
  Ran nj = floodwall_cmd({"check", "--policy", not_json});
  EXPECT_EQ(nj.code, 1) << nj;
  EXPECT_NE(nj.out.find("policy: is not valid JSON"), std::string::npos) << nj;
  Ran missing = floodwall_cmd({"check"});
  EXPECT_EQ(missing.code, 2) << missing;
  EXPECT_NE(missing.err.find("check: needs --policy FILE"), std::string::npos) << missing;
}

// The same commands on a cluster, through sentinels and over TLS: each reaches the node that holds what it
// changes, and a client of the same store sees it.
TEST(Cli, ClusterSentinelAndTls) {
  {
    floodwall::testing::ClusterOptions o;
    o.replicas = 0;
    floodwall::testing::ClusterTopology cluster(o);
    std::string url = cluster.url();
    Client fleet(fleet_policy(url));
    Ran st = floodwall_cmd({"status", "--json"}, url);
    ASSERT_EQ(st.code, 0) << st;
    EXPECT_EQ(st.parsed()["topology"], "cluster of 3 masters");
    for (int i = 0; i < 6; i++) {
      std::string t = "tenant-" + std::to_string(i);  // their slots spread over the masters
      ASSERT_EQ(floodwall_cmd({"block", t}, url).code, 0);
      EXPECT_EQ(fleet.admit(t).status, 403) << t;
    }
    ASSERT_EQ(floodwall_cmd({"mode", "fleet", "dark"}, url).code, 0);
    json s = floodwall_cmd({"status", "--json"}, url).parsed();
    EXPECT_EQ(s["blocks"].size(), 6u) << s;
    EXPECT_EQ(s["modes"]["fleet"], "dark");
    ASSERT_EQ(floodwall_cmd({"unblock", "tenant-3"}, url).code, 0);
    EXPECT_EQ(fleet.admit("tenant-3").status, 200);
  }
  {
    floodwall::testing::SentinelTopology sentinels;
    std::string url = sentinels.sentinel_url();
    Client fleet(fleet_policy(url));
    Ran st = floodwall_cmd({"status", "--json"}, url);
    ASSERT_EQ(st.code, 0) << st;
    EXPECT_EQ(st.parsed()["topology"], "sentinel: master 127.0.0.1:" + std::to_string(sentinels.master_port()));
    ASSERT_EQ(floodwall_cmd({"override", "set", "s1", "--rate", "1", "--burst", "2"}, url).code, 0);
    EXPECT_EQ(fleet.admit("s1").limit, 2);
  }
  {
    floodwall::testing::TlsRedisServer tls;
    std::string url = "rediss://127.0.0.1:" + std::to_string(tls.tls_port());
    json policy = fleet_policy(url);
    policy["redis"] = {{"tls", {{"ca_file", floodwall::testing::TlsCerts::shared().ca()}}}};
    std::string policy_file = write_temp("tls_policy.json", policy.dump());
    Client fleet(policy);
    Ran st = floodwall_cmd({"--policy", policy_file, "status", "--json"});
    ASSERT_EQ(st.code, 0) << st;
    EXPECT_EQ(st.parsed()["store"], url);
    ASSERT_EQ(floodwall_cmd({"--policy", policy_file, "block", "tls-t", "--for", "60"}).code, 0);
    EXPECT_EQ(fleet.admit("tls-t").status, 403);
    // Without the CA the server is not trusted: said, exit 1.
    Ran untrusted = floodwall_cmd({"status"}, url);
    EXPECT_EQ(untrusted.code, 1) << untrusted;
    EXPECT_NE(untrusted.err.find("cannot reach rediss://127.0.0.1:"), std::string::npos) << untrusted;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------- floodwall top

// Waits until `top --once --json` shows `n` clients whose refusals add up to `refused`; the last view.
json wait_top(const std::string &url, size_t n, uint64_t refused) {
  json v;
  for (int i = 0; i < 200; i++) {
    Ran r = floodwall_cmd({"top", "--once", "--json"}, url);
    EXPECT_EQ(r.code, 0) << r;
    v = r.parsed();
    uint64_t sum = 0;
    for (const json &t : v["fleet"]["top_refused"]) sum += t["rejections"].get<uint64_t>();
    if (v["clients"].size() == n && sum == refused) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return v;
}

TEST(Cli, TopShowsEveryClientOfTheFleet) {
  RedisServer redis;
  std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());
  json policy = {{"store", url}, {"request_rate", {{"rate", 0.001}, {"burst", 2}}}, {"summary", {{"period_s", 0.2}}}};
  Client a(policy), b(policy);
  ASSERT_EQ(fw_client_set_language(b.c, "node"), FW_OK);
  for (int i = 0; i < 5; i++) a.admit("acme");  // the fleet's one bucket of 2: 3 refused here
  for (int i = 0; i < 4; i++) b.admit("acme");  // and 4 there: one tenant, refused fleet-wide 7 times
  json v = wait_top(url, 2, 7);
  ASSERT_EQ(v["clients"].size(), 2u) << v.dump(2);
  EXPECT_EQ(v["store"], url);
  const json &f = v["fleet"];
  EXPECT_EQ(f["clients"], 2);
  EXPECT_EQ(f["versions"][fw_version()], 2);
  EXPECT_EQ(f["languages"]["c"], 1);
  EXPECT_EQ(f["languages"]["node"], 1);
  EXPECT_TRUE(f["breakers_open"].empty());
  ASSERT_EQ(f["top_refused"].size(), 1u) << f.dump(2);
  EXPECT_EQ(f["top_refused"][0]["tenant"], "acme");
  EXPECT_EQ(f["top_refused"][0]["rejections"], 7);
  EXPECT_EQ(f["top_refused"][0]["clients"], 2);
  uint64_t decisions = 0;
  for (const json &c : v["clients"]) {
    EXPECT_EQ(c["pid"], getpid());
    decisions += c["decisions_total"].get<uint64_t>();
  }
  EXPECT_EQ(decisions, 9u);
  // The view for a person: the same, in place.
  Ran text = floodwall_cmd({"top", "--once"}, url);
  EXPECT_EQ(text.code, 0) << text;
  for (const char *s : {"clients       2", "MOST REFUSED TENANTS", "acme", "7 refusals (2 clients)", "node", "CLIENT"})
    EXPECT_NE(text.out.find(s), std::string::npos) << s << "\n" << text;
  // floodwall status lists the clients too.
  Ran st = floodwall_cmd({"status", "--json"}, url);
  ASSERT_EQ(st.code, 0) << st;
  EXPECT_EQ(st.parsed()["clients"].size(), 2u) << st;
  Ran st_text = floodwall_cmd({"status"}, url);
  EXPECT_NE(st_text.out.find("LANG"), std::string::npos) << st_text;
  // The command's own client writes no summary: still two.
  EXPECT_EQ(wait_top(url, 2, 7)["clients"].size(), 2u);
}

TEST(Cli, TopOnAStoreWithNoClientsSaysSo) {
  RedisServer redis;
  std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());
  Ran text = floodwall_cmd({"top", "--once"}, url);
  EXPECT_EQ(text.code, 0) << text;
  EXPECT_NE(text.out.find("no clients"), std::string::npos) << text;
  Ran j = floodwall_cmd({"top", "--once", "--json"}, url);
  EXPECT_EQ(j.code, 0) << j;
  EXPECT_TRUE(j.parsed()["clients"].empty()) << j;
  EXPECT_EQ(j.parsed()["fleet"]["clients"], 0) << j;
  std::string shm = "shm://fwtest-top-" + std::to_string(getpid());
  Ran s = floodwall_cmd({"top", "--once"}, shm);
  EXPECT_EQ(s.code, 0) << s;
  EXPECT_NE(s.out.find("no clients"), std::string::npos) << s;
  shm_unlink(("/floodwall.fwtest-top-" + std::to_string(getpid())).c_str());
}

TEST(Cli, TopOnAnUnreachableStoreExitsOneNamingIt) {
  int port = free_port();
  std::string url = "redis://127.0.0.1:" + std::to_string(port);
  Ran r = floodwall_cmd({"top", "--once", "--json"}, url);
  EXPECT_EQ(r.code, 1) << r;
  EXPECT_NE(r.err.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << r;
  EXPECT_TRUE(r.out.empty()) << r;
  // Bad arguments are usage errors naming them, before the store is reached.
  Ran interval = floodwall_cmd({"top", "--interval", "0"}, url);
  EXPECT_EQ(interval.code, 2) << interval;
  EXPECT_NE(interval.err.find("--interval"), std::string::npos) << interval;
  Ran once = floodwall_cmd({"status", "--once"}, url);
  EXPECT_EQ(once.code, 2) << once;
  EXPECT_NE(once.err.find("--once: not an option of status"), std::string::npos) << once;
  Ran help = floodwall_cmd({"top", "--help"});
  EXPECT_EQ(help.code, 0) << help;
  EXPECT_NE(help.out.find("Usage: floodwall top"), std::string::npos) << help;
}

// Runs `floodwall args` for `seconds`, then interrupts it (SIGINT, as Ctrl-C does); what it printed.
std::string run_for(const std::vector<std::string> &args, const std::string &store, double seconds) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    setenv("FLOODWALL_STORE", store.c_str(), 1);
    std::vector<char *> argv = {const_cast<char *>(FW_CLI)};
    for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(FW_CLI, argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  pollfd fd = {out[0], POLLIN, 0};
  while (std::chrono::steady_clock::now() < until) {
    if (poll(&fd, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out[0]);
  return text;
}

TEST(Cli, TopRefreshesUntilInterrupted) {
  RedisServer redis;
  std::string url = "redis://127.0.0.1:" + std::to_string(redis.port());
  Client a({{"store", url}, {"request_rate", {{"rate", 0.001}, {"burst", 1}}}, {"summary", {{"period_s", 0.2}}}});
  a.admit("acme");
  a.admit("acme");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Not a terminal: each view printed after the last (on a terminal each is redrawn in place).
  std::string text = run_for({"top", "--interval", "0.2"}, url, 1.5);
  size_t views = 0;
  for (size_t at = text.find("floodwall top"); at != std::string::npos; at = text.find("floodwall top", at + 1))
    views++;
  EXPECT_GE(views, 2u) << text;
  EXPECT_NE(text.find("acme"), std::string::npos) << text;
  EXPECT_EQ(text.find("\x1b["), std::string::npos) << "no ANSI codes into a pipe";
  // --json, live: one document a line.
  std::string lines = run_for({"top", "--interval", "0.2", "--json"}, url, 1.0);
  size_t docs = 0;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // the last line, without its newline: interrupted while it was written
    json j = json::parse(line);
    EXPECT_EQ(j["fleet"]["clients"], 1) << line;
    docs++;
  }
  EXPECT_GE(docs, 2u) << lines;
}
