// RESP as the Redis store writes it: commands formatted straight into a call's buffer (no sprintf, no
// temporary strings), hiredis' formatter for the rare command with many parts, and what an error
// reply means. Replies are read by hiredis' redisReader (connection.hpp).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stores/store.hpp"

namespace floodwall {

// A whole command (argv form, binary-safe) through hiredis' formatter.
std::string resp_format(const std::vector<std::string_view> &args);

inline std::string resp_num(int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// "*3\r\n", "$5\r\n": an array's or a bulk string's length line.
inline void resp_len(std::string &out, char kind, size_t n) {
  char buf[24];
  buf[0] = kind;
  auto r = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
  *r.ptr++ = '\r';
  *r.ptr++ = '\n';
  out.append(buf, r.ptr);
}

inline void resp_bulk(std::string &out, std::string_view a) {
  resp_len(out, '$', a.size());
  out.append(a);
  out.append("\r\n", 2);
}

inline void resp_int(std::string &out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  resp_bulk(out, std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

// A slot id as the scripts take it: 16 bytes.
void resp_slot_id(std::string &cmd, const SlotId &id);

// The start of an EVALSHA of `nargs` arguments after the key count.
std::string resp_evalsha_head(const std::string &sha, int nkeys, int nargs);

// WRONGTYPE, CROSSSLOT, MOVED/ASK (a cluster behind a plain redis:// URL), NOPERM: the deployment is
// wrong, not down. These are reported apart from outages.
bool resp_is_config_error(std::string_view e);

// Redis refused a command that a script called: unknown there (renamed away) or not allowed in scripts.
bool resp_is_script_refusal(std::string_view e);

// Text a server sent (an error, a name) or the user gave, fit for a message: its first 200 bytes, each
// control or non-ASCII byte as '?'.
std::string message_excerpt(std::string_view s);

}  // namespace floodwall
