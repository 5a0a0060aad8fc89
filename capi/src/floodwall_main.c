/* The floodwall executable: the command (fw_cli_run) with its output written to stdout and stderr. */
#include <stdio.h>

#include "floodwall.h"

int main(int argc, char **argv) {
  int status = 1;
  fw_buf out = FW_BUF_INIT, err = FW_BUF_INIT;
  if (fw_cli_run(argc, (const char *const *)argv, &status, &out, &err) != FW_OK) {
    const fw_error *e = fw_error_last();
    fprintf(stderr, "floodwall: %s\n", e ? e->message : "failed");
    return 1;
  }
  if (out.size) fwrite(out.ptr, 1, out.size, stdout);
  if (err.size) fwrite(err.ptr, 1, err.size, stderr);
  fw_buf_dispose(&out);
  fw_buf_dispose(&err);
  return fflush(stdout) == 0 ? status : 1;
}
