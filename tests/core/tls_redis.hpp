// TLS (rediss://) test fixtures: a throwaway set of certificates made with the openssl command line, and a
// redis-server listening both in plain text (for the test's own admin commands, see command_at) and in TLS.
// A missing or failing openssl or redis-server fails the test loudly and aborts; nothing skips.
//
//   TlsCerts            a temp dir with a test CA, a server certificate it signed (SAN DNS:localhost,
//                       IP:127.0.0.1), a client certificate it signed, and a rogue CA with a client
//                       certificate of its own; all EC P-256, valid for two days. The dir goes with it.
//   TlsCerts::shared()  one set per test process: generating costs tens of milliseconds each time.
//   TlsRedisServer      redis-server on a free plain port and a free TLS port, with the server
//                       certificate and the test CA as the CA clients are checked against
//                       (tls-auth-clients yes when mutual, else no), plus any extra arguments.
//   run_program()       runs a program with some input, collecting what it writes (stdout and stderr).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "redis_server.hpp"

namespace floodwall::testing {

struct RunResult {
  int exit_code = -1;  // the exit status; 128 + the signal if one killed it; -1 if it ran out of time
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs argv[0] (looked up in PATH) with argv, `input` on its stdin (then end of file), and returns its exit
// code and output. A program still running after timeout_s is killed (exit_code -1). A program that cannot
// be executed exits 127 with no output.
inline RunResult run_program(const std::vector<std::string> &argv, std::string_view input = {},
                             double timeout_s = 10.0) {
  std::vector<char *> args;
  for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  // stdin is a socket so that writing to a child that exited without reading is EPIPE, not SIGPIPE.
  int in[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return {};
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return {};
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[1], 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(in[1]);
  close(out[1]);
  RunResult result;
  if (pid < 0) {
    close(in[0]);
    close(out[0]);
    return result;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto left_ms = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return ms.count() > 0 ? static_cast<int>(ms.count()) : 0;
  };
  int in_fd = in[0];
  size_t sent = 0;
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
  }
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    pollfd fds[2] = {{out[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    int n = poll(fds, in_fd >= 0 ? 2 : 1, left_ms());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = true;
      break;
    }
    if (in_fd >= 0 && fds[1].revents) {
      ssize_t w = send(in_fd, input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
    if (fds[0].revents) {
      ssize_t r = read(out[0], buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      result.output.append(buf, static_cast<size_t>(r));
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(out[0]);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return result;
    if (timed_out || left_ms() == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (timed_out) {
    result.exit_code = -1;
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

class TlsCerts {
 public:
  TlsCerts() {
    char tmpl[] = "/tmp/floodwall-tls-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp(/tmp/floodwall-tls-XXXXXX) failed: " << std::strerror(errno);
      std::abort();
    }
    dir_ = tmpl;
    write_config();
    make_ca("ca", "/O=floodwall tests/CN=floodwall test CA");
    make_leaf("server", "/O=floodwall tests/CN=localhost", "ca", "server_ext", "2");
    make_leaf("client", "/O=floodwall tests/CN=floodwall test client", "ca", "client_ext", "3");
    make_ca("rogue-ca", "/O=floodwall rogues/CN=floodwall rogue CA");
    make_leaf("rogue-client", "/O=floodwall rogues/CN=floodwall rogue client", "rogue-ca", "client_ext", "2");
  }
  ~TlsCerts() {
    if (getpid() != owner_) return;  // a forked child leaving through exit() keeps the parent's files
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TlsCerts(const TlsCerts &) = delete;
  TlsCerts &operator=(const TlsCerts &) = delete;

  // One set for the whole test process, made on first use and removed at exit.
  static const TlsCerts &shared() {
    static const TlsCerts certs;
    return certs;
  }

  std::string dir() const { return dir_; }
  std::string ca() const { return dir_ + "/ca.crt"; }
  std::string server_cert() const { return dir_ + "/server.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }
  std::string rogue_ca() const { return dir_ + "/rogue-ca.crt"; }
  std::string rogue_client_cert() const { return dir_ + "/rogue-client.crt"; }
  std::string rogue_client_key() const { return dir_ + "/rogue-client.key"; }

 private:
  // Our own config, so that the system's openssl.cnf (or OPENSSL_CONF) adds no extensions of its own.
  // OpenSSL 3 checks what these say: a CA needs CA:TRUE and keyCertSign, a server certificate a SAN for
  // the name or IP the client asks for (the CN is not looked at), and extendedKeyUsage serverAuth or
  // clientAuth for its role. The key identifiers are what -x509_strict (and Python 3.13) ask for.
  void write_config() const {
    std::ofstream f(dir_ + "/openssl.cnf");
    f << "[req]\n"
         "distinguished_name = dn\n"
         "prompt = no\n"
         "[dn]\n"
         "CN = unused\n"
         "[ca_ext]\n"
         "basicConstraints = critical, CA:TRUE\n"
         "keyUsage = critical, keyCertSign, cRLSign\n"
         "subjectKeyIdentifier = hash\n"
         "[server_ext]\n"
         "basicConstraints = critical, CA:FALSE\n"
         "keyUsage = critical, digitalSignature\n"
         "extendedKeyUsage = serverAuth\n"
         "subjectAltName = DNS:localhost, IP:127.0.0.1\n"
         "subjectKeyIdentifier = hash\n"
         "authorityKeyIdentifier = keyid:always\n"
         "[client_ext]\n"
         "basicConstraints = critical, CA:FALSE\n"
         "keyUsage = critical, digitalSignature\n"
         "extendedKeyUsage = clientAuth\n"
         "subjectKeyIdentifier = hash\n"
         "authorityKeyIdentifier = keyid:always\n";
    f.close();
    if (!f) {
      ADD_FAILURE() << "cannot write " << dir_ << "/openssl.cnf";
      std::abort();
    }
  }

  void make_ca(const std::string &name, const std::string &subject) const {
    openssl({"req", "-config", path("openssl.cnf"), "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-noenc", "-keyout", path(name + ".key"), "-out", path(name + ".crt"),
             "-days", "2", "-subj", subject, "-extensions", "ca_ext"});
  }

  void make_leaf(const std::string &name, const std::string &subject, const std::string &issuer,
                 const std::string &extensions, const std::string &serial) const {
    openssl({"req", "-config", path("openssl.cnf"), "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-noenc", "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj", subject});
    openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA", path(issuer + ".crt"), "-CAkey", path(issuer + ".key"),
             "-set_serial", serial, "-days", "2", "-out", path(name + ".crt"), "-extfile", path("openssl.cnf"),
             "-extensions", extensions});
  }

  void openssl(std::vector<std::string> args) const {
    args.insert(args.begin(), "openssl");
    RunResult r = run_program(args, {}, 30.0);
    if (r.exit_code == 0) return;
    std::string line;
    for (const auto &a : args) line += (line.empty() ? "" : " ") + a;
    if (r.exit_code == 127 && r.output.empty()) {
      ADD_FAILURE() << "cannot run openssl (is the openssl command line installed?): " << line;
    } else {
      ADD_FAILURE() << "openssl failed (exit " << r.exit_code << "): " << line << "\n" << r.output;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::abort();
  }

  std::string path(const std::string &file) const { return dir_ + "/" + file; }

  std::string dir_;
  pid_t owner_ = getpid();
};

struct TlsRedisOptions {
  bool mutual = false;                  // --tls-auth-clients yes: a client must show a certificate of the CA
  std::vector<std::string> extra_args;  // passed to redis-server after the harness' own, e.g.
                                        // {"--rename-command", "TIME", ""}
};

class TlsRedisServer {
 public:
  using Options = TlsRedisOptions;

  explicit TlsRedisServer(Options options = {}, const TlsCerts &certs = TlsCerts::shared())
      : options_(std::move(options)),
        cert_(certs.server_cert()),
        key_(certs.server_key()),
        ca_(certs.ca()),
        plain_port_(free_port()),
        tls_port_(free_port()) {
    while (tls_port_ == plain_port_) tls_port_ = free_port();
    start();
  }
  ~TlsRedisServer() {
    if (getpid() == owner_) stop();  // a forked child leaving through exit() leaves the parent's server be
  }
  TlsRedisServer(const TlsRedisServer &) = delete;
  TlsRedisServer &operator=(const TlsRedisServer &) = delete;

  // Starts redis-server and returns once PING answers on the plain port and the TLS port accepts a TCP
  // connection. After stop(), starts it again on the same ports (with an empty data set).
  void start() {
    std::vector<std::string> argv = {"redis-server",
                                     "--port",
                                     std::to_string(plain_port_),
                                     "--tls-port",
                                     std::to_string(tls_port_),
                                     "--tls-cert-file",
                                     cert_,
                                     "--tls-key-file",
                                     key_,
                                     "--tls-ca-cert-file",
                                     ca_,
                                     "--tls-auth-clients",
                                     options_.mutual ? "yes" : "no",
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--loglevel",
                                     "warning"};
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    std::vector<char *> args;
    for (auto &a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      execvp(args[0], args.data());
      _exit(127);
    }
    bool answered = false;
    for (int i = 0; i < 200; i++) {
      if (!answered) answered = command_at(plain_port_, {"PING"}) == "PONG";
      if (answered && tcp_accepts(tls_port_)) return;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "redis-server did not start with TLS (is Debian's redis-server installed, built with "
                         "TLS? are the arguments right?): "
                      << join(argv);
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ADD_FAILURE() << "redis-server did not answer PING on port " << plain_port_ << " or accept on TLS port "
                  << tls_port_ << ": " << join(argv);
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

  int tls_port() const { return tls_port_; }
  int plain_port() const { return plain_port_; }
  std::string url() const { return "rediss://127.0.0.1:" + std::to_string(tls_port_) + "/0"; }
  const Options &options() const { return options_; }

  // Runs one command on the plain port (argv form, binary-safe) and returns its reply as text (see
  // command_at).
  std::string command(std::initializer_list<std::string> args) const { return command_at(plain_port_, args); }

 private:
  static bool tcp_accepts(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
    close(fd);
    return ok;
  }
  static std::string join(const std::vector<std::string> &argv) {
    std::string line;
    for (const auto &a : argv) line += (line.empty() ? "" : " ") + (a.empty() ? std::string("\"\"") : a);
    return line;
  }

  Options options_;
  std::string cert_, key_, ca_;
  int plain_port_;
  int tls_port_;
  pid_t pid_ = -1;
  pid_t owner_ = getpid();
};

}  // namespace floodwall::testing
