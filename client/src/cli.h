/* Shared pieces of the `nimble` executable: exit codes, the subcommand
 * table's entry type, option parsing helpers and configuration loading.
 * Private to the client. */
#ifndef NIMBLE_CLI_H
#define NIMBLE_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "nimble/cli_config.h"
#include "nimble/status.h"

/* Exit codes; docs/cli.md lists them for users and scripts. */
enum {
  NIMBLE_EXIT_OK = 0,
  NIMBLE_EXIT_FAILURE = 1, /* the operation failed */
  NIMBLE_EXIT_USAGE = 2,   /* bad command line */
  NIMBLE_EXIT_INPUT = 3,   /* an input file could not be read, parsed, imported or typed */
  NIMBLE_EXIT_CONFIG = 4,  /* the configuration (file or environment) is invalid */
};

/* What every subcommand gets: the connection settings given as flags
 * (already checked, source FLAG) and where the config file is, loaded only
 * by the commands that need it (so `inspect` works with a broken config). */
typedef struct nimble_cli_ctx {
  nimble_cli_config config;
  const char *config_flag; /* --config FILE, borrowed from argv; NULL when absent */
  bool config_loaded;
} nimble_cli_ctx;

typedef struct nimble_cli_command {
  const char *name;
  const char *summary;     /* one line for `nimble --help` */
  const char *usage;       /* "inspect [--json] FILE" */
  const char *help;        /* the body of `nimble help CMD` */
  /* argv[0] is the command's name; returns an exit code. */
  int (*run)(nimble_cli_ctx *ctx, int argc, char **argv);
} nimble_cli_command;

extern const nimble_cli_command nimble_cmd_config;
extern const nimble_cli_command nimble_cmd_inspect;
extern const nimble_cli_command nimble_cmd_run; /* cmd_run.c, where the build has nimble-run */

/* Prints the command's help to `f`. */
void nimble_cli_print_command_help(const nimble_cli_command *cmd, FILE *f);

/* Reports a usage error for `cmd` on stderr ("nimble CMD: MESSAGE" and a
 * hint to --help) and returns NIMBLE_EXIT_USAGE. */
int nimble_cli_usage_error(const nimble_cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "nimble: MESSAGE" for a status on stderr and frees it. */
void nimble_cli_report(nimble_status_t s);

/* Loads the config file and the environment under the flags in ctx (once).
 * On failure reports the error and returns NIMBLE_EXIT_CONFIG; else 0. */
int nimble_cli_load_config(nimble_cli_ctx *ctx);

#endif
