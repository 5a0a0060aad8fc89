/*
 * floodwall.i - Floodwall::Native, the thin generated layer: SWIG maps capi/include/floodwall.h into Ruby
 * (fw_set_mode -> Native.set_mode, FW_LIMITER_FLEET -> Native::LIMITER_FLEET, fw_decision ->
 * Native::Decision with read-only accessors). lib/floodwall/*.rb is the idiomatic layer on top.
 *
 * Hand-written here, and only here:
 * - fw_rb_raise: the one place where a status code becomes an exception (through the table in
 *   lib/floodwall/errors.rb);
 * - Native::Handle, the client as Ruby holds it, so that #close cannot free a client that another Ruby
 *   thread is still using while it waits on Redis without the GVL;
 * - admit and release, which run fw_admit / fw_release without the GVL, so that Puma's threads do not
 *   serialise behind one thread's round trip to Redis.
 * fw_admit_async is not wrapped: a blocking admit without the GVL is what Ruby servers want.
 */
%module "floodwall::native"

%{
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <ruby/encoding.h>
#include <ruby/thread.h>
#include "floodwall.h"

/* Raises the exception for a status: Floodwall::Error.raise_for_status (lib/floodwall/errors.rb) holds
   the table of classes. Never returns. */
static void fw_rb_raise_message(int rc, const char *message) {
  rb_funcall(rb_path2class("Floodwall::Error"), rb_intern("raise_for_status"), 2, INT2NUM(rc),
             rb_utf8_str_new_cstr(message));
  rb_raise(rb_eRuntimeError, "floodwall: status %d was not raised", rc); /* unreachable */
}

/* Raises the exception for a failed fw_* call of this thread, with the core's message. */
static void fw_rb_raise(int rc) {
  const fw_error *e = fw_error_last();
  fw_rb_raise_message(rc, e && e->code == rc ? e->message : "floodwall error");
}

/*
 * A client handle. `busy` counts the calls running without the GVL and `closed` is set by #close; both
 * are only touched with the GVL held, so they need no atomics. The core client is freed when it is
 * closed and no call is running any more, whichever comes last (or by the GC, which cannot run this
 * while a thread or a decision still uses the handle: both hold a reference to it).
 */
typedef struct fw_rb_handle {
  fw_client *client;
  long busy;
  bool closed;
  bool blocking; /* the store does I/O (Redis): admit and release give up the GVL while they wait */
} fw_rb_handle;

/* A forked child (Puma's cluster mode forks workers from a preloaded app) needs nothing here: the core
   makes its client anew in the child on first use. */
static fw_client *fw_rb_client(fw_rb_handle *h) {
  if (h->closed) fw_rb_raise_message(FW_ECLOSED, "client: closed");
  return h->client;
}

static fw_client *fw_rb_enter(fw_rb_handle *h) {
  fw_client *c = fw_rb_client(h);
  h->busy++;
  return c;
}

static void fw_rb_leave(fw_rb_handle *h) {
  if (--h->busy == 0 && h->closed && h->client) {
    fw_client_free(h->client);
    h->client = NULL;
  }
}

/*
 * SWIG's Ruby runtime checks each pointer argument by reading a type-name instance variable and
 * comparing strings, and sets that variable on each object it returns: that costs more than the core's
 * admit. Handles and decisions are only ever made by this module, so a class check is as safe here.
 */
static void *fw_rb_unwrap(VALUE obj, swig_type_info *type) {
  VALUE klass = ((swig_class *)type->clientdata)->klass;
  if (!rb_obj_is_kind_of(obj, klass))
    rb_raise(rb_eTypeError, "expected a %s, not %s", rb_class2name(klass), rb_obj_classname(obj));
  if (!DATA_PTR(obj)) rb_raise(rb_eArgError, "%s: not initialized", rb_class2name(klass));
  return DATA_PTR(obj);
}

/* A decision as Ruby holds it: the C ABI's fw_decision first (SWIG's accessors read it there), then the
   handle of the client that made it, which formats its headers and body and which it keeps alive. */
typedef struct fw_rb_decision {
  fw_decision d;
  VALUE handle;
} fw_rb_decision;

static void fw_rb_decision_mark(void *p) {
  rb_gc_mark(((fw_rb_decision *)p)->handle);
}

static VALUE fw_rb_decision_new(const fw_decision *d, VALUE handle) {
  fw_rb_decision *copy;
  VALUE klass = ((swig_class *)SWIGTYPE_p_fw_decision->clientdata)->klass;
  VALUE obj = Data_Make_Struct(klass, fw_rb_decision, fw_rb_decision_mark, RUBY_DEFAULT_FREE, copy);
  copy->d = *d;
  copy->handle = handle;
  return obj;
}

typedef struct fw_rb_admit_call {
  fw_client *client;
  fw_request request;
  fw_decision *out;
  int rc;
  bool ran;
} fw_rb_admit_call;

static void *fw_rb_admit_without_gvl(void *p) {
  fw_rb_admit_call *call = (fw_rb_admit_call *)p;
  call->rc = fw_admit(call->client, &call->request, call->out);
  call->ran = true;
  return NULL;
}

/* A string that is read without the GVL must not change meanwhile: a frozen one (or a frozen copy,
   which shares the bytes) cannot be modified by another thread. */
static VALUE fw_rb_string(VALUE s, bool without_gvl) {
  StringValue(s);
  return without_gvl && !OBJ_FROZEN(s) ? rb_str_new_frozen(s) : s;
}

/* A negative Integer must not wrap around to a huge uint64_t. */
static uint64_t fw_rb_cost(VALUE cost) {
  if (!RB_INTEGER_TYPE_P(cost)) rb_raise(rb_eTypeError, "cost: must be an Integer, not %s", rb_obj_classname(cost));
  if (FIXNUM_P(cost) ? FIX2LONG(cost) < 0 : RTEST(rb_funcall(cost, rb_intern("negative?"), 0)))
    fw_rb_raise_message(FW_EINVAL, "cost: must not be negative");
  return NUM2ULL(cost); /* RangeError above 2**64 - 1 */
}

static VALUE fw_rb_admit(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical,
                         VALUE sandbox) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_decision out = FW_DECISION_INIT;
  tenant = fw_rb_string(tenant, h->blocking);
  if (!NIL_P(route)) route = fw_rb_string(route, h->blocking);
  if (!NIL_P(method)) method = fw_rb_string(method, h->blocking);
  fw_rb_admit_call call = {NULL, FW_REQUEST_INIT, &out, FW_OK, false};
  call.request.tenant = RSTRING_PTR(tenant);
  call.request.tenant_len = (size_t)RSTRING_LEN(tenant); /* binary-safe: NUL bytes are part of the id */
  call.request.route = NIL_P(route) ? NULL : StringValueCStr(route); /* raises on an embedded NUL */
  call.request.method = NIL_P(method) ? NULL : StringValueCStr(method);
  call.request.cost = fw_rb_cost(cost);
  call.request.critical = RTEST(critical); /* Ruby truthiness */
  call.request.sandbox = RTEST(sandbox);
  /* The memory store never waits: giving up the GVL would cost more than its admit. The _gvl2 variant
     does not act on an interrupt (Thread#kill, Timeout, the VM's time-slice timer) that arrives while
     the admit waits, so a decision that holds a slot always reaches Ruby and fw_rb_leave always runs.
     When an interrupt is already pending it does not call the function at all: the interrupt is then
     handled here, before anything is held (a Thread#raise or Timeout raises, the timer lets the other
     threads run), and the admit tried again. Waiting on Redis with the GVL held instead would stop every
     thread of the process for as long as Redis takes, up to the deadline. */
  if (!h->blocking) {
    call.client = fw_rb_enter(h);
    fw_rb_admit_without_gvl(&call);
    fw_rb_leave(h);
  } else {
    while (!call.ran) {
      call.client = fw_rb_enter(h);
      rb_thread_call_without_gvl2(fw_rb_admit_without_gvl, &call, NULL, NULL);
      fw_rb_leave(h);
      if (!call.ran) rb_thread_check_ints();
    }
  }
  RB_GC_GUARD(tenant);
  RB_GC_GUARD(route);
  RB_GC_GUARD(method);
  if (call.rc != FW_OK) fw_rb_raise(call.rc);
  return fw_rb_decision_new(&out, handle);
}

typedef struct fw_rb_release_call {
  fw_client *client;
  fw_ticket ticket;
  bool ran;
} fw_rb_release_call;

static void *fw_rb_release_without_gvl(void *p) {
  fw_rb_release_call *call = (fw_rb_release_call *)p;
  fw_release(call->client, call->ticket);
  call->ran = true;
  return NULL;
}

static int fw_rb_release(fw_rb_handle *h, fw_ticket ticket) {
  if (ticket == 0) return FW_OK;
  fw_rb_release_call call = {fw_rb_enter(h), ticket, false};
  if (h->blocking) rb_thread_call_without_gvl2(fw_rb_release_without_gvl, &call, NULL, NULL);
  /* An interrupt was pending: release all the same, with the GVL (a release never waits on Redis). */
  if (!call.ran) fw_rb_release_without_gvl(&call);
  fw_rb_leave(h);
  return FW_OK;
}

static fw_rb_handle *new_fw_rb_handle(const char *policy_json, bool blocking) {
  fw_client *c = NULL;
  int rc = fw_client_new(&c, policy_json);
  if (rc != FW_OK) fw_rb_raise(rc);
  fw_rb_handle *h = (fw_rb_handle *)calloc(1, sizeof *h);
  if (!h) {
    fw_client_free(c);
    rb_raise(rb_eNoMemError, "floodwall: out of memory");
  }
  h->client = c;
  h->blocking = blocking;
  return h;
}

static void delete_fw_rb_handle(fw_rb_handle *h) {
  fw_client_free(h->client);
  free(h);
}

static void fw_rb_handle_close(fw_rb_handle *h) {
  h->closed = true;
  h->busy++;
  fw_rb_leave(h); /* frees now unless a call is still running without the GVL */
}

static bool fw_rb_handle_closed_p(fw_rb_handle *h) {
  return h->closed;
}

/* The core's headers as a Hash, built here: splitting the formatted text in Ruby (String#split per line,
   then to_h) cost five times the formatting itself. Names are frozen, interned strings, which Hash#[]=
   takes without copying; lowercase gives Rack 3's lower-case names. */
static VALUE fw_rb_headers(VALUE decision, VALUE lowercase) {
  fw_rb_decision *rd = (fw_rb_decision *)fw_rb_unwrap(decision, SWIGTYPE_p_fw_decision);
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_format_headers(fw_rb_client((fw_rb_handle *)DATA_PTR(rd->handle)), &rd->d, &buf);
  if (rc != FW_OK) fw_rb_raise(rc);
  VALUE out = rb_hash_new();
  const char *p = buf.ptr, *end = buf.ptr + buf.size;
  while (p && p < end) {
    const char *eol = (const char *)memchr(p, '\r', (size_t)(end - p));
    if (!eol) eol = end;
    const char *colon = (const char *)memchr(p, ':', (size_t)(eol - p));
    if (colon && colon + 1 < eol && colon[1] == ' ') {
      char name[64];
      size_t n = (size_t)(colon - p);
      if (RTEST(lowercase) && n <= sizeof name) {
        for (size_t i = 0; i < n; i++) name[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
        rb_hash_aset(out, rb_enc_interned_str(name, (long)n, rb_utf8_encoding()),
                     rb_utf8_str_new(colon + 2, eol - colon - 2));
      } else {
        VALUE key = RTEST(lowercase) ? rb_funcall(rb_utf8_str_new(p, (long)n), rb_intern("downcase"), 0)
                                     : rb_enc_interned_str(p, (long)n, rb_utf8_encoding());
        rb_hash_aset(out, rb_obj_freeze(key), rb_utf8_str_new(colon + 2, eol - colon - 2));
      }
    }
    p = eol + 2; /* past "\r\n" */
  }
  fw_buf_dispose(&buf);
  return out;
}
%}

/* fw_admit -> admit, FW_LIMITER_FLEET -> LIMITER_FLEET. */
%rename("%(regex:/^(fw_rb_|fw_|FW_)(.*)/\\2/)s") "";
%rename(Decision) fw_decision;
%rename(Handle) fw_rb_handle;
%rename("closed?") fw_rb_handle::closed_p;

/* Wrapped by hand above, or not for Ruby at all. */
%ignore fw_client_new;
%ignore fw_client_free;
%ignore fw_admit;
%ignore fw_admit_async;
%ignore fw_admit_cb;
%ignore fw_release;
%ignore fw_error;
%ignore fw_error_last;
%ignore fw_buf;
%ignore fw_buf_dispose;
%ignore fw_request;
%ignore FW_REQUEST_INIT;
%ignore FW_DECISION_INIT;
%ignore FW_BUF_INIT;
%ignore FW_EXTERN;

%include <stdint.i>

/* Every int that a fw_* function returns is a status: raise on failure (fw_rb_raise), else return the
   out parameter (below) or nil. */
%typemap(out) int fw_limiter_from_name, int fw_mode_from_name, int fw_set_mode, int fw_get_mode,
              int fw_report_utilization, int fw_shedding_amount, int fw_format_headers, int fw_format_body,
              int fw_metrics_json, int fw_metrics_prometheus, int fw_rb_release
  "if ($1 != FW_OK) fw_rb_raise($1); $result = Qnil;"

/* The client parameter of every entry point is a Native::Handle; a closed one raises Floodwall::ClosedError. */
%typemap(in) fw_client *c {
  $1 = fw_rb_client((fw_rb_handle *)fw_rb_unwrap($input, $descriptor(fw_rb_handle *)));
}
%typemap(in) fw_rb_handle *h, struct fw_rb_handle *self "$1 = (fw_rb_handle *)fw_rb_unwrap($input, $descriptor(fw_rb_handle *));"
%typemap(in) struct fw_decision *self "$1 = (fw_decision *)fw_rb_unwrap($input, $descriptor(fw_decision *));"
/* The formatter takes the decision alone: the client is the one that made it. */
%typemap(in) (fw_client *c, const fw_decision *d) {
  fw_rb_decision *rd = (fw_rb_decision *)fw_rb_unwrap($input, $descriptor(fw_decision *));
  $1 = fw_rb_client((fw_rb_handle *)DATA_PTR(rd->handle));
  $2 = &rd->d;
}

/* Out parameters come back as return values. */
%typemap(in, numinputs=0) fw_buf *out (fw_buf buf = FW_BUF_INIT) "$1 = &buf;"
%typemap(argout) fw_buf *out {
  $result = rb_utf8_str_new(buf$argnum.ptr ? buf$argnum.ptr : "", (long)buf$argnum.size);
  fw_buf_dispose(&buf$argnum);
}
%typemap(in, numinputs=0) fw_limiter *out (fw_limiter v = FW_LIMITER_NONE) "$1 = &v;"
%typemap(argout) fw_limiter *out "$result = INT2NUM((int)v$argnum);"
%typemap(in, numinputs=0) fw_mode *out (fw_mode v = FW_MODE_ENFORCE) "$1 = &v;"
%typemap(argout) fw_mode *out "$result = INT2NUM((int)v$argnum);"
%typemap(in, numinputs=0) double *out (double v = 0.0) "$1 = &v;"
%typemap(argout) double *out "$result = rb_float_new(v$argnum);"
%typemap(in) VALUE "$1 = $input;"

/* Decisions are values, read-only from Ruby. The raw enums keep a _value suffix: lib/floodwall/decision.rb
   gives the idiomatic names (limiter -> "fleet", failed_open?). */
%rename(limiter_value) fw_decision::limiter;
%rename(dark_limiter_value) fw_decision::dark_limiter;
%rename(fail_reason_value) fw_decision::fail_reason;
%immutable fw_decision::version;
%immutable fw_decision::allowed;
%immutable fw_decision::status;
%immutable fw_decision::limiter;
%immutable fw_decision::dark_limiter;
%immutable fw_decision::failed_open;
%immutable fw_decision::degraded;
%immutable fw_decision::fail_reason;
%immutable fw_decision::limit;
%immutable fw_decision::remaining;
%immutable fw_decision::reset_s;
%immutable fw_decision::retry_after_s;
%immutable fw_decision::rate;
%immutable fw_decision::concurrency_limit;
%immutable fw_decision::concurrency_remaining;
%immutable fw_decision::ticket;
%nodefaultctor fw_decision;

%include "floodwall.h"

typedef struct fw_rb_handle {
} fw_rb_handle;

%extend fw_rb_handle {
  fw_rb_handle(const char *policy_json, bool blocking);
  ~fw_rb_handle();
  void close();
  bool closed_p();
}

/* Declared as methods of Native, taking the handle first like the rest of the C ABI. */
VALUE fw_rb_admit(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical, VALUE sandbox);
int fw_rb_release(fw_rb_handle *h, fw_ticket ticket);
VALUE fw_rb_headers(VALUE decision, VALUE lowercase);
