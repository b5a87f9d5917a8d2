/* cli_farm_run.h: `nimble` with a loopback farm's endpoints. */
#include "cli_farm_run.h"

#include <stdio.h>

#include "nimble_test.h"

cli_result cli_run_on_farm(farm *f, const char *token, const char *const *args) {
  const char *argv[40];
  int n = 0;
  argv[n++] = "--scheduler";
  argv[n++] = f->clients_ep;
  argv[n++] = "--store";
  argv[n++] = f->store_url;
  argv[n++] = "--token";
  argv[n++] = token;
  for (int i = 0; args[i]; i++) {
    ck_assert(n < 38);
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  char events[300];
  snprintf(events, sizeof events, "NIMBLE_EVENTS=%s", f->events_ep);
  return cli_run(argv, (const char *const[]){events, NULL});
}
