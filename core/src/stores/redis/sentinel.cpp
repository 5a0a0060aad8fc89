#include "stores/redis/sentinel.hpp"

#include <hiredis/hiredis.h>
#ifdef __linux__
#include <sys/prctl.h>
#else
#include <pthread.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>

#include "stores/redis/cluster_map.hpp"  // reply_head
#include "stores/redis/connection.hpp"
#include "stores/redis/resp.hpp"

namespace floodwall {

namespace {

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

std::string_view text(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR) && r->str
             ? std::string_view(r->str, r->len)
             : std::string_view();
}

// A port as Redis writes it: digits, 1 to 65535.
int port_of(std::string_view s) {
  if (s.empty() || s.size() > 5) return 0;
  int p = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    p = p * 10 + (c - '0');
  }
  return p <= 65535 ? p : 0;
}

struct ReplyFree {
  void operator()(redisReply *r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

std::string name_of(const RedisEndpoint &e) {
  return e.host + ":" + std::to_string(e.port);
}

}  // namespace

SentinelWatch::SentinelWatch(RedisUrl url, const TlsContext *tls, Options opt, std::function<void()> on_change)
    : url_(std::move(url)), tls_(tls), opt_(std::move(opt)), on_change_(std::move(on_change)) {
  thread_ = std::thread([this] { run(); });
}

SentinelWatch::~SentinelWatch() {
  stop();
}

void SentinelWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SentinelWatch::abandon_after_fork() {
  // The thread is the parent's: not joined, and not detached either (its id may by now name a thread
  // this child made since, whose stack glibc handed on). The object is leaked by its owner; only the
  // subscription's socket is closed here (its lock may be held by a thread that does not exist here).
  if (sub_) sub_.release()->abandon();
}

std::optional<RedisEndpoint> SentinelWatch::master(uint64_t *generation) const {
  std::lock_guard lock(mu_);
  if (generation) *generation = generation_.load(std::memory_order_relaxed);
  return master_;
}

void SentinelWatch::suspect(uint64_t generation) {
  {
    std::lock_guard lock(mu_);
    if (generation != generation_.load(std::memory_order_relaxed)) return;  // already moved on
    asked_ = true;
    doubted_ = master_;
  }
  cv_.notify_all();
}

bool SentinelWatch::wait_known(int64_t timeout_ms) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return master_.has_value() || stop_; }) &&
         master_.has_value();
}

bool SentinelWatch::stopping_or_asked() {
  std::lock_guard lock(mu_);
  return stop_ || asked_;
}

std::unique_ptr<Connection> SentinelWatch::open(size_t i, int64_t deadline_us, std::string *tls_error) {
  auto c = std::make_unique<Connection>();
  if (!c->connect_blocking(url_.nodes[i], tls_, deadline_us)) {
    // A sentinel we cannot verify (or that refused our certificate) is the deployment's, not an outage.
    if (tls_error && c->failure() == FailReason::config) *tls_error = c->error();
    return nullptr;
  }
  if (!opt_.password.empty()) {
    std::string cmd =
        opt_.user.empty() ? resp_format({"AUTH", opt_.password}) : resp_format({"AUTH", opt_.user, opt_.password});
    Reply r(c->roundtrip(cmd, deadline_us));
    if (!r) {
      if (tls_error && c->failure() == FailReason::config) *tls_error = c->error();
      return nullptr;
    }
    // A sentinel with no password of its own refuses AUTH ("... without any password configured"): it is
    // asked without one. Any other refusal (a wrong password) makes it one that did not answer.
    if (r->type == REDIS_REPLY_ERROR && text(r.get()).find("without any password") == std::string_view::npos) {
      auth_refused_.store(true, std::memory_order_relaxed);
      return nullptr;
    }
  }
  return c;
}

void SentinelWatch::set_master(const RedisEndpoint &m) {
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    doubted_.reset();
    if (!master_ || !(*master_ == m)) {
      master_ = m;
      generation_.fetch_add(1, std::memory_order_release);
      changed = true;
    }
  }
  unknown_.store(static_cast<uint8_t>(FailReason::none), std::memory_order_relaxed);
  said_unreachable_.store(false);
  said_unknown_.store(false);
  said_refused_.store(false);
  if (!changed) return;
  changes_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_all();
  on_change_();
}

void SentinelWatch::take(const RedisEndpoint &m, size_t i) {
  next_ = named_by_ = i;
  set_master(m);
}

void SentinelWatch::say_malformed(size_t i, const redisReply *reply) {
  if (!said_.insert("malformed " + name_of(url_.nodes[i])).second) return;
  std::fprintf(stderr,
               "floodwall: sentinel %s sent a SENTINEL get-master-addr-by-name reply that is no address (master "
               "\"%s\"), left out; the other sentinels are asked: %s\n",
               name_of(url_.nodes[i]).c_str(), message_excerpt(url_.master).c_str(),
               message_excerpt(reply_head(reply)).c_str());
}

void SentinelWatch::say_contradiction(size_t doubting, const RedisEndpoint &doubted, size_t other,
                                      const RedisEndpoint &named) {
  if (!said_.insert("contradiction " + name_of(url_.nodes[doubting])).second) return;
  std::fprintf(stderr,
               "floodwall: sentinel %s names %s as the master \"%s\", which is no master now (its ROLE, or no "
               "connection); sentinel %s names %s: taken (a failover it has not heard of yet?)\n",
               name_of(url_.nodes[doubting]).c_str(), name_of(doubted).c_str(), message_excerpt(url_.master).c_str(),
               name_of(url_.nodes[other]).c_str(), name_of(named).c_str());
}

bool SentinelWatch::ask() {
  asks_.fetch_add(1, std::memory_order_relaxed);
  auth_refused_.store(false, std::memory_order_relaxed);
  bool unknown = false;
  std::string tls_error;  // the first sentinel that failed TLS (verification, or it refused our certificate)
  const std::string cmd = resp_format({"SENTINEL", "get-master-addr-by-name", url_.master});
  std::optional<RedisEndpoint> doubted;
  {
    std::lock_guard lock(mu_);
    doubted = doubted_;
  }
  // A doubted master: the sentinel that named it is asked last, and its answer (or any sentinel's naming
  // it again) is kept only if no sentinel names another.
  const size_t n = url_.nodes.size(), first = doubted && n > 1 ? (named_by_ + 1) % n : next_;
  std::optional<size_t> naming_doubted;
  for (size_t k = 0; k < n; k++) {
    size_t i = (first + k) % n;
    {
      std::lock_guard lock(mu_);
      if (stop_) return false;
    }
    // The connect and the question each within the connect time-out (a sentinel answers from memory).
    std::string why;
    auto c = open(i, now_us() + opt_.connect_timeout_ms * 1000, &why);
    if (!c) {
      if (tls_error.empty()) tls_error = why;
      continue;
    }
    Reply r(c->roundtrip(cmd, now_us() + opt_.connect_timeout_ms * 1000));
    if (!r) {
      // TLS 1.3: a sentinel refuses a missing certificate only after our side of the handshake ended.
      if (tls_error.empty() && c->failure() == FailReason::config) tls_error = c->error();
      continue;
    }
    if (r->type == REDIS_REPLY_NIL) {
      unknown = true;  // this sentinel does not monitor that name
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) continue;  // refused (NOAUTH, LOADING...): the others may answer
    std::string_view host = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? text(r->element[0]) : "";
    int port = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? port_of(text(r->element[1])) : 0;
    if (host.empty() || port <= 0) {
      say_malformed(i, r.get());
      continue;
    }
    RedisEndpoint m{std::string(host), port};
    if (doubted && m == *doubted && n > 1) {
      if (!naming_doubted) naming_doubted = i;
      continue;
    }
    if (naming_doubted) say_contradiction(*naming_doubted, *doubted, i, m);
    take(m, i);
    return true;
  }
  if (naming_doubted) {
    // Every sentinel that answered names it: still the master as far as they know (restarted, or a
    // connection that broke); the store's ROLE check says again.
    take(*doubted, *naming_doubted);
    return true;
  }
  std::string where;
  for (const RedisEndpoint &e : url_.nodes) where += (where.empty() ? "" : ",") + e.host + ":" + std::to_string(e.port);
  if (auth_refused_.exchange(false, std::memory_order_relaxed) && !unknown) {
    // Up, and refusing us: the deployment's (a wrong sentinel password), not an outage.
    unknown_.store(static_cast<uint8_t>(FailReason::config), std::memory_order_relaxed);
    if (!said_refused_.exchange(true))
      std::fprintf(stderr,
                   "floodwall: the sentinels at %s refused the password (master \"%s\"); every decision is the "
                   "fallback's until they accept it (a sentinel password of its own goes in "
                   "redis.sentinel_password_env)\n",
                   where.c_str(), message_excerpt(url_.master).c_str());
  } else if (unknown) {
    unknown_.store(static_cast<uint8_t>(FailReason::config), std::memory_order_relaxed);
    if (!said_unknown_.exchange(true))
      std::fprintf(stderr,
                   "floodwall: the sentinels at %s know no master named \"%s\"; every decision is the fallback's until "
                   "they do (check the name in the store URL)\n",
                   where.c_str(), message_excerpt(url_.master).c_str());
  } else if (!tls_error.empty()) {
    if (!master_known()) unknown_.store(static_cast<uint8_t>(FailReason::config), std::memory_order_relaxed);
    if (!said_unreachable_.exchange(true))
      std::fprintf(stderr,
                   "floodwall: TLS to the sentinels at %s failed: %s; every decision is the fallback's until it "
                   "succeeds (check redis.tls)\n",
                   where.c_str(), message_excerpt(tls_error).c_str());
  } else {
    if (!master_known()) unknown_.store(static_cast<uint8_t>(FailReason::connection), std::memory_order_relaxed);
    if (!said_unreachable_.exchange(true))
      std::fprintf(stderr,
                   "floodwall: no sentinel answered at %s (master \"%s\"); the fallback decides until one does, "
                   "asked again in the background\n",
                   where.c_str(), message_excerpt(url_.master).c_str());
  }
  return false;
}

bool SentinelWatch::master_known() const {
  std::lock_guard lock(mu_);
  return master_.has_value();
}

void SentinelWatch::listen(int64_t until_us) {
  if (!sub_) {
    sub_at_ = next_;
    sub_ = open(sub_at_, now_us() + opt_.connect_timeout_ms * 1000);
    if (!sub_) return;
    Reply ok(sub_->roundtrip(resp_format({"SUBSCRIBE", "+switch-master"}), now_us() + opt_.connect_timeout_ms * 1000));
    if (!ok || ok->type != REDIS_REPLY_ARRAY) {
      sub_.reset();
      return;
    }
  }
  // Woken every 100 ms to see whether the store asked for a new look, or the client is closing.
  while (now_us() < until_us && !stopping_or_asked()) {
    Reply m(sub_->next_blocking(std::min(until_us, now_us() + 100'000)));
    if (!m) {
      if (sub_->failure() == FailReason::timeout) continue;
      sub_.reset();  // the sentinel went away: ask the others
      std::lock_guard lock(mu_);
      asked_ = true;
      return;
    }
    // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || text(m->element[0]) != "message") continue;
    std::string_view body = text(m->element[2]);
    std::string_view parts[5];
    size_t n = 0;
    while (!body.empty() && n < 5) {
      size_t sp = body.find(' ');
      parts[n++] = body.substr(0, sp);
      body = sp == std::string_view::npos ? std::string_view() : body.substr(sp + 1);
    }
    if (n == 5 && parts[0] == url_.master && port_of(parts[4]) > 0)
      take({std::string(parts[3]), port_of(parts[4])}, sub_at_);
  }
}

void SentinelWatch::run() {
#ifdef __linux__
  prctl(PR_SET_NAME, "fw-sentinel", 0, 0, 0);
#elif defined(__APPLE__)
  pthread_setname_np("fw-sentinel");  // macOS names the calling thread only
#endif
  int64_t retry_ms = 100;
  int64_t last_ask = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (stop_) return;
      // Asks are at least 100 ms apart, however often the store suspects the master.
      int64_t wait = last_ask + 100'000 - now_us();
      if (wait > 0) cv_.wait_for(lock, std::chrono::microseconds(wait), [this] { return stop_; });
      if (stop_) return;
      asked_ = false;
    }
    last_ask = now_us();
    bool named = ask();
    retry_ms = named ? 100 : std::min<int64_t>(retry_ms * 2, 1000);
    int64_t next_ask = now_us() + (named ? opt_.reask_ms : retry_ms) * 1000;
    while (now_us() < next_ask && !stopping_or_asked()) {
      if (named) listen(next_ask);
      if (!sub_ || !named) {
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::microseconds(next_ask)),
                       [this] { return stop_ || asked_; });
      }
    }
  }
}

}  // namespace floodwall
