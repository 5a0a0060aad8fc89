// This thread's last error (fw_error_last) and the helpers of guarded.hpp that need it.
#include "guarded.hpp"

#include <cstdlib>
#include <new>

namespace fw_capi {

namespace {
thread_local std::string tl_message;
thread_local fw_error tl_error{FW_OK, ""};
thread_local bool tl_has_error = false;
}  // namespace

int fail(int code, const std::string &message) {
  try {
    tl_message = message;
  } catch (...) {
    tl_message.clear();
  }
  tl_error.code = code;
  tl_error.message = tl_message.c_str();
  tl_has_error = true;
  return code;
}

const fw_error *last_error() {
  return tl_has_error ? &tl_error : nullptr;
}

int status_of(const std::exception_ptr &e) {
  return guarded([&]() -> int { std::rethrow_exception(e); });
}

int set_buf(fw_buf *out, const std::string &s) {
  if (!out) throw floodwall::BadRequest("out: must not be NULL");
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  out->ptr = p;
  out->size = s.size();
  return FW_OK;
}

}  // namespace fw_capi
