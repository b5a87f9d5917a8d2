/* nimble keys: the farm's signing keys (docs/fetch.md, "Trust").
 *   nimble keys generate FILE [COMMENT]   a new Ed25519 key in FILE (0600),
 *                                          its trusted keys line on stdout
 *   nimble keys show FILE [COMMENT]        the trusted keys line of a key
 * The secret key goes to nimble-scheduler --signing-key; the printed line
 * goes into the applications' trusted keys file (NIMBLE_TRUSTED_KEYS). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nimble/signature.h"

extern const nimble_cli_command nimble_cmd_keys;

static int report(nimble_status_t s) {
  int code = nimble_status_code(s) == NIMBLE_NOT_FOUND || nimble_status_code(s) == NIMBLE_INVALID_ARGUMENT ||
                     nimble_status_code(s) == NIMBLE_PERMISSION_DENIED
                 ? NIMBLE_EXIT_INPUT
                 : NIMBLE_EXIT_FAILURE;
  nimble_cli_report(s);
  return code;
}

static int run_keys(nimble_cli_ctx *ctx, int argc, char **argv) {
  (void)ctx;
  if (argc < 3 || argc > 4 || (strcmp(argv[1], "generate") && strcmp(argv[1], "show")))
    return nimble_cli_usage_error(&nimble_cmd_keys, "expected 'keys generate FILE [COMMENT]' or "
                                                    "'keys show FILE [COMMENT]'");
  const char *path = argv[2], *comment = argc == 4 ? argv[3] : path;
  if (strchr(comment, '\n')) return nimble_cli_usage_error(&nimble_cmd_keys, "the comment holds a newline");
  uint8_t pub[NIMBLE_SIGN_KEY_BYTES];
  nimble_status_t s;
  if (!strcmp(argv[1], "generate")) {
    s = nimble_sign_keygen(path, pub);
  } else {
    nimble_sign_key_t k;
    s = nimble_sign_key_load(path, &k);
    if (!s) memcpy(pub, k.public_key, sizeof pub);
    nimble_sign_key_deinit(&k);
  }
  char *line = NULL;
  if (!s) s = nimble_sign_public_line(pub, comment, &line);
  if (s) return report(s);
  fputs(line, stdout);
  free(line);
  return NIMBLE_EXIT_OK;
}

const nimble_cli_command nimble_cmd_keys = {
    "keys",
    "Make or show the farm's artifact signing key.",
    "keys generate FILE [COMMENT] | keys show FILE [COMMENT]",
    "generate writes a new Ed25519 secret key to FILE (mode 0600; an existing\n"
    "file is never overwritten) and prints its public line; show prints the\n"
    "public line of an existing key. The line, 'ed25519 <64 hex> COMMENT'\n"
    "(COMMENT defaults to FILE), is what applications put in their trusted\n"
    "keys file (NIMBLE_TRUSTED_KEYS, nimble run --trusted-keys); the secret\n"
    "key is given to nimble-scheduler --signing-key. A key file that group\n"
    "or others can read is refused. Exit status: 0 success; 2 usage; 3 the\n"
    "key file is missing, malformed or readable by others; 1 otherwise.\n",
    run_keys,
};
