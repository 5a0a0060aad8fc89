// floodwall.node: a thin, mechanical map of the C ABI (capi/include/floodwall.h) for lib/index.js.
//
// Decisions cross into JavaScript as 28 numbers (see kRaw* below) rather than as objects: building a
// 17-property object through Node-API costs more than the memory store's whole decision, while a
// Float64Array write is free and lib/decision.js turns it into a Decision with plain JS property stores.
// The rules' fields (fw_decision version 4) are written and read only for a decision that a limit or a
// quota applied to (rules != 0): a policy without them pays for one 64-bit mask. The block's two fields
// (a tenant blocked through the admin API: 403) are always written: the formatter builds a 403's body and
// Retry-After from them.
//
// fw_admit_async3 returns a decision made at once (the memory store, a hot tenant, the fallback) in place:
// the numbers go into the client's scratch array and admit() returns undefined, with no thread hop. For an
// admit that waits on Redis it calls back from the core's I/O thread: the decision (or the error's message)
// is copied, handed to the JS thread through a thread-safe function, and the promise that admit() returned
// settles there. The event loop never waits on Redis.
//
// The admin calls (fw_admin_*) block for up to the store's deadline: each runs on libuv's thread pool (a
// Napi::AsyncWorker) and settles a promise on the JS thread. The fw_client is shared between the Client and
// the workers still running (std::shared_ptr), so that a client collected or torn down meanwhile is closed
// (its calls answer FW_ECLOSED) but freed only once the last worker is done with it.
#include <napi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floodwall.h"

namespace {

// Layout of a raw decision (a Float64Array); lib/decision.js reads the same indices.
enum RawIndex {
  kRawAllowed,
  kRawStatus,
  kRawLimiter,
  kRawDarkLimiter,
  kRawFailedOpen,
  kRawFailReason,
  kRawLimit,
  kRawRemaining,
  kRawReset,
  kRawRetryAfter,
  kRawRate,
  kRawConcurrencyLimit,
  kRawConcurrencyRemaining,
  kRawTicketHigh,  // the 64-bit ticket as two exact 32-bit halves
  kRawTicketLow,
  kRawDegraded,
  kRawCost,
  kRawRulesHigh,  // the 64-bit rules mask as two exact 32-bit halves; the fields below only when it is not 0
  kRawRulesLow,
  kRawRule,
  kRawDarkRule,
  kRawShownRule,
  kRawRuleLimit,
  kRawRuleRemaining,
  kRawRuleReset,
  kRawRuleWindowEnd,
  kRawBlocked,  // fw_decision.blocked, and blocked_until_s (seconds since the epoch: exact)
  kRawBlockedUntil,
  kRawWait,    // fw_decision.wait_s (fw_reserve_async: the seconds until the turn, the caller's to wait)
  kRawWaited,  // fw_decision.waited_s
  kRawSize
};

void ToRaw(const fw_decision &d, double *out) {
  out[kRawAllowed] = d.allowed ? 1 : 0;
  out[kRawStatus] = d.status;
  out[kRawLimiter] = d.limiter;
  out[kRawDarkLimiter] = d.dark_limiter;
  out[kRawFailedOpen] = d.failed_open ? 1 : 0;
  out[kRawFailReason] = d.fail_reason;
  out[kRawLimit] = static_cast<double>(d.limit);
  out[kRawRemaining] = static_cast<double>(d.remaining);
  out[kRawReset] = static_cast<double>(d.reset_s);
  out[kRawRetryAfter] = static_cast<double>(d.retry_after_s);
  out[kRawRate] = d.rate;
  out[kRawConcurrencyLimit] = static_cast<double>(d.concurrency_limit);
  out[kRawConcurrencyRemaining] = static_cast<double>(d.concurrency_remaining);
  out[kRawTicketHigh] = static_cast<double>(d.ticket >> 32);
  out[kRawTicketLow] = static_cast<double>(d.ticket & 0xffffffffu);
  out[kRawDegraded] = d.degraded ? 1 : 0;
  out[kRawCost] = static_cast<double>(d.cost);  // at most the burst: exact
  out[kRawRulesHigh] = static_cast<double>(d.rules >> 32);
  out[kRawRulesLow] = static_cast<double>(d.rules & 0xffffffffu);
  out[kRawBlocked] = d.blocked ? 1 : 0;
  out[kRawBlockedUntil] = static_cast<double>(d.blocked_until_s);
  out[kRawWait] = d.wait_s;
  out[kRawWaited] = d.waited_s;
  if (d.rules == 0) return;  // no rule applied: rule, dark_rule and shown_rule are -1, the rest 0
  out[kRawRule] = d.rule;
  out[kRawDarkRule] = d.dark_rule;
  out[kRawShownRule] = d.shown_rule;
  out[kRawRuleLimit] = static_cast<double>(d.rule_limit);
  out[kRawRuleRemaining] = static_cast<double>(d.rule_remaining);
  out[kRawRuleReset] = static_cast<double>(d.rule_reset_s);
  out[kRawRuleWindowEnd] = static_cast<double>(d.rule_window_end_s);  // seconds since the epoch: exact
}

fw_decision FromRaw(const double *in) {
  fw_decision d = FW_DECISION_INIT;
  d.allowed = in[kRawAllowed] != 0;
  d.status = static_cast<int>(in[kRawStatus]);
  d.limiter = static_cast<fw_limiter>(in[kRawLimiter]);
  d.dark_limiter = static_cast<fw_limiter>(in[kRawDarkLimiter]);
  d.failed_open = in[kRawFailedOpen] != 0;
  d.fail_reason = static_cast<fw_fail_reason>(in[kRawFailReason]);
  d.degraded = in[kRawDegraded] != 0;
  d.limit = static_cast<int64_t>(in[kRawLimit]);
  d.remaining = static_cast<int64_t>(in[kRawRemaining]);
  d.reset_s = static_cast<int64_t>(in[kRawReset]);
  d.retry_after_s = static_cast<int64_t>(in[kRawRetryAfter]);
  d.rate = in[kRawRate];
  d.concurrency_limit = static_cast<int64_t>(in[kRawConcurrencyLimit]);
  d.concurrency_remaining = static_cast<int64_t>(in[kRawConcurrencyRemaining]);
  d.ticket = (static_cast<fw_ticket>(in[kRawTicketHigh]) << 32) | static_cast<fw_ticket>(in[kRawTicketLow]);
  d.cost = static_cast<uint64_t>(in[kRawCost]);
  d.rules = (static_cast<uint64_t>(in[kRawRulesHigh]) << 32) | static_cast<uint64_t>(in[kRawRulesLow]);
  d.blocked = in[kRawBlocked] != 0;
  d.blocked_until_s = static_cast<int64_t>(in[kRawBlockedUntil]);
  if (d.rules == 0) return d;
  d.rule = static_cast<int>(in[kRawRule]);
  d.dark_rule = static_cast<int>(in[kRawDarkRule]);
  d.shown_rule = static_cast<int>(in[kRawShownRule]);
  d.rule_limit = static_cast<int64_t>(in[kRawRuleLimit]);
  d.rule_remaining = static_cast<int64_t>(in[kRawRuleRemaining]);
  d.rule_reset_s = static_cast<int64_t>(in[kRawRuleReset]);
  d.rule_window_end_s = static_cast<int64_t>(in[kRawRuleWindowEnd]);
  return d;
}

// ------------------------------------------------------------------------------------------------ errors

struct InstanceData {
  Napi::FunctionReference make_error;  // lib/errors.js fromStatus(code, message)
};

std::string LastMessage(int code) {
  const fw_error *e = fw_error_last();
  if (e && e->code == code) return e->message;
  return "floodwall: error " + std::to_string(code);
}

// Every fw_* failure becomes a JS exception here, through the JS layer's factory: lib/errors.js is the one
// place that maps a code to a class.
Napi::Value MakeError(Napi::Env env, int code, const std::string &message) {
  auto *data = env.GetInstanceData<InstanceData>();
  if (!data || data->make_error.IsEmpty()) return Napi::Error::New(env, message).Value();
  return data->make_error.Call({Napi::Number::New(env, code), Napi::String::New(env, message)});
}

[[noreturn]] void Throw(Napi::Env env, int code, const std::string &message) {
  throw Napi::Error(env, MakeError(env, code, message));
}

void Check(Napi::Env env, int rc) {
  if (rc != FW_OK) Throw(env, rc, LastMessage(rc));
}

// A failing napi_* call (a pending exception, a value of the wrong type) as a JS exception.
void CheckNapi(Napi::Env env, napi_status status) {
  if (status != napi_ok) throw Napi::Error::New(env);
}

Napi::Value TakeBuf(Napi::Env env, fw_buf &buf) {
  Napi::String s = Napi::String::New(env, buf.ptr ? buf.ptr : "", buf.size);
  fw_buf_dispose(&buf);
  return s;
}

// A string argument's UTF-8 bytes for the duration of one call; null/undefined give NULL. Short strings
// (every route, method and most tenants) are copied once into the stack buffer, without the length pass
// and the allocation of Napi::String::Utf8Value.
class Utf8Arg {
 public:
  explicit Utf8Arg(const Napi::Value &v) {
    if (!v.IsString()) return;
    size_t len = 0;
    napi_get_value_string_utf8(v.Env(), v, small_, sizeof small_, &len);
    // A copy that stopped short of the buffer's end is complete (a cut one ends within 4 bytes of it).
    if (len + 4 < sizeof small_) {
      ptr_ = small_;
      len_ = len;
    } else {
      big_ = v.As<Napi::String>().Utf8Value();
      ptr_ = big_.c_str();
      len_ = big_.size();
    }
  }
  const char *get() const { return ptr_; }
  size_t size() const { return len_; }

 private:
  char small_[256];
  std::string big_;
  const char *ptr_ = nullptr;
  size_t len_ = 0;
};

// The bytes of a Uint8Array (a Buffer); an empty one is "" (its data pointer may be NULL), never NULL.
const char *BytesOf(const Napi::Value &v, size_t *len) {
  auto bytes = v.As<Napi::Uint8Array>();
  *len = bytes.ByteLength();
  return *len ? reinterpret_cast<const char *>(bytes.Data()) : "";
}

// ------------------------------------------------------------------------------------ request identity

// The request's header fields as fw_header pairs, from a flat [name, value, ...] array (req.rawHeaders)
// or an array of [name, value] pairs. Strings are byte strings, one byte per character (Latin-1): that is
// how node:http (and fetch's Headers) hold the bytes of a header, so the core hashes the bytes the client
// sent, as it does in every language. Buffers are taken as they are. The bytes live here until the next
// request; one list per client, reused, so a request allocates nothing once the buffers have grown.
// Only the fields the policy's tenant derivation reads are kept (fw_client_tenant_header): the value of
// any other (a cookie, a user agent) is checked to be a string or a Buffer, never copied.
class HeaderList {
 public:
  // The header names (lower case) the client's policy derives a tenant from.
  void Want(fw_client *c) {
    const char *name = nullptr;
    for (int i = 0; fw_client_tenant_header(c, i, &name) == FW_OK; i++) wanted_.emplace_back(name);
  }

  // Reads the JS array `list`; data() and its pointers stay valid until the next Read.
  void Read(Napi::Env env, napi_value list) {
    bytes_.clear();
    spans_.clear();
    headers_.clear();
    uint32_t n = 0;
    CheckNapi(env, napi_get_array_length(env, list, &n));
    if (n == 0) return;
    napi_value first;
    CheckNapi(env, napi_get_element(env, list, 0, &first));
    bool pairs = false;
    CheckNapi(env, napi_is_array(env, first, &pairs));
    if (pairs) {
      for (uint32_t i = 0; i < n; i++) {
        napi_value pair;
        CheckNapi(env, napi_get_element(env, list, i, &pair));
        bool is_array = false;
        uint32_t len = 0;
        CheckNapi(env, napi_is_array(env, pair, &is_array));
        if (is_array) CheckNapi(env, napi_get_array_length(env, pair, &len));
        if (!is_array || len != 2) Bad(env, "entry " + std::to_string(i) + " must be a [name, value] pair");
        napi_value name, value;
        CheckNapi(env, napi_get_element(env, pair, 0, &name));
        CheckNapi(env, napi_get_element(env, pair, 1, &value));
        Field(env, name, value, i, i);
      }
    } else {
      if (n % 2) Bad(env, "a flat list must hold names and values in turn (an even length)");
      for (uint32_t i = 0; i < n; i += 2) {
        napi_value name, value;
        CheckNapi(env, napi_get_element(env, list, i, &name));
        CheckNapi(env, napi_get_element(env, list, i + 1, &value));
        Field(env, name, value, i, i + 1);
      }
    }
    // Only now that bytes_ has stopped growing do the pointers into it hold.
    for (size_t i = 0; i + 1 < spans_.size(); i += 2) {
      headers_.push_back({bytes_.data() + spans_[i].first, spans_[i].second, bytes_.data() + spans_[i + 1].first,
                          spans_[i + 1].second});
    }
  }

  const fw_header *data() const { return headers_.empty() ? nullptr : headers_.data(); }
  size_t size() const { return headers_.size(); }

 private:
  [[noreturn]] static void Bad(Napi::Env env, const std::string &why) {
    Throw(env, FW_EINVAL, "headers: " + why + " (a flat [name, value, ...] array or [name, value] pairs)");
  }

  // One field: its name read, and its value too when the name is one the tenant derivation reads.
  void Field(Napi::Env env, napi_value name, napi_value value, uint32_t name_entry, uint32_t value_entry) {
    size_t at = bytes_.size();
    Append(env, name, name_entry);
    std::string_view got(bytes_.data() + at, bytes_.size() - at);
    if (Wanted(got)) {
      Append(env, value, value_entry);
      return;
    }
    bytes_.resize(at);
    spans_.pop_back();
    napi_valuetype type;
    CheckNapi(env, napi_typeof(env, value, &type));
    if (type != napi_string && !IsBytes(env, value)) NotBytes(env, value_entry);
  }

  // A Uint8Array (a Buffer), the one kind of field that is not a string.
  static bool IsBytes(Napi::Env env, napi_value item) {
    bool typed = false;
    CheckNapi(env, napi_is_typedarray(env, item, &typed));
    return typed && Napi::Value(env, item).As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
  }
  [[noreturn]] static void NotBytes(Napi::Env env, uint32_t entry) {
    Bad(env, "entry " + std::to_string(entry) + " must be a string or a Buffer");
  }

  bool Wanted(std::string_view name) const {
    for (const std::string &w : wanted_) {
      if (w.size() != name.size()) continue;
      bool same = true;
      for (size_t i = 0; same && i < w.size(); i++) {
        char ch = name[i];
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
        same = ch == w[i];
      }
      if (same) return true;
    }
    return false;
  }

  void Append(Napi::Env env, napi_value item, uint32_t entry) {
    size_t at = bytes_.size();
    // Most fields fit in 256 bytes: one call copies them (and fails for a value that is not a string,
    // which may be a Buffer). A copy that filled the room may have been cut short: then ask for the
    // length and copy again.
    constexpr size_t kRoom = 256;
    bytes_.resize(at + kRoom);
    size_t len = 0;
    napi_status st = napi_get_value_string_latin1(env, item, bytes_.data() + at, kRoom, &len);
    if (st == napi_ok) {
      if (len + 1 >= kRoom) {
        CheckNapi(env, napi_get_value_string_latin1(env, item, nullptr, 0, &len));
        bytes_.resize(at + len + 1);  // napi writes a terminating NUL
        CheckNapi(env, napi_get_value_string_latin1(env, item, bytes_.data() + at, len + 1, &len));
      }
      bytes_.resize(at + len);
      spans_.emplace_back(at, len);
      return;
    }
    bytes_.resize(at);
    if (st != napi_string_expected) CheckNapi(env, st);
    if (!IsBytes(env, item)) NotBytes(env, entry);
    const char *p = BytesOf(Napi::Value(env, item), &len);
    bytes_.append(p, len);
    spans_.emplace_back(at, len);
  }

  std::string bytes_;
  std::vector<std::pair<size_t, size_t>> spans_;  // (offset, length) in bytes_: name, value, name, value...
  std::vector<fw_header> headers_;
  std::vector<std::string> wanted_;
};

// The tenant, headers and peer of a request (three arguments from `first` on) set into *req for one call.
// A tenant (string: UTF-8; Uint8Array: its bytes; '' the anonymous tenant) is used as it is; null or
// undefined leaves req->tenant NULL, so that the core derives it from the headers and the peer.
class Identity {
 public:
  Identity(const Napi::CallbackInfo &info, size_t first, HeaderList &headers, fw_request *req) : tenant_(info[first]) {
    if (info[first].IsTypedArray()) {
      req->tenant = BytesOf(info[first], &req->tenant_len);
    } else {
      req->tenant = tenant_.get();
      req->tenant_len = tenant_.size();
    }
    if (req->tenant) return;  // the core reads headers and peer only to derive a tenant
    if (info[first + 1].IsArray()) {
      headers.Read(info.Env(), info[first + 1]);
      req->headers = headers.data();
      req->header_count = headers.size();
    }
    peer_.emplace(info[first + 2]);
    req->peer = peer_->get();
    req->peer_len = peer_->size();
  }

 private:
  Utf8Arg tenant_;
  std::optional<Utf8Arg> peer_;
};

// fw_request.credential from a number (lib/index.js maps `verified` to an fw_credential_check); anything
// else is FW_CREDENTIAL_UNCHECKED. The core refuses a number that names no check (FW_EINVAL, "credential").
int CredentialArg(const Napi::Value &v) {
  return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : FW_CREDENTIAL_UNCHECKED;
}

// ------------------------------------------------------------------------------------------------ client

class Client;

// One admit that waits on the store: its promise, and the result that fw_admit_async3's callback copies in
// on the I/O thread (or on the thread closing the client) and hands to the JS thread through the
// thread-safe function, where the promise settles and the call is freed.
struct Call {
  Client *client = nullptr;
  int status = FW_OK;
  std::string message;
  fw_decision d = FW_DECISION_INIT;
  std::optional<Napi::Promise::Deferred> deferred;  // made on the JS thread once the admit is known to wait
};

void OnDecision(void *payload, int status, const fw_decision *d, const char *message);

// The native side of one Floodwall: the fw_client, the scratch array that immediate decisions are written
// to, and the thread-safe function that brings I/O-thread decisions back to the JS thread. JS holds it as an
// External handle that every function takes first, like the C ABI's fw_client * (an External costs
// nothing to read back, where ObjectWrap's napi_unwrap is a property lookup on every admit).
//
// The client's own lifetime is the ABI's: fw_client_close makes every later call fail with FW_ECLOSED
// (thrown as ClosedError) and decides the admits still pending before it returns. What is left here is the
// JS side's: the thread-safe function, referenced while completions are due so that the process waits for
// them, and a strong reference to the handle until the last of them has settled its promise.
class Client {
 public:
  // No napi reference is kept to the scratch array: the JS layer holds it next to the handle for the
  // client's whole life (lib/index.js, #core), and a reference deleted from this object's finalizer can
  // crash Node at environment teardown, when every finalizer runs in one sweep.
  Client(Napi::Env env, fw_client *c, Napi::Float64Array scratch)
      : env_(env), core_(c, fw_client_free), c_(c), scratch_(scratch.Data()) {
    headers_.Want(c);
    tsfn_ = Tsfn::New(env, "floodwall.admit", 0, 1, this);
    tsfn_.Unref(env);  // an idle client must not keep the process alive; Admit refs it while admits wait
    // At environment teardown this hook runs before the thread-safe function's own (hooks run last-in,
    // first-out), so the pending admits are decided while the function can still take their completions.
    napi_add_env_cleanup_hook(env, &Client::CleanupHook, this);
  }

  // Closes the client when JS did not (the admits still pending are decided, an admin call in progress
  // finishes); fw_client_free comes with the last reference to core_, which an admin worker may hold.
  ~Client() {
    napi_remove_env_cleanup_hook(env_, &Client::CleanupHook, this);
    fw_client_close(c_);
    ReleaseTsfn();
  }

  static Client *From(const Napi::CallbackInfo &info) {
    if (!info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "floodwall: not a client handle");
    return info[0].As<Napi::External<Client>>().Data();
  }

  // The fw_client, open or closed: a call on a closed one returns FW_ECLOSED.
  fw_client *raw() const { return c_; }
  // The fw_client for a call that may outlive this object (an admin worker on the thread pool).
  const std::shared_ptr<fw_client> &shared() const { return core_; }
  double *scratch() const { return scratch_; }
  HeaderList &headers() { return headers_; }
  std::string &fields() { return fields_; }

  // The numbers of the last allowed decision formatted, as FormatResponse compares them (its ticket left
  // out, and the rules' fields when no rule applied), or none. An allowed decision's response is a function
  // of its numbers and the client's policy alone, and a run of them often repeats it (every tenant well
  // within its limits has the same headers), so FormatResponse answers `true`, "the same as the last",
  // and lib/decision.js reuses the headers it made of it.
  bool SameAsLastFormatted(const double *raw) {
    double key[kRawSize];
    std::memcpy(key, raw, sizeof key);
    key[kRawTicketHigh] = key[kRawTicketLow] = 0;
    key[kRawWait] = key[kRawWaited] = 0;  // not in the response
    if (key[kRawRulesHigh] == 0 && key[kRawRulesLow] == 0) {
      for (int i = kRawRule; i <= kRawRuleWindowEnd; i++) key[i] = 0;  // not written for such a decision
    }
    bool same = last_formatted_valid_ && std::memcmp(key, last_formatted_, sizeof key) == 0;
    std::memcpy(pending_key_, key, sizeof key);
    return same;
  }
  // FormatResponse formatted the decision SameAsLastFormatted was last asked about: an allowed one, whose
  // response is remembered from now on; or a rejection, which leaves the remembered one as it was.
  void Formatted(bool allowed) {
    if (!allowed) return;
    std::memcpy(last_formatted_, pending_key_, sizeof last_formatted_);
    last_formatted_valid_ = true;
  }

  // fw_client_close: the admits pending on the store are decided (each one's completion queued to tsfn_,
  // never waiting on this thread) before it returns. Then no completion can come any more: tsfn_ is let go,
  // once, and delivers those already queued before it goes.
  int Close() {
    last_formatted_valid_ = false;
    int rc = fw_client_close(c_);
    if (rc == FW_OK) ReleaseTsfn();
    return rc;
  }

  // On the I/O thread (or the one closing the client): hand the copied decision over to the JS thread.
  // The queue is unbounded, so this never blocks.
  void Complete(Call *call) {
    if (tsfn_.NonBlockingCall(call) != napi_ok) delete call;  // the environment is going away
  }

  // admit(handle, tenant: string | Uint8Array | null, headers: array | null, peer: string | null,
  //       route?: string, method?: string, cost: number, critical: boolean, sandbox: boolean,
  //       credential: number (an fw_credential_check), path?: string, maxWait?: number):
  //   undefined (decided at once: see scratch) | Promise<Float64Array>
  // With maxWait (seconds) it is a reservation (fw_reserve_async): an allowed decision's wait is the caller's.
  Napi::Value Admit(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    fw_request req = FW_REQUEST_INIT;
    Identity identity(info, 1, headers_, &req);
    Utf8Arg route(info[4]), method(info[5]), path(info[10]);
    req.route = route.get();
    req.method = method.get();
    req.path = path.get();
    req.path_len = path.size();
    req.cost = static_cast<uint64_t>(info[6].As<Napi::Number>().Int64Value());
    req.critical = info[7].As<Napi::Boolean>().Value();
    req.sandbox = info[8].As<Napi::Boolean>().Value();
    req.credential = CredentialArg(info[9]);

    std::unique_ptr<Call> call = spare_ ? std::move(spare_) : std::make_unique<Call>();
    call->client = this;
    fw_decision d = FW_DECISION_INIT;
    int decided = 0;
    int rc = info.Length() > 11 && info[11].IsNumber()
                 ? fw_reserve_async(c_, &req, info[11].As<Napi::Number>().DoubleValue(), &d, &decided, OnDecision,
                                    call.get())
                 : fw_admit_async3(c_, &req, &d, &decided, OnDecision, call.get());
    if (rc != FW_OK || decided) {
      spare_ = std::move(call);  // never handed over: kept for the next admit
      Check(env, rc);            // a bad request, or a closed client
      ToRaw(d, scratch_);
      return env.Undefined();
    }
    // The callback may already be running on the I/O thread: it only writes the result's fields and queues
    // the call to tsfn_, whose OnJsThread runs on this thread, so after Admit has returned; and tsfn_ only
    // refuses (and frees) a call once it is released, which happens on this thread too (Close, teardown).
    Call *waiting = call.release();
    waiting->deferred.emplace(env);
    if (pending_++ == 0) {
      napi_create_reference(env, info[0], 1, &pending_ref_);  // keep the handle alive while completions are due
      tsfn_.Ref(env);
    }
    return waiting->deferred->Promise();
  }

 private:
  static void CleanupHook(void *self) { static_cast<Client *>(self)->Close(); }

  void ReleaseTsfn() {
    if (tsfn_released_) return;
    tsfn_released_ = true;
    tsfn_.Release();
  }

  static void OnJsThread(Napi::Env env, Napi::Function, Client *self, Call *raw) {
    std::unique_ptr<Call> call(raw);
    if (!env) return;  // torn down: nobody is waiting any more
    if (call->status == FW_OK) {
      Napi::Float64Array out = Napi::Float64Array::New(env, kRawSize);
      ToRaw(call->d, out.Data());
      call->deferred->Resolve(out);
    } else {
      call->deferred->Reject(MakeError(env, call->status, call->message));
    }
    if (--self->pending_ == 0) {
      if (!self->tsfn_released_) self->tsfn_.Unref(env);
      napi_ref ref = self->pending_ref_;
      self->pending_ref_ = nullptr;
      napi_delete_reference(env, ref);  // last: this may let the client be collected
    }
  }

  using Tsfn = Napi::TypedThreadSafeFunction<Client, Call, &Client::OnJsThread>;

  Napi::Env env_;
  std::shared_ptr<fw_client> core_;  // fw_client_free with the last reference: this object's, or a worker's
  fw_client *c_;                     // core_.get()
  double *scratch_;
  napi_ref pending_ref_ = nullptr;  // a strong reference to the handle while completions are due
  Tsfn tsfn_;
  bool tsfn_released_ = false;
  size_t pending_ = 0;  // admits whose completion has not reached the JS thread yet; the JS thread's only
  std::unique_ptr<Call> spare_;
  HeaderList headers_;  // the last request's header bytes: the JS thread's only
  std::string fields_;  // the last formatted response's header names and values (FormatResponse)
  double last_formatted_[kRawSize] = {};
  double pending_key_[kRawSize] = {};
  bool last_formatted_valid_ = false;  // false again once closed: a closed client formats nothing
};

// fw_admit_async3's callback: never inline, on the I/O thread, or on the thread in fw_client_close for the
// admits that close decides. It only copies and queues: close may run on the JS thread and waits for it.
void OnDecision(void *payload, int status, const fw_decision *d, const char *message) {
  Call *call = static_cast<Call *>(payload);
  call->status = status;
  if (d) call->d = *d;
  if (status != FW_OK) call->message = message ? message : "floodwall: error " + std::to_string(status);
  call->client->Complete(call);
}

// ---------------------------------------------------------------------------------------------- functions

// create(policyJson: string, scratch: Float64Array(kRawSize)): handle
Napi::Value Create(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) Throw(env, FW_EPOLICY, "policy: must be a JSON document");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array ||
      info[1].As<Napi::Float64Array>().ElementLength() != kRawSize)
    Throw(env, FW_EINVAL, "scratch: must be a Float64Array(" + std::to_string(kRawSize) + ")");
  std::string policy = info[0].As<Napi::String>().Utf8Value();
  fw_client *c = nullptr;
  Check(env, fw_client_new(&c, policy.c_str()));
  fw_client_set_language(c, "node");  // its summary in the fleet view (floodwall top)
  auto *client = new Client(env, c, info[1].As<Napi::Float64Array>());
  return Napi::External<Client>::New(env, client, [](Napi::Env, Client *self) { delete self; });
}

Napi::Value Admit(const Napi::CallbackInfo &info) {
  return Client::From(info)->Admit(info);
}

// ruleNames(handle): string[], the names of the policy's limits and then its quotas, by index
// (fw_client_rule_name): what the rules of a decision refer to. Asked once per client by lib/index.js.
Napi::Value RuleNames(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->raw();
  Napi::Array out = Napi::Array::New(env);
  const char *name = nullptr;
  for (uint32_t i = 0; fw_client_rule_name(c, static_cast<int>(i), &name, nullptr) == FW_OK; i++)
    out.Set(i, Napi::String::New(env, name));
  return out;
}

// tenantKey(handle, tenant, headers, peer, credential: number): string, the tenant id fw_admit would use
Napi::Value TenantKey(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Client *client = Client::From(info);
  fw_client *c = client->raw();
  fw_request req = FW_REQUEST_INIT;
  Identity identity(info, 1, client->headers(), &req);
  req.credential = CredentialArg(info[4]);
  fw_buf buf = FW_BUF_INIT;
  Check(env, fw_tenant_key(c, &req, &buf));
  return TakeBuf(env, buf);
}

// requestRoute(handle, route?: string, path?: string): string, the route the request's rules match
// (fw_request_route): the route made canonical, else the path, else ''.
Napi::Value RequestRoute(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_request req = FW_REQUEST_INIT;
  Utf8Arg route(info[1]), path(info[2]);
  req.route = route.get();
  req.path = path.get();
  req.path_len = path.size();
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_request_route(Client::From(info)->raw(), &req, &buf);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    Check(env, rc);
  }
  return TakeBuf(env, buf);
}

// policyText(policy: string, isPath: boolean): string, the policy's JSON text by the rule of every language
// (fw_policy_text): JSON text when it starts with "{" or "[", else (and always when isPath) a file's path.
Napi::Value PolicyText(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) Throw(env, FW_EPOLICY, "policy: must be a string");
  std::string policy = info[0].As<Napi::String>().Utf8Value();
  if (policy.find('\0') != std::string::npos) Throw(env, FW_EPOLICY, "policy: holds a NUL byte");
  fw_buf buf = FW_BUF_INIT;
  Check(env, fw_policy_text(policy.c_str(), info[1].ToBoolean().Value() ? 1 : 0, &buf));
  return TakeBuf(env, buf);
}

// requestCredential(handle, headers, peer): string | null, the credential a verify hook is asked about
// (fw_request_credential). Latin-1, as the header's own bytes are in a node:http request: the string is
// the header value the app reads from req.headers, trimmed (and without its Bearer scheme).
Napi::Value RequestCredential(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Client *client = Client::From(info);
  fw_request req = FW_REQUEST_INIT;
  if (info[1].IsArray()) {
    client->headers().Read(env, info[1]);
    req.headers = client->headers().data();
    req.header_count = client->headers().size();
  }
  Utf8Arg peer(info[2]);
  req.peer = peer.get();
  req.peer_len = peer.size();
  fw_buf buf = FW_BUF_INIT;
  int found = 0;
  int rc = fw_request_credential(client->raw(), &req, &buf, &found);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    Check(env, rc);
  }
  napi_value out = env.Null();
  napi_status st = found ? napi_create_string_latin1(env, buf.ptr ? buf.ptr : "", buf.size, &out) : napi_ok;
  fw_buf_dispose(&buf);
  CheckNapi(env, st);
  return Napi::Value(env, out);
}

// deadlineMs(handle): number, the store's per-admit deadline in milliseconds (fw_client_deadline_ms)
Napi::Value DeadlineMs(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int64_t ms = 0;
  Check(env, fw_client_deadline_ms(Client::From(info)->raw(), &ms));
  return Napi::Number::New(env, static_cast<double>(ms));
}

// release(handle, ticket: number | bigint); never fails, a no-op after close
Napi::Value Release(const Napi::CallbackInfo &info) {
  Client *client = Client::From(info);
  fw_ticket t = 0;
  if (info[1].IsBigInt()) {
    bool lossless = false;
    t = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  } else if (info[1].IsNumber()) {
    t = static_cast<fw_ticket>(info[1].As<Napi::Number>().DoubleValue());
  }
  fw_release(client->raw(), t);  // FW_ECLOSED after close: nothing to release, nothing to report
  return info.Env().Undefined();
}

// canBlock(handle): whether the store is a network one (fw_client_can_block): lib/index.js batches its writes.
Napi::Value CanBlock(const Napi::CallbackInfo &info) {
  int out = 0;
  Check(info.Env(), fw_client_can_block(Client::From(info)->raw(), &out));
  return Napi::Boolean::New(info.Env(), out != 0);
}

// hold(handle) and flush(handle): this thread's admits and releases wait for the flush to go out together
// (fw_client_hold, fw_client_flush). Never throw: after close there is nothing left to hold or to send.
Napi::Value Hold(const Napi::CallbackInfo &info) {
  fw_client_hold(Client::From(info)->raw());
  return info.Env().Undefined();
}

Napi::Value Flush(const Napi::CallbackInfo &info) {
  fw_client_flush(Client::From(info)->raw());
  return info.Env().Undefined();
}

Napi::Value SetMode(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->raw();
  fw_limiter l;
  fw_mode m;
  Check(env, fw_limiter_from_name(&l, Utf8Arg(info[1]).get()));
  Check(env, fw_mode_from_name(&m, Utf8Arg(info[2]).get()));
  Check(env, fw_set_mode(c, l, m));
  return env.Undefined();
}

Napi::Value GetMode(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->raw();
  fw_limiter l;
  fw_mode m;
  Check(env, fw_limiter_from_name(&l, Utf8Arg(info[1]).get()));
  Check(env, fw_get_mode(c, l, &m));
  return Napi::String::New(env, fw_mode_name(m));
}

Napi::Value ReportUtilization(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->raw();
  Check(env, fw_report_utilization(c, info[1].As<Napi::Number>().DoubleValue()));
  return env.Undefined();
}

Napi::Value SheddingAmount(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  double amount = 0;
  Check(env, fw_shedding_amount(Client::From(info)->raw(), &amount));
  return Napi::Number::New(env, amount);
}

// formatResponse(handle): true when the decision is an allowed one with the numbers of the last allowed
// one formatted (Client::SameAsLastFormatted: the same response; the scratch array is left as it is);
// else `fields` for the decision that lib/decision.js wrote back into the scratch array,
// or [fields, contentType, body] for a rejection (an allowed decision has neither: no array, and no two
// empty strings, to make for every response); on return the scratch array holds [header count, name
// length, value length, ...] and `fields` is the headers' names and values, in the core's order, one after
// the other. The lengths are the core's fw_header lengths (names and values are ASCII: a byte is a
// character), so lib/decision.js slices the pairs out without reading a byte of them; one string instead of
// one per name and value, each of which costs more to create through Node-API than the core takes to
// format them all.
static_assert(1 + 2 * FW_RESPONSE_MAX_HEADERS <= kRawSize, "the scratch array holds the header lengths");

Napi::Value FormatResponse(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Client *client = Client::From(info);
  fw_client *c = client->raw();
  if (client->SameAsLastFormatted(client->scratch())) return Napi::Boolean::New(env, true);
  fw_decision d = FromRaw(client->scratch());
  fw_response resp = FW_RESPONSE_INIT;
  int rc = fw_format_response(c, &d, &resp);
  if (rc != FW_OK) {
    fw_response_dispose(&resp);
    Check(env, rc);
  }
  std::string &fields = client->fields();
  fields.clear();
  double *lengths = client->scratch();
  lengths[0] = static_cast<double>(resp.header_count);
  for (size_t i = 0; i < resp.header_count; i++) {
    const fw_header &h = resp.headers[i];
    fields.append(h.name, h.name_len).append(h.value, h.value_len);
    lengths[1 + 2 * i] = static_cast<double>(h.name_len);
    lengths[2 + 2 * i] = static_cast<double>(h.value_len);
  }
  napi_value text;
  CheckNapi(env, napi_create_string_latin1(env, fields.data(), fields.size(), &text));
  if (!resp.body || resp.body_len == 0) {
    fw_response_dispose(&resp);
    client->Formatted(d.allowed);
    return Napi::Value(env, text);
  }
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(0u, text);
  out.Set(1u, Napi::String::New(env, resp.content_type ? resp.content_type : ""));
  out.Set(2u, Napi::String::New(env, resp.body, resp.body_len));
  fw_response_dispose(&resp);
  return out;
}

template <int (*Metrics)(fw_client *, fw_buf *)>
Napi::Value MetricsText(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_buf buf = FW_BUF_INIT;
  Check(env, Metrics(Client::From(info)->raw(), &buf));
  return TakeBuf(env, buf);
}

Napi::Value Close(const Napi::CallbackInfo &info) {
  Check(info.Env(), Client::From(info)->Close());
  return info.Env().Undefined();
}

// ------------------------------------------------------------------------------------------------- admin

// An fw_admin_* call on libuv's thread pool, settling a promise on the JS thread: with undefined, or with
// the JSON text of fw_admin_show and fw_admin_list (lib/admin.js parses it). The arguments are copied on
// the JS thread; the error's message is read on the pool thread that failed (fw_error_last is per thread).
class AdminWorker : public Napi::AsyncWorker {
 public:
  enum Op { kSetOverride, kRemoveOverride, kSetTier, kBlock, kUnblock, kShow, kReset, kSetMode, kList };

  AdminWorker(Napi::Env env, Op op, std::shared_ptr<fw_client> c)
      : Napi::AsyncWorker(env, "floodwall.admin"), op_(op), c_(std::move(c)), deferred_(env) {}

  std::string tenant;
  std::optional<std::string> tier;  // kSetTier: none takes the tenant out of any tier
  double x = 0, y = 0;              // kSetOverride: rate, burst; kBlock: seconds
  fw_limiter limiter = FW_LIMITER_NONE;
  int mode = -1;
  size_t limit = 0;

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override {
    fw_client *c = c_.get();
    const char *t = tenant.data();
    size_t n = tenant.size();
    fw_buf buf = FW_BUF_INIT;
    switch (op_) {
      case kSetOverride: rc_ = fw_admin_set_override(c, t, n, x, y); break;
      case kRemoveOverride: rc_ = fw_admin_remove_override(c, t, n); break;
      case kSetTier: rc_ = fw_admin_set_tier(c, t, n, tier ? tier->c_str() : nullptr); break;
      case kBlock: rc_ = fw_admin_block(c, t, n, x); break;
      case kUnblock: rc_ = fw_admin_unblock(c, t, n); break;
      case kShow: rc_ = fw_admin_show(c, t, n, &buf); break;
      case kReset: rc_ = fw_admin_reset(c, t, n); break;
      case kSetMode: rc_ = fw_admin_set_mode(c, limiter, mode); break;
      case kList: rc_ = fw_admin_list(c, limit, &buf); break;
    }
    try {
      if (rc_ != FW_OK)
        message_ = LastMessage(rc_);
      else if (buf.ptr)
        json_.assign(buf.ptr, buf.size);
    } catch (...) {  // out of memory on a pool thread: nothing may throw out of Execute
      rc_ = FW_ENOMEM;
      message_.clear();
    }
    fw_buf_dispose(&buf);
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (rc_ != FW_OK) {
      deferred_.Reject(MakeError(env, rc_, message_.empty() ? "floodwall: out of memory" : message_));
    } else if (op_ == kShow || op_ == kList) {
      deferred_.Resolve(Napi::String::New(env, json_));
    } else {
      deferred_.Resolve(env.Undefined());
    }
  }

 private:
  Op op_;
  std::shared_ptr<fw_client> c_;
  Napi::Promise::Deferred deferred_;
  int rc_ = FW_OK;
  std::string message_;
  std::string json_;
};

// A tenant argument as bytes: a string's UTF-8, a Uint8Array's bytes (lib/admin.js checks the type).
std::string TenantBytes(const Napi::Value &v) {
  if (v.IsTypedArray()) {
    size_t len = 0;
    const char *p = BytesOf(v, &len);
    return std::string(p, len);
  }
  if (!v.IsString()) Throw(v.Env(), FW_EINVAL, "tenant: must be a string or a Buffer");
  return v.As<Napi::String>().Utf8Value();
}

// Queues the worker (the pool owns it from here, and deletes it after OnOK) and returns its promise.
Napi::Value Queue(AdminWorker *w) {
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// admin<Op>(handle, tenant, ...): Promise<undefined | string>
template <AdminWorker::Op op>
Napi::Value AdminTenant(const Napi::CallbackInfo &info) {
  auto w = std::make_unique<AdminWorker>(info.Env(), op, Client::From(info)->shared());
  w->tenant = TenantBytes(info[1]);
  if (op == AdminWorker::kSetOverride) {
    w->x = info[2].As<Napi::Number>().DoubleValue();
    w->y = info[3].As<Napi::Number>().DoubleValue();
  } else if (op == AdminWorker::kBlock) {
    w->x = info[2].As<Napi::Number>().DoubleValue();
  } else if (op == AdminWorker::kSetTier && info[2].IsString()) {
    w->tier = info[2].As<Napi::String>().Utf8Value();
  }
  return Queue(w.release());
}

// adminSetMode(handle, limiter: string, mode: string | null): Promise<undefined>; unknown names throw here
Napi::Value AdminSetMode(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto w = std::make_unique<AdminWorker>(env, AdminWorker::kSetMode, Client::From(info)->shared());
  Check(env, fw_limiter_from_name(&w->limiter, Utf8Arg(info[1]).get()));
  if (info[2].IsString()) {
    fw_mode m;
    Check(env, fw_mode_from_name(&m, Utf8Arg(info[2]).get()));
    w->mode = static_cast<int>(m);
  }
  return Queue(w.release());
}

// adminList(handle, limit: number): Promise<string>
Napi::Value AdminList(const Napi::CallbackInfo &info) {
  auto w = std::make_unique<AdminWorker>(info.Env(), AdminWorker::kList, Client::From(info)->shared());
  double limit = info[1].As<Napi::Number>().DoubleValue();  // a positive integer (lib/admin.js)
  w->limit = limit >= 1e15 ? static_cast<size_t>(1e15) : static_cast<size_t>(limit);
  return Queue(w.release());
}

// ----------------------------------------------------------------------------------------------- backoff

// backoffDelay(base_s, cap_s, attempt, retry_after_s, random01): seconds (fw_backoff_delay; attempts is the
// core's default, which the delay does not depend on)
Napi::Value BackoffDelay(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_backoff b = FW_BACKOFF_INIT;
  b.base_s = info[0].As<Napi::Number>().DoubleValue();
  b.cap_s = info[1].As<Napi::Number>().DoubleValue();
  double attempt = info[2].As<Napi::Number>().DoubleValue();  // a non-negative integer (lib/retry.js)
  unsigned n = attempt >= 4294967295.0 ? 4294967295u : static_cast<unsigned>(attempt);
  double out = 0;
  Check(env, fw_backoff_delay(&b, n, info[3].As<Napi::Number>().DoubleValue(), info[4].As<Napi::Number>().DoubleValue(),
                              &out));
  return Napi::Number::New(env, out);
}

// parseRetryAfter(value: string, now_unix_s: number): seconds, or null when the value is neither
// delay-seconds nor an HTTP-date
Napi::Value ParseRetryAfter(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Utf8Arg value(info[0]);
  double out = 0;
  int rc = fw_parse_retry_after(value.get() ? value.get() : "", value.size(), info[1].As<Napi::Number>().DoubleValue(),
                                &out);
  if (rc == FW_EINVAL) return env.Null();
  Check(env, rc);
  return Napi::Number::New(env, out);
}

// cliRun(argv: string[]): {code, out, err}: the floodwall command (fw_cli_run), for bin/floodwall.js. Blocking
// (the store's connect time-out and deadline): a command-line program's whole job, never a server's path.
Napi::Value CliRun(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Napi::Array argv = info[0].As<Napi::Array>();
  std::vector<std::string> words;
  for (uint32_t i = 0; i < argv.Length(); i++) words.push_back(argv.Get(i).As<Napi::String>().Utf8Value());
  std::vector<const char *> args;
  for (const std::string &w : words) args.push_back(w.c_str());
  int code = 1;
  fw_buf out = FW_BUF_INIT, err = FW_BUF_INIT;
  Check(env, fw_cli_run(static_cast<int>(args.size()), args.data(), &code, &out, &err));
  Napi::Object r = Napi::Object::New(env);
  r.Set("code", code);
  r.Set("out", Napi::Buffer<char>::Copy(env, out.ptr ? out.ptr : "", out.size));
  r.Set("err", Napi::Buffer<char>::Copy(env, err.ptr ? err.ptr : "", err.size));
  fw_buf_dispose(&out);
  fw_buf_dispose(&err);
  return r;
}

// ------------------------------------------------------------------------------------------------ module

Napi::Value SetErrorFactory(const Napi::CallbackInfo &info) {
  auto *data = info.Env().GetInstanceData<InstanceData>();
  data->make_error = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData(new InstanceData());
  exports.Set("create", Napi::Function::New<Create>(env, "create"));
  exports.Set("admit", Napi::Function::New<Admit>(env, "admit"));
  exports.Set("tenantKey", Napi::Function::New<TenantKey>(env, "tenantKey"));
  exports.Set("requestRoute", Napi::Function::New<RequestRoute>(env, "requestRoute"));
  exports.Set("policyText", Napi::Function::New<PolicyText>(env, "policyText"));
  exports.Set("requestCredential", Napi::Function::New<RequestCredential>(env, "requestCredential"));
  exports.Set("deadlineMs", Napi::Function::New<DeadlineMs>(env, "deadlineMs"));
  exports.Set("ruleNames", Napi::Function::New<RuleNames>(env, "ruleNames"));
  exports.Set("release", Napi::Function::New<Release>(env, "release"));
  exports.Set("canBlock", Napi::Function::New<CanBlock>(env, "canBlock"));
  exports.Set("hold", Napi::Function::New<Hold>(env, "hold"));
  exports.Set("flush", Napi::Function::New<Flush>(env, "flush"));
  exports.Set("setMode", Napi::Function::New<SetMode>(env, "setMode"));
  exports.Set("getMode", Napi::Function::New<GetMode>(env, "getMode"));
  exports.Set("reportUtilization", Napi::Function::New<ReportUtilization>(env, "reportUtilization"));
  exports.Set("sheddingAmount", Napi::Function::New<SheddingAmount>(env, "sheddingAmount"));
  exports.Set("formatResponse", Napi::Function::New<FormatResponse>(env, "formatResponse"));
  exports.Set("metricsJson", Napi::Function::New<MetricsText<fw_metrics_json>>(env, "metricsJson"));
  exports.Set("metricsPrometheus", Napi::Function::New<MetricsText<fw_metrics_prometheus>>(env, "metricsPrometheus"));
  exports.Set("close", Napi::Function::New<Close>(env, "close"));
  exports.Set("adminSetOverride", Napi::Function::New<AdminTenant<AdminWorker::kSetOverride>>(env, "adminSetOverride"));
  exports.Set("adminRemoveOverride",
              Napi::Function::New<AdminTenant<AdminWorker::kRemoveOverride>>(env, "adminRemoveOverride"));
  exports.Set("adminSetTier", Napi::Function::New<AdminTenant<AdminWorker::kSetTier>>(env, "adminSetTier"));
  exports.Set("adminBlock", Napi::Function::New<AdminTenant<AdminWorker::kBlock>>(env, "adminBlock"));
  exports.Set("adminUnblock", Napi::Function::New<AdminTenant<AdminWorker::kUnblock>>(env, "adminUnblock"));
  exports.Set("adminShow", Napi::Function::New<AdminTenant<AdminWorker::kShow>>(env, "adminShow"));
  exports.Set("adminReset", Napi::Function::New<AdminTenant<AdminWorker::kReset>>(env, "adminReset"));
  exports.Set("adminSetMode", Napi::Function::New<AdminSetMode>(env, "adminSetMode"));
  exports.Set("adminList", Napi::Function::New<AdminList>(env, "adminList"));
  exports.Set("backoffDelay", Napi::Function::New<BackoffDelay>(env, "backoffDelay"));
  exports.Set("parseRetryAfter", Napi::Function::New<ParseRetryAfter>(env, "parseRetryAfter"));
  exports.Set("cliRun", Napi::Function::New<CliRun>(env, "cliRun"));
  exports.Set("setErrorFactory", Napi::Function::New<SetErrorFactory>(env, "setErrorFactory"));
  exports.Set("version", Napi::String::New(env, fw_version()));
  exports.Set("rawSize", Napi::Number::New(env, kRawSize));
  // The one set of backoff defaults (FW_BACKOFF_INIT), for lib/retry.js to take rather than restate.
  const fw_backoff defaults = FW_BACKOFF_INIT;
  Napi::Object backoff = Napi::Object::New(env);
  backoff.Set("base_s", defaults.base_s);
  backoff.Set("cap_s", defaults.cap_s);
  backoff.Set("attempts", defaults.attempts);
  exports.Set("backoffDefaults", backoff);
  // The core's names of the fail reasons, from 1 on (lib/decision.js indexes them by code): never a list
  // of our own that a new reason could slip past.
  Napi::Array reasons = Napi::Array::New(env);
  for (int r = FW_FAIL_NONE + 1;; r++) {
    const char *name = fw_fail_reason_name(static_cast<fw_fail_reason>(r));
    if (std::strcmp(name, "unknown") == 0) break;
    reasons.Set(reasons.Length(), name);
  }
  exports.Set("failReasons", reasons);
  // The same for the limiters (lib/decision.js: a decision's limiter by code).
  Napi::Array limiters = Napi::Array::New(env);
  for (int l = FW_LIMITER_NONE + 1; l < FW_LIMITER_COUNT; l++)
    limiters.Set(limiters.Length(), fw_limiter_name(static_cast<fw_limiter>(l)));
  exports.Set("limiters", limiters);
  Napi::Object codes = Napi::Object::New(env);
  codes.Set("FW_ERROR", static_cast<int>(FW_ERROR));
  codes.Set("FW_ENOMEM", static_cast<int>(FW_ENOMEM));
  codes.Set("FW_EINVAL", static_cast<int>(FW_EINVAL));
  codes.Set("FW_EPOLICY", static_cast<int>(FW_EPOLICY));
  codes.Set("FW_ESTORE", static_cast<int>(FW_ESTORE));
  codes.Set("FW_ECLOSED", static_cast<int>(FW_ECLOSED));
  exports.Set("codes", codes);
  return exports;
}

}  // namespace

NODE_API_MODULE(floodwall, Init)
