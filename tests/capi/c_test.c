/* A plain-C program over the ABI, as a C user writes it. Exits non-zero on the first failure. */
#include <floodwall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static int callbacks = 0;
static void on_decision(void *payload, int status, const fw_decision *d) {
  int *allowed = (int *)payload;
  CHECK(status == FW_OK);
  *allowed = d->allowed;
  callbacks++;
}

int main(void) {
  fw_client *c = NULL;
  fw_request r = FW_REQUEST_INIT;
  fw_decision d = FW_DECISION_INIT;
  fw_buf b = FW_BUF_INIT;
  const fw_error *e;
  int i, allowed = 0, async_allowed = -1;
  fw_mode m;
  fw_limiter l;

  CHECK(strcmp(fw_version(), FW_VERSION_STRING) == 0);

  /* A bad policy names its field. */
  CHECK(fw_client_new(&c, "{\"request_rate\": {\"rate\": -1, \"burst\": 5}}") == FW_EPOLICY);
  CHECK(c == NULL);
  e = fw_error_last();
  CHECK(e != NULL && e->code == FW_EPOLICY && strstr(e->message, "request_rate.rate") != NULL);

  CHECK(fw_client_new(&c,
                      "{\"request_rate\": {\"rate\": 1, \"burst\": 5},"
                      " \"concurrency\": {\"limit\": 2, \"ttl_s\": 60}}") == FW_OK);
  CHECK(c != NULL);

  r.tenant = "acme";
  r.tenant_len = 4;
  r.route = "/v1/routes";
  r.method = "POST";
  for (i = 0; i < 5; i++) {
    CHECK(fw_admit(c, &r, &d) == FW_OK);
    if (d.allowed) allowed++;
    CHECK(fw_release(c, d.ticket) == FW_OK);
    CHECK(fw_release(c, d.ticket) == FW_OK); /* idempotent */
  }
  CHECK(allowed == 5);
  CHECK(fw_admit(c, &r, &d) == FW_OK);
  CHECK(!d.allowed && d.status == 429 && d.limiter == FW_LIMITER_REQUEST_RATE && d.retry_after_s >= 1);
  CHECK(d.ticket == 0);

  CHECK(fw_format_headers(c, &d, &b) == FW_OK);
  CHECK(b.ptr != NULL && strstr(b.ptr, "Retry-After: 1\r\n") != NULL);
  fw_buf_dispose(&b);
  CHECK(b.ptr == NULL && b.size == 0);
  CHECK(fw_format_body(c, &d, &b) == FW_OK);
  CHECK(strstr(b.ptr, "\"limit_type\":\"request_rate\"") != NULL);
  fw_buf_dispose(&b);

  /* Modes by name, dark mode lets the request through and says who would have blocked it. */
  CHECK(fw_limiter_from_name(&l, "request_rate") == FW_OK && l == FW_LIMITER_REQUEST_RATE);
  CHECK(fw_mode_from_name(&m, "dark") == FW_OK && m == FW_MODE_DARK);
  CHECK(fw_limiter_from_name(&l, "bogus") == FW_EINVAL);
  CHECK(fw_set_mode(c, FW_LIMITER_REQUEST_RATE, FW_MODE_DARK) == FW_OK);
  CHECK(fw_get_mode(c, FW_LIMITER_REQUEST_RATE, &m) == FW_OK && m == FW_MODE_DARK);
  CHECK(fw_admit(c, &r, &d) == FW_OK);
  CHECK(d.allowed && d.dark_limiter == FW_LIMITER_REQUEST_RATE);
  fw_release(c, d.ticket);

  /* Async completes (inline on the memory store). */
  CHECK(fw_admit_async(c, &r, on_decision, &async_allowed) == FW_OK);
  CHECK(callbacks == 1 && async_allowed == 1);

  /* Bad input: an empty tenant of a version 1 caller, cost above the burst. Nothing throws, nothing
     crashes. (Version 2 takes an empty tenant as the anonymous one.) */
  r.tenant_len = 0;
  r.version = 1;
  CHECK(fw_admit(c, &r, &d) == FW_EINVAL);
  CHECK(strstr(fw_error_last()->message, "tenant") != NULL);
  r.version = FW_REQUEST_VERSION;
  r.tenant_len = 4;
  r.cost = 6;
  CHECK(fw_admit(c, &r, &d) == FW_EINVAL);
  CHECK(strstr(fw_error_last()->message, "cost") != NULL);
  CHECK(fw_admit(NULL, &r, &d) == FW_EINVAL);
  CHECK(fw_report_utilization(c, 2.0) == FW_EINVAL);
  CHECK(fw_release(c, 0) == FW_OK);
  CHECK(fw_release(NULL, 7) == FW_OK);

  CHECK(fw_metrics_prometheus(c, &b) == FW_OK);
  CHECK(strstr(b.ptr, "floodwall_decisions_total{limiter=\"request_rate\",outcome=\"rejected\"") != NULL);
  fw_buf_dispose(&b);
  CHECK(fw_metrics_json(c, &b) == FW_OK);
  CHECK(b.ptr[0] == '{');
  fw_buf_dispose(&b);

  fw_client_free(c);
  fw_client_free(NULL);
  if (failures) {
    fprintf(stderr, "c_test: %d failures\n", failures);
    return 1;
  }
  printf("c_test: all checks passed\n");
  return 0;
}
