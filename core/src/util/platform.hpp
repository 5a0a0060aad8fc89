// What Linux has and other Unixes (macOS) lack, spelled once, so that the core builds there: on Linux every
// name here is the system's own and nothing changes. Not Linux: poll's peer-closed event is none (a peer's
// close is then seen at the next read), send's no-SIGPIPE flag is none (the socket is made with SO_NOSIGPIPE
// instead: stores/redis/connection.cpp), ppoll is poll with the time-out rounded up to a millisecond, and
// shm:// is refused by the store factory (its process-shared robust mutexes are Linux's and glibc's/musl's).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <ctime>

#ifndef POLLRDHUP
#define POLLRDHUP 0
#endif
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

// FW_HAVE_SHM_STORE: whether shm:// is built (stores/shm_store*.cpp); the store factory refuses it otherwise.
#ifdef __linux__
#define FW_HAVE_SHM_STORE 1
#else
#define FW_HAVE_SHM_STORE 0
#endif

namespace floodwall {

#ifndef __linux__
// ppoll without a signal mask (the core never passes one): poll, the time-out rounded up to a millisecond.
inline int ppoll(pollfd *fds, nfds_t n, const timespec *timeout, const void * /*sigmask: always null*/) {
  int ms = -1;
  if (timeout) ms = static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_nsec + 999'999) / 1'000'000);
  return ::poll(fds, n, ms);
}
#endif

// The platform's name, for an error that says where something does not work ("shm:// ... on macOS").
inline const char *platform_name() {
#if defined(__linux__)
  return "Linux";
#elif defined(__APPLE__)
  return "macOS";
#elif defined(__FreeBSD__)
  return "FreeBSD";
#else
  return "this platform";
#endif
}

}  // namespace floodwall
