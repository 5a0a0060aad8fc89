// What a test's process writes on stderr (floodwall says some things once there), and how often a text
// occurs in it.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace floodwall::testing {

// What this process writes on stderr while it lives (fd 2 redirected to a file).
class CaptureStderr {
 public:
  CaptureStderr() {
    std::fflush(stderr);
    saved_ = dup(2);
    char path[] = "/tmp/floodwall-stderr-XXXXXX";
    fd_ = mkstemp(path);
    path_ = path;
    dup2(fd_, 2);
  }
  ~CaptureStderr() {
    restore();
    if (!path_.empty()) unlink(path_.c_str());
  }
  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    close(fd_);
    saved_ = -1;
  }
  int saved_ = -1, fd_ = -1;
  std::string path_;
};

inline size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

}  // namespace floodwall::testing
