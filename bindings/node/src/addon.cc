// floodwall.node: a thin, mechanical map of the C ABI (capi/include/floodwall.h) for lib/index.js.
//
// Decisions cross into JavaScript as 15 numbers (see kRaw* below) rather than as objects: building a
// 15-property object through Node-API costs more than the memory store's whole decision, while a
// Float64Array write is free and lib/decision.js turns it into a Decision with plain JS property stores.
//
// fw_admit_async calls back inline for the memory store (and for bad requests): the numbers go into the
// client's scratch array and admit() returns undefined. For the Redis store it calls back from the core's
// I/O thread: the decision is copied, handed to the JS thread through a thread-safe function, and the
// promise that admit() returned resolves there. The event loop never waits on Redis.
#include <napi.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

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

// ------------------------------------------------------------------------------------------------ client

class Client;

// One admit in flight. Completed inline, it never leaves Admit() (and is kept for the next admit);
// completed on the I/O thread, it travels through the thread-safe function and is freed on the JS thread.
struct Call {
  Client *client = nullptr;
  int status = FW_OK;
  std::string message;
  fw_decision d = FW_DECISION_INIT;
  bool done_inline = false;
  std::optional<Napi::Promise::Deferred> deferred;  // set on the JS thread once we know it is async
};

thread_local const Call *tls_inline_call = nullptr;

void OnDecision(void *payload, int status, const fw_decision *d);

// The native side of one Floodwall: the fw_client, the scratch array that inline decisions are written to,
// and the thread-safe function that brings I/O-thread decisions back to the JS thread. JS holds it as an
// External handle that every function takes first, like the C ABI's fw_client * (an External costs
// nothing to read back, where ObjectWrap's napi_unwrap is a property lookup on every admit).
class Client {
 public:
  // No napi reference is kept to the scratch array: the JS layer holds it next to the handle for the
  // client's whole life (lib/index.js, #core), and a reference deleted from this object's finalizer can
  // crash Node at environment teardown, when every finalizer runs in one sweep.
  Client(Napi::Env env, fw_client *c, Napi::Float64Array scratch) : env_(env), c_(c), scratch_(scratch.Data()) {
    tsfn_ = Tsfn::New(env, "floodwall.admit", 0, 1, this);
    tsfn_.Unref(env);  // an idle client must not keep the process alive; Admit refs it while admits wait
    // At environment teardown this hook runs before the thread-safe function's own (hooks run last-in,
    // first-out), so the I/O thread is stopped while the function can still take its last calls.
    napi_add_env_cleanup_hook(env, &Client::CleanupHook, this);
  }

  ~Client() {
    napi_remove_env_cleanup_hook(env_, &Client::CleanupHook, this);
    Shutdown();
  }

  static Client *From(const Napi::CallbackInfo &info) {
    if (!info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "floodwall: not a client handle");
    return info[0].As<Napi::External<Client>>().Data();
  }

  fw_client *Need(Napi::Env env) {
    if (!c_) Throw(env, FW_ECLOSED, "client: closed");
    return c_;
  }
  fw_client *raw() const { return c_; }
  double *scratch() const { return scratch_; }

  // Stops the I/O thread (pending admits complete, failed open, through tsfn_), then lets tsfn_ go.
  void Shutdown() {
    if (!c_) return;
    fw_client *c = c_;
    c_ = nullptr;
    fw_client_free(c);
    tsfn_.Release();
  }

  // On the I/O thread: hand the (copied) decision over to the JS thread.
  void Complete(Call *call) {
    if (tsfn_.NonBlockingCall(call) != napi_ok) delete call;  // the environment is going away
  }

  // admit(handle, tenant: string | Uint8Array, route?: string, method?: string, cost: number,
  //       critical: boolean, sandbox: boolean): undefined (decided inline: see scratch) | Promise<Float64Array>
  Napi::Value Admit(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    fw_client *c = Need(env);
    fw_request req = FW_REQUEST_INIT;
    std::optional<Utf8Arg> tenant;
    if (info[1].IsTypedArray()) {
      auto bytes = info[1].As<Napi::Uint8Array>();
      req.tenant = reinterpret_cast<const char *>(bytes.Data());
      req.tenant_len = bytes.ByteLength();
    } else {
      tenant.emplace(info[1]);
      req.tenant = tenant->get();
      req.tenant_len = tenant->size();
    }
    Utf8Arg route(info[2]), method(info[3]);
    req.route = route.get();
    req.method = method.get();
    req.cost = static_cast<uint64_t>(info[4].As<Napi::Number>().Int64Value());
    req.critical = info[5].As<Napi::Boolean>().Value();
    req.sandbox = info[6].As<Napi::Boolean>().Value();

    std::unique_ptr<Call> call = spare_ ? std::move(spare_) : std::make_unique<Call>();
    call->client = this;
    tls_inline_call = call.get();
    int rc = fw_admit_async(c, &req, OnDecision, call.get());
    tls_inline_call = nullptr;
    Check(env, rc);  // only NULL arguments: the callback was not called
    if (call->done_inline) {
      int status = call->status;
      std::string message = std::move(call->message);
      if (status == FW_OK) ToRaw(call->d, scratch_);
      *call = Call{};
      spare_ = std::move(call);
      if (status != FW_OK) Throw(env, status, message);
      return env.Undefined();
    }
    // The I/O thread owns the completion now; OnJsThread runs on this thread, so only after we return.
    call->deferred.emplace(env);
    Napi::Promise promise = call->deferred->Promise();
    if (pending_++ == 0) {
      napi_create_reference(env, info[0], 1, &pending_ref_);  // keep the client alive while admits wait
      tsfn_.Ref(env);
    }
    call.release();
    return promise;
  }

 private:
  static void CleanupHook(void *self) { static_cast<Client *>(self)->Shutdown(); }

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
      if (self->c_) self->tsfn_.Unref(env);
      napi_ref ref = self->pending_ref_;
      self->pending_ref_ = nullptr;
      napi_delete_reference(env, ref);  // last: this may let the client be collected
    }
  }

  using Tsfn = Napi::TypedThreadSafeFunction<Client, Call, &Client::OnJsThread>;

  Napi::Env env_;
  fw_client *c_;
  double *scratch_;
  napi_ref pending_ref_ = nullptr;  // a strong reference to the handle while admits wait on the I/O thread
  Tsfn tsfn_;
  size_t pending_ = 0;  // admits waiting on the I/O thread; touched on the JS thread only
  std::unique_ptr<Call> spare_;
};

void OnDecision(void *payload, int status, const fw_decision *d) {
  Call *call = static_cast<Call *>(payload);
  call->status = status;
  if (d) call->d = *d;
  if (status != FW_OK) call->message = LastMessage(status);  // thread-local: read it on this thread
  if (call == tls_inline_call) {                             // inline, on the JS thread, before fw_admit_async returned
    call->done_inline = true;
    return;
  }
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
  auto *client = new Client(env, c, info[1].As<Napi::Float64Array>());
  return Napi::External<Client>::New(env, client, [](Napi::Env, Client *self) { delete self; });
}

Napi::Value Admit(const Napi::CallbackInfo &info) {
  return Client::From(info)->Admit(info);
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
  if (client->raw()) fw_release(client->raw(), t);
  return info.Env().Undefined();
}

Napi::Value SetMode(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->Need(env);
  fw_limiter l;
  fw_mode m;
  Check(env, fw_limiter_from_name(&l, Utf8Arg(info[1]).get()));
  Check(env, fw_mode_from_name(&m, Utf8Arg(info[2]).get()));
  Check(env, fw_set_mode(c, l, m));
  return env.Undefined();
}

Napi::Value GetMode(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->Need(env);
  fw_limiter l;
  fw_mode m;
  Check(env, fw_limiter_from_name(&l, Utf8Arg(info[1]).get()));
  Check(env, fw_get_mode(c, l, &m));
  return Napi::String::New(env, fw_mode_name(m));
}

Napi::Value ReportUtilization(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->Need(env);
  Check(env, fw_report_utilization(c, info[1].As<Napi::Number>().DoubleValue()));
  return env.Undefined();
}

Napi::Value SheddingAmount(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  double amount = 0;
  Check(env, fw_shedding_amount(Client::From(info)->Need(env), &amount));
  return Napi::Number::New(env, amount);
}

// formatHeaders(handle) / formatBody(handle): of the decision lib/decision.js wrote back into the scratch array.
template <int (*Format)(fw_client *, const fw_decision *, fw_buf *)>
Napi::Value FormatDecision(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  Client *client = Client::From(info);
  fw_decision d = FromRaw(client->scratch());
  fw_buf buf = FW_BUF_INIT;
  Check(env, Format(client->Need(env), &d, &buf));
  return TakeBuf(env, buf);
}

template <int (*Metrics)(fw_client *, fw_buf *)>
Napi::Value MetricsText(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_buf buf = FW_BUF_INIT;
  Check(env, Metrics(Client::From(info)->Need(env), &buf));
  return TakeBuf(env, buf);
}

Napi::Value Close(const Napi::CallbackInfo &info) {
  Client::From(info)->Shutdown();
  return info.Env().Undefined();
}

// coreAdmitLoop(handle, n, tenant): seconds that n blocking fw_admit + fw_release calls take in C, for
// bench/node/run.js to tell the core's own cost from the binding's.
Napi::Value CoreAdmitLoop(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  fw_client *c = Client::From(info)->Need(env);
  int64_t n = info[1].As<Napi::Number>().Int64Value();
  std::string tenant = info[2].As<Napi::String>().Utf8Value();
  fw_request req = FW_REQUEST_INIT;
  req.tenant = tenant.data();
  req.tenant_len = tenant.size();
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; i++) {
    fw_decision d = FW_DECISION_INIT;
    Check(env, fw_admit(c, &req, &d));
    fw_release(c, d.ticket);
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return Napi::Number::New(env, took.count());
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
  exports.Set("release", Napi::Function::New<Release>(env, "release"));
  exports.Set("setMode", Napi::Function::New<SetMode>(env, "setMode"));
  exports.Set("getMode", Napi::Function::New<GetMode>(env, "getMode"));
  exports.Set("reportUtilization", Napi::Function::New<ReportUtilization>(env, "reportUtilization"));
  exports.Set("sheddingAmount", Napi::Function::New<SheddingAmount>(env, "sheddingAmount"));
  exports.Set("formatHeaders", Napi::Function::New<FormatDecision<fw_format_headers>>(env, "formatHeaders"));
  exports.Set("formatBody", Napi::Function::New<FormatDecision<fw_format_body>>(env, "formatBody"));
  exports.Set("metricsJson", Napi::Function::New<MetricsText<fw_metrics_json>>(env, "metricsJson"));
  exports.Set("metricsPrometheus", Napi::Function::New<MetricsText<fw_metrics_prometheus>>(env, "metricsPrometheus"));
  exports.Set("close", Napi::Function::New<Close>(env, "close"));
  exports.Set("coreAdmitLoop", Napi::Function::New<CoreAdmitLoop>(env, "coreAdmitLoop"));
  exports.Set("setErrorFactory", Napi::Function::New<SetErrorFactory>(env, "setErrorFactory"));
  exports.Set("version", Napi::String::New(env, fw_version()));
  exports.Set("rawSize", Napi::Number::New(env, kRawSize));
  // The core's names of the fail reasons, from 1 on (lib/decision.js indexes them by code): never a list
  // of our own that a new reason could slip past.
  Napi::Array reasons = Napi::Array::New(env);
  for (int r = FW_FAIL_NONE + 1;; r++) {
    const char *name = fw_fail_reason_name(static_cast<fw_fail_reason>(r));
    if (std::strcmp(name, "unknown") == 0) break;
    reasons.Set(reasons.Length(), name);
  }
  exports.Set("failReasons", reasons);
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
