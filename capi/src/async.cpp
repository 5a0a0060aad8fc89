// The C ABI's calls that answer later or wait: fw_admit_async*, fw_acquire, fw_reserve and
// fw_reserve_async (docs/concepts/acquire.md). Every entry point runs inside guarded() (entry.hpp).
#include <cmath>
#include <exception>
#include <string>

#include "engine/guard.hpp"
#include "entry.hpp"
#include "floodwall.h"
#include "mapping.hpp"

using namespace fw_capi;  // NOLINT: the mapping is this file's vocabulary

extern "C" {

int fw_acquire(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = decision_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;
    write_decision(g.acquire(to_request(req, g.policy(), derived), max_wait_s), version, out);
    return FW_OK;
  });
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

namespace {
// What fw_admit would have returned for an admit that ended in this exception; its message is this
// thread's fw_error_last().
int status_of(const std::exception_ptr &e) {
  return guarded([&]() -> int { std::rethrow_exception(e); });
}
}  // namespace

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
    message = last_message.c_str();
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

}  // extern "C"
