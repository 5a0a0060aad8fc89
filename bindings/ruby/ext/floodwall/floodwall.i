/*
 * floodwall.i - Floodwall::Native, the thin generated layer: SWIG maps capi/include/floodwall.h into Ruby
 * (fw_set_mode -> Native.set_mode, FW_LIMITER_FLEET -> Native::LIMITER_FLEET, fw_decision ->
 * Native::Decision with read-only accessors). lib/floodwall/*.rb is the idiomatic layer on top.
 *
 * Hand-written here, and only here:
 * - fw_rb_raise: the one place where a status code becomes an exception (through the table in
 *   lib/floodwall/errors.rb);
 * - Native::Handle, the client as Ruby holds it: #close is fw_client_close (without the GVL: it waits for
 *   the calls other Ruby threads have in progress on Redis), the GC's free is fw_client_free; it asks the
 *   core once (fw_client_can_block) whether admits can wait on I/O at all;
 * - admit and release, which run fw_admit / fw_release without the GVL when they can wait, so that
 *   Puma's threads do not serialise behind one thread's round trip to Redis;
 * - the request: a tenant String, or the request's headers (an Array of [name, value] pairs or a Hash)
 *   and peer address, from which the core derives the tenant (admit, tenant_key), with what the app said
 *   of its credential (verified: nil, true or false); request_credential, the credential a verify hook is
 *   asked about; rack_headers turns a Rack env's HTTP_* keys back into header names; the request's path
 *   (fw_request v4), which the policy's route globs match when no route pattern is given, and
 *   request_route, the route its rules match (fw_request_route);
 * - response: fw_format_response's name/value pairs, content type and body as Ruby objects;
 * - rule_name and rules: the names of a decision's limits and quotas, from the client's names, asked once
 *   (fw_client_rule_name) when its handle is made;
 * - the backoff calls (fw_backoff_delay, fw_parse_retry_after) and FW_BACKOFF_INIT's defaults;
 * - policy_text, a policy String or path made JSON text by the rule of every language (fw_policy_text);
 * - the admin calls (fw_admin_*), each of which may wait on the store, so without the GVL, as admit does.
 * fw_admit_async is not wrapped: a blocking admit without the GVL is what Ruby servers want.
 */
%module "floodwall::native"

%{
#include <limits.h>
#include <stdio.h>
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
 * A client handle. The core client lives as long as the handle: #close is fw_client_close, which lets
 * the calls in progress finish and makes every later one return FW_ECLOSED (Floodwall::ClosedError);
 * the GC's free is fw_client_free, and the GC cannot run it while a thread or a decision still uses the
 * handle (both hold a reference to it). `closed` only answers closed?; it is set with the GVL held.
 * A forked child (Puma's cluster mode forks workers from a preloaded app) needs nothing here: the core
 * makes its client anew in the child on first use.
 */
typedef struct fw_rb_handle {
  fw_client *client;
  bool closed;
  bool blocking; /* fw_client_can_block: admit and release give up the GVL while they wait on the store */
  /* The policy's limits, then its quotas (fw_client_rule_name), by the index a decision names them by: the
     core's own strings, valid as long as the client, which lives as long as the handle. */
  int rule_count;
  const char *rule_names[64];
} fw_rb_handle;

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
   handle of the client that made it, which formats its response and which it keeps alive. */
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

/*
 * The request's header fields, copied into one buffer of the caller's (fw_header array, then the bytes):
 * a header String in a Ruby Array or Hash can be moved by GC.compact in another thread while the admit
 * runs without the GVL (only what the C stack points at is pinned), and copying a few hundred bytes costs
 * less than a frozen copy of each String. The first pass counts and checks, the second copies; no Ruby
 * code runs in or between them (no to_str, no to_ary), so both see the same headers.
 */
typedef struct fw_rb_headers_acc {
  size_t count, bytes; /* pass 1: what to allocate; pass 2: what has been copied */
  size_t max_count, max_bytes;
  fw_header *out; /* NULL in pass 1 */
  char *bytes_out;
} fw_rb_headers_acc;

static VALUE fw_rb_header_string(VALUE s, const char *what) {
  if (RB_SYMBOL_P(s) && what[0] == 'n') return rb_sym2str(s);
  if (!RB_TYPE_P(s, T_STRING))
    rb_raise(rb_eTypeError, "headers: a header %s must be a String, not %s", what, rb_obj_classname(s));
  return s;
}

static void fw_rb_header_add(fw_rb_headers_acc *a, VALUE name, VALUE value) {
  name = fw_rb_header_string(name, "name");
  value = fw_rb_header_string(value, "value");
  size_t name_len = (size_t)RSTRING_LEN(name), value_len = (size_t)RSTRING_LEN(value);
  if (!a->out) {
    a->count++;
    a->bytes += name_len + value_len;
    return;
  }
  if (a->count >= a->max_count || a->bytes + name_len + value_len > a->max_bytes)
    rb_raise(rb_eRuntimeError, "headers: changed while they were read");
  fw_header *h = &a->out[a->count++];
  char *p = a->bytes_out + a->bytes;
  memcpy(p, RSTRING_PTR(name), name_len);
  memcpy(p + name_len, RSTRING_PTR(value), value_len);
  h->name = p;
  h->name_len = name_len;
  h->value = p + name_len;
  h->value_len = value_len;
  a->bytes += name_len + value_len;
}

static int fw_rb_header_pair(VALUE name, VALUE value, VALUE acc) {
  fw_rb_header_add((fw_rb_headers_acc *)acc, name, value);
  return ST_CONTINUE;
}

static void fw_rb_headers_pass(VALUE headers, fw_rb_headers_acc *a) {
  if (RB_TYPE_P(headers, T_HASH)) {
    rb_hash_foreach(headers, fw_rb_header_pair, (VALUE)a);
    return;
  }
  for (long i = 0; i < RARRAY_LEN(headers); i++) {
    VALUE pair = RARRAY_AREF(headers, i);
    if (!RB_TYPE_P(pair, T_ARRAY) || RARRAY_LEN(pair) != 2)
      rb_raise(rb_eTypeError, "headers[%ld]: expected a [name, value] pair, not %s", i,
               RB_TYPE_P(pair, T_ARRAY) ? "an Array of another size" : rb_obj_classname(pair));
    fw_rb_header_add(a, RARRAY_AREF(pair, 0), RARRAY_AREF(pair, 1));
  }
}

/* The tenant part of a request: a tenant String (any bytes; "" is the anonymous tenant), or nil and the
   headers and peer address the core derives it from. Headers and peer are only read when tenant is nil.
   `keep` holds what the request points into (GC-guarded by the caller); `tmp` the header buffer, freed
   by the caller with rb_free_tmp_buffer (or by the GC when an exception comes first). */
typedef struct fw_rb_request {
  fw_request r;
  VALUE tenant, peer, route, method, path;
  volatile VALUE tmp;
} fw_rb_request;

static void fw_rb_request_tenant(fw_rb_request *q, VALUE tenant, VALUE headers, VALUE peer, bool without_gvl) {
  q->tenant = q->peer = q->route = q->method = q->path = Qnil;
  q->tmp = 0;
  if (!NIL_P(tenant)) {
    if (!RB_TYPE_P(tenant, T_STRING))
      rb_raise(rb_eTypeError, "tenant: must be a String or nil, not %s", rb_obj_classname(tenant));
    q->tenant = fw_rb_string(tenant, without_gvl);
    return;
  }
  if (!NIL_P(peer)) {
    if (!RB_TYPE_P(peer, T_STRING))
      rb_raise(rb_eTypeError, "peer: must be a String or nil, not %s", rb_obj_classname(peer));
    q->peer = fw_rb_string(peer, without_gvl);
  }
  if (NIL_P(headers)) return;
  if (!RB_TYPE_P(headers, T_HASH) && !RB_TYPE_P(headers, T_ARRAY))
    rb_raise(rb_eTypeError, "headers: expected an Array of [name, value] pairs or a Hash, not %s",
             rb_obj_classname(headers));
  fw_rb_headers_acc a = {0, 0, 0, 0, NULL, NULL};
  fw_rb_headers_pass(headers, &a);
  if (a.count == 0) return;
  if (a.count > (size_t)LONG_MAX / 2 / sizeof(fw_header) || a.bytes > (size_t)LONG_MAX / 2)
    rb_raise(rb_eArgError, "headers: too large");
  size_t table = a.count * sizeof(fw_header);
  char *buf = (char *)rb_alloc_tmp_buffer(&q->tmp, (long)(table + a.bytes + 1));
  fw_rb_headers_acc b = {0, 0, a.count, a.bytes, (fw_header *)buf, buf + table};
  fw_rb_headers_pass(headers, &b);
  q->r.headers = b.out;
  q->r.header_count = b.count;
}

/* fw_request.credential from Ruby: nil (the app said nothing), true (it vouched for the credential) or false
   (it did not). Anything else is a TypeError: a truthy String must not pass for a verification. */
static int fw_rb_credential_check(VALUE verified) {
  if (NIL_P(verified)) return FW_CREDENTIAL_UNCHECKED;
  if (verified == Qtrue) return FW_CREDENTIAL_VERIFIED;
  if (verified == Qfalse) return FW_CREDENTIAL_REJECTED;
  rb_raise(rb_eTypeError, "verified: must be true, false or nil, not %s", rb_obj_classname(verified));
  return FW_CREDENTIAL_UNCHECKED; /* unreachable */
}

/* The route pattern (NUL-terminated: fw_request's route is a C string) and the path (any bytes: the client's),
   each a String or nil. Set after fw_rb_request_tenant, which clears them. */
static void fw_rb_request_route_path(fw_rb_request *q, VALUE route, VALUE path, bool without_gvl) {
  if (!NIL_P(route)) {
    if (!RB_TYPE_P(route, T_STRING))
      rb_raise(rb_eTypeError, "route: must be a String or nil, not %s", rb_obj_classname(route));
    q->route = fw_rb_string(route, without_gvl);
  }
  if (!NIL_P(path)) {
    if (!RB_TYPE_P(path, T_STRING))
      rb_raise(rb_eTypeError, "path: must be a String or nil, not %s", rb_obj_classname(path));
    q->path = fw_rb_string(path, without_gvl);
  }
}

/* Points the fw_request at the Strings: done last, after every conversion that can allocate. */
static void fw_rb_request_point(fw_rb_request *q) {
  if (!NIL_P(q->tenant)) {
    q->r.tenant = RSTRING_PTR(q->tenant);
    q->r.tenant_len = (size_t)RSTRING_LEN(q->tenant); /* binary-safe: NUL bytes are part of the id */
  }
  if (!NIL_P(q->peer)) {
    q->r.peer = RSTRING_PTR(q->peer);
    q->r.peer_len = (size_t)RSTRING_LEN(q->peer);
  }
  if (!NIL_P(q->path)) {
    q->r.path = RSTRING_PTR(q->path);
    q->r.path_len = (size_t)RSTRING_LEN(q->path); /* binary-safe: the path's bytes are the client's */
  }
  q->r.route = NIL_P(q->route) ? NULL : StringValueCStr(q->route); /* raises on an embedded NUL */
  q->r.method = NIL_P(q->method) ? NULL : StringValueCStr(q->method);
}

typedef struct fw_rb_admit_call {
  fw_client *client;
  const fw_request *request;
  fw_decision *out;
  int rc;
  bool ran;
  bool reserve;    /* fw_reserve with max_wait, else fw_admit */
  double max_wait;
} fw_rb_admit_call;

static void *fw_rb_admit_without_gvl(void *p) {
  fw_rb_admit_call *call = (fw_rb_admit_call *)p;
  call->rc = call->reserve ? fw_reserve(call->client, call->request, call->max_wait, call->out)
                            : fw_admit(call->client, call->request, call->out);
  call->ran = true;
  return NULL;
}

static VALUE fw_rb_decide(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical,
                          VALUE sandbox, VALUE headers, VALUE peer, VALUE verified, VALUE path, bool reserve,
                          double max_wait);

static VALUE fw_rb_admit(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical,
                         VALUE sandbox, VALUE headers, VALUE peer, VALUE verified, VALUE path) {
  return fw_rb_decide(handle, tenant, route, method, cost, critical, sandbox, headers, peer, verified, path, false, 0);
}

/* fw_reserve: the decision of an acquire, its wait (wait_s) left to lib/floodwall/client.rb, which sleeps
   it out (Kernel#sleep gives up the GVL). max_wait is seconds; a non-numeric one is refused naming it. */
static VALUE fw_rb_reserve(VALUE handle, VALUE max_wait, VALUE tenant, VALUE route, VALUE method, VALUE cost,
                           VALUE critical, VALUE sandbox, VALUE headers, VALUE peer, VALUE verified, VALUE path) {
  if (!RB_FLOAT_TYPE_P(max_wait) && !RB_INTEGER_TYPE_P(max_wait))
    rb_raise(rb_eTypeError, "max_wait: must be a number of seconds");
  return fw_rb_decide(handle, tenant, route, method, cost, critical, sandbox, headers, peer, verified, path, true,
                      NUM2DBL(max_wait));
}

static VALUE fw_rb_decide(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical,
                          VALUE sandbox, VALUE headers, VALUE peer, VALUE verified, VALUE path, bool reserve,
                          double max_wait) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_decision out = FW_DECISION_INIT;
  fw_rb_request q = {FW_REQUEST_INIT, Qnil, Qnil, Qnil, Qnil, Qnil, 0};
  q.r.credential = fw_rb_credential_check(verified);
  fw_rb_request_tenant(&q, tenant, headers, peer, h->blocking);
  fw_rb_request_route_path(&q, route, path, h->blocking);
  if (!NIL_P(method)) q.method = fw_rb_string(method, h->blocking);
  q.r.cost = fw_rb_cost(cost);
  q.r.critical = RTEST(critical); /* Ruby truthiness */
  q.r.sandbox = RTEST(sandbox);
  fw_rb_request_point(&q);
  fw_rb_admit_call call = {h->client, &q.r, &out, FW_OK, false, reserve, max_wait};
  /* The in-process stores never wait (fw_client_can_block says 0): giving up the GVL would cost more than
     their admit. The _gvl2 variant does not act on an interrupt (Thread#kill, Timeout, the VM's
     time-slice timer) that arrives while the admit waits, so a decision that holds a slot always reaches
     Ruby. When an interrupt is already pending it does not call the function at all: the interrupt is
     then handled here, before anything is held (a Thread#raise or Timeout raises, the timer lets the
     other threads run), and the admit tried again. Waiting on Redis with the GVL held instead would stop
     every thread of the process for as long as Redis takes, up to the deadline. A client closed meanwhile
     (fw_client_close) lets this admit finish, or refuses it with FW_ECLOSED. */
  if (!h->blocking) {
    fw_rb_admit_without_gvl(&call);
  } else {
    while (!call.ran) {
      rb_thread_call_without_gvl2(fw_rb_admit_without_gvl, &call, NULL, NULL);
      if (!call.ran) rb_thread_check_ints();
    }
  }
  RB_GC_GUARD(q.tenant);
  RB_GC_GUARD(q.peer);
  RB_GC_GUARD(q.route);
  RB_GC_GUARD(q.method);
  RB_GC_GUARD(q.path);
  if (q.tmp) rb_free_tmp_buffer(&q.tmp);
  if (call.rc != FW_OK) fw_rb_raise(call.rc);
  return fw_rb_decision_new(&out, handle);
}

/* The tenant id the core would use for the request (fw_tenant_key). It never waits: the GVL stays. */
static VALUE fw_rb_tenant_key(VALUE handle, VALUE tenant, VALUE headers, VALUE peer, VALUE verified) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_rb_request q = {FW_REQUEST_INIT, Qnil, Qnil, Qnil, Qnil, Qnil, 0};
  q.r.credential = fw_rb_credential_check(verified);
  fw_rb_request_tenant(&q, tenant, headers, peer, false);
  fw_rb_request_point(&q);
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_tenant_key(h->client, &q.r, &buf);
  RB_GC_GUARD(q.tenant);
  RB_GC_GUARD(q.peer);
  if (q.tmp) rb_free_tmp_buffer(&q.tmp);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    fw_rb_raise(rc);
  }
  VALUE key = rb_utf8_str_new(buf.ptr ? buf.ptr : "", (long)buf.size);
  fw_buf_dispose(&buf);
  return key;
}

/* The credential a verify hook is asked about (fw_request_credential): the request's Bearer token or API key,
   raw and trimmed, or nil when it has none that comes before its address. It never waits: the GVL stays. */
static VALUE fw_rb_request_credential(VALUE handle, VALUE headers, VALUE peer) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_rb_request q = {FW_REQUEST_INIT, Qnil, Qnil, Qnil, Qnil, Qnil, 0};
  fw_rb_request_tenant(&q, Qnil, headers, peer, false);
  fw_rb_request_point(&q);
  fw_buf buf = FW_BUF_INIT;
  int found = 0;
  int rc = fw_request_credential(h->client, &q.r, &buf, &found);
  RB_GC_GUARD(q.peer);
  if (q.tmp) rb_free_tmp_buffer(&q.tmp);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    fw_rb_raise(rc);
  }
  VALUE credential = found ? rb_utf8_str_new(buf.ptr ? buf.ptr : "", (long)buf.size) : Qnil;
  fw_buf_dispose(&buf);
  return credential;
}

/* The route a request's rules match (fw_request_route): its route pattern made canonical ("/orders/:id" for
   "/orders/{id}", "/orders/<int:id>" or "/orders/:id(.:format)"), else its path without a trailing '/', else "".
   It never waits: the GVL stays. */
static VALUE fw_rb_request_route(VALUE handle, VALUE route, VALUE path) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_rb_request q = {FW_REQUEST_INIT, Qnil, Qnil, Qnil, Qnil, Qnil, 0};
  fw_rb_request_route_path(&q, route, path, false);
  fw_rb_request_point(&q);
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_request_route(h->client, &q.r, &buf);
  RB_GC_GUARD(q.route);
  RB_GC_GUARD(q.path);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    fw_rb_raise(rc);
  }
  VALUE out = rb_utf8_str_new(buf.ptr ? buf.ptr : "", (long)buf.size);
  fw_buf_dispose(&buf);
  return out;
}

/* The request header names (lower case, frozen) that the policy's tenant derivation reads
   (fw_client_tenant_header): no other header is ever read for the tenant. */
static VALUE fw_rb_tenant_headers(VALUE handle) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  VALUE out = rb_ary_new();
  const char *name = NULL;
  for (int i = 0; fw_client_tenant_header(h->client, i, &name) == FW_OK; i++)
    rb_ary_push(out, rb_enc_interned_str(name, (long)strlen(name), rb_utf8_encoding()));
  return rb_ary_freeze(out);
}

/* A Rack env's request headers as a Hash of header names: HTTP_X_API_KEY -> "x-api-key" (frozen,
   interned names), the env's own value Strings. CONTENT_TYPE and CONTENT_LENGTH are left out (no
   tenant comes from them), and so is any entry whose key or value is not a String. */
static int fw_rb_rack_header(VALUE key, VALUE value, VALUE out) {
  if (!RB_TYPE_P(key, T_STRING) || !RB_TYPE_P(value, T_STRING)) return ST_CONTINUE;
  long len = RSTRING_LEN(key);
  const char *k = RSTRING_PTR(key);
  if (len <= 5 || memcmp(k, "HTTP_", 5) != 0) return ST_CONTINUE;
  char small[128];
  VALUE heap = 0;
  char *name = len - 5 <= (long)sizeof small ? small : (char *)rb_alloc_tmp_buffer(&heap, len - 5);
  k = RSTRING_PTR(key); /* the allocation may have run the GC, which may have moved an embedded key */
  for (long i = 5; i < len; i++) {
    char c = k[i];
    name[i - 5] = c == '_' ? '-' : (c >= 'A' && c <= 'Z' ? (char)(c + 32) : c);
  }
  VALUE interned = rb_enc_interned_str(name, len - 5, rb_utf8_encoding());
  if (heap) rb_free_tmp_buffer(&heap);
  rb_hash_aset(out, interned, value);
  return ST_CONTINUE;
}

static VALUE fw_rb_rack_headers(VALUE env) {
  Check_Type(env, T_HASH);
  VALUE out = rb_hash_new();
  rb_hash_foreach(env, fw_rb_rack_header, out);
  return out;
}

typedef struct fw_rb_release_call {
  fw_client *client;
  fw_ticket ticket;
  int rc;
  bool ran;
} fw_rb_release_call;

static void *fw_rb_release_without_gvl(void *p) {
  fw_rb_release_call *call = (fw_rb_release_call *)p;
  call->rc = fw_release(call->client, call->ticket);
  call->ran = true;
  return NULL;
}

/* FW_OK, or FW_ECLOSED from a closed client (fw_release never fails otherwise). Ticket 0 holds nothing
   and asks nothing of the client, closed or not. */
static int fw_rb_release(fw_rb_handle *h, fw_ticket ticket) {
  if (ticket == 0) return FW_OK;
  fw_rb_release_call call = {h->client, ticket, FW_OK, false};
  if (h->blocking) rb_thread_call_without_gvl2(fw_rb_release_without_gvl, &call, NULL, NULL);
  /* An interrupt was pending: release all the same, with the GVL (a release never waits on Redis). */
  if (!call.ran) fw_rb_release_without_gvl(&call);
  return call.rc;
}

static fw_rb_handle *new_fw_rb_handle(const char *policy_json) {
  fw_client *c = NULL;
  int rc = fw_client_new(&c, policy_json);
  if (rc != FW_OK) fw_rb_raise(rc);
  fw_client_set_language(c, "ruby"); /* its summary in the fleet view (floodwall top) */
  int can_block = 1;
  rc = fw_client_can_block(c, &can_block);
  if (rc != FW_OK) {
    fw_client_free(c);
    fw_rb_raise(rc);
  }
  fw_rb_handle *h = (fw_rb_handle *)calloc(1, sizeof *h);
  if (!h) {
    fw_client_free(c);
    rb_raise(rb_eNoMemError, "floodwall: out of memory");
  }
  h->client = c;
  h->blocking = can_block != 0;
  while (h->rule_count < 64 && fw_client_rule_name(c, h->rule_count, &h->rule_names[h->rule_count], NULL) == FW_OK)
    h->rule_count++;
  return h;
}

static void delete_fw_rb_handle(fw_rb_handle *h) {
  fw_client_free(h->client);
  free(h);
}

typedef struct fw_rb_close_call {
  fw_client *client;
  int rc;
  bool ran;
} fw_rb_close_call;

static void *fw_rb_close_without_gvl(void *p) {
  fw_rb_close_call *call = (fw_rb_close_call *)p;
  call->rc = fw_client_close(call->client);
  call->ran = true;
  return NULL;
}

/* fw_client_close waits for the calls in progress, which other Ruby threads may be making without the
   GVL while they wait on Redis (up to the store's deadline): it gives the GVL up meanwhile, so that those
   threads, and every other, go on. As for an admit, an interrupt already pending is handled first (the
   _gvl2 variant then does not call it) and the close tried again; one that arrives while it waits is
   handled after it, once the client is closed. A second close is the core's no-op. */
static void fw_rb_handle_close(fw_rb_handle *h) {
  fw_rb_close_call call = {h->client, FW_OK, false};
  while (!call.ran) {
    rb_thread_call_without_gvl2(fw_rb_close_without_gvl, &call, NULL, NULL);
    if (!call.ran) rb_thread_check_ints();
  }
  if (call.rc != FW_OK) fw_rb_raise(call.rc);
  h->closed = true;
}

static bool fw_rb_handle_closed_p(fw_rb_handle *h) {
  return h->closed;
}

static bool fw_rb_handle_blocking_p(fw_rb_handle *h) {
  return h->blocking;
}

/* The core's response for a decision (fw_format_response) as [headers, content_type, body]: headers a
   Hash built here from the name/value pairs in the core's order, names frozen and interned (Hash#[]=
   takes them without copying), values frozen; lowercase gives Rack 3's lower-case names. content_type
   and body are nil for an allowed decision. */
typedef struct fw_rb_response_call {
  fw_response r;
  VALUE lowercase;
} fw_rb_response_call;

static VALUE fw_rb_response_build(VALUE p) {
  const fw_rb_response_call *call = (const fw_rb_response_call *)p;
  const fw_response *r = &call->r;
  VALUE headers = rb_hash_new();
  for (size_t i = 0; i < r->header_count; i++) {
    const fw_header *f = &r->headers[i];
    VALUE name;
    char lower[64];
    if (RTEST(call->lowercase) && f->name_len <= sizeof lower) {
      for (size_t j = 0; j < f->name_len; j++) {
        char c = f->name[j];
        lower[j] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
      }
      name = rb_enc_interned_str(lower, (long)f->name_len, rb_utf8_encoding());
    } else if (RTEST(call->lowercase)) {
      name = rb_funcall(rb_utf8_str_new(f->name, (long)f->name_len), rb_intern("downcase"), 0);
      name = rb_obj_freeze(name);
    } else {
      name = rb_enc_interned_str(f->name, (long)f->name_len, rb_utf8_encoding());
    }
    rb_hash_aset(headers, name, rb_obj_freeze(rb_utf8_str_new(f->value, (long)f->value_len)));
  }
  VALUE content_type = r->content_type && r->content_type[0]
                           ? rb_enc_interned_str(r->content_type, (long)strlen(r->content_type), rb_utf8_encoding())
                           : Qnil;
  VALUE body = r->body && r->body_len ? rb_obj_freeze(rb_utf8_str_new(r->body, (long)r->body_len)) : Qnil;
  return rb_ary_new_from_args(3, headers, content_type, body);
}

static VALUE fw_rb_response_dispose(VALUE p) {
  fw_response_dispose(&((fw_rb_response_call *)p)->r);
  return Qnil;
}

static VALUE fw_rb_response(VALUE decision, VALUE lowercase) {
  fw_rb_decision *rd = (fw_rb_decision *)fw_rb_unwrap(decision, SWIGTYPE_p_fw_decision);
  fw_client *c = ((fw_rb_handle *)DATA_PTR(rd->handle))->client;
  fw_rb_response_call call = {FW_RESPONSE_INIT, lowercase};
  int rc = fw_format_response(c, &rd->d, &call.r);
  if (rc != FW_OK) {
    fw_response_dispose(&call.r);
    fw_rb_raise(rc);
  }
  return rb_ensure(fw_rb_response_build, (VALUE)&call, fw_rb_response_dispose, (VALUE)&call);
}

/* The name of the decision's client's limit or quota at `index` (fw_decision.rule, dark_rule: frozen,
   interned), or nil for -1 and any other index the policy has no rule at. */
static VALUE fw_rb_rule_name(VALUE decision, VALUE index) {
  fw_rb_decision *rd = (fw_rb_decision *)fw_rb_unwrap(decision, SWIGTYPE_p_fw_decision);
  const fw_rb_handle *h = (const fw_rb_handle *)DATA_PTR(rd->handle);
  int i = NUM2INT(index);
  if (i < 0 || i >= h->rule_count) return Qnil;
  return rb_enc_interned_str(h->rule_names[i], (long)strlen(h->rule_names[i]), rb_utf8_encoding());
}

/* The names of the limits and quotas that applied to the decision (fw_decision.rules), in the policy's
   order: the limits, then the quotas. */
static VALUE fw_rb_rules(VALUE decision) {
  fw_rb_decision *rd = (fw_rb_decision *)fw_rb_unwrap(decision, SWIGTYPE_p_fw_decision);
  const fw_rb_handle *h = (const fw_rb_handle *)DATA_PTR(rd->handle);
  VALUE out = rb_ary_new();
  for (int i = 0; i < h->rule_count; i++) {
    if ((rd->d.rules >> i) & 1)
      rb_ary_push(out, rb_enc_interned_str(h->rule_names[i], (long)strlen(h->rule_names[i]), rb_utf8_encoding()));
  }
  return out;
}

/* A whole number for an unsigned field of the core: a negative one must not wrap around. */
static unsigned fw_rb_unsigned(VALUE v, const char *field) {
  if (!RB_INTEGER_TYPE_P(v)) rb_raise(rb_eTypeError, "%s: must be an Integer, not %s", field, rb_obj_classname(v));
  if (FIXNUM_P(v) ? FIX2LONG(v) < 0 : RTEST(rb_funcall(v, rb_intern("negative?"), 0))) {
    char message[96];
    snprintf(message, sizeof message, "%s: must not be negative", field);
    fw_rb_raise_message(FW_EINVAL, message);
  }
  unsigned long long n = NUM2ULL(v);
  if (n > UINT_MAX) rb_raise(rb_eRangeError, "%s: %llu is too big", field, n);
  return (unsigned)n;
}

/* FW_BACKOFF_INIT, the one set of defaults of every language: [base_s, cap_s, attempts]. */
static VALUE fw_rb_backoff_defaults(void) {
  fw_backoff b = FW_BACKOFF_INIT;
  return rb_ary_new_from_args(3, DBL2NUM(b.base_s), DBL2NUM(b.cap_s), UINT2NUM(b.attempts));
}

/* fw_backoff_delay: seconds before retry number `attempt`; retry_after_s < 0 (or nil) means none. */
static VALUE fw_rb_backoff_delay(VALUE base_s, VALUE cap_s, VALUE attempts, VALUE attempt, VALUE retry_after_s,
                                 VALUE random01) {
  fw_backoff b = FW_BACKOFF_INIT;
  b.base_s = NUM2DBL(base_s);
  b.cap_s = NUM2DBL(cap_s);
  b.attempts = fw_rb_unsigned(attempts, "backoff.attempts");
  unsigned n = fw_rb_unsigned(attempt, "attempt");
  double retry_after = NIL_P(retry_after_s) ? -1.0 : NUM2DBL(retry_after_s);
  double random = NUM2DBL(random01);
  double out = 0.0;
  int rc = fw_backoff_delay(&b, n, retry_after, random, &out);
  if (rc != FW_OK) fw_rb_raise(rc);
  return DBL2NUM(out);
}

/* fw_parse_retry_after: a Retry-After value in seconds from now_unix_s, or nil when it is neither
   delay-seconds nor an HTTP-date. */
static VALUE fw_rb_parse_retry_after(VALUE value, VALUE now_unix_s) {
  StringValue(value);
  double now = NUM2DBL(now_unix_s);
  double out = 0.0;
  int rc = fw_parse_retry_after(RSTRING_PTR(value), (size_t)RSTRING_LEN(value), now, &out);
  if (rc == FW_EINVAL) return Qnil;
  if (rc != FW_OK) fw_rb_raise(rc);
  return DBL2NUM(out);
}

/* fw_policy_text: the policy's JSON text from a String by the rule of every language (JSON text when it starts
   with "{" or "[", else a file's path), or from a path (is_path true: a Pathname's). */
static VALUE fw_rb_policy_text(VALUE policy, VALUE is_path) {
  StringValue(policy);
  if (memchr(RSTRING_PTR(policy), 0, (size_t)RSTRING_LEN(policy))) fw_rb_raise_message(FW_EPOLICY, "policy: holds a NUL byte");
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_policy_text(StringValueCStr(policy), RTEST(is_path) ? 1 : 0, &buf);
  RB_GC_GUARD(policy);
  if (rc != FW_OK) fw_rb_raise(rc);
  VALUE out = rb_utf8_str_new(buf.ptr ? buf.ptr : "", (long)buf.size);
  fw_buf_dispose(&buf);
  return out;
}

/*
 * The admin calls (fw_admin_*): a tenant's control record in the store. Each may wait on the store for up
 * to its deadline (at least a second), so each runs without the GVL, always (they are rare: the hand-off
 * costs nothing worth saving), the way an admit on Redis does: an interrupt already pending is handled
 * first and the call tried again; one that arrives while it waits is handled after it. The strings are
 * frozen (or frozen copies), held on this C stack, so that no thread can change or move them meanwhile.
 */
enum { FW_RB_SET_OVERRIDE, FW_RB_REMOVE_OVERRIDE, FW_RB_SET_TIER, FW_RB_BLOCK, FW_RB_UNBLOCK, FW_RB_SHOW,
       FW_RB_RESET, FW_RB_SET_MODE, FW_RB_LIST };

typedef struct fw_rb_admin_call {
  int op;
  fw_client *client;
  const char *tenant;
  size_t tenant_len;
  const char *tier; /* FW_RB_SET_TIER: NULL takes the tenant out of any tier */
  double x, y;      /* FW_RB_SET_OVERRIDE: rate, burst; FW_RB_BLOCK: seconds (0: until unblocked) */
  fw_limiter limiter;
  int mode;
  size_t limit;
  fw_buf out;
  int rc;
  bool ran;
} fw_rb_admin_call;

static void *fw_rb_admin_without_gvl(void *p) {
  fw_rb_admin_call *c = (fw_rb_admin_call *)p;
  switch (c->op) {
    case FW_RB_SET_OVERRIDE: c->rc = fw_admin_set_override(c->client, c->tenant, c->tenant_len, c->x, c->y); break;
    case FW_RB_REMOVE_OVERRIDE: c->rc = fw_admin_remove_override(c->client, c->tenant, c->tenant_len); break;
    case FW_RB_SET_TIER: c->rc = fw_admin_set_tier(c->client, c->tenant, c->tenant_len, c->tier); break;
    case FW_RB_BLOCK: c->rc = fw_admin_block(c->client, c->tenant, c->tenant_len, c->x); break;
    case FW_RB_UNBLOCK: c->rc = fw_admin_unblock(c->client, c->tenant, c->tenant_len); break;
    case FW_RB_SHOW: c->rc = fw_admin_show(c->client, c->tenant, c->tenant_len, &c->out); break;
    case FW_RB_RESET: c->rc = fw_admin_reset(c->client, c->tenant, c->tenant_len); break;
    case FW_RB_SET_MODE: c->rc = fw_admin_set_mode(c->client, c->limiter, c->mode); break;
    case FW_RB_LIST: c->rc = fw_admin_list(c->client, c->limit, &c->out); break;
    default: c->rc = FW_EINVAL;
  }
  c->ran = true;
  return NULL;
}

/* Runs the call without the GVL; raises its error (read on this thread, which made the call), or returns
   nil, or the JSON text of show and list. */
static VALUE fw_rb_admin_run(fw_rb_admin_call *call) {
  while (!call->ran) {
    rb_thread_call_without_gvl2(fw_rb_admin_without_gvl, call, NULL, NULL);
    if (!call->ran) rb_thread_check_ints();
  }
  if (call->rc != FW_OK) {
    fw_buf_dispose(&call->out);
    fw_rb_raise(call->rc);
  }
  if (call->op != FW_RB_SHOW && call->op != FW_RB_LIST) return Qnil;
  VALUE json = rb_utf8_str_new(call->out.ptr ? call->out.ptr : "", (long)call->out.size);
  fw_buf_dispose(&call->out);
  return json;
}

/* A call on the handle's client for the tenant (a String of any bytes), its other fields still to set. */
static fw_rb_admin_call fw_rb_admin_for(VALUE handle, int op, VALUE tenant, VALUE *keep) {
  fw_rb_handle *h = (fw_rb_handle *)fw_rb_unwrap(handle, SWIGTYPE_p_fw_rb_handle);
  fw_rb_admin_call call;
  memset(&call, 0, sizeof call);
  call.op = op;
  call.client = h->client;
  call.mode = -1;
  if (op == FW_RB_SET_MODE || op == FW_RB_LIST) return call;
  if (!RB_TYPE_P(tenant, T_STRING))
    rb_raise(rb_eTypeError, "tenant: must be a String, not %s", rb_obj_classname(tenant));
  *keep = fw_rb_string(tenant, true);
  call.tenant = RSTRING_PTR(*keep);
  call.tenant_len = (size_t)RSTRING_LEN(*keep); /* binary-safe, as for admit */
  return call;
}

static VALUE fw_rb_admin_tenant_op(VALUE handle, int op, VALUE tenant) {
  VALUE keep = Qnil;
  fw_rb_admin_call call = fw_rb_admin_for(handle, op, tenant, &keep);
  VALUE out = fw_rb_admin_run(&call);
  RB_GC_GUARD(keep);
  return out;
}

static VALUE fw_rb_admin_set_override(VALUE handle, VALUE tenant, VALUE rate, VALUE burst) {
  double r = NUM2DBL(rate), b = NUM2DBL(burst); /* TypeError for a String or nil */
  VALUE keep = Qnil;
  fw_rb_admin_call call = fw_rb_admin_for(handle, FW_RB_SET_OVERRIDE, tenant, &keep);
  call.x = r;
  call.y = b;
  VALUE out = fw_rb_admin_run(&call);
  RB_GC_GUARD(keep);
  return out;
}

static VALUE fw_rb_admin_remove_override(VALUE handle, VALUE tenant) {
  return fw_rb_admin_tenant_op(handle, FW_RB_REMOVE_OVERRIDE, tenant);
}

/* tier: a String, or nil to take the tenant out of any tier. */
static VALUE fw_rb_admin_set_tier(VALUE handle, VALUE tenant, VALUE tier) {
  VALUE name = Qnil;
  if (!NIL_P(tier)) {
    if (!RB_TYPE_P(tier, T_STRING)) rb_raise(rb_eTypeError, "tier: must be a String or nil, not %s", rb_obj_classname(tier));
    name = fw_rb_string(tier, true);
    StringValueCStr(name); /* ArgumentError for an embedded NUL */
  }
  VALUE keep = Qnil;
  fw_rb_admin_call call = fw_rb_admin_for(handle, FW_RB_SET_TIER, tenant, &keep);
  call.tier = NIL_P(name) ? NULL : RSTRING_PTR(name);
  VALUE out = fw_rb_admin_run(&call);
  RB_GC_GUARD(keep);
  RB_GC_GUARD(name);
  return out;
}

/* seconds: 0 blocks until unblocked (Floodwall::Admin#block passes 0 for nil). */
static VALUE fw_rb_admin_block(VALUE handle, VALUE tenant, VALUE seconds) {
  double s = NUM2DBL(seconds);
  VALUE keep = Qnil;
  fw_rb_admin_call call = fw_rb_admin_for(handle, FW_RB_BLOCK, tenant, &keep);
  call.x = s;
  VALUE out = fw_rb_admin_run(&call);
  RB_GC_GUARD(keep);
  return out;
}

static VALUE fw_rb_admin_unblock(VALUE handle, VALUE tenant) {
  return fw_rb_admin_tenant_op(handle, FW_RB_UNBLOCK, tenant);
}

static VALUE fw_rb_admin_show(VALUE handle, VALUE tenant) {
  return fw_rb_admin_tenant_op(handle, FW_RB_SHOW, tenant);
}

static VALUE fw_rb_admin_reset(VALUE handle, VALUE tenant) {
  return fw_rb_admin_tenant_op(handle, FW_RB_RESET, tenant);
}

/* limiter: an fw_limiter (Native.limiter_from_name); mode: an fw_mode, or -1 for none. */
static VALUE fw_rb_admin_set_mode(VALUE handle, VALUE limiter, VALUE mode) {
  int l = NUM2INT(limiter), m = NUM2INT(mode);
  fw_rb_admin_call call = fw_rb_admin_for(handle, FW_RB_SET_MODE, Qnil, NULL);
  call.limiter = (fw_limiter)l;
  call.mode = m;
  return fw_rb_admin_run(&call);
}

static VALUE fw_rb_admin_list(VALUE handle, VALUE limit) {
  if (!RB_INTEGER_TYPE_P(limit)) rb_raise(rb_eTypeError, "limit: must be an Integer, not %s", rb_obj_classname(limit));
  if (RTEST(rb_funcall(limit, rb_intern("<"), 1, INT2FIX(1)))) fw_rb_raise_message(FW_EINVAL, "limit: must be at least 1");
  fw_rb_admin_call call = fw_rb_admin_for(handle, FW_RB_LIST, Qnil, NULL);
  call.limit = RTEST(rb_funcall(limit, rb_intern(">"), 1, ULL2NUM(SIZE_MAX))) ? SIZE_MAX : (size_t)NUM2ULL(limit);
  return fw_rb_admin_run(&call);
}
/* fw_cli_run: the floodwall command (exe/floodwall) on an Array of Strings, argv[0] the program's name:
   [exit status, stdout, stderr]. It holds the GVL while it waits on the store (at most its connect time-out
   and deadline per call): it is a command-line program's whole job. */
static VALUE fw_rb_cli_run(VALUE argv) {
  Check_Type(argv, T_ARRAY);
  long n = RARRAY_LEN(argv);
  VALUE words = rb_ary_new_capa(n);
  for (long i = 0; i < n; i++) {
    VALUE w = rb_ary_entry(argv, i);
    StringValueCStr(w); /* no NUL inside: a C string each */
    rb_ary_push(words, w);
  }
  const char **args = ALLOCA_N(const char *, n > 0 ? n : 1);
  for (long i = 0; i < n; i++) args[i] = RSTRING_PTR(rb_ary_entry(words, i));
  int code = 1;
  fw_buf out = FW_BUF_INIT, err = FW_BUF_INIT;
  int rc = fw_cli_run((int)n, args, &code, &out, &err);
  RB_GC_GUARD(words);
  if (rc != FW_OK) fw_rb_raise(rc);
  VALUE o = rb_utf8_str_new(out.ptr ? out.ptr : "", (long)out.size);
  VALUE e = rb_utf8_str_new(err.ptr ? err.ptr : "", (long)err.size);
  fw_buf_dispose(&out);
  fw_buf_dispose(&err);
  return rb_ary_new_from_args(3, INT2NUM(code), o, e);
}
%}

/* fw_admit -> admit, FW_LIMITER_FLEET -> LIMITER_FLEET. */
%rename("%(regex:/^(fw_rb_|fw_|FW_)(.*)/\\2/)s") "";
%rename(Decision) fw_decision;
%rename(Handle) fw_rb_handle;
%rename("closed?") fw_rb_handle::closed_p;
%rename("blocking?") fw_rb_handle::blocking_p;

/* Wrapped by hand above, or not for Ruby at all. The text formatters (fw_format_headers, fw_format_body)
   are left out: fw_format_response gives the same as pairs, which no one has to parse. */
%ignore fw_client_new;
%ignore fw_client_close;
%ignore fw_client_free;
%ignore fw_client_can_block;
%ignore fw_client_rule_name;
%ignore fw_client_tenant_header;
%ignore fw_admit;
%ignore fw_admit_async;
%ignore fw_admit_async2;
%ignore fw_admit_cb;
%ignore fw_admit_async3;
%ignore fw_acquire;
%ignore fw_reserve;
%ignore fw_reserve_async;
%ignore fw_admit_cb3;
%ignore fw_release;
%ignore fw_tenant_key;
%ignore fw_request_credential;
%ignore fw_request_route;
%ignore fw_error;
%ignore fw_error_last;
%ignore fw_buf;
%ignore fw_buf_dispose;
%ignore fw_header;
%ignore fw_request;
%ignore fw_response;
%ignore fw_format_headers;
%ignore fw_format_body;
%ignore fw_format_response;
%ignore fw_response_dispose;
%ignore fw_backoff;
%ignore fw_backoff_delay;
%ignore fw_policy_text;
%ignore fw_parse_retry_after;
%ignore fw_admin_set_override;
%ignore fw_admin_remove_override;
%ignore fw_admin_set_tier;
%ignore fw_admin_block;
%ignore fw_admin_unblock;
%ignore fw_admin_show;
%ignore fw_admin_reset;
%ignore fw_admin_set_mode;
%ignore fw_admin_list;
%ignore fw_admin_status;
%ignore fw_admin_clients;
%ignore fw_client_set_language;
%ignore fw_cli_run;
%ignore FW_REQUEST_INIT;
%ignore FW_DECISION_INIT;
%ignore FW_BUF_INIT;
%ignore FW_RESPONSE_INIT;
%ignore FW_BACKOFF_INIT;
%ignore FW_EXTERN;

%include <stdint.i>

/* Every int that a fw_* function returns is a status: raise on failure (fw_rb_raise), else return the
   out parameter (below) or nil. */
%typemap(out) int fw_limiter_from_name, int fw_mode_from_name, int fw_set_mode, int fw_get_mode,
              int fw_report_utilization, int fw_shedding_amount, int fw_metrics_json, int fw_metrics_prometheus,
              int fw_client_deadline_ms, int fw_rb_release
  "if ($1 != FW_OK) fw_rb_raise($1); $result = Qnil;"

/* The client parameter of every entry point is a Native::Handle; the core answers FW_ECLOSED for a closed
   one (Floodwall::ClosedError). */
%typemap(in) fw_client *c {
  $1 = ((fw_rb_handle *)fw_rb_unwrap($input, $descriptor(fw_rb_handle *)))->client;
}
%typemap(in) fw_rb_handle *h, struct fw_rb_handle *self "$1 = (fw_rb_handle *)fw_rb_unwrap($input, $descriptor(fw_rb_handle *));"
%typemap(in) struct fw_decision *self "$1 = (fw_decision *)fw_rb_unwrap($input, $descriptor(fw_decision *));"

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
%typemap(in, numinputs=0) int64_t *out (int64_t v = 0) "$1 = &v;"
%typemap(argout) int64_t *out "$result = LL2NUM((long long)v$argnum);"
%typemap(in) VALUE "$1 = $input;"

/* Decisions are values, read-only from Ruby. The raw enums and rule indices keep a _value suffix:
   lib/floodwall/decision.rb gives the idiomatic names (limiter -> "fleet", failed_open?, rule -> "writes"). */
%rename(limiter_value) fw_decision::limiter;
%rename(dark_limiter_value) fw_decision::dark_limiter;
%rename(fail_reason_value) fw_decision::fail_reason;
%rename(rules_value) fw_decision::rules;
%rename(rule_value) fw_decision::rule;
%rename(dark_rule_value) fw_decision::dark_rule;
%rename(shown_rule_value) fw_decision::shown_rule;
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
%immutable fw_decision::cost;
%immutable fw_decision::rules;
%immutable fw_decision::rule;
%immutable fw_decision::dark_rule;
%immutable fw_decision::shown_rule;
%immutable fw_decision::rule_limit;
%immutable fw_decision::rule_remaining;
%immutable fw_decision::rule_reset_s;
%immutable fw_decision::rule_window_end_s;
%immutable fw_decision::blocked;
%immutable fw_decision::blocked_until_s;
%nodefaultctor fw_decision;

%include "floodwall.h"

typedef struct fw_rb_handle {
} fw_rb_handle;

%extend fw_rb_handle {
  fw_rb_handle(const char *policy_json);
  ~fw_rb_handle();
  void close();
  bool closed_p();
  bool blocking_p();
}

/* Declared as methods of Native, taking the handle first like the rest of the C ABI. Native.admit's
   headers, peer, verified and path may be left out (a tenant String given): one wrapper that counts its
   arguments. */
%feature("compactdefaultargs") fw_rb_admit;
VALUE fw_rb_admit(VALUE handle, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical, VALUE sandbox,
                  VALUE headers = Qnil, VALUE peer = Qnil, VALUE verified = Qnil, VALUE path = Qnil);
VALUE fw_rb_reserve(VALUE handle, VALUE max_wait, VALUE tenant, VALUE route, VALUE method, VALUE cost, VALUE critical,
                    VALUE sandbox, VALUE headers, VALUE peer, VALUE verified, VALUE path);
%feature("compactdefaultargs") fw_rb_tenant_key;
VALUE fw_rb_tenant_key(VALUE handle, VALUE tenant, VALUE headers, VALUE peer, VALUE verified = Qnil);
VALUE fw_rb_request_credential(VALUE handle, VALUE headers, VALUE peer);
VALUE fw_rb_request_route(VALUE handle, VALUE route, VALUE path);
VALUE fw_rb_rack_headers(VALUE env);
VALUE fw_rb_tenant_headers(VALUE handle);
int fw_rb_release(fw_rb_handle *h, fw_ticket ticket);
VALUE fw_rb_response(VALUE decision, VALUE lowercase);
VALUE fw_rb_rule_name(VALUE decision, VALUE index);
VALUE fw_rb_rules(VALUE decision);
VALUE fw_rb_backoff_defaults(void);
VALUE fw_rb_backoff_delay(VALUE base_s, VALUE cap_s, VALUE attempts, VALUE attempt, VALUE retry_after_s,
                          VALUE random01);
VALUE fw_rb_parse_retry_after(VALUE value, VALUE now_unix_s);
VALUE fw_rb_policy_text(VALUE policy, VALUE is_path);
VALUE fw_rb_admin_set_override(VALUE handle, VALUE tenant, VALUE rate, VALUE burst);
VALUE fw_rb_admin_remove_override(VALUE handle, VALUE tenant);
VALUE fw_rb_admin_set_tier(VALUE handle, VALUE tenant, VALUE tier);
VALUE fw_rb_admin_block(VALUE handle, VALUE tenant, VALUE seconds);
VALUE fw_rb_admin_unblock(VALUE handle, VALUE tenant);
VALUE fw_rb_admin_show(VALUE handle, VALUE tenant);
VALUE fw_rb_admin_reset(VALUE handle, VALUE tenant);
VALUE fw_rb_admin_set_mode(VALUE handle, VALUE limiter, VALUE mode);
VALUE fw_rb_admin_list(VALUE handle, VALUE limit);
VALUE fw_rb_cli_run(VALUE argv);
