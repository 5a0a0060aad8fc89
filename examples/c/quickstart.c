/* The README's C quick start, built against the installed library by tests/capi/install_test.sh. */
#include <floodwall.h>
#include <stdio.h>

int main(void) {
  fw_client *fw;
  if (fw_client_new(&fw,
                    "{\"request_rate\": {\"rate\": 100, \"burst\": 500},"
                    " \"concurrency\": {\"limit\": 20, \"routes\": [\"/v1/routes\"]}}") != FW_OK) {
    fprintf(stderr, "%s\n", fw_error_last()->message); /* names the field, e.g. request_rate.burst */
    return 1;
  }
  fw_request req = FW_REQUEST_INIT;
  req.tenant = "acme";
  req.tenant_len = 4; /* any bytes, NUL-safe */
  req.route = "/v1/routes";
  req.method = "POST";
  req.cost = 3; /* tokens: weight expensive requests */
  fw_decision d = FW_DECISION_INIT;
  fw_admit(fw, &req, &d); /* 0 whenever a decision was made, the fallback's included */
  fw_buf headers = FW_BUF_INIT, body = FW_BUF_INIT;
  fw_format_headers(fw, &d, &headers); /* "RateLimit-Policy: ...\r\n..." on every response */
  fw_format_body(fw, &d, &body);       /* JSON on 429/503, empty otherwise */
  printf("%d\n%s%s\n", d.status, headers.ptr ? headers.ptr : "", body.ptr ? body.ptr : "");
  fw_buf_dispose(&headers);
  fw_buf_dispose(&body);
  fw_release(fw, d.ticket); /* on every path, when the request ends */
  fw_client_free(fw);
  return 0;
}
