// floodwall._floodwall: a thin, mechanical map of the C ABI (floodwall.h) and nothing else. The idiomatic
// layer (policy loading, asyncio, middleware) is pure Python in floodwall/.
//
// Three things here are more than a one-line forward, and each says why:
// - Status codes become exceptions in exactly one place: exception_for().
// - Blocking calls release the GIL when the store can block (Redis), so other threads run meanwhile.
// - fw_admit_async completes on the core's I/O thread, which must never wait for the GIL (a Python thread
//   holding it would stall every pipelined Redis reply). Its callback therefore only copies the decision
//   into a CompletionQueue and writes one byte to a pipe; the asyncio loop watches the pipe and drains it.
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
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
PyObject *StoreError = nullptr;            // FW_ESTORE, a ValueError (a bad store URL is bad configuration)
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

struct Handle : std::enable_shared_from_this<Handle> {
  fw_client *c = nullptr;
  bool release_gil = true;
  // Calls share it; close() takes it alone, so a client is never freed under a call in progress.
  std::shared_mutex mu;
  // Set by close() before it waits for mu: new calls fail at once instead of starving it (readers
  // keep a reader-preferring rwlock busy for ever when threads admit back to back).
  std::atomic<bool> closing{false};
  // Async admits accepted and not yet called back. The client is freed only once they are done (each
  // completes within the store's deadline): fw_client_free with admits still pending crashes in the
  // core today (Guard's members are destroyed before its store fails them open; reported).
  std::mutex pending_mu;
  std::condition_variable pending_cv;
  size_t pending = 0;

  void add_pending() {
    std::lock_guard lock(pending_mu);
    pending++;
  }
  // The last touch of the Handle by a callback: close() may free it as soon as the mutex is released.
  void done_pending() {
    std::lock_guard lock(pending_mu);
    pending--;
    pending_cv.notify_all();
  }
  void free_client() {
    {
      std::unique_lock lock(pending_mu);
      pending_cv.wait(lock, [&] { return pending == 0; });  // callbacks never need the GIL
    }
    fw_client_free(c);
    c = nullptr;
  }

  ~Handle() { free_client(); }
};

// A shared hold on the client. Waiting for it (a close() in progress) happens without the GIL: the
// close may be waiting in turn for a call that needs the GIL back to return.
std::shared_lock<std::shared_mutex> hold(Handle &h) {
  std::shared_lock lock(h.mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    py::gil_scoped_release nogil;
    lock.lock();
  }
  return lock;
}

// A shared hold on a live client for the duration of one call.
class Use {
 public:
  explicit Use(Handle &h) : lock_(hold(h)) {
    if (!h.c || h.closing.load(std::memory_order_relaxed)) raise_status(FW_ECLOSED, "floodwall: the client is closed");
    c = h.c;
  }
  fw_client *c;

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

// Runs f with the GIL released when the store may block on I/O; on the memory store the call is
// shorter than a GIL hand-off, and releasing it would only invite a convoy of threads.
template <class F>
int call(Handle &h, F &&f) {
  if (!h.release_gil) return f();
  py::gil_scoped_release nogil;
  return f();
}

// ---------------------------------------------------------------------------------------- decision

struct Decision {
  fw_decision d = FW_DECISION_INIT;
  std::shared_ptr<Handle> h;  // for the formatter and for release
};

py::object limiter_or_none(fw_limiter l) {
  if (l == FW_LIMITER_NONE) return py::none();
  return py::str(fw_limiter_name(l));
}

// fw_format_headers gives "Name: value\r\n" lines in a fixed order; a dict keeps that order.
py::dict headers_of(const Decision &dec) {
  fw_buf buf = FW_BUF_INIT;
  {
    Use use(*dec.h);
    check(fw_format_headers(use.c, &dec.d, &buf));
  }
  py::dict out;
  std::string_view text(buf.ptr ? buf.ptr : "", buf.size);
  while (!text.empty()) {
    size_t eol = text.find("\r\n");
    std::string_view line = text.substr(0, eol);
    size_t colon = line.find(": ");
    if (colon != std::string_view::npos)
      out[py::str(line.data(), colon)] = py::str(line.data() + colon + 2, line.size() - colon - 2);
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 2);
  }
  fw_buf_dispose(&buf);
  return out;
}

py::str body_of(const Decision &dec) {
  fw_buf buf = FW_BUF_INIT;
  {
    Use use(*dec.h);
    check(fw_format_body(use.c, &dec.d, &buf));
  }
  py::str out(buf.ptr ? buf.ptr : "", buf.size);
  fw_buf_dispose(&buf);
  return out;
}

void release_ticket(Handle &h, fw_ticket t) {
  if (t == 0) return;
  auto lock = hold(h);
  if (!h.c) return;  // a closed client holds nothing any more
  fw_client *c = h.c;
  call(h, [&] { return fw_release(c, t); });
}

py::object wrap(fw_decision d, std::shared_ptr<Handle> h) {
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

fw_request to_request(py::handle tenant, py::handle route, py::handle method, py::handle cost, py::handle critical,
                      py::handle sandbox) {
  fw_request rq = FW_REQUEST_INIT;
  if (PyBytes_Check(tenant.ptr())) {
    rq.tenant = PyBytes_AS_STRING(tenant.ptr());
    rq.tenant_len = static_cast<size_t>(PyBytes_GET_SIZE(tenant.ptr()));
  } else if (PyUnicode_Check(tenant.ptr())) {
    Py_ssize_t n = 0;
    rq.tenant = PyUnicode_AsUTF8AndSize(tenant.ptr(), &n);  // a lone surrogate raises UnicodeEncodeError
    if (!rq.tenant) throw py::error_already_set();
    rq.tenant_len = static_cast<size_t>(n);
  } else {
    throw py::type_error("tenant: must be str or bytes");
  }
  rq.route = route.is_none() ? nullptr : c_string(route, "route");
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
  return rq;
}

// ---------------------------------------------------------------------------------------- async

struct Completion {
  uint64_t token;
  int status;
  std::string message;
  fw_decision d;
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

struct Pending {
  std::shared_ptr<CompletionQueue> queue;
  uint64_t token;
  Handle *handle;  // alive until done_pending(): the client is not freed while admits are pending
};

// The memory store (and a bad request) calls back inline, before fw_admit_async returns: the result is
// then handed straight back to the caller instead of taking a trip through the loop.
thread_local Pending *tl_submitting = nullptr;
thread_local bool tl_inline = false;
thread_local Completion tl_result;

void on_admitted(void *payload, int status, const fw_decision *d) noexcept {
  auto *p = static_cast<Pending *>(payload);
  Handle *h = p->handle;
  try {
    Completion c{p->token, status, status ? message_for(status) : std::string(), *d};
    if (p == tl_submitting) {
      tl_inline = true;
      tl_result = std::move(c);
      h->done_pending();
      return;  // the submitter owns p
    }
    p->queue->push(std::move(c));
  } catch (...) {
    // Out of memory on the I/O thread: nothing can be reported; the admit's ticket heals after ttl_s.
  }
  delete p;
  h->done_pending();
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

std::shared_ptr<Handle> client_new(const std::string &policy_json, bool release_gil) {
  auto h = std::make_shared<Handle>();
  h->release_gil = release_gil;
  int rc;
  {
    py::gil_scoped_release nogil;  // a Redis store connects here
    rc = fw_client_new(&h->c, policy_json.c_str());
  }
  check(rc);
  return h;
}

void client_close(Handle &h) {
  h.closing.store(true);
  py::gil_scoped_release nogil;  // waits for pending admits and joins the I/O thread: neither needs the GIL
  std::unique_lock lock(h.mu);
  h.free_client();
}

py::object client_admit(Handle &h, py::handle tenant, py::handle route, py::handle method, py::handle cost,
                        py::handle critical, py::handle sandbox) {
  fw_request rq = to_request(tenant, route, method, cost, critical, sandbox);
  fw_decision d = FW_DECISION_INIT;
  int rc;
  {
    Use use(h);
    rc = call(h, [&] { return fw_admit(use.c, &rq, &d); });
  }
  check(rc);
  return wrap(d, h.shared_from_this());
}

// Returns the Decision when it was made inline, else None: it will come out of queue.drain() later.
py::object client_admit_async(Handle &h, const std::shared_ptr<CompletionQueue> &queue, uint64_t token,
                              py::handle tenant, py::handle route, py::handle method, py::handle cost,
                              py::handle critical, py::handle sandbox) {
  fw_request rq = to_request(tenant, route, method, cost, critical, sandbox);
  int rc;
  bool was_inline;
  Pending *p;
  {
    Use use(h);
    p = new Pending{queue, token, &h};
    h.add_pending();
    tl_submitting = p;
    tl_inline = false;
    rc = fw_admit_async(use.c, &rq, on_admitted, p);  // only enqueues on Redis: no need to drop the GIL
    tl_submitting = nullptr;
    was_inline = tl_inline;
  }
  if (rc != FW_OK) {
    delete p;  // the callback is not called
    h.done_pending();
    check(rc);
  }
  if (!was_inline) return py::none();  // p belongs to the callback now
  delete p;
  Completion c = std::move(tl_result);
  if (c.status != FW_OK) raise_status(c.status, c.message);
  return wrap(c.d, h.shared_from_this());
}

py::list client_drain(Handle &h, CompletionQueue &queue) {
  std::vector<Completion> done = queue.take();
  py::list out;
  auto self = h.shared_from_this();
  for (auto &c : done) out.append(py::make_tuple(c.token, result_of(c, self)));
  return out;
}

fw_limiter limiter_of(py::handle name) {
  fw_limiter l;
  check(fw_limiter_from_name(&l, c_string(name, "limiter")));
  return l;
}

py::str buf_call(Handle &h, int (*f)(fw_client *, fw_buf *)) {
  fw_buf buf = FW_BUF_INIT;
  {
    Use use(h);
    check(f(use.c, &buf));
  }
  py::str out(buf.ptr ? buf.ptr : "", buf.size);
  fw_buf_dispose(&buf);
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
                                       "A bad argument (empty tenant, cost above the burst, unknown name).");
  StoreError = new_exception("floodwall.StoreError", value_bases.ptr(),
                             "The store could not be set up (unparseable URL, unknown scheme).");
  ClosedError = new_exception("floodwall.ClosedError", Error, "The client is closed or shutting down.");
  m.attr("Error") = py::handle(Error);
  m.attr("PolicyError") = py::handle(PolicyError);
  m.attr("InvalidArgumentError") = py::handle(InvalidArgumentError);
  m.attr("StoreError") = py::handle(StoreError);
  m.attr("ClosedError") = py::handle(ClosedError);

  m.def(
      "version", [] { return std::string(fw_version()); }, "The C library's runtime version.");

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
      .def_property_readonly("concurrency_limit", [](const Decision &x) { return x.d.concurrency_limit; })
      .def_property_readonly("concurrency_remaining", [](const Decision &x) { return x.d.concurrency_remaining; })
      .def_property_readonly("ticket", [](const Decision &x) { return x.d.ticket; })
      .def_property_readonly("headers", &headers_of)
      .def_property_readonly("body", &body_of)
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
        if (x.d.limit) s += " remaining=" + std::to_string(x.d.remaining) + "/" + std::to_string(x.d.limit);
        if (x.d.failed_open) s += " failed_open=True";
        if (x.d.degraded) s += " degraded=True";
        return s + ">";
      });

  py::class_<CompletionQueue, std::shared_ptr<CompletionQueue>>(m, "CompletionQueue")
      .def(py::init<>())
      .def("fileno", &CompletionQueue::fileno);

  py::class_<Handle, std::shared_ptr<Handle>>(m, "Client")
      .def(py::init(&client_new), py::arg("policy_json"), py::arg("release_gil") = true)
      .def("close", &client_close)
      .def_property_readonly("closed",
                             [](Handle &h) {
                               auto lock = hold(h);
                               return h.c == nullptr;
                             })
      .def("admit", &client_admit)
      .def("admit_async", &client_admit_async)
      .def("drain", &client_drain)
      .def("release", [](Handle &h, fw_ticket t) { release_ticket(h, t); })
      .def("set_mode",
           [](Handle &h, py::handle limiter, py::handle mode) {
             fw_limiter l = limiter_of(limiter);
             fw_mode md;
             check(fw_mode_from_name(&md, c_string(mode, "mode")));
             Use use(h);
             check(fw_set_mode(use.c, l, md));
           })
      .def("get_mode",
           [](Handle &h, py::handle limiter) {
             fw_limiter l = limiter_of(limiter);
             fw_mode md;
             Use use(h);
             check(fw_get_mode(use.c, l, &md));
             return std::string(fw_mode_name(md));
           })
      .def("report_utilization",
           [](Handle &h, double u) {
             Use use(h);
             check(fw_report_utilization(use.c, u));
           })
      .def("shedding_amount",
           [](Handle &h) {
             double x = 0;
             Use use(h);
             check(fw_shedding_amount(use.c, &x));
             return x;
           })
      .def("metrics_json", [](Handle &h) { return buf_call(h, fw_metrics_json); })
      .def("metrics_prometheus", [](Handle &h) { return buf_call(h, fw_metrics_prometheus); });
}
