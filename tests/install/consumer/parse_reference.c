/* Links the installed fetcher: parses a store reference and prints its
 * parts, "BASE NAME TAG DIGEST" ("-" for an absent one); exit 1 with the
 * runtime's message for a bad reference. */
#include <stdio.h>

#include "nimble/fetch.h"

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: %s REFERENCE\n", argv[0]), 2;
  nimble_fetch_reference_t ref;
  nimble_status_t s = nimble_fetch_parse_reference(argv[1], &ref);
  if (s) {
    fprintf(stderr, "%s: %s\n", nimble_status_code_name(nimble_status_code(s)),
            nimble_status_message(s));
    nimble_status_free(s);
    return 1;
  }
  printf("%s %s %s %s\n", ref.base_url, ref.name, ref.tag ? ref.tag : "-",
         ref.digest ? ref.digest : "-");
  nimble_fetch_reference_deinit(&ref);
  return 0;
}
