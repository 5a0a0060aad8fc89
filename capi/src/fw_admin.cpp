// The C ABI's control records (fw_admin_*: overrides, tiers, blocks, modes, show, list, status) and the
// floodwall command (fw_cli_run). Each entry point runs inside guarded() (guarded.hpp).
#include <string>
#include <string_view>

#include "cli.hpp"
#include "floodwall.h"
#include "guarded.hpp"

using namespace fw_capi;  // NOLINT: the ABI's frame is this file's vocabulary

namespace {
std::string_view admin_tenant(const char *tenant, size_t len) {
  if (!tenant) throw floodwall::BadRequest("tenant: must not be NULL");
  return {tenant, len};
}
}  // namespace

extern "C" {

int fw_admin_set_override(fw_client *c, const char *tenant, size_t tenant_len, double rate, double burst) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_set_override(admin_tenant(tenant, tenant_len), rate, burst);
    return FW_OK;
  });
}

int fw_admin_remove_override(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_remove_override(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_set_tier(fw_client *c, const char *tenant, size_t tenant_len, const char *tier) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_set_tier(admin_tenant(tenant, tenant_len), tier ? std::string_view(tier) : std::string_view());
    return FW_OK;
  });
}

int fw_admin_block(fw_client *c, const char *tenant, size_t tenant_len, double seconds) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_block(admin_tenant(tenant, tenant_len), seconds);
    return FW_OK;
  });
}

int fw_admin_unblock(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_unblock(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_show(fw_client *c, const char *tenant, size_t tenant_len, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_show(admin_tenant(tenant, tenant_len)));
  });
}

int fw_admin_reset(fw_client *c, const char *tenant, size_t tenant_len) {
  return guarded([&]() -> int {
    Use use(c);
    guard_of(c).admin_reset(admin_tenant(tenant, tenant_len));
    return FW_OK;
  });
}

int fw_admin_set_mode(fw_client *c, fw_limiter l, int mode) {
  return guarded([&]() -> int {
    Use use(c);
    // The same check as fw_set_mode: a cast alone would make 257 the request-rate limiter.
    if (!valid_limiter(raw(l))) throw floodwall::BadRequest("limiter: unknown value " + std::to_string(raw(l)));
    guard_of(c).admin_set_mode(static_cast<floodwall::Limiter>(raw(l)), mode);
    return FW_OK;
  });
}

int fw_admin_list(fw_client *c, size_t limit, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_list(limit));
  });
}

int fw_admin_status(fw_client *c, fw_buf *out) {
  return guarded([&]() -> int {
    Use use(c);
    return set_buf(out, guard_of(c).admin_status());
  });
}

int fw_cli_run(int argc, const char *const *argv, int *exit_status, fw_buf *out, fw_buf *err) {
  return guarded([&]() -> int {
    if (argc < 0 || (argc > 0 && !argv) || !exit_status || !out || !err)
      throw floodwall::BadRequest("fw_cli_run: argv, exit_status, out and err must not be NULL");
    std::string o, e;
    *exit_status = fw_cli::run(argc, argv, o, e);
    set_buf(out, o);
    set_buf(err, e);
    return FW_OK;
  });
}

}  // extern "C"
