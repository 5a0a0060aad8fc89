// shm://NAME's fleet view (Store::put_summary, engine/fleet_summary.hpp): one file per client in a folder
// beside the segment, /dev/shm/floodwall.NAME.clients/<id>, its first line the instant it expires (ms since
// the epoch, the machine's one clock), the summary after it. Files rather than a table in the segment: a
// summary is a few hundred bytes of JSON written every few seconds, the segment's layout stays as it is,
// and a file is replaced whole (written beside, then renamed), so no reader sees half of one and no lock
// is held by a process that may die. A reader takes expired files away (a process killed, or closed).
#include "util/platform.hpp"
// shm:// is built on Linux alone (util/platform.hpp); elsewhere the store factory refuses it.
#if FW_HAVE_SHM_STORE

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "stores/shm_store.hpp"
#include "util/errors.hpp"

namespace floodwall {

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool plain_id(const std::string &id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_'))
      return false;
  return true;
}

// Beside the segment where POSIX shared memory is a folder (Linux: /dev/shm); else in the temporary folder.
std::string summaries_dir(const std::string &segment) {
  std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return base + segment + ".clients";
}

}  // namespace

void ShmStore::put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) {
  if (!plain_id(id)) throw StoreError("store: a client id must be 1-64 characters of [A-Za-z0-9_-]");
  std::string dir = summaries_dir(segment_), path = dir + "/" + id;
  if (text.empty()) {
    unlink(path.c_str());
    return;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw StoreError("store: cannot make " + dir + " (" + std::strerror(errno) + ")");
  std::string tmp = dir + "/." + id + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << (wall_ms() + ttl_ms) << '\n' << text;
    if (!f.good()) throw StoreError("store: cannot write " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0)
    throw StoreError("store: cannot write " + path + " (" + std::strerror(errno) + ")");
}

std::vector<std::string> ShmStore::summaries() {
  std::vector<std::string> out;
  std::string dir = summaries_dir(segment_);
  DIR *d = opendir(dir.c_str());
  if (!d) return out;  // no client has written one yet
  int64_t now = wall_ms();
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (!plain_id(name)) continue;  // ".", "..", a file being written
    std::string path = dir + "/" + name;
    std::ifstream f(path, std::ios::binary);
    int64_t expires = 0;
    if (!(f >> expires) || f.get() != '\n') continue;
    if (expires <= now) {
      unlink(path.c_str());  // its process died, or closed without a word
      continue;
    }
    std::ostringstream text;
    text << f.rdbuf();
    out.push_back(text.str());
  }
  closedir(d);
  return out;
}

}  // namespace floodwall

#endif  // FW_HAVE_SHM_STORE
