/* Reading a bearer token from a token file, for the programs that talk to
 * the store (nimble-scheduler, nimble-worker). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nimble/store_client.h"

nimble_status_t nimble_store_read_token_file(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "token file '%s': %s", path, strerror(errno));
  char line[1024];
  unsigned lineno = 0;
  nimble_status_t s = NULL;
  int found = 0;
  while (!found && !s && fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, "\r\n");
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    p[n] = '\0';
    if (!n || *p == '#') continue;
    if (n >= cap) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "token file '%s': line %u: token of %zu bytes, "
                             "at most %zu", path, lineno, n, cap ? cap - 1 : 0);
      break;
    }
    memcpy(out, p, n + 1);
    found = 1;
  }
  fclose(f);
  if (!s && !found)
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "token file '%s': no token (only blank or '#' lines)", path);
  return s;
}
