#include "policy/route.hpp"

namespace floodwall {

namespace {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool ident_char(char c) {
  return ident_start(c) || (c >= '0' && c <= '9');
}

// The end of the identifier that starts at i (i itself when there is none).
size_t ident_end(std::string_view s, size_t i) {
  if (i >= s.size() || !ident_start(s[i])) return i;
  while (i < s.size() && ident_char(s[i])) i++;
  return i;
}

// The index just past the bracket that closes the one at i, counting nesting; npos when unbalanced.
size_t past_group(std::string_view s, size_t i, char open, char close) {
  int depth = 0;
  for (size_t j = i; j < s.size(); j++) {
    if (s[j] == open) depth++;
    if (s[j] == close && --depth == 0) return j + 1;
  }
  return std::string_view::npos;
}

bool is_modifier(char c) {
  return c == '?' || c == '*' || c == '+';
}

size_t trailing_slashes(std::string_view s) {
  if (s.size() < 2 || s[0] != '/') return 0;
  size_t n = 0;
  while (n + 1 < s.size() && s[s.size() - 1 - n] == '/') n++;
  return n;
}

bool pattern_is_canonical(std::string_view s, RouteText kind) {
  if (trailing_slashes(s) > 0) return false;
  if (kind == RouteText::path) return true;
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == '{' || c == '<' || c == '(') return false;
    if (c == ':') {
      size_t j = ident_end(s, i + 1);
      if (j > i + 1 && j < s.size() && (s[j] == '(' || (kind == RouteText::pattern && is_modifier(s[j])))) return false;
    }
  }
  return true;
}

// "{id}" or "{id:converter}" (Starlette, FastAPI, OpenAPI): the parameter's name; else empty.
std::string_view brace_parameter(std::string_view s, size_t i, size_t &past) {
  size_t j = ident_end(s, i + 1);
  if (j == i + 1 || j >= s.size() || (s[j] != '}' && s[j] != ':')) return {};
  size_t close = s.find('}', j);
  if (close == std::string_view::npos) return {};
  past = close + 1;
  return s.substr(i + 1, j - i - 1);
}

// "<id>", "<int:id>" or "<regex('...'):id>" (Flask, Werkzeug, Django): the name after the last ':'.
std::string_view angle_parameter(std::string_view s, size_t i, size_t &past) {
  size_t close = s.find('>', i);
  if (close == std::string_view::npos) return {};
  std::string_view inside = s.substr(i + 1, close - i - 1);
  size_t colon = inside.rfind(':');
  std::string_view name = colon == std::string_view::npos ? inside : inside.substr(colon + 1);
  if (name.empty() || ident_end(name, 0) != name.size()) return {};
  past = close + 1;
  return name;
}

}  // namespace

std::string_view canonical_route(std::string_view in, RouteText kind, std::string &buf) {
  if (pattern_is_canonical(in, kind)) return in;
  buf.clear();
  buf.reserve(in.size());
  size_t i = 0;
  while (kind != RouteText::path && i < in.size()) {
    char c = in[i];
    size_t past = 0;
    if (c == '{' || c == '<') {
      std::string_view name = c == '{' ? brace_parameter(in, i, past) : angle_parameter(in, i, past);
      if (!name.empty()) {
        buf += ':';
        buf += name;
        i = past;
        continue;
      }
    }
    if (c == '{' || c == '(') {  // an optional part: "{/:id}" (Express 5), "(.:format)" (Rails)
      size_t end = past_group(in, i, c, c == '{' ? '}' : ')');
      if (end != std::string_view::npos) {
        i = end;
        continue;
      }
    }
    if (c == ':') {
      size_t j = ident_end(in, i + 1);
      if (j > i + 1) {
        buf.append(in.substr(i, j - i));
        i = j;
        if (i < in.size() && in[i] == '(') {  // its regex: ":id(\\d+)"
          size_t end = past_group(in, i, '(', ')');
          i = end == std::string_view::npos ? in.size() : end;
        }
        if (kind == RouteText::pattern && i < in.size() && is_modifier(in[i])) i++;
        continue;
      }
    }
    buf += c;
    i++;
  }
  if (kind == RouteText::path) buf.assign(in);
  buf.resize(buf.size() - trailing_slashes(buf));
  return buf;
}

}  // namespace floodwall
