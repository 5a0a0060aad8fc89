#include "stores/redis/resp.hpp"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace floodwall {

std::string resp_format(const std::vector<std::string_view> &args) {
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char *cmd = nullptr;
  int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
  if (n < 0 || !cmd) throw std::bad_alloc();
  std::string out(cmd, static_cast<size_t>(n));
  free(cmd);
  return out;
}

void resp_slot_id(std::string &cmd, const SlotId &id) {
  char b[16];
  std::memcpy(b, &id.hi, 8);
  std::memcpy(b + 8, &id.lo, 8);
  resp_bulk(cmd, std::string_view(b, 16));
}

std::string resp_evalsha_head(const std::string &sha, int nkeys, int nargs) {
  std::string h;
  resp_len(h, '*', static_cast<size_t>(3 + nkeys + nargs));
  resp_bulk(h, "EVALSHA");
  resp_bulk(h, sha);
  resp_bulk(h, resp_num(nkeys));
  return h;
}

bool resp_is_config_error(std::string_view e) {
  for (std::string_view marker : {"WRONGTYPE", "CROSSSLOT", "MOVED", "ASK ", "NOPERM", "WRONGPASS", "NOAUTH"})
    if (e.find(marker) != std::string_view::npos) return true;
  return false;
}

bool resp_is_script_refusal(std::string_view e) {
  for (std::string_view marker : {"Unknown Redis command called from script", "not allowed from script",
                                  "command is not allowed", "unknown command 'TIME'", "unknown command `TIME`"})
    if (e.find(marker) != std::string_view::npos) return true;
  return false;
}

std::string message_excerpt(std::string_view s) {
  std::string out(s.substr(0, 200));
  for (char &ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return out;
}

}  // namespace floodwall
