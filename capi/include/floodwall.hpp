// floodwall.hpp - a header-only C++17 RAII wrapper over the C ABI (floodwall.h).
//
//   floodwall::Client fw(R"({"request_rate": {"rate": 100, "burst": 500}})");
//   floodwall::Admission a = fw.admit("tenant-42", "/v1/routes", "POST", 3);
//   if (!a.allowed()) send(a.status(), a.headers(), a.body());
//   // a's destructor releases its ticket; a.release() does it earlier.
//
// The ABI itself stays RAII-free (tickets are plain values); this header adds ownership on top.
#ifndef FLOODWALL_HPP
#define FLOODWALL_HPP

#include <floodwall.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace floodwall {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

inline void check(int rc) {
  if (rc == FW_OK) return;
  const fw_error *e = fw_error_last();
  throw Error(rc, e ? e->message : "floodwall error");
}

inline std::string take(fw_buf &b) {
  std::string s(b.ptr ? b.ptr : "", b.size);
  fw_buf_dispose(&b);
  return s;
}

class Client;

// One decision and the ticket it holds; move-only, releases on destruction.
class Admission {
 public:
  Admission() = default;
  Admission(fw_client *c, const fw_decision &d) : c_(c), d_(d) {}
  Admission(Admission &&o) noexcept : c_(o.c_), d_(o.d_) { o.d_.ticket = 0; }
  Admission &operator=(Admission &&o) noexcept {
    if (this != &o) {
      release();
      c_ = o.c_;
      d_ = o.d_;
      o.d_.ticket = 0;
    }
    return *this;
  }
  Admission(const Admission &) = delete;
  Admission &operator=(const Admission &) = delete;
  ~Admission() { release(); }

  void release() noexcept {
    if (c_ && d_.ticket) fw_release(c_, d_.ticket);
    d_.ticket = 0;
  }
  bool allowed() const { return d_.allowed != 0; }
  int status() const { return d_.status; }
  fw_limiter limiter() const { return d_.limiter; }
  const fw_decision &decision() const { return d_; }
  std::string headers() const {
    fw_buf b = FW_BUF_INIT;
    check(fw_format_headers(c_, &d_, &b));
    return take(b);
  }
  std::string body() const {
    fw_buf b = FW_BUF_INIT;
    check(fw_format_body(c_, &d_, &b));
    return take(b);
  }

 private:
  fw_client *c_ = nullptr;
  fw_decision d_ = FW_DECISION_INIT;
};

class Client {
 public:
  explicit Client(const std::string &policy_json) { check(fw_client_new(&c_, policy_json.c_str())); }
  Client(Client &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Client &operator=(Client &&o) noexcept {
    if (this != &o) {
      fw_client_free(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  Client(const Client &) = delete;
  Client &operator=(const Client &) = delete;
  ~Client() { fw_client_free(c_); }

  Admission admit(std::string_view tenant, const char *route = nullptr, const char *method = "GET", uint64_t cost = 1,
                  bool critical = false, bool sandbox = false) {
    fw_request r = FW_REQUEST_INIT;
    r.tenant = tenant.data();
    r.tenant_len = tenant.size();
    r.route = route;
    r.method = method;
    r.cost = cost;
    r.critical = critical;
    r.sandbox = sandbox;
    fw_decision d = FW_DECISION_INIT;
    check(fw_admit(c_, &r, &d));
    return Admission(c_, d);
  }
  void set_mode(fw_limiter l, fw_mode m) { check(fw_set_mode(c_, l, m)); }
  void report_utilization(double u) { check(fw_report_utilization(c_, u)); }
  std::string metrics_json() {
    fw_buf b = FW_BUF_INIT;
    check(fw_metrics_json(c_, &b));
    return take(b);
  }
  std::string prometheus() {
    fw_buf b = FW_BUF_INIT;
    check(fw_metrics_prometheus(c_, &b));
    return take(b);
  }
  fw_client *get() const noexcept { return c_; }

 private:
  fw_client *c_ = nullptr;
};

}  // namespace floodwall

#endif  // FLOODWALL_HPP
