/* The public header compiles as C99 with -Wall -Wextra -pedantic -Werror, and its INIT macros work. */
#include <floodwall.h>

int header_c99_check(void);
int header_c99_check(void) {
  fw_request r = FW_REQUEST_INIT;
  fw_decision d = FW_DECISION_INIT;
  fw_buf b = FW_BUF_INIT;
  (void)b;
  return (int)r.version + (int)d.version;
}
