#include "stores/redis/connection.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/errors.hpp"

namespace floodwall {

namespace {

// A non-blocking, close-on-exec socket for the address. Where socket() takes no such flags (macOS), they are
// set after it, and SO_NOSIGPIPE stands in for send's MSG_NOSIGNAL (util/platform.hpp makes that flag 0 there).
int nonblocking_socket(const addrinfo *a) {
#ifdef SOCK_NONBLOCK
  return socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
#else
  int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
  if (fd < 0) return fd;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
#ifdef SO_NOSIGPIPE
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
  return fd;
#endif
}

int64_t steady_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// OpenSSL's error queue as one line (the first error, which names the cause), and the queue emptied.
std::string ssl_errors() {
  unsigned long e = ERR_get_error();
  std::string out;
  if (e) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out = buf;
  }
  ERR_clear_error();
  return out.empty() ? "the TLS session failed" : out;
}

// The server's alert says it refused our certificate (or wanted one we did not send): the deployment is
// wrong, not down.
bool refused_by_peer(const std::string &why) {
  return why.find("alert") != std::string::npos &&
         (why.find("certificate") != std::string::npos || why.find("unknown ca") != std::string::npos);
}

bool is_ip_literal(const std::string &host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

// ------------------------------------------------------------------------------------------- TLS

TlsContext::TlsContext(const RedisOptions::Tls &tls, const std::string &url_host)
    : server_name_(tls.server_name.empty() ? url_host : tls.server_name),
      configured_name_(!tls.server_name.empty()),
      verify_(!tls.insecure) {
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (!ctx_) throw StoreError("store: OpenSSL could not make a TLS context (" + ssl_errors() + ")");
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  auto refuse = [&](const char *field, const std::string &path) {
    std::string why = ssl_errors();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw StoreError(std::string(field) + ": cannot use \"" + path + "\" (" + why + ")");
  };
  if (verify_) {
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (!tls.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx_, tls.ca_file.c_str(), nullptr) != 1)
        refuse("redis.tls.ca_file", tls.ca_file);
    } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
      refuse("redis.tls.ca_file", "the system's CA bundle");
    }
  } else {
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx_, tls.cert_file.c_str()) != 1)
      refuse("redis.tls.cert_file", tls.cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      refuse("redis.tls.key_file", tls.key_file);
    if (SSL_CTX_check_private_key(ctx_) != 1) refuse("redis.tls.key_file", tls.key_file + "\" for \"" + tls.cert_file);
  }
}

TlsContext::~TlsContext() {
  if (ctx_) SSL_CTX_free(ctx_);
}

// ------------------------------------------------------------------------------------ connection

Connection::Connection() = default;

Connection::~Connection() {
  close();
}

void Connection::close() {
  if (ssl_) SSL_free(ssl_);  // frees its BIOs
  ssl_ = nullptr;
  rbio_ = wbio_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (reader_) redisReaderFree(reader_);
  reader_ = nullptr;
  state_ = State::closed;
  out_.clear();
  out_pos_ = 0;
  barrier_ = std::string::npos;
  wire_.clear();
  wire_pos_ = 0;
  want_read_for_write_ = false;
}

void Connection::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Connection::Step Connection::fail(FailReason why, std::string what) {
  failure_ = why;
  error_ = std::move(what);
  return Step::failed;
}

bool Connection::start(const RedisEndpoint &to, const TlsContext *tls) {
  close();
  failure_ = FailReason::none;
  peer_ = to.host + ":" + std::to_string(to.port);
  error_.clear();
  tls_ = tls;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  std::string port = std::to_string(to.port);
  int rc = getaddrinfo(to.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    fail(FailReason::connection, "cannot resolve " + to.host + " (" + gai_strerror(rc) + ")");
    return false;
  }
  int err = 0;
  for (addrinfo *a = res; a && fd_ < 0; a = a->ai_next) {
    int fd = nonblocking_socket(a);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
      fd_ = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  freeaddrinfo(res);
  if (fd_ < 0) {
    fail(FailReason::connection, "cannot connect to " + to.host + ":" + port + " (" + std::strerror(err) + ")");
    return false;
  }
  reader_ = redisReaderCreate();
  state_ = State::connecting;
  if (tls_) {
    ssl_ = SSL_new(tls_->ctx());
    rbio_ = BIO_new(BIO_s_mem());
    wbio_ = BIO_new(BIO_s_mem());
    if (!ssl_ || !rbio_ || !wbio_) {
      if (rbio_ && !ssl_) BIO_free(rbio_);
      if (wbio_ && !ssl_) BIO_free(wbio_);
      fail(FailReason::error, "OpenSSL could not make a session (" + ssl_errors() + ")");
      close();
      return false;
    }
    BIO_set_mem_eof_return(rbio_, -1);  // no bytes yet is "want read", not the end
    SSL_set_bio(ssl_, rbio_, wbio_);
    SSL_set_connect_state(ssl_);
    name_ = tls_->name_for(to.host);
    const std::string &name = name_;
    if (!is_ip_literal(name)) SSL_set_tlsext_host_name(ssl_, name.c_str());  // SNI names hosts, not addresses
    if (tls_->verify()) {
      X509_VERIFY_PARAM *param = SSL_get0_param(ssl_);
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      int ok = is_ip_literal(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                   : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
      if (ok != 1) {
        fail(FailReason::config, "cannot verify the server name \"" + name + "\"");
        close();
        return false;
      }
    }
  }
  return true;
}

Connection::Step Connection::advance() {
  if (state_ == State::connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return Step::again;
    if (err) {  // "connection refused": strerror's words, lower-case, as they read inside a sentence
      std::string why = std::strerror(err);
      if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
      return fail(FailReason::connection, why);
    }
    // Connected, or still connecting: a zero-byte peek would not tell; poll said writable, which is it.
    state_ = ssl_ ? State::handshaking : State::open;
  }
  if (state_ == State::handshaking) return handshake();
  return state_ == State::open ? Step::done : Step::failed;
}

Connection::Step Connection::handshake() {
  for (;;) {
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl_);
    if (!drain_tls_output() || !send_wire()) return fail(FailReason::connection, "the TLS handshake was cut off");
    if (rc == 1) {
      state_ = State::open;
      return Step::done;
    }
    int e = SSL_get_error(ssl_, rc);
    if (e == SSL_ERROR_WANT_READ) {
      bool eof = false;
      size_t before = static_cast<size_t>(BIO_pending(rbio_));
      if (!recv_into(eof)) return fail(FailReason::connection, "the TLS handshake was cut off");
      if (eof) return fail(FailReason::connection, "the server closed the connection during the TLS handshake");
      if (static_cast<size_t>(BIO_pending(rbio_)) == before) return Step::again;  // wait for the server
      continue;
    }
    if (e == SSL_ERROR_WANT_WRITE) return Step::again;
    long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK)
      return fail(FailReason::config, std::string("TLS verification failed: ") + X509_verify_cert_error_string(verify) +
                                          " (server name \"" + name_ + "\")");
    std::string why = ssl_errors();
    return fail(refused_by_peer(why) ? FailReason::config : FailReason::connection, "TLS handshake failed: " + why);
  }
}

short Connection::events(bool flush) const {
  if (state_ == State::connecting) return POLLOUT;
  short ev = POLLIN;
  if (wire_pos_ < wire_.size() || (flush && has_output())) ev |= POLLOUT;
  return ev;
}

void Connection::append(std::string_view cmd) {
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
    if (barrier_ != std::string::npos) barrier_ = 0;
  }
  out_.append(cmd);
}

bool Connection::has_output() const {
  size_t end = barrier_ == std::string::npos ? out_.size() : barrier_;
  return out_pos_ < end || wire_pos_ < wire_.size();
}

bool Connection::drain_tls_output() {
  char buf[16384];
  for (;;) {
    int n = BIO_read(wbio_, buf, sizeof buf);
    if (n <= 0) return true;
    if (wire_pos_ == wire_.size()) {
      wire_.clear();
      wire_pos_ = 0;
    }
    wire_.append(buf, static_cast<size_t>(n));
  }
}

bool Connection::send_wire() {
  while (wire_pos_ < wire_.size()) {
    ssize_t n = ::send(fd_, wire_.data() + wire_pos_, wire_.size() - wire_pos_, MSG_NOSIGNAL);
    if (n > 0) {
      wire_pos_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  wire_.clear();
  wire_pos_ = 0;
  return true;
}

bool Connection::write(bool &all) {
  all = false;
  size_t end = barrier_ == std::string::npos ? out_.size() : barrier_;
  if (!ssl_) {
    while (out_pos_ < end) {
      ssize_t n = ::send(fd_, out_.data() + out_pos_, end - out_pos_, MSG_NOSIGNAL);
      if (n > 0) {
        out_pos_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return fail(FailReason::connection, std::string("write failed (") + std::strerror(errno) + ")"), false;
    }
    all = true;
    return true;
  }
  // TLS: encrypt what is writable (the memory BIO takes it all), then send the ciphertext.
  while (out_pos_ < end && !want_read_for_write_) {
    ERR_clear_error();
    int n = SSL_write(ssl_, out_.data() + out_pos_, static_cast<int>(std::min<size_t>(end - out_pos_, 1 << 20)));
    if (n > 0) {
      out_pos_ += static_cast<size_t>(n);
      continue;
    }
    int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ) {
      want_read_for_write_ = true;  // a renegotiation: go on once the peer's bytes came (read())
      break;
    }
    return fail(FailReason::connection, "TLS write failed: " + ssl_errors()), false;
  }
  if (!drain_tls_output() || !send_wire()) {
    // The server may have closed after an alert (TLS 1.3 refuses a client certificate only after our
    // handshake ended): read it, so that the failure names it.
    if (read_alert()) return false;
    return fail(FailReason::connection, std::string("write failed (") + std::strerror(errno) + ")"), false;
  }
  all = out_pos_ >= end && wire_pos_ >= wire_.size();
  return true;
}

bool Connection::recv_into(bool &eof) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      if (ssl_) {
        if (BIO_write(rbio_, buf, static_cast<int>(n)) != n) return false;
      } else if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
        return false;
      }
      if (static_cast<size_t>(n) < sizeof buf) return true;
      continue;
    }
    if (n == 0) {
      eof = true;
      return true;
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

bool Connection::read_alert() {
  bool eof = false;
  recv_into(eof);
  char buf[4096];
  ERR_clear_error();
  int n = SSL_read(ssl_, buf, sizeof buf);
  if (n > 0 || SSL_get_error(ssl_, n) != SSL_ERROR_SSL) return false;
  std::string why = ssl_errors();
  if (!refused_by_peer(why)) return false;
  fail(FailReason::config, "TLS read failed: " + why);
  return true;
}

bool Connection::read() {
  bool eof = false;
  if (!recv_into(eof)) {
    if (ssl_ && read_alert()) return false;
    return fail(FailReason::connection, std::string("read failed (") + std::strerror(errno) + ")"), false;
  }
  if (ssl_) {
    char buf[16384];
    for (;;) {
      ERR_clear_error();
      int n = SSL_read(ssl_, buf, sizeof buf);
      if (n > 0) {
        if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK)
          return fail(FailReason::error, "the reply reader failed"), false;
        continue;
      }
      int e = SSL_get_error(ssl_, n);
      if (e == SSL_ERROR_WANT_READ) break;
      if (e == SSL_ERROR_ZERO_RETURN) {
        eof = true;
        break;
      }
      std::string why = ssl_errors();
      return fail(refused_by_peer(why) ? FailReason::config : FailReason::connection, "TLS read failed: " + why), false;
    }
    want_read_for_write_ = false;
    // Reading may have made OpenSSL answer something (a key update): send it.
    if (!drain_tls_output() || !send_wire()) return fail(FailReason::connection, "write failed"), false;
  }
  if (eof) return fail(FailReason::connection, "the server closed the connection"), false;
  return true;
}

int Connection::next_reply(redisReply **out) {
  void *reply = nullptr;
  if (!reader_ || redisReaderGetReply(reader_, &reply) != REDIS_OK) {
    fail(FailReason::error, "a reply that is not RESP");
    return -1;
  }
  *out = static_cast<redisReply *>(reply);
  return reply ? 1 : 0;
}

// --------------------------------------------------------------------------------------- blocking

bool Connection::wait(short ev, int64_t deadline_us) {
  for (;;) {
    // Past the deadline, one look without waiting: a thread that was not scheduled until after it (a
    // starved box) must not take a reply already there for a silent Redis.
    int64_t left = deadline_us - steady_us();
    pollfd p{fd_, ev, 0};
    int rc = poll(&p, 1, left > 0 ? static_cast<int>((left + 999) / 1000) : 0);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
    if (left <= 0) return false;
  }
}

bool Connection::connect_blocking(const RedisEndpoint &to, const TlsContext *tls, int64_t deadline_us) {
  if (!start(to, tls)) return false;
  for (;;) {
    if (!wait(events(false), deadline_us)) {
      fail(FailReason::timeout, "connect timed out");
      close();
      return false;
    }
    Step s = advance();
    if (s == Step::done) return true;
    if (s == Step::failed) {
      close();
      return false;
    }
  }
}

bool Connection::send_blocking(std::string_view cmd, int64_t deadline_us) {
  append(cmd);
  for (;;) {
    bool all = false;
    if (!write(all)) return false;
    if (all) return true;
    if (!wait(POLLOUT | POLLIN, deadline_us)) {
      fail(FailReason::timeout, "no reply in time");
      return false;
    }
  }
}

redisReply *Connection::roundtrip(std::string_view cmd, int64_t deadline_us) {
  if (!send_blocking(cmd, deadline_us)) return nullptr;
  return next_blocking(deadline_us);
}

redisReply *Connection::next_blocking(int64_t deadline_us) {
  for (;;) {
    redisReply *r = nullptr;
    int got = next_reply(&r);
    if (got < 0) return fail(FailReason::error, "the reply reader failed"), nullptr;
    if (got > 0) return r;
    if (!wait(POLLIN, deadline_us)) {
      fail(FailReason::timeout, "no reply in time");
      return nullptr;
    }
    if (!read()) return nullptr;
  }
}

}  // namespace floodwall
