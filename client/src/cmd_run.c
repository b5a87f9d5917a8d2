/* nimble run: the runtime's nimble-run inside the CLI (one program, the
 * same options and messages), plus what the CLI knows: the store and token
 * from its configuration, so `nimble run team/mlp:x86 --input x=x.npy`
 * fetches from the configured store. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "nimble_run.h"

/* The model argument: the first argument after the command that is not an
 * option or an option's value. */
static int model_index(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) return i + 1 < argc ? i + 1 : -1;
    if (a[0] == '-') {
      /* --opt VALUE, unless it is --opt=VALUE or a flag without a value. */
      if (!strchr(a, '=') && strcmp(a, "--help") && strcmp(a, "-h") && strcmp(a, "--version")) i++;
      continue;
    }
    return i;
  }
  return -1;
}

static int run_run(nimble_cli_ctx *ctx, int argc, char **argv) {
  int m = model_index(argc, argv);
  char *ref = NULL;
  if (m > 0) {
    const char *model = argv[m];
    struct stat st;
    bool is_url = strncmp(model, "http://", 7) == 0 || strncmp(model, "https://", 8) == 0;
    bool store_name = !is_url && stat(model, &st) != 0 && (strchr(model, ':') || strchr(model, '@'));
    if (is_url || store_name) {
      /* A store reference: the store and the token come from the config. */
      int rc = nimble_cli_load_config(ctx);
      if (rc) return rc;
      const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
      if (token && !getenv("NIMBLE_TOKEN")) setenv("NIMBLE_TOKEN", token, 1);
      const char *store = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_STORE);
      if (store_name) {
        if (!store)
          return nimble_cli_usage_error(&nimble_cmd_run,
                                        "'%s' is no file, and no store is configured to fetch it from "
                                        "(--store, NIMBLE_STORE or the config file)",
                                        model);
        size_t n = strlen(store) + strlen(model) + 2;
        ref = malloc(n);
        if (!ref) {
          nimble_cli_report(NIMBLE_OOM());
          return NIMBLE_EXIT_FAILURE;
        }
        size_t sl = strlen(store);
        while (sl > 0 && store[sl - 1] == '/') sl--;
        snprintf(ref, n, "%.*s/%s", (int)sl, store, model);
        argv[m] = ref;
      }
    }
  }
  int rc = nimble_run_main(argc, argv, "nimble run");
  free(ref);
  return rc;
}

const nimble_cli_command nimble_cmd_run = {
    "run",
    "Run a compiled model on input files (nimble-run).",
    "run MODEL --input NAME=FILE [--input NAME=FILE ...] [--output-dir DIR] [--repeat N] [--threads N] "
    "[--entry NAME]",
    "The runtime's nimble-run, with the same options and exit status\n"
    "(`nimble run --help` lists them): MODEL is a .nimble file, a directory\n"
    "of parts (nimble fetch -o DIR), a store reference\n"
    "http://HOST:PORT/NAME:TAG or ...@sha256:..., or NAME:TAG (NAME@sha256:...)\n"
    "in the configured store (--store, NIMBLE_STORE, the config file), whose\n"
    "token (--token, NIMBLE_TOKEN, the config file) is sent. Inputs are .npy,\n"
    "ONNX TensorProto .pb, or JSON files for tree (ADT) inputs; each output is\n"
    "written to DIR/NAME.npy.\n"
    "\n"
    "Exit status: 0 success; 1 a file could not be read or written, or the\n"
    "model failed to load or run; 2 a usage error; 4 bad configuration.\n",
    run_run,
};
