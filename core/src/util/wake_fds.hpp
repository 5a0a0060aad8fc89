// The descriptor a thread polls to be woken (the Redis store's I/O thread, the slot notices' subscriber):
// one eventfd on Linux, where the read end is the write end; a non-blocking pipe elsewhere (macOS). Both
// close on exec.
#pragma once

#include <fcntl.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

#include <cstdint>

namespace floodwall {

struct WakeFds {
  int read_fd = -1, write_fd = -1;

  // False when the system gave no descriptor (errno says why).
  bool open() {
#ifdef __linux__
    read_fd = write_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return read_fd >= 0;
#else
    int ends[2];
    if (pipe(ends) != 0) return false;
    for (int fd : ends) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    read_fd = ends[0];
    write_fd = ends[1];
    return true;
#endif
  }
  void ring() const {
    uint64_t one = 1;
    (void)!::write(write_fd, &one, sizeof one);
  }
  void close() {
    if (read_fd >= 0) ::close(read_fd);
    if (write_fd >= 0 && write_fd != read_fd) ::close(write_fd);
    read_fd = write_fd = -1;
  }
};

}  // namespace floodwall
