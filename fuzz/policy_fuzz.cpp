// parse_policy on any bytes. A PolicyError is the expected answer to a bad document; any other exception
// escaping (std::terminate), a crash, a leak or UB is a finding. A policy that parses must hold what the
// rest of the core takes for granted.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "check.hpp"
#include "policy/policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  floodwall::Policy p;
  try {
    p = floodwall::parse_policy(text);
  } catch (const floodwall::PolicyError &e) {
    FW_FUZZ_CHECK(!e.field().empty());  // every error names the field to fix
    return 0;
  }
  FW_FUZZ_CHECK(!p.prefix.empty() && p.prefix.size() <= 64);
  FW_FUZZ_CHECK(p.docs_url.size() <= 512);
  FW_FUZZ_CHECK(p.max_tenants >= 1);
  if (p.request_rate) {
    auto ok = [](const floodwall::BucketLimits &b) {
      return std::isfinite(b.rate) && b.rate > 0 && b.burst >= 1 && b.rate_m > 0 && b.burst_m >= b.burst;
    };
    FW_FUZZ_CHECK(ok(p.request_rate->limits));
    for (const auto &[tenant, limits] : p.request_rate->overrides) {
      FW_FUZZ_CHECK(tenant.size() <= floodwall::TenantKey::kSize);
      FW_FUZZ_CHECK(ok(limits));
    }
  }
  if (p.concurrency) FW_FUZZ_CHECK(p.concurrency->limit >= 1 && p.concurrency->ttl_s > 0);
  if (p.fleet) FW_FUZZ_CHECK(p.fleet->capacity >= 1 && p.fleet->ttl_s > 0);
  if (p.utilization) FW_FUZZ_CHECK(p.utilization->good <= p.utilization->bad && p.utilization->bad < 1);
  FW_FUZZ_CHECK(p.tenant.ipv6_prefix >= 1 && p.tenant.ipv6_prefix <= 128);
  FW_FUZZ_CHECK(!p.tenant.from.empty() && p.tenant.trusted_proxies.size() <= 1024);
  return 0;
}
