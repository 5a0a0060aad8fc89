// The C ABI over the core. Every entry point runs inside guarded(): nothing throws across the ABI,
// std::bad_alloc becomes FW_ENOMEM, everything else a status code with a thread-local message.
#include "floodwall.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "formatter.hpp"
#include "guard.hpp"
#include "policy.hpp"
#include "process_guard.hpp"
#include "store_factory.hpp"

struct fw_client {
  explicit fw_client(floodwall::Policy p) : client(std::move(p)) {}
  floodwall::ProcessGuard client;  // the Guard of this process, made anew in a forked child
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
  } catch (const std::exception &e) {
    return fail(FW_ERROR, e.what());
  } catch (...) {
    return fail(FW_ERROR, "unknown error");
  }
}

// fw_decision grows by appending: a version 1 struct ends where `degraded` begins.
constexpr size_t kDecisionV1Size = offsetof(fw_decision, degraded);
static_assert(kDecisionV1Size == 96, "the version 1 fw_decision layout is frozen");

unsigned decision_version(const fw_decision *d) {
  unsigned v = d->version;
  if (v > FW_DECISION_VERSION)
    throw floodwall::BadRequest("decision.version: unsupported (" + std::to_string(v) + "; this library knows 1 to " +
                                std::to_string(FW_DECISION_VERSION) + ")");
  return v;
}

// A caller's decision as this library's: the fields its version has, the later ones at their defaults.
fw_decision read_decision(const fw_decision *d) {
  if (decision_version(d) >= 2) return *d;
  fw_decision full = FW_DECISION_INIT;
  std::memcpy(&full, d, kDecisionV1Size);
  return full;
}

// Out of line and cold: the message is built only for a request that is refused, and keeping it out of
// to_request lets that be inlined into every admit.
[[noreturn, gnu::noinline, gnu::cold]] void bad_request(const fw_request *req) {
  if (!req) throw floodwall::BadRequest("request: must not be NULL");
  if (req->version < 1 || req->version > FW_REQUEST_VERSION)
    throw floodwall::BadRequest("request.version: unsupported (" + std::to_string(req->version) + ")");
  throw floodwall::BadRequest("tenant: NULL with a non-zero length");
}

floodwall::Request to_request(const fw_request *req) {
  if (!req || req->version < 1 || req->version > FW_REQUEST_VERSION || (!req->tenant && req->tenant_len))
    bad_request(req);
  floodwall::Request r;
  r.tenant = {req->tenant ? req->tenant : "", req->tenant_len};
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

void need_client(const fw_client *c) {
  if (!c) throw floodwall::BadRequest("client: must not be NULL");
}

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

void fw_client_free(fw_client *c) {
  guarded([&]() -> int {
    delete c;
    return FW_OK;
  });
}

int fw_admit(fw_client *c, const fw_request *req, fw_decision *out) {
  return guarded([&]() -> int {
    need_client(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = decision_version(out);
    if (version >= 2) {
      guard_of(c).admit(to_request(req), *out);
      return FW_OK;
    }
    fw_decision full;
    guard_of(c).admit(to_request(req), full);
    full.version = version;  // the caller's struct keeps its own version
    std::memcpy(out, &full, kDecisionV1Size);
    return FW_OK;
  });
}

int fw_admit_async(fw_client *c, const fw_request *req, fw_admit_cb cb, void *payload) {
  if (!cb) return fail(FW_EINVAL, "cb: must not be NULL");
  bool called = false;
  int rc = guarded([&]() -> int {
    need_client(c);
    floodwall::Request r = to_request(req);
    called = true;  // from here on, the Guard calls cb exactly once (or throws before calling it)
    guard_of(c).admit_async(r, cb, payload);
    return FW_OK;
  });
  if (rc != FW_OK && called) {
    // A bad request: report it through the callback too, so that a caller waiting on it never hangs.
    fw_decision d = FW_DECISION_INIT;
    cb(payload, rc, &d);
    return FW_OK;
  }
  return rc;
}

int fw_release(fw_client *c, fw_ticket t) {
  if (!c || t == 0) return FW_OK;
  guarded([&]() -> int {
    guard_of(c).release(t);
    return FW_OK;
  });
  return FW_OK;  // never fails the caller
}

int fw_set_mode(fw_client *c, fw_limiter l, fw_mode m) {
  return guarded([&]() -> int {
    need_client(c);
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    if (!valid_mode(raw(m))) throw floodwall::BadRequest("mode: unknown value " + std::to_string(raw(m)));
    guard_of(c).set_mode(static_cast<floodwall::Limiter>(raw(l)), static_cast<floodwall::Mode>(raw(m)));
    return FW_OK;
  });
}

int fw_get_mode(fw_client *c, fw_limiter l, fw_mode *out) {
  return guarded([&]() -> int {
    need_client(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    *out = static_cast<fw_mode>(guard_of(c).mode(static_cast<floodwall::Limiter>(raw(l))));
    return FW_OK;
  });
}

int fw_report_utilization(fw_client *c, double u) {
  return guarded([&]() -> int {
    need_client(c);
    if (!(u >= 0.0 && u <= 1.0)) throw floodwall::BadRequest("utilization: must be a number in [0, 1]");
    guard_of(c).report_utilization(u);
    return FW_OK;
  });
}

int fw_shedding_amount(fw_client *c, double *out) {
  return guarded([&]() -> int {
    need_client(c);
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
    need_client(c);
    if (!d) throw floodwall::BadRequest("decision: must not be NULL");
    return set_buf(out, floodwall::format_headers(read_decision(d)));
  });
}

int fw_format_body(fw_client *c, const fw_decision *d, fw_buf *out) {
  return guarded([&]() -> int {
    need_client(c);
    if (!d) throw floodwall::BadRequest("decision: must not be NULL");
    return set_buf(out, floodwall::format_body(read_decision(d), guard_of(c).policy()));
  });
}

int fw_metrics_json(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    need_client(c);
    return set_buf(out, guard_of(c).metrics_json());
  });
}

int fw_metrics_prometheus(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    need_client(c);
    return set_buf(out, guard_of(c).metrics_prometheus());
  });
}

}  // extern "C"
