#include "policy/policy_source.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "policy/policy.hpp"

namespace floodwall {

namespace {

constexpr size_t kMaxPolicyBytes = size_t{16} << 20;  // /dev/zero or a log named by mistake: an error, not memory

bool looks_like_json(std::string_view s) {
  size_t i = s.find_first_not_of(" \t\r\n");
  return i != std::string_view::npos && (s[i] == '{' || s[i] == '[');
}

// The path as an error shows it: control bytes escaped, so that a hostile or broken path cannot forge lines.
std::string shown(std::string_view path) {
  std::string out;
  for (unsigned char ch : path) {
    if (ch < 0x20 || ch == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

}  // namespace

std::string policy_text(std::string_view text_or_path, bool is_path) {
  if (!is_path && looks_like_json(text_or_path)) return std::string(text_or_path);
  const std::string path(text_or_path);
  if (path.empty()) throw PolicyError("policy", "an empty string is neither JSON text nor a file's path");
  if (path.find('\0') != std::string::npos) throw PolicyError("policy", "a file's path cannot hold a NUL byte");
  auto unreadable = [&](const std::string &why) {
    return PolicyError("policy", "cannot read the file \"" + shown(path) + "\" (" + why + ")");
  };
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) throw unreadable(std::strerror(errno));
  std::string text;
  char buf[16384];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() <= kMaxPolicyBytes) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err) throw unreadable(std::strerror(err));  // a directory: "Is a directory"
  if (text.size() > kMaxPolicyBytes) throw unreadable("larger than 16 MiB: not a policy");
  return text;
}

}  // namespace floodwall
