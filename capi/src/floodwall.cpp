// The C ABI over the core. Every entry point runs inside guarded(): nothing throws across the ABI,
// std::bad_alloc becomes FW_ENOMEM, everything else a status code with a thread-local message.
#include "floodwall.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "engine/guard.hpp"
#include "engine/process_guard.hpp"
#include "http/backoff.hpp"
#include "http/formatter.hpp"
#include "policy/policy.hpp"
#include "policy/request_tenant.hpp"
#include "stores/store.hpp"
#include "stores/store_factory.hpp"

// The C enums and the core's are one vocabulary: a value crosses the ABI by a cast.
static_assert(FW_LIMITER_NONE == static_cast<int>(floodwall::Limiter::none));
static_assert(FW_LIMITER_REQUEST_RATE == static_cast<int>(floodwall::Limiter::request_rate));
static_assert(FW_LIMITER_CONCURRENCY == static_cast<int>(floodwall::Limiter::concurrency));
static_assert(FW_LIMITER_FLEET == static_cast<int>(floodwall::Limiter::fleet));
static_assert(FW_LIMITER_UTILIZATION == static_cast<int>(floodwall::Limiter::utilization));
static_assert(FW_LIMITER_COUNT == floodwall::kLimiterCount);
static_assert(FW_MODE_ENFORCE == static_cast<int>(floodwall::Mode::enforce));
static_assert(FW_MODE_DARK == static_cast<int>(floodwall::Mode::dark));
static_assert(FW_MODE_OFF == static_cast<int>(floodwall::Mode::off));
static_assert(FW_FAIL_NONE == static_cast<int>(floodwall::FailReason::none));
static_assert(FW_FAIL_TIMEOUT == static_cast<int>(floodwall::FailReason::timeout));
static_assert(FW_FAIL_CONNECTION == static_cast<int>(floodwall::FailReason::connection));
static_assert(FW_FAIL_BREAKER == static_cast<int>(floodwall::FailReason::breaker));
static_assert(FW_FAIL_CONFIG == static_cast<int>(floodwall::FailReason::config));
static_assert(FW_FAIL_ERROR == static_cast<int>(floodwall::FailReason::error));
static_assert(FW_FAIL_OVERLOAD == static_cast<int>(floodwall::FailReason::overload));
static_assert(FW_FAIL_OVERLOAD + 1 == floodwall::kFailReasonCount);
static_assert(FW_RESPONSE_MAX_HEADERS >= 6, "RateLimit-Policy, RateLimit, -Limit, -Remaining, -Reset, Retry-After");

struct fw_client {
  explicit fw_client(floodwall::Policy p) : client(std::move(p)) {}
  floodwall::ProcessGuard client;  // the Guard of this process, made anew in a forked child
  // Calls in progress, counted in slots by thread so that concurrent callers do not share a cache line,
  // and whether fw_client_close was called: close sets `closed`, then waits until no call is in progress
  // (a call enters, then looks at `closed`; close sets it, then looks at the calls: one of the two sees
  // the other), then closes the Guard.
  struct alignas(64) Slot {
    std::atomic<int64_t> calls{0};
  };
  static constexpr size_t kSlots = 32;
  std::array<Slot, kSlots> in_progress;
  std::atomic<bool> closed{false};
  std::mutex close_mu;
  bool close_done = false;
};

namespace {

floodwall::Guard &guard_of(fw_client *c) {
  return c->client.guard();
}

thread_local std::string last_message;
thread_local fw_error last_error{FW_OK, ""};
thread_local bool has_error = false;

int fail(int code, const std::string &message) {
  try {
    last_message = message;
  } catch (...) {
    last_message.clear();
  }
  last_error.code = code;
  last_error.message = last_message.c_str();
  has_error = true;
  return code;
}

// A call on a closed client (fw_client_close): FW_ECLOSED.
class ClientClosed : public std::runtime_error {
 public:
  ClientClosed() : std::runtime_error("client: closed (fw_client_close)") {}
};

template <class F>
int guarded(F &&f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return fail(FW_ENOMEM, "out of memory");
  } catch (const floodwall::PolicyError &e) {
    return fail(FW_EPOLICY, e.what());
  } catch (const floodwall::StoreError &e) {
    return fail(FW_ESTORE, e.what());
  } catch (const floodwall::BadRequest &e) {
    return fail(FW_EINVAL, e.what());
  } catch (const ClientClosed &e) {
    return fail(FW_ECLOSED, e.what());
  } catch (const std::exception &e) {
    return fail(FW_ERROR, e.what());
  } catch (...) {
    return fail(FW_ERROR, "unknown error");
  }
}

// fw_decision grows by appending: a version 1 struct ends where `degraded` begins, version 2 where
// `cost` begins.
constexpr size_t kDecisionV1Size = offsetof(fw_decision, degraded);
constexpr size_t kDecisionV2Size = offsetof(fw_decision, cost);
static_assert(kDecisionV1Size == 96, "the version 1 fw_decision layout is frozen");
static_assert(kDecisionV2Size == 104, "the version 2 fw_decision layout is frozen (sizeof, with its padding)");

unsigned decision_version(const fw_decision *d) {
  unsigned v = d->version;
  if (v < 1 || v > FW_DECISION_VERSION)
    throw floodwall::BadRequest("decision.version: unsupported (" + std::to_string(v) + "; this library knows 1 to " +
                                std::to_string(FW_DECISION_VERSION) + ")");
  return v;
}

// The bytes a caller's struct of that version has.
size_t decision_size(unsigned version) {
  return version == 1 ? kDecisionV1Size : version == 2 ? kDecisionV2Size : sizeof(fw_decision);
}

// A caller's decision as this library's: the fields its version has, the later ones at their defaults.
fw_decision read_decision(const fw_decision *d) {
  unsigned v = decision_version(d);
  if (v == FW_DECISION_VERSION) return *d;
  fw_decision full = FW_DECISION_INIT;
  std::memcpy(&full, d, decision_size(v));
  return full;
}

// fw_request grows by appending too: a version 1 struct ends where `headers` begins.
constexpr size_t kRequestV1Size = offsetof(fw_request, headers);
static_assert(kRequestV1Size == 56, "the version 1 fw_request layout is frozen");

// Out of line and cold: the message is built only for a request that is refused, and keeping it out of
// to_request lets that be inlined into every admit.
[[noreturn, gnu::noinline, gnu::cold]] void bad_request(const fw_request *req) {
  if (!req) throw floodwall::BadRequest("request: must not be NULL");
  if (req->version < 1 || req->version > FW_REQUEST_VERSION)
    throw floodwall::BadRequest("request.version: unsupported (" + std::to_string(req->version) + ")");
  throw floodwall::BadRequest("tenant: NULL with a non-zero length");
}

constexpr std::string_view kAnonymous = "anonymous";

// The request as the core takes it. A version 2 request without a tenant has one derived from its
// headers and peer into `derived`, which must outlive the returned Request.
floodwall::Request to_request(const fw_request *req, const floodwall::Policy &policy, std::string &derived) {
  if (!req || req->version < 1 || req->version > FW_REQUEST_VERSION || (!req->tenant && req->tenant_len))
    bad_request(req);
  floodwall::Request r;
  if (req->version >= 2 && !req->tenant) {
    if ((!req->headers && req->header_count) || (!req->peer && req->peer_len))
      throw floodwall::BadRequest(!req->peer && req->peer_len ? "peer: NULL with a non-zero length"
                                                              : "headers: NULL with a non-zero count");
    derived = floodwall::derive_tenant(policy.tenant, req->headers, req->headers ? req->header_count : 0,
                                       {req->peer ? req->peer : "", req->peer ? req->peer_len : 0});
    r.tenant = derived;
  } else if (req->version >= 2 && req->tenant_len == 0) {
    r.tenant = kAnonymous;  // an empty key is one anonymous tenant, limited like any other
  } else {
    r.tenant = {req->tenant ? req->tenant : "", req->tenant_len};
  }
  r.route = req->route ? std::string_view(req->route) : std::string_view();
  r.method = req->method ? std::string_view(req->method) : std::string_view();
  r.cost = req->cost;
  r.critical = req->critical != 0;
  r.sandbox = req->sandbox != 0;
  return r;
}

int set_buf(fw_buf *out, const std::string &s) {
  if (!out) throw floodwall::BadRequest("out: must not be NULL");
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  out->ptr = p;
  out->size = s.size();
  return FW_OK;
}

// Calls of this thread in progress on any client: a close from inside one (a callback run inline) would
// wait for itself.
thread_local int tl_calls_in_progress = 0;

size_t my_slot() {
  static std::atomic<size_t> next{0};
  thread_local size_t slot = next.fetch_add(1, std::memory_order_relaxed) % fw_client::kSlots;
  return slot;
}

// One call on a client, from its start to its end: the client is not closed under it.
class Use {
 public:
  explicit Use(fw_client *c) {
    if (!c) throw floodwall::BadRequest("client: must not be NULL");
    std::atomic<int64_t> &calls = c->in_progress[my_slot()].calls;
    calls.fetch_add(1, std::memory_order_seq_cst);
    if (c->closed.load(std::memory_order_seq_cst)) {
      calls.fetch_sub(1, std::memory_order_release);
      throw ClientClosed();
    }
    calls_ = &calls;
    tl_calls_in_progress++;
  }
  ~Use() {
    tl_calls_in_progress--;
    calls_->fetch_sub(1, std::memory_order_release);
  }
  Use(const Use &) = delete;
  Use &operator=(const Use &) = delete;

 private:
  std::atomic<int64_t> *calls_ = nullptr;
};

// A C caller may pass any int where an enum is declared; read it as an int so that an out-of-range
// value is an error, not undefined behaviour.
template <class E>
int raw(const E &e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bool valid_limiter(int l) {
  return l >= FW_LIMITER_REQUEST_RATE && l <= FW_LIMITER_UTILIZATION;
}
bool valid_mode(int m) {
  return m >= FW_MODE_ENFORCE && m <= FW_MODE_OFF;
}

}  // namespace

extern "C" {

const char *fw_version(void) {
  return FW_VERSION_STRING;
}

const fw_error *fw_error_last(void) {
  return has_error ? &last_error : nullptr;
}

const char *fw_limiter_name(fw_limiter l) {
  if (raw(l) < FW_LIMITER_NONE || raw(l) > FW_LIMITER_UTILIZATION) return "unknown";
  return floodwall::limiter_name(static_cast<floodwall::Limiter>(raw(l)));
}

const char *fw_mode_name(fw_mode m) {
  if (!valid_mode(raw(m))) return "unknown";
  return floodwall::mode_name(static_cast<floodwall::Mode>(raw(m)));
}

const char *fw_fail_reason_name(fw_fail_reason r) {
  if (raw(r) < FW_FAIL_NONE || raw(r) > FW_FAIL_OVERLOAD) return "unknown";
  return floodwall::fail_reason_name(static_cast<floodwall::FailReason>(raw(r)));
}

int fw_limiter_from_name(fw_limiter *out, const char *name) {
  return guarded([&]() -> int {
    if (!out || !name) throw floodwall::BadRequest("limiter: must not be NULL");
    for (int l = FW_LIMITER_REQUEST_RATE; l <= FW_LIMITER_UTILIZATION; l++) {
      if (std::strcmp(name, fw_limiter_name(static_cast<fw_limiter>(l))) == 0) {
        *out = static_cast<fw_limiter>(l);
        return FW_OK;
      }
    }
    return fail(FW_EINVAL, "limiter: unknown name (expected request_rate, concurrency, fleet or utilization)");
  });
}

int fw_mode_from_name(fw_mode *out, const char *name) {
  return guarded([&]() -> int {
    if (!out || !name) throw floodwall::BadRequest("mode: must not be NULL");
    for (int m = FW_MODE_ENFORCE; m <= FW_MODE_OFF; m++) {
      if (std::strcmp(name, fw_mode_name(static_cast<fw_mode>(m))) == 0) {
        *out = static_cast<fw_mode>(m);
        return FW_OK;
      }
    }
    return fail(FW_EINVAL, "mode: unknown name (expected enforce, dark or off)");
  });
}

int fw_client_new(fw_client **out, const char *policy_json) {
  return guarded([&]() -> int {
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    *out = nullptr;
    if (!policy_json) throw floodwall::PolicyError("policy", "must not be NULL");
    *out = new fw_client(floodwall::parse_policy(policy_json));
    return FW_OK;
  });
}

int fw_client_close(fw_client *c) {
  if (!c) return FW_OK;
  if (tl_calls_in_progress > 0)
    return fail(FW_EINVAL, "fw_client_close: called from inside a call on a client (a callback run inline)");
  return guarded([&]() -> int {
    std::lock_guard lock(c->close_mu);  // a second close waits for the first, then does nothing
    if (c->close_done) return FW_OK;
    c->closed.store(true, std::memory_order_seq_cst);
    for (;;) {
      int64_t calls = 0;
      for (const fw_client::Slot &s : c->in_progress) calls += s.calls.load(std::memory_order_seq_cst);
      if (calls == 0) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    // No call is in progress and none can start: the Guard goes, and with it the store, which decides
    // every admit still pending on it (each callback exactly once) before this returns.
    c->client.close();
    c->close_done = true;
    return FW_OK;
  });
}

void fw_client_free(fw_client *c) {
  guarded([&]() -> int {
    delete c;
    return FW_OK;
  });
}

int fw_admit(fw_client *c, const fw_request *req, fw_decision *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = decision_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    if (version == FW_DECISION_VERSION) {
      g.admit(to_request(req, g.policy(), derived), *out);
      return FW_OK;
    }
    fw_decision full;
    g.admit(to_request(req, g.policy(), derived), full);
    full.version = version;  // the caller's struct keeps its own version
    std::memcpy(out, &full, decision_size(version));
    return FW_OK;
  });
}

int fw_admit_async2(fw_client *c, const fw_request *req, fw_admit_cb cb, void *payload, int *completed) {
  if (completed) *completed = 0;
  if (!cb) return fail(FW_EINVAL, "cb: must not be NULL");
  bool called = false, was_inline = false;
  int rc = guarded([&]() -> int {
    Use use(c);
    floodwall::Guard &g = guard_of(c);
    std::string derived;  // the Guard copies the tenant before admit_async returns
    floodwall::Request r = to_request(req, g.policy(), derived);
    called = true;  // from here on, the Guard calls cb exactly once (or throws before calling it)
    was_inline = g.admit_async(r, cb, payload);
    return FW_OK;
  });
  if (rc != FW_OK && called) {
    // A bad request: report it through the callback too, so that a caller waiting on it never hangs.
    fw_decision d = FW_DECISION_INIT;
    cb(payload, rc, &d);
    was_inline = true;
    rc = FW_OK;
  }
  if (completed && rc == FW_OK) *completed = was_inline ? 1 : 0;
  return rc;
}

int fw_admit_async(fw_client *c, const fw_request *req, fw_admit_cb cb, void *payload) {
  return fw_admit_async2(c, req, cb, payload, nullptr);
}

namespace {

// One fw_admit_async3 in flight: where an inline decision goes, and whom to call otherwise.
struct Async3 {
  fw_admit_cb3 cb;
  void *payload;
  fw_decision *out;
  unsigned out_version;
  bool inline_done = false;
  int inline_status = FW_OK;
};

// The fw_admit_async3 this thread is inside of (a callback may submit another: each keeps the outer one).
thread_local Async3 *tl_async3 = nullptr;

void async3_done(void *payload, int status, const fw_decision *d) {
  auto *a = static_cast<Async3 *>(payload);
  if (a == tl_async3) {
    // Decided inside fw_admit_async3, on its thread: the caller reads it from *out.
    a->inline_done = true;
    a->inline_status = status;
    if (status == FW_OK) {
      fw_decision full = *d;
      full.version = a->out_version;
      std::memcpy(a->out, &full, decision_size(a->out_version));
    }
    return;
  }
  const char *message = status == FW_OK       ? nullptr
                        : status == FW_ENOMEM ? "out of memory"
                                              : "the admit failed inside the core";
  fw_admit_cb3 cb = a->cb;
  void *p = a->payload;
  delete a;
  cb(p, status, d, message);
}

}  // namespace

int fw_admit_async3(fw_client *c, const fw_request *req, fw_decision *out, int *decided, fw_admit_cb3 cb,
                    void *payload) {
  if (decided) *decided = 0;
  if (!cb) return fail(FW_EINVAL, "cb: must not be NULL");
  if (!out) return fail(FW_EINVAL, "out: must not be NULL");
  if (!decided) return fail(FW_EINVAL, "decided: must not be NULL");
  Async3 *a = nullptr;
  Async3 *outer = tl_async3;
  bool taken = false, was_inline = false;
  int rc = guarded([&]() -> int {
    Use use(c);
    unsigned version = decision_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    floodwall::Request r = to_request(req, g.policy(), derived);
    a = new Async3{cb, payload, out, version};
    tl_async3 = a;
    taken = true;  // from here on the Guard calls async3_done exactly once, or throws before calling it
    was_inline = g.admit_async(r, async3_done, a);
    return FW_OK;
  });
  tl_async3 = outer;
  if (!taken) return rc;
  if (rc != FW_OK) {  // thrown before the Guard called back: nobody else holds `a`
    delete a;
    return rc;
  }
  if (!was_inline) return FW_OK;  // `a` belongs to the I/O thread now: not touched again here
  int status = a->inline_status;
  delete a;
  if (status != FW_OK) return fail(status, "the admit failed inside the core");
  *decided = 1;
  return FW_OK;
}

int fw_tenant_key(fw_client *c, const fw_request *req, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    std::string derived;
    floodwall::Request r = to_request(req, guard_of(c).policy(), derived);
    if (r.tenant.empty()) throw floodwall::BadRequest("tenant: must not be empty");
    return set_buf(out, std::string(r.tenant));
  });
}

int fw_client_can_block(fw_client *c, int *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    *out = guard_of(c).store().can_block() ? 1 : 0;
    return FW_OK;
  });
}

int fw_release(fw_client *c, fw_ticket t) {
  if (!c || t == 0) return FW_OK;
  int rc = guarded([&]() -> int {
    Use use(c);
    guard_of(c).release(t);
    return FW_OK;
  });
  return rc == FW_ECLOSED ? rc : FW_OK;  // never fails the caller; a closed client says so
}

int fw_set_mode(fw_client *c, fw_limiter l, fw_mode m) {
  return guarded([&]() -> int {
    Use use(c);
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    if (!valid_mode(raw(m))) throw floodwall::BadRequest("mode: unknown value " + std::to_string(raw(m)));
    guard_of(c).set_mode(static_cast<floodwall::Limiter>(raw(l)), static_cast<floodwall::Mode>(raw(m)));
    return FW_OK;
  });
}

int fw_get_mode(fw_client *c, fw_limiter l, fw_mode *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    *out = static_cast<fw_mode>(guard_of(c).mode(static_cast<floodwall::Limiter>(raw(l))));
    return FW_OK;
  });
}

int fw_report_utilization(fw_client *c, double u) {
  return guarded([&]() -> int {
    Use use(c);
    if (!(u >= 0.0 && u <= 1.0)) throw floodwall::BadRequest("utilization: must be a number in [0, 1]");
    guard_of(c).report_utilization(u);
    return FW_OK;
  });
}

int fw_shedding_amount(fw_client *c, double *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    *out = guard_of(c).shedding_amount();
    return FW_OK;
  });
}

void fw_buf_dispose(fw_buf *buf) {
  if (!buf) return;
  std::free(buf->ptr);
  buf->ptr = nullptr;
  buf->size = 0;
}

int fw_format_headers(fw_client *c, const fw_decision *d, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!d) throw floodwall::BadRequest("decision: must not be NULL");
    return set_buf(out, floodwall::format_headers(read_decision(d)));
  });
}

int fw_format_body(fw_client *c, const fw_decision *d, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!d) throw floodwall::BadRequest("decision: must not be NULL");
    return set_buf(out, floodwall::format_body(read_decision(d), guard_of(c).policy()));
  });
}

namespace {
// What an fw_response's values and body point into.
struct ResponseStorage {
  floodwall::HeaderFields headers;
  std::string body;
};
}  // namespace

int fw_format_response(fw_client *c, const fw_decision *d, fw_response *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!d) throw floodwall::BadRequest("decision: must not be NULL");
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    if (out->version != FW_RESPONSE_VERSION)
      throw floodwall::BadRequest("response.version: unsupported (" + std::to_string(out->version) + ")");
    fw_response_dispose(out);
    fw_decision full = read_decision(d);
    const floodwall::Policy &policy = guard_of(c).policy();
    auto storage = std::make_unique<ResponseStorage>();
    storage->headers = floodwall::response_headers(full);
    storage->body = floodwall::format_body(full, policy);
    out->status = full.status;
    out->header_count = storage->headers.count;
    for (size_t i = 0; i < storage->headers.count; i++) {
      const floodwall::HeaderField &h = storage->headers.items[i];
      out->headers[i] = {h.name, std::strlen(h.name), h.value.data(), h.value.size()};
    }
    out->content_type = floodwall::body_content_type(full, policy);
    out->body = storage->body.c_str();
    out->body_len = storage->body.size();
    out->storage_ = storage.release();
    return FW_OK;
  });
}

void fw_response_dispose(fw_response *r) {
  if (!r) return;
  delete static_cast<ResponseStorage *>(r->storage_);
  unsigned version = r->version;
  fw_response empty = FW_RESPONSE_INIT;
  *r = empty;
  r->version = version;
}

int fw_backoff_delay(const fw_backoff *b, unsigned attempt, double retry_after_s, double random01, double *out_s) {
  return guarded([&]() -> int {
    if (!b) throw floodwall::BadRequest("backoff: must not be NULL");
    if (!out_s) throw floodwall::BadRequest("out: must not be NULL");
    if (b->version != FW_BACKOFF_VERSION)
      throw floodwall::BadRequest("backoff.version: unsupported (" + std::to_string(b->version) + ")");
    *out_s = floodwall::backoff_delay(*b, attempt, retry_after_s, random01);
    return FW_OK;
  });
}

int fw_parse_retry_after(const char *value, size_t len, double now_unix_s, double *out_s) {
  return guarded([&]() -> int {
    if (!value && len) throw floodwall::BadRequest("value: NULL with a non-zero length");
    if (!out_s) throw floodwall::BadRequest("out: must not be NULL");
    std::optional<double> s = floodwall::parse_retry_after({value ? value : "", len}, now_unix_s);
    if (!s) return fail(FW_EINVAL, "retry_after: neither delay-seconds nor an HTTP-date");
    *out_s = *s;
    return FW_OK;
  });
}

int fw_metrics_json(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).metrics_json());
  });
}

int fw_metrics_prometheus(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).metrics_prometheus());
  });
}

}  // extern "C"
