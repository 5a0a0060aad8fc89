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

#include "calls.hpp"
#include "cli.hpp"
#include "engine/guard.hpp"
#include "engine/process_guard.hpp"
#include "entry.hpp"
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

namespace {

// One value of a client's into *out: the fw_client_* and fw_shedding_amount getters.
template <typename T, typename Get>
int read_into(fw_client *c, T *out, Get get) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    *out = get(guard_of(c));
    return FW_OK;
  });
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
  return l >= FW_LIMITER_REQUEST_RATE && l <= FW_LIMITER_ADAPTIVE;
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
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = decision_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    write_decision(g.admit(to_request(req, g.policy(), derived)), version, out);
    return FW_OK;
  });
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

// ------------------------------------------------------------------------------------------ admin

namespace {
std::string_view admin_tenant(const char *tenant, size_t len) {
  if (!tenant) throw floodwall::BadRequest("tenant: must not be NULL");
  return {tenant, len};
}
}  // namespace

int fw_admin_set_override(fw_client *c, const char *tenant, size_t tenant_len, double rate, double burst) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_set_override(admin_tenant(tenant, tenant_len), rate, burst);
    return FW_OK;
  });
}

int fw_admin_remove_override(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_remove_override(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_set_tier(fw_client *c, const char *tenant, size_t tenant_len, const char *tier) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_set_tier(admin_tenant(tenant, tenant_len), tier ? std::string_view(tier) : std::string_view());
    return FW_OK;
  });
}

int fw_admin_block(fw_client *c, const char *tenant, size_t tenant_len, double seconds) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_block(admin_tenant(tenant, tenant_len), seconds);
    return FW_OK;
  });
}

int fw_admin_unblock(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_unblock(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_show(fw_client *c, const char *tenant, size_t tenant_len, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_show(admin_tenant(tenant, tenant_len)));
  });
}

int fw_admin_reset(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_reset(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_set_mode(fw_client *c, fw_limiter l, int mode) {
  return guarded([&]() -> int {
    Use use(c);
    // The same check as fw_set_mode: a cast alone would make 257 the request-rate limiter.
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    guard_of(c).admin_set_mode(static_cast<floodwall::Limiter>(raw(l)), mode);
    return FW_OK;
  });
}

int fw_admin_list(fw_client *c, size_t limit, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_list(limit));
  });
}

int fw_admin_status(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_status());
  });
}

int fw_cli_run(int argc, const char *const *argv, int *exit_status, fw_buf *out, fw_buf *err) {
  return guarded([&]() -> int {
    if (argc < 0 || (argc > 0 && !argv) || !exit_status || !out || !err)
      throw floodwall::BadRequest("fw_cli_run: argv, exit_status, out and err must not be NULL");
    std::string o, e;
    *exit_status = fw_cli::run(argc, argv, o, e);
    set_buf(out, o);
    set_buf(err, e);
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
