// A throwaway redis-server on a free port, started and stopped by the test that needs it. A missing
// redis-server fails the test; it never skips. Also the helpers every fixture uses for its own admin
// commands: free_port(), and command_at() (command_at_auth(), commands_at_auth() when a password or one
// connection for several commands is needed).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

namespace floodwall::testing {

inline int free_port() {
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

// Several commands (argv form, binary-safe) in order on one connection of their own (see connect_at), so
// that a WAIT counts the writes before it: each reply as text (see reply_text). When there is no connection,
// AUTH is refused or a command gets no reply, that command and the ones after it read "<no connection>",
// "<AUTH: ...>" or "<" + hiredis' error + ">".
inline std::vector<std::string> commands_at_auth(int port, const std::string &password,
                                                 const std::vector<std::vector<std::string>> &commands,
                                                 double timeout_s = 1.0) {
  std::vector<std::string> out;
  std::string error;
  redisContext *c = connect_at(port, password, timeout_s, &error);
  for (const auto &args : commands) {
    if (!c) {
      out.push_back(error);
      continue;
    }
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const auto &a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto *r = static_cast<redisReply *>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) {
      error = std::string("<") + c->errstr + ">";
      out.push_back(error);
      redisFree(c);
      c = nullptr;
      continue;
    }
    out.push_back(reply_text(r));
    freeReplyObject(r);
  }
  if (c) redisFree(c);
  return out;
}

// One command on a connection of its own to 127.0.0.1:port after AUTH with `password` when it is not empty
// (see commands_at_auth).
inline std::string command_at_auth(int port, const std::string &password, std::initializer_list<std::string> args,
                                   double timeout_s = 1.0) {
  return commands_at_auth(port, password, {std::vector<std::string>(args)}, timeout_s).front();
}

// One command on a connection of its own to 127.0.0.1:port (argv form, binary-safe): the reply as text,
// an integer as its digits, nil as "<nil>", an array as its elements joined by spaces, and a failure as
// "<no connection>" or "<" + hiredis' error + ">".
inline std::string command_at(int port, std::initializer_list<std::string> args, double timeout_s = 1.0) {
  return command_at_auth(port, {}, args, timeout_s);
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
// PING on `port` to answer PONG (after AUTH with `password` when it is not empty). The pid; or -1 with `why`
// set, the process reaped (it exited, or did not answer and was killed).
inline pid_t spawn_redis(const std::vector<std::string> &argv, int port, const std::string &log,
                         const std::string &password, std::string &why) {
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
    reply = command_at_auth(port, password, {"PING"});
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
