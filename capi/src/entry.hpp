// What every entry point of the C ABI shares (floodwall.cpp, async.cpp): the client, the thread-local
// last error, guarded() (nothing throws across the ABI) and Use (a call the client is not closed under).
#pragma once

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include "calls.hpp"
#include "engine/process_guard.hpp"
#include "floodwall.h"
#include "policy/policy.hpp"
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

inline thread_local std::string last_message;
inline thread_local fw_error last_error{FW_OK, ""};
inline thread_local bool has_error = false;

inline int fail(int code, const std::string &message) {
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

inline int set_buf(fw_buf *out, const std::string &s) {
  if (!out) throw floodwall::BadRequest("out: must not be NULL");
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  out->ptr = p;
  out->size = s.size();
  return FW_OK;
}

// One call on a client, from its start to its end: the client is not closed under it.
class Use {
 public:
  explicit Use(fw_client *c) : thread_(&fw_capi::tl_calls) {
    if (!c) throw floodwall::BadRequest("client: must not be NULL");
    slot_ = thread_->slot_plus_1 ? thread_->slot_plus_1 : fw_capi::first_slot(*thread_);
    if (!c->calls.enter(*thread_, slot_)) throw ClientClosed();
    calls_ = &c->calls;
  }
  ~Use() { calls_->leave(*thread_, slot_); }
  Use(const Use &) = delete;
  Use &operator=(const Use &) = delete;

 private:
  fw_capi::ThreadCalls *thread_;
  fw_capi::CallCounts *calls_ = nullptr;
  unsigned slot_ = 0;
};

}  // namespace fw_capi
