// The C ABI over the core: the client, admit and acquire, release, modes, the request's helpers, formatting,
// backoff and metrics (the control records and the floodwall command are in fw_admin.cpp). Every entry point
// runs inside guarded() (guarded.hpp): nothing throws across the ABI, std::bad_alloc becomes FW_ENOMEM,
// everything else a status code with a thread-local message.
#include "floodwall.h"

#include <array>
#include <chrono>
#include <cmath>
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
#include "guarded.hpp"
#include "http/backoff.hpp"
#include "http/formatter.hpp"
#include "mapping.hpp"
#include "policy/policy.hpp"
#include "policy/policy_source.hpp"
#include "policy/request_tenant.hpp"
#include "policy/route.hpp"
#include "stores/store.hpp"
#include "stores/store_factory.hpp"

using namespace fw_capi;  // NOLINT: the mapping is this file's vocabulary

extern "C" {

const char *fw_version(void) {
  return FW_VERSION_STRING;
}

const fw_error *fw_error_last(void) {
  return last_error();
}

const char *fw_limiter_name(fw_limiter l) {
  if (raw(l) < FW_LIMITER_NONE || raw(l) > FW_LIMITER_ADAPTIVE) return "unknown";
  return floodwall::limiter_name(static_cast<floodwall::Limiter>(raw(l)));
}

const char *fw_mode_name(fw_mode m) {
  if (!valid_mode(raw(m))) return "unknown";
  return floodwall::mode_name(static_cast<floodwall::Mode>(raw(m)));
}

const char *fw_fail_reason_name(fw_fail_reason r) {
  if (raw(r) < FW_FAIL_NONE || raw(r) > FW_FAIL_CLUSTER) return "unknown";
  return floodwall::fail_reason_name(static_cast<floodwall::FailReason>(raw(r)));
}

int fw_limiter_from_name(fw_limiter *out, const char *name) {
  return guarded([&]() -> int {
    if (!out || !name) throw floodwall::BadRequest("limiter: must not be NULL");
    for (int l = FW_LIMITER_REQUEST_RATE; l <= FW_LIMITER_ADAPTIVE; l++) {
      if (std::strcmp(name, fw_limiter_name(static_cast<fw_limiter>(l))) == 0) {
        *out = static_cast<fw_limiter>(l);
        return FW_OK;
      }
    }
    return fail(FW_EINVAL,
                "limiter: unknown name (expected request_rate, concurrency, fleet, utilization or adaptive)");
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
    fw_capi::choose_counting();  // before any call can be counted
    floodwall::Policy policy = floodwall::parse_policy(policy_json);
    // No store in the policy: the environment's (twelve-factor, as the floodwall command does).
    const char *env = policy.store_given ? nullptr : std::getenv("FLOODWALL_STORE");
    bool from_env = env && *env;
    if (from_env) policy.store = env;
    try {
      *out = new fw_client(std::move(policy));
    } catch (const floodwall::PolicyError &e) {  // a bad URL is named where it came from
      if (!from_env || e.field() != "store") throw;
      throw floodwall::PolicyError("FLOODWALL_STORE", std::string(e.what()).substr(7));
    } catch (const floodwall::StoreError &e) {
      if (!from_env || std::string_view(e.what()).substr(0, 7) != "store: ") throw;
      throw floodwall::StoreError("FLOODWALL_STORE: " + std::string(e.what()).substr(7));
    }
    return FW_OK;
  });
}

int fw_policy_text(const char *policy, int is_path, fw_buf *out) {
  return guarded([&]() -> int {
    if (!policy || !out) throw floodwall::BadRequest("fw_policy_text: policy and out must not be NULL");
    return set_buf(out, floodwall::policy_text(policy, is_path != 0));
  });
}

int fw_client_close(fw_client *c) {
  if (!c) return FW_OK;
  if (fw_capi::tl_calls.in_progress > 0)
    return fail(FW_EINVAL, "fw_client_close: called from inside a call on a client (a callback run inline)");
  return guarded([&]() -> int {
    std::lock_guard lock(c->close_mu);  // a second close waits for the first, then does nothing
    if (c->close_done) return FW_OK;
    c->calls.close();
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
  return decide_into(c, req, out, [](floodwall::Guard &g, const floodwall::Request &r) { return g.admit(r); });
}

int fw_acquire(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out) {
  return decide_into(
      c, req, out, [max_wait_s](floodwall::Guard &g, const floodwall::Request &r) { return g.acquire(r, max_wait_s); });
}

namespace {
// fw_reserve's decision must be able to say its wait.
unsigned reserve_version(const fw_decision *out) {
  unsigned version = decision_version(out);
  if (version < 6)
    throw floodwall::BadRequest("out.version: fw_reserve needs a version 6 decision (wait_s), got " +
                                std::to_string(version));
  return version;
}
}  // namespace

int fw_reserve(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = reserve_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    write_decision(g.reserve(to_request(req, g.policy(), derived), max_wait_s), version, out);
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
    // Two pointers: std::function keeps them in place, no allocation.
    was_inline = g.admit_async(r, [cb, payload](const floodwall::Decision &d, std::exception_ptr e) {
      fw_decision out = FW_DECISION_INIT;
      int status = e ? status_of(e) : FW_OK;
      if (!e) to_c(d, out);
      cb(payload, status, &out);
    });
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
  std::exception_ptr inline_error;
};

// The fw_admit_async3 this thread is inside of (a callback may submit another: each keeps the outer one).
thread_local Async3 *tl_async3 = nullptr;

void async3_done(Async3 *a, const floodwall::Decision &d, std::exception_ptr e) {
  if (a == tl_async3) {
    // Decided inside fw_admit_async3, on its thread: the caller reads it from *out.
    a->inline_done = true;
    if (e)
      a->inline_error = std::move(e);
    else
      write_decision(d, a->out_version, a->out);
    return;
  }
  fw_decision out = FW_DECISION_INIT;
  int status = FW_OK;
  const char *message = nullptr;
  if (e) {
    status = status_of(e);
    message = last_error()->message;
  } else {
    to_c(d, out);
  }
  fw_admit_cb3 cb = a->cb;
  void *p = a->payload;
  delete a;
  cb(p, status, &out, message);
}

}  // namespace

namespace {
// fw_admit_async3 (max_wait_s < 0) and fw_reserve_async.
int submit_async3(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out, int *decided,
                  fw_admit_cb3 cb, void *payload) {
  if (decided) *decided = 0;
  if (!cb) return fail(FW_EINVAL, "cb: must not be NULL");
  if (!out) return fail(FW_EINVAL, "out: must not be NULL");
  if (!decided) return fail(FW_EINVAL, "decided: must not be NULL");
  Async3 *a = nullptr;
  Async3 *outer = tl_async3;
  bool taken = false, was_inline = false;
  int rc = guarded([&]() -> int {
    Use use(c);
    unsigned version = max_wait_s < 0 ? decision_version(out) : reserve_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    floodwall::Request r = to_request(req, g.policy(), derived);
    a = new Async3{cb, payload, out, version, false, nullptr};
    tl_async3 = a;
    taken = true;  // from here on the Guard calls async3_done exactly once, or throws before calling it
    auto done = [a](const floodwall::Decision &d, std::exception_ptr e) { async3_done(a, d, std::move(e)); };
    was_inline = max_wait_s < 0 ? g.admit_async(r, done) : g.reserve_async(r, max_wait_s, done);
    return FW_OK;
  });
  tl_async3 = outer;
  if (!taken) return rc;
  if (rc != FW_OK) {  // thrown before the Guard called back: nobody else holds `a`
    delete a;
    return rc;
  }
  if (!was_inline) return FW_OK;  // `a` belongs to the I/O thread now: not touched again here
  std::exception_ptr error = std::move(a->inline_error);
  delete a;
  if (error) return status_of(error);
  *decided = 1;
  return FW_OK;
}
}  // namespace

int fw_admit_async3(fw_client *c, const fw_request *req, fw_decision *out, int *decided, fw_admit_cb3 cb,
                    void *payload) {
  return submit_async3(c, req, -1, out, decided, cb, payload);
}

int fw_reserve_async(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out, int *decided,
                     fw_admit_cb3 cb, void *payload) {
  if (!std::isfinite(max_wait_s) || max_wait_s < 0) {
    if (decided) *decided = 0;
    return fail(FW_EINVAL,
                "max_wait: must be a finite number of seconds, 0 or more (got " + std::to_string(max_wait_s) + ")");
  }
  return submit_async3(c, req, max_wait_s, out, decided, cb, payload);
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

int fw_request_credential(fw_client *c, const fw_request *req, fw_buf *out, int *found) {
  return guarded([&]() -> int {
    Use use(c);
    if (!found) throw floodwall::BadRequest("found: must not be NULL");
    RequestSource src = request_source(req);
    auto credential = floodwall::request_credential(guard_of(c).policy().tenant, src.headers, src.count, src.peer);
    *found = credential ? 1 : 0;
    return set_buf(out, credential ? std::string(credential->value) : std::string());
  });
}

int fw_request_route(fw_client *c, const fw_request *req, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    std::string derived;
    floodwall::Request r = to_request(req, guard_of(c).policy(), derived);
    std::string buf;
    return set_buf(out, std::string(floodwall::request_route(r.route, r.path, buf)));
  });
}

int fw_client_can_block(fw_client *c, int *out) {
  return read_into(c, out, [](floodwall::Guard &g) { return g.store().can_block() ? 1 : 0; });
}

int fw_client_deadline_ms(fw_client *c, int64_t *out) {
  return read_into(c, out, [](floodwall::Guard &g) { return g.policy().redis.deadline_ms; });
}

int fw_client_hold(fw_client *c) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).store().hold_writes();
    return FW_OK;
  });
}

int fw_client_flush(fw_client *c) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).store().flush_writes();
    return FW_OK;
  });
}

int fw_client_rule_name(fw_client *c, int index, const char **out, int *is_quota) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    const auto &rules = guard_of(c).policy().rules;
    if (index < 0 || static_cast<size_t>(index) >= rules.size())
      throw floodwall::BadRequest("index: the policy has no limit or quota " + std::to_string(index) + " (it has " +
                                  std::to_string(rules.size()) + ")");
    *out = rules[static_cast<size_t>(index)].name.c_str();
    if (is_quota) *is_quota = rules[static_cast<size_t>(index)].quota ? 1 : 0;
    return FW_OK;
  });
}

int fw_client_tenant_header(fw_client *c, int index, const char **out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    std::vector<const char *> names = floodwall::tenant_header_names(guard_of(c).policy().tenant);
    if (index < 0 || static_cast<size_t>(index) >= names.size())
      throw floodwall::BadRequest("index: the tenant derivation reads no header " + std::to_string(index) +
                                  " (it reads " + std::to_string(names.size()) + ")");
    *out = names[static_cast<size_t>(index)];
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
  return read_into(c, out, [](floodwall::Guard &g) { return g.shedding_amount(); });
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
    return set_buf(out, floodwall::format_headers(read_decision(d), &guard_of(c).policy()));
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
    floodwall::Decision full = read_decision(d);
    const floodwall::Policy &policy = guard_of(c).policy();
    auto storage = std::make_unique<ResponseStorage>();
    storage->headers = floodwall::response_headers(full, &policy);
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
    *out_s = floodwall::backoff_delay({b->base_s, b->cap_s, b->attempts}, attempt, retry_after_s, random01);
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
