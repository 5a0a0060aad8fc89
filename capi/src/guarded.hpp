// What every entry point of the C ABI shares: the client, the frame that keeps exceptions from crossing the
// ABI (guarded), the count of calls in progress (Use), and the small helpers that write into a caller's
// out-parameters. The entry points are in floodwall.cpp (the client, admit, acquire, release, formatting)
// and fw_admin.cpp (the control records and the floodwall command).
#pragma once

#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>

#include "calls.hpp"
#include "engine/guard.hpp"
#include "engine/process_guard.hpp"
#include "floodwall.h"
#include "mapping.hpp"
#include "util/errors.hpp"

struct fw_client {
  explicit fw_client(floodwall::Policy p) : client(std::move(p)) {}
  floodwall::ProcessGuard client;  // the Guard of this process, made anew in a forked child
  fw_capi::CallCounts calls;       // in progress, and whether fw_client_close was called (calls.hpp)
  std::mutex close_mu;
  bool close_done = false;
};

namespace fw_capi {

inline floodwall::Guard &guard_of(fw_client *c) {
  return c->client.guard();
}

// Sets this thread's fw_error_last() and returns code.
int fail(int code, const std::string &message);
// This thread's last error, or NULL when no call on it has failed yet (fw_error_last).
const fw_error *last_error();

// A call on a closed client (fw_client_close): FW_ECLOSED.
class ClientClosed : public std::runtime_error {
 public:
  ClientClosed() : std::runtime_error("client: closed (fw_client_close)") {}
};

// Runs f and turns what it throws into a status code and this thread's message: nothing throws across the
// ABI, std::bad_alloc becomes FW_ENOMEM.
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

// What a call would have returned for a decision that ended in this exception; its message is this thread's
// fw_error_last().
int status_of(const std::exception_ptr &e);

// s into *out, allocated with malloc (fw_buf_dispose frees it).
int set_buf(fw_buf *out, const std::string &s);

// One call on a client, from its start to its end: the client is not closed under it.
class Use {
 public:
  explicit Use(fw_client *c) : thread_(&tl_calls) {
    if (!c) throw floodwall::BadRequest("client: must not be NULL");
    slot_ = thread_->slot_plus_1 ? thread_->slot_plus_1 : first_slot(*thread_);
    if (!c->calls.enter(*thread_, slot_)) throw ClientClosed();
    calls_ = &c->calls;
  }
  ~Use() { calls_->leave(*thread_, slot_); }
  Use(const Use &) = delete;
  Use &operator=(const Use &) = delete;

 private:
  ThreadCalls *thread_;
  CallCounts *calls_ = nullptr;
  unsigned slot_ = 0;
};

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

// One decision of a client's into *out, in the version of fw_decision the caller passed: fw_admit and
// fw_acquire. decide(guard, request) returns the core's Decision.
template <typename Decide>
int decide_into(fw_client *c, const fw_request *req, fw_decision *out, Decide decide) {
  return guarded([&]() -> int {
    Use use(c);
    if (!out) throw floodwall::BadRequest("out: must not be NULL");
    unsigned version = decision_version(out);
    floodwall::Guard &g = guard_of(c);
    std::string derived;  // a derived tenant key lives here while the request points at it
    write_decision(decide(g, to_request(req, g.policy(), derived)), version, out);
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

inline bool valid_limiter(int l) {
  return l >= FW_LIMITER_REQUEST_RATE && l <= FW_LIMITER_ADAPTIVE;
}
inline bool valid_mode(int m) {
  return m >= FW_MODE_ENFORCE && m <= FW_MODE_OFF;
}

}  // namespace fw_capi
