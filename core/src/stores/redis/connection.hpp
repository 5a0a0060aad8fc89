// One connection to Redis on the store's own non-blocking socket, plain TCP or TLS (OpenSSL), with
// hiredis kept as the RESP reader (redisReader). The I/O thread drives it from poll(): it asks
// events() what to wait for and calls advance() / write() / read() when the socket is ready; the
// direct path (a blocking caller's own connection) uses the blocking helpers at the end, with deadlines.
//
// TLS goes through memory BIOs: OpenSSL encrypts into a buffer and this class sends it with
// send(MSG_NOSIGNAL), and what recv() reads is handed to OpenSSL. So a broken connection is an error,
// never a SIGPIPE in the application, and TLS and TCP share one socket path.
//
// A barrier holds commands back: what is appended after set_barrier() is not written until
// clear_barrier(). The store writes a new connection's setup (AUTH, SELECT, SCRIPT LOAD) first and holds
// every other call until Redis accepted it, so that no call runs as the default user behind a refused AUTH.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "policy/policy.hpp"
#include "stores/redis/url.hpp"
#include "stores/store.hpp"
#include "util/platform.hpp"  // POLLRDHUP, MSG_NOSIGNAL and ppoll where Linux's are missing

struct redisReply;
struct redisReader;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace floodwall {

// One per store: the CA bundle, the client certificate and what is verified. Throws StoreError naming
// the policy field when a file cannot be used (a PEM that does not parse, a key that does not match).
class TlsContext {
 public:
  TlsContext(const RedisOptions::Tls &tls, const std::string &url_host);
  ~TlsContext();
  TlsContext(const TlsContext &) = delete;
  TlsContext &operator=(const TlsContext &) = delete;

  SSL_CTX *ctx() const { return ctx_; }
  const std::string &server_name() const { return server_name_; }
  // The name sent and verified for a connection to `host`: redis.tls.server_name when set, else the host
  // itself (a sentinel's, or the master's it named).
  std::string name_for(const std::string &host) const { return configured_name_ ? server_name_ : host; }
  bool verify() const { return verify_; }

 private:
  SSL_CTX *ctx_ = nullptr;
  std::string server_name_;
  bool configured_name_ = false;
  bool verify_ = true;
};

class Connection {
 public:
  Connection();
  ~Connection();
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;

  enum class Step : uint8_t { done, again, failed };

  // Starts a non-blocking connect (the name is resolved here, blocking, as hiredis did). False when no
  // socket could be made; failure() and error() say why.
  bool start(const RedisEndpoint &to, const TlsContext *tls);
  // The TCP connect and then the TLS handshake: done once commands can be written.
  Step advance();
  bool open() const { return fd_ >= 0 && state_ == State::open; }
  int fd() const { return fd_; }
  // What poll() should wait for; `flush` when the caller wants to write what it appended.
  short events(bool flush) const;
  void close();
  // In a forked child: the socket is closed and nothing else touched (this object is then leaked).
  void abandon();
  // Why the last step failed: connection, timeout (set by the caller), or config (TLS verification, a
  // certificate the server refused). error() is the text, with no secret in it.
  FailReason failure() const { return failure_; }
  // "host:port" of the server last started: what a message names.
  const std::string &peer() const { return peer_; }
  const std::string &error() const { return error_; }

  void append(std::string_view cmd);
  void set_barrier() { barrier_ = out_.size(); }
  void clear_barrier() { barrier_ = std::string::npos; }
  // Bytes appended and not yet written (up to the barrier), or encrypted and not yet sent.
  bool has_output() const;
  // Writes what it can; false on an error. `all` says whether nothing writable is left.
  bool write(bool &all);
  // Reads what the socket holds into the reader; false on an error or the peer's close.
  bool read();
  // The next whole reply read: 1 with *out set, 0 when none is complete yet, -1 on a protocol error.
  int next_reply(redisReply **out);

  // Blocking use, each within its own deadline on the steady clock (us). connect_blocking is start()
  // and advance() until done; roundtrip writes one command and returns its reply, or null with
  // failure() timeout / connection / error.
  bool connect_blocking(const RedisEndpoint &to, const TlsContext *tls, int64_t deadline_us);
  redisReply *roundtrip(std::string_view cmd, int64_t deadline_us);
  // roundtrip's first half: the command written (false with failure() when it could not be in time).
  bool send_blocking(std::string_view cmd, int64_t deadline_us);
  // The next reply the server sends (a subscription's message), or null at the deadline (failure()
  // timeout) or on an error.
  redisReply *next_blocking(int64_t deadline_us);

 private:
  enum class State : uint8_t { closed, connecting, handshaking, open };
  Step fail(FailReason why, std::string what);
  Step handshake();
  bool send_wire();           // sends wire_ (the bytes for the socket)
  bool recv_into(bool &eof);  // reads the socket: into the reader (TCP) or into OpenSSL (TLS)
  bool drain_tls_output();    // what OpenSSL wrote, into wire_
  bool read_alert();          // TLS: an alert the server sent before it closed: true (config) if it refused us
  bool wait(short events, int64_t deadline_us);

  int fd_ = -1;
  State state_ = State::closed;
  FailReason failure_ = FailReason::none;
  std::string error_;
  std::string out_;  // commands appended, not yet written (TCP) or encrypted (TLS)
  size_t out_pos_ = 0;
  size_t barrier_ = std::string::npos;
  std::string wire_;  // TLS: ciphertext not yet sent
  size_t wire_pos_ = 0;
  bool want_read_for_write_ = false;  // TLS: OpenSSL needs the peer's bytes before it can go on
  redisReader *reader_ = nullptr;
  SSL *ssl_ = nullptr;
  BIO *rbio_ = nullptr, *wbio_ = nullptr;  // owned by ssl_
  const TlsContext *tls_ = nullptr;
  std::string name_;  // TLS: the server name sent and verified
  std::string peer_;
};

}  // namespace floodwall
