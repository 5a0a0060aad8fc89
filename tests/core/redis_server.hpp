// A throwaway redis-server on a free port, started and stopped by the test that needs it. A missing
// redis-server fails the test; it never skips. Also the helpers every fixture uses for its own admin
// commands: free_port(), and command_at() (command_at_auth(), commands_at_auth() when a password, TLS or
// one connection for several commands is needed; see NodeAccess and AdminLink).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace floodwall::testing {

// A free port for a server the test starts: random below the kernel's ephemeral range (32768-60999 on
// Linux), checked by binding it. A port bind(0) hands out is one that any outgoing connection of the machine
// may take as its local port before the server binds it: a cluster node's bus port was taken so once, in
// make test's lanes ("Address already in use", the node aborted). Seeded per call, so that forked children
// do not draw their parent's sequence. bind(0)'s port only when 2000 draws found none.
inline bool port_is_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// A port drawn by any test process of this machine in the last ten minutes is not drawn again, free or
// not: a cluster remembers the address of a node killed a moment ago and keeps calling it, and a node
// of another test's cluster started there joined that cluster (redis-cli --cluster create then found it
// "not empty", once in make test). Each draw leaves a file named after the port in a directory every test
// process shares; one older than that is taken as free. Where the directory cannot be written, every
// port counts as undrawn.
inline bool claim_port(int port) {
  const char *tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/floodwall-test-ports";
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) return true;
  std::string path = dir + "/" + std::to_string(port);
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0666);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    if (errno != EEXIST) return true;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || time(nullptr) - st.st_mtime < 600) return false;
    unlink(path.c_str());  // drawn long ago: drawn again (a race with another process's unlink is harmless)
  }
  return false;
}

inline int free_port() {
  std::random_device seed;
  std::mt19937 rng(seed() ^ static_cast<unsigned>(getpid()));
  for (int attempt = 0; attempt < 2000; attempt++) {
    int port = 20000 + static_cast<int>(rng() % 12000);
    if (port_is_free(port) && claim_port(port)) return port;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Waits for each forked child of a test and expects it to have exited with status 0 (a child reports a
// failure by its exit status: its gtest assertions are not the parent's).
inline void expect_children_exit_ok(const std::vector<pid_t> &kids) {
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << k << ": status " << status;
  }
}

// A connection of its own to 127.0.0.1:port, with `timeout_s` for connecting and for every reply, after
// AUTH with `password` when it is not empty. nullptr when there is none, `error` (when given) then saying
// why: "<no connection>", or "<AUTH: " + the server's error (or hiredis') + ">".
inline redisContext *connect_at(int port, const std::string &password, double timeout_s = 1.0,
                                std::string *error = nullptr) {
  timeval tv{static_cast<time_t>(timeout_s),
             static_cast<suseconds_t>((timeout_s - static_cast<time_t>(timeout_s)) * 1e6)};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    if (error) *error = "<no connection>";
    return nullptr;
  }
  redisSetTimeout(c, tv);
  if (password.empty()) return c;
  auto *r = static_cast<redisReply *>(redisCommand(c, "AUTH %b", password.data(), password.size()));
  bool ok = r && r->type == REDIS_REPLY_STATUS;
  if (!ok && error) *error = "<AUTH: " + (r ? std::string(r->str ? r->str : "", r->len) : std::string(c->errstr)) + ">";
  if (r) freeReplyObject(r);
  if (ok) return c;
  redisFree(c);
  return nullptr;
}

// A reply as text: an integer as its digits, nil as "<nil>", an array as its elements joined by spaces (an
// element that is itself an array as nothing), anything else (status, error, string) as its text.
inline std::string reply_text(const redisReply *r) {
  std::string out;
  if (r->type == REDIS_REPLY_INTEGER) {
    out = std::to_string(r->integer);
  } else if (r->type == REDIS_REPLY_NIL) {
    out = "<nil>";
  } else if (r->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < r->elements; i++) {
      if (i) out += ' ';
      const redisReply *e = r->element[i];
      out += e->type == REDIS_REPLY_INTEGER ? std::to_string(e->integer) : std::string(e->str ? e->str : "", e->len);
    }
  } else {
    out = std::string(r->str ? r->str : "", r->len);
  }
  return out;
}

// How the harness' own connections reach a node: the password sent with AUTH (none when empty) and, for a
// node that speaks only TLS (redis-server --port 0 --tls-port ...), the CA its certificate must chain to
// (TLS when tls_ca is not empty; the certificate must also name 127.0.0.1 among its IP SANs, as the store
// checks it) and a client certificate to show (when tls_cert is not empty; a node with tls-auth-clients yes
// refuses the handshake without one). A password alone converts to it, so callers that pass a password (or
// {} or "") are unchanged.
struct NodeAccess {
  std::string password;
  std::string tls_ca;
  std::string tls_cert, tls_key;

  NodeAccess() = default;
  NodeAccess(std::string pw) : password(std::move(pw)) {}  // implicit: a password is an access
  NodeAccess(const char *pw) : password(pw ? pw : "") {}
  bool tls() const { return !tls_ca.empty(); }
};

// One connection of the harness' own to 127.0.0.1:port, plain (hiredis, see connect_at) or TLS (OpenSSL on a
// blocking socket, hiredis' reader for the replies: the Debian hiredis 0.14 has no TLS of its own), with
// `timeout_s` for connecting, the handshake and every reply, after AUTH when access has a password. When
// ok() is false, error() says why: "<no connection>", "<TLS: " + what OpenSSL said (the verification's
// reason when that failed) + ">", "<AUTH: " + the server's error + ">"; after a command got no reply,
// "<" + the error + ">" (and the connection is closed: every later command gets null too).
class AdminLink {
 public:
  AdminLink(int port, const NodeAccess &access, double timeout_s = 1.0) {
    if (!access.tls()) {
      plain_ = connect_at(port, access.password, timeout_s, &error_);
      return;
    }
    if (!open_tls(port, access, timeout_s)) {
      close_tls();
      return;
    }
    if (access.password.empty()) return;
    redisReply *r = command({"AUTH", access.password});
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok && r) error_ = "<AUTH: " + std::string(r->str ? r->str : "", r->len) + ">";
    if (!ok && !r) error_ = "<AUTH: " + error_.substr(1);
    if (r) freeReplyObject(r);
    if (!ok) close_tls();
  }
  ~AdminLink() {
    if (plain_) redisFree(plain_);
    close_tls();
  }
  AdminLink(const AdminLink &) = delete;
  AdminLink &operator=(const AdminLink &) = delete;

  bool ok() const { return plain_ || ssl_; }
  const std::string &error() const { return error_; }

  // One command (argv form, binary-safe): its reply (to free with freeReplyObject), or null.
  redisReply *command(const std::vector<std::string> &args) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (plain_) {
      auto *r =
          static_cast<redisReply *>(redisCommandArgv(plain_, static_cast<int>(argv.size()), argv.data(), lens.data()));
      if (!r) {
        error_ = std::string("<") + plain_->errstr + ">";
        redisFree(plain_);
        plain_ = nullptr;
      }
      return r;
    }
    if (!ssl_) return nullptr;
    char *cmd = nullptr;
    int len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    bool sent = len > 0 && write_all(cmd, static_cast<size_t>(len));
    if (cmd) redisFreeCommand(cmd);
    if (!sent) return fail_reply("write");
    for (;;) {
      void *reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
        error_ = std::string("<protocol error: ") + reader_->errstr + ">";
        close_tls();
        return nullptr;
      }
      if (reply) return static_cast<redisReply *>(reply);
      char buf[16384];
      errno = 0;
      int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) return fail_reply("read", n);
      redisReaderFeed(reader_, buf, static_cast<size_t>(n));
    }
  }

 private:
  bool open_tls(int port, const NodeAccess &access, double timeout_s) {
    error_ = "<no connection>";
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    timeval tv{static_cast<time_t>(timeout_s),
               static_cast<suseconds_t>((timeout_s - static_cast<time_t>(timeout_s)) * 1e6)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // also bounds connect() (Linux)
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) return false;
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (!ctx_) return tls_error("SSL_CTX_new");
    if (SSL_CTX_load_verify_locations(ctx_, access.tls_ca.c_str(), nullptr) != 1)
      return tls_error("cannot load the CA " + access.tls_ca);
    if (!access.tls_cert.empty() && (SSL_CTX_use_certificate_chain_file(ctx_, access.tls_cert.c_str()) != 1 ||
                                     SSL_CTX_use_PrivateKey_file(ctx_, access.tls_key.c_str(), SSL_FILETYPE_PEM) != 1))
      return tls_error("cannot load the client certificate " + access.tls_cert);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    if (!ssl_) return tls_error("SSL_new");
    // The node's own address, as the store verifies it (an IP SAN).
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), "127.0.0.1");
    SSL_set_fd(ssl_, fd_);
    ERR_clear_error();
    int rc = SSL_connect(ssl_);
    if (rc != 1) {
      long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) return tls_error(std::string("verification: ") + X509_verify_cert_error_string(verify));
      int err = SSL_get_error(ssl_, rc);
      if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        error_ = "<TLS: handshake: " + std::string(errno ? std::strerror(errno) : "connection closed") + ">";
        return false;
      }
      return tls_error("handshake");
    }
    reader_ = redisReaderCreate();
    if (!reader_) return tls_error("redisReaderCreate");
    error_.clear();
    return true;
  }
  bool tls_error(const std::string &what) {
    unsigned long e = ERR_get_error();
    char text[256] = "";
    if (e) ERR_error_string_n(e, text, sizeof text);
    error_ = "<TLS: " + what + (e ? std::string(": ") + text : std::string()) + ">";
    ERR_clear_error();
    return false;
  }
  // SSL_write with SIGPIPE held back: a node that closed the connection is an error here, not the end of
  // the test process (OpenSSL's socket BIO writes with write(2)).
  bool write_all(const char *data, size_t len) {
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    errno = 0;
    bool ok = true;
    for (size_t done = 0; ok && done < len;) {
      int n = SSL_write(ssl_, data + done, static_cast<int>(len - done));
      if (n <= 0) ok = false;
      if (n > 0) done += static_cast<size_t>(n);
    }
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) && !sigismember(&old, SIGPIPE)) {
      timespec zero{0, 0};
      sigtimedwait(&pipe_only, nullptr, &zero);  // the one raised here
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return ok;
  }
  redisReply *fail_reply(const char *what, int rc = 0) {
    int err = rc ? SSL_get_error(ssl_, rc) : SSL_ERROR_SYSCALL;
    if (err == SSL_ERROR_ZERO_RETURN) {
      error_ = "<Server closed the connection>";
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      error_ = std::string("<") + what + ": Resource temporarily unavailable>";  // the time-out, as hiredis says it
    } else {
      error_ = std::string("<") + what + ": " + (errno ? std::strerror(errno) : "connection closed") + ">";
    }
    close_tls();
    return nullptr;
  }
  void close_tls() {
    if (reader_) redisReaderFree(reader_);
    reader_ = nullptr;
    if (ssl_) SSL_free(ssl_);
    ssl_ = nullptr;
    if (ctx_) SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  redisContext *plain_ = nullptr;
  int fd_ = -1;
  SSL_CTX *ctx_ = nullptr;
  SSL *ssl_ = nullptr;
  redisReader *reader_ = nullptr;
  std::string error_;
};

// Several commands (argv form, binary-safe) in order on one connection of their own (see AdminLink), so
// that a WAIT counts the writes before it: each reply as text (see reply_text). When there is no connection,
// AUTH is refused or a command gets no reply, that command and the ones after it read "<no connection>",
// "<AUTH: ...>" (or "<TLS: ...>") or "<" + the error + ">".
inline std::vector<std::string> commands_at_auth(int port, const NodeAccess &access,
                                                 const std::vector<std::vector<std::string>> &commands,
                                                 double timeout_s = 1.0) {
  std::vector<std::string> out;
  AdminLink link(port, access, timeout_s);
  for (const auto &args : commands) {
    redisReply *r = link.ok() ? link.command(args) : nullptr;
    if (!r) {
      out.push_back(link.error());
      continue;
    }
    out.push_back(reply_text(r));
    freeReplyObject(r);
  }
  return out;
}

// One command on a connection of its own to 127.0.0.1:port after AUTH with the password when there is one,
// over TLS when access says so (see commands_at_auth).
inline std::string command_at_auth(int port, const NodeAccess &access, std::initializer_list<std::string> args,
                                   double timeout_s = 1.0) {
  return commands_at_auth(port, access, {std::vector<std::string>(args)}, timeout_s).front();
}

// One command on a connection of its own to 127.0.0.1:port (argv form, binary-safe): the reply as text,
// an integer as its digits, nil as "<nil>", an array as its elements joined by spaces, and a failure as
// "<no connection>" or "<" + hiredis' error + ">".
inline std::string command_at(int port, std::initializer_list<std::string> args, double timeout_s = 1.0) {
  return command_at_auth(port, {}, args, timeout_s);
}

// A TIME reply as command_at gives it ("<seconds> <microseconds>") in seconds: the store's clock, on which a
// bucket refills, so that "burst + rate x time" is measured on it. (The steady clock of a test process would
// disagree with it across a step of the wall clock, which a freshly booted CI machine's time sync may make in
// the middle of a test.)
inline double time_reply_seconds(const std::string &time) {
  size_t sp = time.find(' ');
  if (sp == std::string::npos) throw std::runtime_error("TIME: not \"<seconds> <microseconds>\": " + time);
  return static_cast<double>(std::stoll(time.substr(0, sp))) +
         static_cast<double>(std::stoll(time.substr(sp + 1))) / 1e6;
}

// Redis' clock (TIME) at a port, in seconds.
inline double redis_seconds_at(int port) {
  return time_reply_seconds(command_at(port, {"TIME"}));
}

// How many calls of `command` Redis ran to the end without an error reply, from an INFO commandstats text:
// calls less failed_calls. A floodwall call that Redis refused with NOSCRIPT (a direct connection that
// reached a fresh server before the I/O thread's SCRIPT LOAD) is sent again once loaded: it made no
// decision, so a test that counts decisions' calls leaves it out.
inline int64_t completed_calls(const std::string &commandstats, const std::string &command) {
  std::string tag = "cmdstat_" + command + ":calls=";
  size_t at = commandstats.find(tag);
  if (at == std::string::npos) return 0;
  int64_t calls = std::stoll(commandstats.substr(at + tag.size()));
  size_t end = commandstats.find('\n', at), failed = commandstats.find("failed_calls=", at);
  if (failed != std::string::npos && failed < end) calls -= std::stoll(commandstats.substr(failed + 13));
  return calls;
}

// A process's end as text: "exit 1", "signal 9".
inline std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// An argv as one line (an empty argument as "").
inline std::string join_argv(const std::vector<std::string> &argv) {
  std::string line;
  for (const auto &a : argv) line += (line.empty() ? "" : " ") + (a.empty() ? std::string("\"\"") : a);
  return line;
}

// Forks and execs argv (redis-server, a sentinel too), its stdout and stderr appended to `log` (so what it
// says before it opens its own log file, an option it refuses say, is there too), then waits up to 5 s for
// PING on `port` to answer PONG (after AUTH with the password when there is one, over TLS when `access` says
// so). The pid; or -1 with `why` set, the process reaped (it exited, or did not answer and was killed).
inline pid_t spawn_redis(const std::vector<std::string> &argv, int port, const std::string &log,
                         const NodeAccess &access, std::string &why) {
  std::vector<char *> args;
  for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) {
    why = "fork failed: " + std::string(std::strerror(errno));
    return -1;
  }
  std::string reply;
  for (int i = 0; i < 200; i++) {
    reply = command_at_auth(port, access, {"PING"});
    if (reply == "PONG") return pid;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      why = "redis-server exited (" + exit_text(status) + "; is Debian's redis-server installed?): " + join_argv(argv);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  why =
      "redis-server did not answer PING on port " + std::to_string(port) + " (last: " + reply + "): " + join_argv(argv);
  return -1;
}

class RedisServer {
 public:
  RedisServer() : port_(free_port()) { start(); }
  ~RedisServer() { stop(); }

  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--loglevel", "warning", static_cast<char *>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200; i++) {
      if (redisContext *c = connect()) {
        redisReply *r = static_cast<redisReply *>(redisCommand(c, "PING"));
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        redisFree(c);
        if (ok) return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "redis-server did not start (is Debian's redis-server installed?)";
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ADD_FAILURE() << "redis-server did not answer PING on port " << port_;
    std::abort();
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void pause() { kill(pid_, SIGSTOP); }
  void resume() { kill(pid_, SIGCONT); }
  // Puts the server's main thread ahead of the test's threads and the other suites' (nice -10; root may):
  // a deployment's Redis has CPU of its own, here it shares two cores. False when not permitted.
  bool prioritize() const { return setpriority(PRIO_PROCESS, static_cast<id_t>(pid_), -10) == 0; }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

  redisContext *connect() const {
    timeval tv{1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    return c;
  }
  // Runs one command (argv form, binary-safe) and returns its reply as text (see command_at).
  std::string command(std::initializer_list<std::string> args) const { return command_at(port_, args); }

 private:
  int port_;
  pid_t pid_ = -1;
};

}  // namespace floodwall::testing
