// floodwall._floodwall: a thin, mechanical map of the C ABI (floodwall.h) and nothing else. The idiomatic
// layer (policy loading, asyncio, middleware, the retry loop) is pure Python in floodwall/.
//
// Four things here are more than a one-line forward, and each says why:
// - Status codes become exceptions in exactly one place: exception_for().
// - Blocking calls release the GIL only when fw_client_can_block says the store can block (Redis), so
//   other threads run meanwhile; on the in-process stores the call is shorter than a GIL hand-off.
// - A request's headers are (name, value) pairs of str or bytes, WSGI/ASGI style, handed to the core as
//   fw_header views into the Python objects, which are kept alive for the call.
// - fw_admit_async3 returns a decision made at once directly; any other completes later on the core's I/O
//   thread (never inline), which must never wait for the GIL (a Python thread holding it would stall every
//   pipelined Redis reply). Its callback therefore only copies the decision into a CompletionQueue and
//   writes one byte to a pipe; the asyncio loop watches the pipe and drains it.
// - The admin calls (fw_admin_*) always release the GIL: each may wait on the store for up to its
//   deadline, and they are rare enough that the hand-off costs nothing worth saving.
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "floodwall.h"

namespace py = pybind11;

namespace {

// ------------------------------------------------------------------------------------------ errors

PyObject *Error = nullptr;                 // floodwall.Error: every FW_ERROR
PyObject *PolicyError = nullptr;           // FW_EPOLICY, a ValueError
PyObject *InvalidArgumentError = nullptr;  // FW_EINVAL, a ValueError
PyObject *StoreError = nullptr;            // FW_ESTORE, a ValueError (a bad store URL is bad configuration; also
                                           // an admin call that cannot reach the store)
PyObject *ClosedError = nullptr;           // FW_ECLOSED, and any use of a closed client

// The one place where a status code becomes an exception class.
PyObject *exception_for(int code) {
  switch (code) {
    case FW_EPOLICY: return PolicyError;
    case FW_EINVAL: return InvalidArgumentError;
    case FW_ESTORE: return StoreError;
    case FW_ECLOSED: return ClosedError;
    case FW_ENOMEM: return PyExc_MemoryError;
    default: return Error;
  }
}

// The message of the calling thread's last failure, if it is the failure of `code`.
std::string message_for(int code) {
  const fw_error *e = fw_error_last();
  if (e && e->code == code) return e->message;
  return "floodwall: error " + std::to_string(code);
}

[[noreturn]] void raise_status(int code, const std::string &message) {
  PyErr_SetString(exception_for(code), message.c_str());
  throw py::error_already_set();
}

void check(int rc) {
  if (rc != FW_OK) raise_status(rc, message_for(rc));
}

PyObject *new_exception(const char *name, PyObject *bases, const char *doc) {
  PyObject *type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  return type;
}

// --------------------------------------------------------------------------------- client handle

// The client's life is the C ABI's: fw_client_close refuses later calls (FW_ECLOSED, mapped to ClosedError
// like any status), lets calls in progress finish and decides the async admits pending on the store. The
// Handle only keeps what that leaves to the binding: the fw_client_free of the last reference.
struct Handle : std::enable_shared_from_this<Handle> {
  fw_client *c = nullptr;  // set by client_new, freed only by the destructor
  // fw_client_can_block, asked once after fw_client_new: whether admits may wait on I/O.
  bool can_block = true;
  // close() returned (for the `closed` property; the core itself refuses every call after close).
  std::atomic<bool> closed{false};
  // The policy's limits and quotas by index (fw_client_rule_name), asked once after fw_client_new: they
  // never change, and a decision names its rules by these indices.
  std::vector<std::string> rule_names;
  // The request headers the policy's tenant derivation reads (fw_client_tenant_header), asked once.
  py::tuple tenant_headers;
  // fw_client_deadline_ms, asked once: the policy's, fixed for the client's life.
  int64_t deadline_ms = 0;

  // The last reference is gone, so no call is in progress: fw_client_free may close and free. Async admits
  // still pending are decided by it; their callbacks never need the GIL.
  ~Handle() { fw_client_free(c); }
};

// Runs f with the GIL released when the store may block on I/O (fw_client_can_block); on the in-process
// stores the call is shorter than a GIL hand-off, and releasing it would only invite a convoy of threads.
template <class F>
int call(Handle &h, F &&f) {
  if (!h.can_block) return f();
  py::gil_scoped_release nogil;
  return f();
}

// ---------------------------------------------------------------------------------------- decision

// fw_format_response's answer, copied out of the core once per decision (a middleware reads the headers,
// the content type and the body of the same decision).
struct Formatted {
  std::vector<std::pair<std::string, std::string>> headers;  // in the core's order
  std::string content_type;
  std::string body;
};

struct Decision {
  fw_decision d = FW_DECISION_INIT;
  std::shared_ptr<Handle> h;  // for the formatter and for release
  std::unique_ptr<Formatted> formatted;
};

py::object limiter_or_none(fw_limiter l) {
  if (l == FW_LIMITER_NONE) return py::none();
  return py::str(fw_limiter_name(l));
}

// A rule's name (fw_decision.rule, dark_rule), or None for -1.
py::object rule_or_none(const Decision &x, int index) {
  const auto &names = x.h->rule_names;
  if (index < 0 || static_cast<size_t>(index) >= names.size()) return py::none();
  return py::str(names[static_cast<size_t>(index)]);
}

// The names of the rules that applied (fw_decision.rules), in the policy's order: limits, then quotas.
py::list rules_of(const Decision &x) {
  py::list out;
  const auto &names = x.h->rule_names;
  for (size_t i = 0; i < names.size() && i < 64 && (x.d.rules >> i) != 0; i++)
    if ((x.d.rules >> i) & 1) out.append(py::str(names[i]));
  return out;
}

const Formatted &formatted_of(Decision &dec) {
  if (dec.formatted) return *dec.formatted;
  auto f = std::make_unique<Formatted>();
  fw_response r = FW_RESPONSE_INIT;
  int rc = fw_format_response(dec.h->c, &dec.d, &r);
  if (rc != FW_OK) {
    std::string message = message_for(rc);
    fw_response_dispose(&r);
    raise_status(rc, message);
  }
  f->headers.reserve(r.header_count);
  for (size_t i = 0; i < r.header_count && i < FW_RESPONSE_MAX_HEADERS; i++) {
    const fw_header &x = r.headers[i];
    f->headers.emplace_back(std::string(x.name, x.name_len), std::string(x.value, x.value_len));
  }
  f->content_type = r.content_type ? r.content_type : "";
  f->body.assign(r.body ? r.body : "", r.body ? r.body_len : 0);
  fw_response_dispose(&r);
  dec.formatted = std::move(f);
  return *dec.formatted;
}

// The limit headers in the core's order, names as the core spells them; a dict keeps that order.
py::dict headers_of(Decision &dec) {
  py::dict out;
  for (const auto &[name, value] : formatted_of(dec).headers) out[py::str(name)] = py::str(value);
  return out;
}

// Never raises: fw_release fails only with FW_ECLOSED, and a closed client holds nothing any more.
void release_ticket(Handle &h, fw_ticket t) {
  if (t == 0) return;
  (void)call(h, [&] { return fw_release(h.c, t); });
}

py::object wrap(const fw_decision &d, std::shared_ptr<Handle> h) {
  auto dec = std::make_unique<Decision>();
  dec->d = d;
  dec->h = std::move(h);
  return py::cast(std::move(dec));
}

// ----------------------------------------------------------------------------------------- request
// The request's strings point into the caller's Python objects, which outlive the call.

const char *c_string(py::handle s, const char *field) {
  if (!PyUnicode_Check(s.ptr())) throw py::type_error(std::string(field) + ": must be a str");
  Py_ssize_t n = 0;
  const char *p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);
  if (!p) throw py::error_already_set();
  // The C ABI takes NUL-terminated strings here; a NUL inside would silently cut the value short.
  if (std::strlen(p) != static_cast<size_t>(n)) raise_status(FW_EINVAL, std::string(field) + ": must not contain NUL");
  return p;
}

// The bytes of a str (its UTF-8, cached in the object) or of a bytes object; false for any other type.
bool bytes_of(py::handle s, std::string_view &out) {
  if (PyBytes_Check(s.ptr())) {
    out = std::string_view(PyBytes_AS_STRING(s.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(s.ptr())));
    return true;
  }
  if (PyUnicode_Check(s.ptr())) {
    Py_ssize_t n = 0;
    const char *p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);  // a lone surrogate raises UnicodeEncodeError
    if (!p) throw py::error_already_set();
    out = std::string_view(p, static_cast<size_t>(n));
    return true;
  }
  return false;
}

std::string_view bytes_arg(py::handle s, const char *field) {
  std::string_view out;
  if (!bytes_of(s, out)) throw py::type_error(std::string(field) + ": must be str or bytes");
  return out;
}

// An fw_request and what its pointers point into: the names and values of the headers are referenced here
// (not only through their pairs, which another thread could mutate while the GIL is released).
struct Request {
  fw_request rq = FW_REQUEST_INIT;
  std::vector<fw_header> headers;
  std::vector<py::object> keep;
};

void add_headers(Request &r, py::handle headers) {
  if (headers.is_none()) return;
  py::object pairs = py::reinterpret_borrow<py::object>(headers);
  // A mapping (a dict, Starlette's Headers, werkzeug's EnvironHeaders): its items.
  if (!PyUnicode_Check(pairs.ptr()) && !PyBytes_Check(pairs.ptr()) && py::hasattr(pairs, "items"))
    pairs = pairs.attr("items")();
  if (PyUnicode_Check(pairs.ptr()) || PyBytes_Check(pairs.ptr()) || !py::isinstance<py::iterable>(pairs))
    throw py::type_error("headers: must be an iterable of (name, value) pairs");
  for (py::handle item : pairs) {
    py::object name, value;
    if (PyTuple_Check(item.ptr()) && PyTuple_GET_SIZE(item.ptr()) == 2) {
      name = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(item.ptr(), 0));
      value = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(item.ptr(), 1));
    } else if (PySequence_Check(item.ptr()) && !PyUnicode_Check(item.ptr()) && !PyBytes_Check(item.ptr()) &&
               PySequence_Size(item.ptr()) == 2) {
      name = py::reinterpret_steal<py::object>(PySequence_GetItem(item.ptr(), 0));
      value = py::reinterpret_steal<py::object>(PySequence_GetItem(item.ptr(), 1));
      if (!name || !value) throw py::error_already_set();
    } else {
      if (PyErr_Occurred()) throw py::error_already_set();
      throw py::type_error("headers: each header must be a (name, value) pair");
    }
    std::string_view n, v;
    if (!bytes_of(name, n) || !bytes_of(value, v))
      throw py::type_error("headers: a header's name and value must be str or bytes");
    r.headers.push_back(fw_header{n.data(), n.size(), v.data(), v.size()});
    r.keep.push_back(std::move(name));
    r.keep.push_back(std::move(value));
  }
  r.rq.headers = r.headers.data();
  r.rq.header_count = r.headers.size();
}

// tenant None: the core derives it from headers and peer. An empty tenant is the anonymous tenant.
void to_request(Request &r, py::handle tenant, py::handle headers, py::handle peer) {
  if (!tenant.is_none()) {
    std::string_view t;
    if (!bytes_of(tenant, t)) throw py::type_error("tenant: must be str, bytes or None");
    r.rq.tenant = t.data();  // never NULL, also when empty
    r.rq.tenant_len = t.size();
  }
  add_headers(r, headers);
  if (!peer.is_none()) {
    std::string_view p = bytes_arg(peer, "peer");
    r.rq.peer = p.data();
    r.rq.peer_len = p.size();
  }
}

// fw_request.credential from `verified`: None is FW_CREDENTIAL_UNCHECKED (the policy's tenant.credentials
// decides), True FW_CREDENTIAL_VERIFIED, False FW_CREDENTIAL_REJECTED. Nothing else: verified="false" must
// not vouch for a key by being a non-empty string (Node and Ruby refuse the same).
void set_credential(Request &r, py::handle verified) {
  if (verified.is_none()) return;  // FW_REQUEST_INIT's FW_CREDENTIAL_UNCHECKED
  if (verified.ptr() != Py_True && verified.ptr() != Py_False)
    throw py::type_error("verified: must be True, False or None (got " +
                         std::string(py::str(py::type::of(verified).attr("__name__"))) + ")");
  r.rq.credential = verified.ptr() == Py_True ? FW_CREDENTIAL_VERIFIED : FW_CREDENTIAL_REJECTED;
}

// fw_request.route and (version 4) .path: the framework's route pattern (None: not known) and the request's
// path, str or bytes without its query string (None: not known), which the policy's globs match when no
// route is given.
void set_route(Request &r, py::handle route, py::handle path) {
  r.rq.route = route.is_none() ? nullptr : c_string(route, "route");
  if (path.is_none()) return;
  std::string_view p;
  if (!bytes_of(path, p)) throw py::type_error("path: must be str, bytes or None");
  r.rq.path = p.data();  // never NULL, also when empty
  r.rq.path_len = p.size();
}

void to_request(Request &r, py::handle tenant, py::handle headers, py::handle peer, py::handle route, py::handle path,
                py::handle method, py::handle cost, py::handle critical, py::handle sandbox, py::handle verified) {
  to_request(r, tenant, headers, peer);
  set_credential(r, verified);
  set_route(r, route, path);
  fw_request &rq = r.rq;
  rq.method = method.is_none() ? nullptr : c_string(method, "method");
  if (!PyLong_Check(cost.ptr())) throw py::type_error("cost: must be an int");
  unsigned long long c = PyLong_AsUnsignedLongLong(cost.ptr());
  if (c == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    raise_status(FW_EINVAL, "cost: must be an integer in [0, 2**64)");
  }
  rq.cost = c;
  int crit = PyObject_IsTrue(critical.ptr());
  int sand = PyObject_IsTrue(sandbox.ptr());
  if (crit < 0 || sand < 0) throw py::error_already_set();
  rq.critical = crit;
  rq.sandbox = sand;
}

// ---------------------------------------------------------------------------------------- async

struct Completion {
  uint64_t token = 0;
  int status = FW_OK;
  std::string message;
  fw_decision d = FW_DECISION_INIT;
};

// Decisions that arrived on the core's I/O thread, waiting for the asyncio loop. A byte on the pipe
// means "not empty"; it is written only when the queue goes from empty to not empty.
class CompletionQueue {
 public:
  CompletionQueue() {
    int fds[2];
    if (pipe(fds) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    for (int fd : fds) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    rfd_ = fds[0];
    wfd_ = fds[1];
  }
  ~CompletionQueue() {
    close(rfd_);
    close(wfd_);
  }
  CompletionQueue(const CompletionQueue &) = delete;
  CompletionQueue &operator=(const CompletionQueue &) = delete;

  int fileno() const { return rfd_; }

  // Called on the I/O thread: no Python, no blocking beyond a short mutex.
  void push(Completion &&c) {
    bool wake;
    {
      std::lock_guard lock(mu_);
      wake = items_.empty();
      items_.push_back(std::move(c));
    }
    if (wake) {
      char b = 1;
      ssize_t n = write(wfd_, &b, 1);
      (void)n;  // a full pipe already says "not empty"
    }
  }

  // Empties the pipe first and the queue second, so that a push in between is never left unsignalled.
  std::vector<Completion> take() {
    char buf[64];
    while (read(rfd_, buf, sizeof buf) > 0) {
    }
    std::vector<Completion> out;
    std::lock_guard lock(mu_);
    out.swap(items_);
    return out;
  }

 private:
  int rfd_ = -1, wfd_ = -1;
  std::mutex mu_;
  std::vector<Completion> items_;
};

// One fw_admit_async3 that the core will call back: where its result goes. Owned by the callback.
struct Pending {
  std::shared_ptr<CompletionQueue> queue;
  uint64_t token = 0;
};

// Called exactly once, never inline: on the core's I/O thread, or on the thread of fw_client_close that
// decides it. No Python and no GIL here, only a copy into the queue.
void on_admitted(void *payload, int status, const fw_decision *d, const char *message) noexcept {
  std::unique_ptr<Pending> p(static_cast<Pending *>(payload));
  try {
    Completion c;
    c.token = p->token;
    c.status = status;
    if (d) c.d = *d;
    if (status != FW_OK) c.message = message ? message : "floodwall: error " + std::to_string(status);
    p->queue->push(std::move(c));
  } catch (...) {
    // Out of memory on the I/O thread: nothing can be reported; the admit's ticket heals after ttl_s.
  }
}

py::object result_of(Completion &c, const std::shared_ptr<Handle> &h) {
  if (c.status != FW_OK) {
    PyObject *exc = PyObject_CallFunction(exception_for(c.status), "s", c.message.c_str());
    if (!exc) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(exc);
  }
  return wrap(c.d, h);
}

// ------------------------------------------------------------------------------------ the client

std::shared_ptr<Handle> client_new(const std::string &policy_json) {
  auto h = std::make_shared<Handle>();
  int rc;
  {
    py::gil_scoped_release nogil;  // a Redis store connects here
    rc = fw_client_new(&h->c, policy_json.c_str());
  }
  check(rc);
  fw_client_set_language(h->c, "python");  // its summary in the fleet view (floodwall top)
  int blocks = 1;
  if (fw_client_can_block(h->c, &blocks) == FW_OK) h->can_block = blocks != 0;  // else assume it can
  const char *name = nullptr;
  for (int i = 0; fw_client_rule_name(h->c, i, &name, nullptr) == FW_OK; i++) h->rule_names.emplace_back(name);
  py::list wanted;
  for (int i = 0; fw_client_tenant_header(h->c, i, &name) == FW_OK; i++) wanted.append(py::str(name));
  h->tenant_headers = py::tuple(wanted);
  check(fw_client_deadline_ms(h->c, &h->deadline_ms));
  return h;
}

// Waits for calls in progress and for the pending async admits to be decided: without the GIL, which
// any of them may need to get back.
void client_close(Handle &h) {
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = fw_client_close(h.c);
  }
  check(rc);
  h.closed.store(true);
}

py::object client_admit(Handle &h, py::handle tenant, py::handle headers, py::handle peer, py::handle route,
                        py::handle path, py::handle method, py::handle cost, py::handle critical, py::handle sandbox,
                        py::handle verified) {
  Request r;
  to_request(r, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified);
  fw_decision d = FW_DECISION_INIT;
  check(call(h, [&] { return fw_admit(h.c, &r.rq, &d); }));
  return wrap(d, h.shared_from_this());
}

// Returns the Decision when it was made already, else None: it will come out of queue.drain() later
// under `token`.
py::object client_admit_async(Handle &h, const std::shared_ptr<CompletionQueue> &queue, uint64_t token,
                              py::handle tenant, py::handle headers, py::handle peer, py::handle route, py::handle path,
                              py::handle method, py::handle cost, py::handle critical, py::handle sandbox,
                              py::handle verified) {
  Request r;
  to_request(r, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified);
  auto p = std::make_unique<Pending>();  // ours until the core takes it (decided == 0)
  p->queue = queue;
  p->token = token;
  fw_decision d = FW_DECISION_INIT;
  int decided = 0;
  check(fw_admit_async3(h.c, &r.rq, &d, &decided, on_admitted, p.get()));  // only enqueues on Redis: keep the GIL
  if (decided) return wrap(d, h.shared_from_this());                       // decided at once: no callback
  (void)p.release();                                                       // the callback owns it now
  return py::none();
}

// fw_acquire: the GIL released for the whole wait (whatever the store), since it sleeps until the turn.
py::object client_acquire(Handle &h, py::handle tenant, py::handle headers, py::handle peer, py::handle route,
                          py::handle path, py::handle method, py::handle cost, py::handle critical, py::handle sandbox,
                          py::handle verified, double max_wait) {
  Request r;
  to_request(r, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified);
  fw_decision d = FW_DECISION_INIT;
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = fw_acquire(h.c, &r.rq, max_wait, &d);
  }
  check(rc);
  return wrap(d, h.shared_from_this());
}

// fw_reserve_async: as client_admit_async, the decision's wait left for the asyncio loop to wait out.
py::object client_reserve_async(Handle &h, const std::shared_ptr<CompletionQueue> &queue, uint64_t token,
                                py::handle tenant, py::handle headers, py::handle peer, py::handle route,
                                py::handle path, py::handle method, py::handle cost, py::handle critical,
                                py::handle sandbox, py::handle verified, double max_wait) {
  Request r;
  to_request(r, tenant, headers, peer, route, path, method, cost, critical, sandbox, verified);
  auto p = std::make_unique<Pending>();
  p->queue = queue;
  p->token = token;
  fw_decision d = FW_DECISION_INIT;
  int decided = 0;
  check(fw_reserve_async(h.c, &r.rq, max_wait, &d, &decided, on_admitted, p.get()));
  if (decided) return wrap(d, h.shared_from_this());
  (void)p.release();
  return py::none();
}

py::list client_drain(Handle &h, CompletionQueue &queue) {
  std::vector<Completion> done = queue.take();
  py::list out;
  auto self = h.shared_from_this();
  for (auto &c : done) out.append(py::make_tuple(c.token, result_of(c, self)));
  return out;
}

// The tenant id fw_admit would use. A given tenant comes back as it was; one that is not UTF-8 (bytes)
// comes back with surrogate escapes, so that this never fails on a tenant admit() accepts.
// An fw_buf's bytes as a str (UTF-8, surrogate escapes for any other byte); disposes of the buffer.
py::str str_of(fw_buf &buf) {
  PyObject *s = PyUnicode_DecodeUTF8(buf.ptr ? buf.ptr : "", static_cast<Py_ssize_t>(buf.size), "surrogateescape");
  fw_buf_dispose(&buf);
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

py::str client_tenant_key(Handle &h, py::handle tenant, py::handle headers, py::handle peer, py::handle verified) {
  Request r;
  to_request(r, tenant, headers, peer);
  set_credential(r, verified);
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_tenant_key(h.c, &r.rq, &buf);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    raise_status(rc, message_for(rc));
  }
  return str_of(buf);
}

// The credential (Bearer token or API key, trimmed) that a verify hook is asked about, or None when the
// request has none before its address (fw_request_credential). Not UTF-8: with surrogate escapes.
py::object client_request_credential(Handle &h, py::handle headers, py::handle peer) {
  Request r;
  to_request(r, py::none(), headers, peer);
  fw_buf buf = FW_BUF_INIT;
  int found = 0;
  int rc = fw_request_credential(h.c, &r.rq, &buf, &found);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    raise_status(rc, message_for(rc));
  }
  if (!found) {
    fw_buf_dispose(&buf);
    return py::none();
  }
  return str_of(buf);
}

// The route a request's rules match (fw_request_route): its route made canonical, else its path, else "".
py::str client_request_route(Handle &h, py::handle route, py::handle path) {
  Request r;
  set_route(r, route, path);
  fw_buf buf = FW_BUF_INIT;
  int rc = fw_request_route(h.c, &r.rq, &buf);
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    raise_status(rc, message_for(rc));
  }
  return str_of(buf);
}

fw_limiter limiter_of(py::handle name) {
  fw_limiter l;
  check(fw_limiter_from_name(&l, c_string(name, "limiter")));
  return l;
}

py::str buf_call(Handle &h, int (*f)(fw_client *, fw_buf *)) {
  fw_buf buf = FW_BUF_INIT;
  check(f(h.c, &buf));
  py::str out(buf.ptr ? buf.ptr : "", buf.size);
  fw_buf_dispose(&buf);
  return out;
}

// ------------------------------------------------------------------------------------------- admin
// Each fw_admin_* call may wait on the store (at most its deadline, at least a second): always without the
// GIL. The tenant's bytes point into the caller's str (its cached UTF-8) or bytes, both immutable and kept
// alive by the caller for the call; the other strings are copied first.

std::string_view admin_tenant(py::handle tenant) {
  std::string_view t;
  if (!bytes_of(tenant, t)) throw py::type_error("tenant: must be str or bytes");
  return t;
}

template <class F>
void admin_call(F &&f) {
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = f();
  }
  check(rc);
}

template <class F>
py::str admin_json(F &&f) {
  fw_buf buf = FW_BUF_INIT;
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = f(&buf);
  }
  if (rc != FW_OK) {
    fw_buf_dispose(&buf);
    raise_status(rc, message_for(rc));
  }
  py::str out(buf.ptr ? buf.ptr : "", buf.size);
  fw_buf_dispose(&buf);
  return out;
}

void admin_set_override(Handle &h, py::handle tenant, double rate, double burst) {
  std::string_view t = admin_tenant(tenant);
  admin_call([&] { return fw_admin_set_override(h.c, t.data(), t.size(), rate, burst); });
}

void admin_remove_override(Handle &h, py::handle tenant) {
  std::string_view t = admin_tenant(tenant);
  admin_call([&] { return fw_admin_remove_override(h.c, t.data(), t.size()); });
}

// tier None (or ""): out of any tier.
void admin_set_tier(Handle &h, py::handle tenant, py::handle tier) {
  std::string_view t = admin_tenant(tenant);
  std::string name;
  bool none = tier.is_none();
  if (!none) name = c_string(tier, "tier");
  admin_call([&] { return fw_admin_set_tier(h.c, t.data(), t.size(), none ? nullptr : name.c_str()); });
}

// seconds 0: until unblocked (the floodwall package passes 0 for None).
void admin_block(Handle &h, py::handle tenant, double seconds) {
  std::string_view t = admin_tenant(tenant);
  admin_call([&] { return fw_admin_block(h.c, t.data(), t.size(), seconds); });
}

void admin_unblock(Handle &h, py::handle tenant) {
  std::string_view t = admin_tenant(tenant);
  admin_call([&] { return fw_admin_unblock(h.c, t.data(), t.size()); });
}

py::str admin_show(Handle &h, py::handle tenant) {
  std::string_view t = admin_tenant(tenant);
  return admin_json([&](fw_buf *out) { return fw_admin_show(h.c, t.data(), t.size(), out); });
}

void admin_reset(Handle &h, py::handle tenant) {
  std::string_view t = admin_tenant(tenant);
  admin_call([&] { return fw_admin_reset(h.c, t.data(), t.size()); });
}

// mode None: back to each process's own mode (-1).
void admin_set_mode(Handle &h, py::handle limiter, py::handle mode) {
  fw_limiter l = limiter_of(limiter);
  int m = -1;
  if (!mode.is_none()) {
    fw_mode md;
    check(fw_mode_from_name(&md, c_string(mode, "mode")));
    m = static_cast<int>(md);
  }
  admin_call([&] { return fw_admin_set_mode(h.c, l, m); });
}

py::str admin_list(Handle &h, py::handle limit) {
  if (!PyLong_Check(limit.ptr())) throw py::type_error("limit: must be an int");
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(limit.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && v < 1)) raise_status(FW_EINVAL, "limit: must be at least 1");
  size_t n = overflow > 0 ? SIZE_MAX : static_cast<size_t>(v);
  return admin_json([&](fw_buf *out) { return fw_admin_list(h.c, n, out); });
}

// ----------------------------------------------------------------------------------------- backoff

// A non-negative int as an unsigned; above UINT_MAX it is UINT_MAX (for an attempt: the cap either way).
unsigned unsigned_arg(py::handle x, const char *field) {
  if (!PyLong_Check(x.ptr())) throw py::type_error(std::string(field) + ": must be an int");
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(x.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && v < 0)) raise_status(FW_EINVAL, std::string(field) + ": must be >= 0");
  if (overflow > 0 || v > static_cast<long long>(UINT_MAX)) return UINT_MAX;
  return static_cast<unsigned>(v);
}

double backoff_delay(double base_s, double cap_s, py::handle attempts, py::handle attempt, double retry_after_s,
                     double random01) {
  fw_backoff b = FW_BACKOFF_INIT;
  b.base_s = base_s;
  b.cap_s = cap_s;
  b.attempts = unsigned_arg(attempts, "attempts");
  unsigned n = unsigned_arg(attempt, "attempt");
  double out = 0;
  check(fw_backoff_delay(&b, n, retry_after_s, random01, &out));
  return out;
}

double parse_retry_after(py::handle value, double now_unix_s) {
  std::string_view v = bytes_arg(value, "value");
  double out = 0;
  check(fw_parse_retry_after(v.data(), v.size(), now_unix_s, &out));
  return out;
}

}  // namespace

PYBIND11_MODULE(_floodwall, m) {
  m.doc() = "floodwall's C ABI, mapped one to one. Use the floodwall package, not this module.";

  py::handle value_error = PyExc_ValueError;
  Error = new_exception("floodwall.Error", PyExc_Exception, "Base class of floodwall's errors.");
  py::tuple value_bases = py::make_tuple(py::handle(Error), value_error);
  PolicyError =
      new_exception("floodwall.PolicyError", value_bases.ptr(), "The policy is invalid; the message names the field.");
  InvalidArgumentError = new_exception("floodwall.InvalidArgumentError", value_bases.ptr(),
                                       "A bad argument (cost above the burst, unknown name); the message names it.");
  StoreError = new_exception("floodwall.StoreError", value_bases.ptr(),
                             "The store could not be set up (unparseable URL, unknown scheme), or an admin "
                             "call could not reach it.");
  ClosedError = new_exception("floodwall.ClosedError", Error, "The client is closed or shutting down.");
  m.attr("Error") = py::handle(Error);
  m.attr("PolicyError") = py::handle(PolicyError);
  m.attr("InvalidArgumentError") = py::handle(InvalidArgumentError);
  m.attr("StoreError") = py::handle(StoreError);
  m.attr("ClosedError") = py::handle(ClosedError);

  m.def(
      "version", [] { return std::string(fw_version()); }, "The C library's runtime version.");
  m.def(
      "cli_run",
      [](const py::list &argv) {
        std::vector<std::string> words;
        for (const py::handle &a : argv) words.push_back(a.cast<std::string>());
        std::vector<const char *> args;
        for (const std::string &a : words) args.push_back(a.c_str());
        int code = 1, rc;
        fw_buf out = FW_BUF_INIT, err = FW_BUF_INIT;
        {
          py::gil_scoped_release nogil;  // the store's connect time-out and deadline
          rc = fw_cli_run(static_cast<int>(args.size()), args.data(), &code, &out, &err);
        }
        check(rc);
        py::bytes o(out.ptr ? out.ptr : "", out.size), e(err.ptr ? err.ptr : "", err.size);
        fw_buf_dispose(&out);
        fw_buf_dispose(&err);
        return py::make_tuple(code, o, e);
      },
      py::arg("argv"),
      "fw_cli_run: the floodwall command on argv (argv[0] the program's name): (exit status, stdout, stderr).");

  m.def(
      "policy_text",
      [](const py::bytes &policy, bool is_path) {
        std::string s = policy;  // a path in the file system's encoding, or JSON text as UTF-8
        if (s.find('\0') != std::string::npos) raise_status(FW_EPOLICY, "policy: holds a NUL byte");
        fw_buf out = FW_BUF_INIT;
        check(fw_policy_text(s.c_str(), is_path ? 1 : 0, &out));
        return str_of(out);
      },
      py::arg("policy"), py::arg("is_path"),
      "fw_policy_text: the policy's JSON text, from JSON text or a file's path by the rule of every language.");

  const fw_backoff defaults = FW_BACKOFF_INIT;
  py::dict backoff_defaults;
  backoff_defaults["base_s"] = defaults.base_s;
  backoff_defaults["cap_s"] = defaults.cap_s;
  backoff_defaults["attempts"] = defaults.attempts;
  m.attr("BACKOFF_DEFAULTS") = backoff_defaults;
  // The core's limiter names (fw_limiter_name), in the order of fw_limiter: never a list of our own that a new
  // limiter could slip past.
  py::list limiters;
  for (int l = FW_LIMITER_NONE + 1; l < FW_LIMITER_COUNT; l++)
    limiters.append(fw_limiter_name(static_cast<fw_limiter>(l)));
  m.attr("LIMITERS") = py::tuple(limiters);
  m.def("backoff_delay", &backoff_delay, py::arg("base_s"), py::arg("cap_s"), py::arg("attempts"), py::arg("attempt"),
        py::arg("retry_after_s"), py::arg("random01"), "fw_backoff_delay: the wait in seconds before a retry.");
  m.def("parse_retry_after", &parse_retry_after, py::arg("value"), py::arg("now_unix_s"),
        "fw_parse_retry_after: a Retry-After value in seconds; InvalidArgumentError when unparseable.");

  py::class_<Decision>(m, "Decision")
      .def_property_readonly("allowed", [](const Decision &x) { return x.d.allowed != 0; })
      .def_property_readonly("status", [](const Decision &x) { return x.d.status; })
      .def_property_readonly("limiter", [](const Decision &x) { return limiter_or_none(x.d.limiter); })
      .def_property_readonly("dark_limiter", [](const Decision &x) { return limiter_or_none(x.d.dark_limiter); })
      .def_property_readonly("failed_open", [](const Decision &x) { return x.d.failed_open != 0; })
      .def_property_readonly("degraded", [](const Decision &x) { return x.d.degraded != 0; })
      .def_property_readonly("fail_reason",
                             [](const Decision &x) -> py::object {
                               if (x.d.fail_reason == FW_FAIL_NONE) return py::none();
                               return py::str(fw_fail_reason_name(x.d.fail_reason));
                             })
      .def_property_readonly("limit", [](const Decision &x) { return x.d.limit; })
      .def_property_readonly("remaining", [](const Decision &x) { return x.d.remaining; })
      .def_property_readonly("reset", [](const Decision &x) { return x.d.reset_s; })
      .def_property_readonly("retry_after", [](const Decision &x) { return x.d.retry_after_s; })
      .def_property_readonly("rate", [](const Decision &x) { return x.d.rate; })
      .def_property_readonly("cost", [](const Decision &x) { return x.d.cost; })
      .def_property_readonly("rule", [](const Decision &x) { return rule_or_none(x, x.d.rule); })
      .def_property_readonly("dark_rule", [](const Decision &x) { return rule_or_none(x, x.d.dark_rule); })
      .def_property_readonly("rules", &rules_of)
      .def_property_readonly("blocked", [](const Decision &x) { return x.d.blocked != 0; })
      .def_property_readonly("blocked_until",
                             [](const Decision &x) -> py::object {
                               if (!x.d.blocked || x.d.blocked_until_s <= 0) return py::none();
                               return py::int_(x.d.blocked_until_s);
                             })
      .def_property_readonly("concurrency_limit", [](const Decision &x) { return x.d.concurrency_limit; })
      .def_property_readonly("concurrency_remaining", [](const Decision &x) { return x.d.concurrency_remaining; })
      .def_property_readonly("ticket", [](const Decision &x) { return x.d.ticket; })
      // acquire() and acquire_async() return once the turn has come: the wait they waited (a reservation's
      // wait_s is waited out by acquire_async before it returns the decision).
      .def_property_readonly("waited", [](const Decision &x) { return x.d.waited_s + x.d.wait_s; })
      .def_property_readonly("wait", [](const Decision &x) { return x.d.wait_s; })
      .def_property_readonly("headers", &headers_of)
      .def_property_readonly("content_type", [](Decision &x) { return py::str(formatted_of(x).content_type); })
      .def_property_readonly("body", [](Decision &x) { return py::str(formatted_of(x).body); })
      .def("release", [](Decision &x) { release_ticket(*x.h, x.d.ticket); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](Decision &x, py::args) {
             release_ticket(*x.h, x.d.ticket);
             return false;
           })
      .def("__repr__", [](const Decision &x) {
        std::string s = "<floodwall.Decision allowed=" + std::string(x.d.allowed ? "True" : "False") +
                        " status=" + std::to_string(x.d.status);
        if (x.d.limiter != FW_LIMITER_NONE) s += " limiter=" + std::string(fw_limiter_name(x.d.limiter));
        if (x.d.rule >= 0 && static_cast<size_t>(x.d.rule) < x.h->rule_names.size())
          s += " rule=" + x.h->rule_names[static_cast<size_t>(x.d.rule)];
        if (x.d.limit) s += " remaining=" + std::to_string(x.d.remaining) + "/" + std::to_string(x.d.limit);
        if (x.d.cost > 1) s += " cost=" + std::to_string(x.d.cost);
        if (x.d.blocked) s += " blocked=True";
        if (x.d.failed_open) s += " failed_open=True";
        if (x.d.degraded) s += " degraded=True";
        return s + ">";
      });

  py::class_<CompletionQueue, std::shared_ptr<CompletionQueue>>(m, "CompletionQueue")
      .def(py::init<>())
      .def("fileno", &CompletionQueue::fileno);

  py::class_<Handle, std::shared_ptr<Handle>>(m, "Client")
      .def(py::init(&client_new), py::arg("policy_json"))
      .def("close", &client_close)
      .def_property_readonly("closed", [](Handle &h) { return h.closed.load(); })
      .def_property_readonly("can_block", [](Handle &h) { return h.can_block; })
      .def_property_readonly("tenant_headers", [](Handle &h) { return h.tenant_headers; })
      .def("admit", &client_admit)
      .def("admit_async", &client_admit_async)
      .def("acquire", &client_acquire)
      .def("reserve_async", &client_reserve_async)
      .def("drain", &client_drain)
      .def("tenant_key", &client_tenant_key)
      .def("request_credential", &client_request_credential)
      .def("request_route", &client_request_route)
      .def_property_readonly("deadline_ms", [](Handle &h) { return h.deadline_ms; })
      .def("release", [](Handle &h, fw_ticket t) { release_ticket(h, t); })
      // fw_client_hold / fw_client_flush: this thread's admits and releases go out together at the flush.
      // Never raise: after close there is nothing left to hold or to send.
      .def("hold", [](Handle &h) { fw_client_hold(h.c); })
      .def("flush", [](Handle &h) { fw_client_flush(h.c); })
      .def("set_mode",
           [](Handle &h, py::handle limiter, py::handle mode) {
             fw_limiter l = limiter_of(limiter);
             fw_mode md;
             check(fw_mode_from_name(&md, c_string(mode, "mode")));
             check(fw_set_mode(h.c, l, md));
           })
      .def("get_mode",
           [](Handle &h, py::handle limiter) {
             fw_limiter l = limiter_of(limiter);
             fw_mode md;
             check(fw_get_mode(h.c, l, &md));
             return std::string(fw_mode_name(md));
           })
      .def("report_utilization", [](Handle &h, double u) { check(fw_report_utilization(h.c, u)); })
      .def("shedding_amount",
           [](Handle &h) {
             double x = 0;
             check(fw_shedding_amount(h.c, &x));
             return x;
           })
      .def("metrics_json", [](Handle &h) { return buf_call(h, fw_metrics_json); })
      .def("metrics_prometheus", [](Handle &h) { return buf_call(h, fw_metrics_prometheus); })
      .def("admin_set_override", &admin_set_override)
      .def("admin_remove_override", &admin_remove_override)
      .def("admin_set_tier", &admin_set_tier)
      .def("admin_block", &admin_block)
      .def("admin_unblock", &admin_unblock)
      .def("admin_show", &admin_show)
      .def("admin_reset", &admin_reset)
      .def("admin_set_mode", &admin_set_mode)
      .def("admin_list", &admin_list);
}
