// The C ABI's own cost of one fw_admit on the memory store: the baseline that bench/python/run.py puts
// next to floodwall.Floodwall.admit. Usage: capi_admit N POLICY_JSON  -> prints nanoseconds per admit.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "floodwall.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s N POLICY_JSON\n", argv[0]);
    return 2;
  }
  long n = std::atol(argv[1]);
  fw_client *c = nullptr;
  if (fw_client_new(&c, argv[2]) != FW_OK) {
    std::fprintf(stderr, "%s\n", fw_error_last()->message);
    return 1;
  }
  fw_request rq = FW_REQUEST_INIT;
  rq.tenant = "tenant-1";
  rq.tenant_len = 8;
  rq.method = "GET";
  fw_decision d = FW_DECISION_INIT;
  long allowed = 0;
  for (long i = 0; i < n / 10; i++) fw_admit(c, &rq, &d);  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) {
    fw_admit(c, &rq, &d);
    allowed += d.allowed;
    fw_release(c, d.ticket);
  }
  auto t1 = std::chrono::steady_clock::now();
  fw_client_free(c);
  if (allowed != n) {
    std::fprintf(stderr, "only %ld of %ld admits were allowed: the policy must not reject\n", allowed, n);
    return 1;
  }
  std::printf("%.1f\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n));
  return 0;
}
