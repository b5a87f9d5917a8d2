/* `nimble`: the command-line client. main() parses the global options,
 * dispatches to a subcommand from the table below and owns the decision of
 * how errors are reported and which exit code they give. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifndef NIMBLE_VERSION_STRING
#define NIMBLE_VERSION_STRING "unknown"
#endif

static const nimble_cli_command kHelpCommand;

#ifdef NIMBLE_CLI_HAVE_FARM
#include "farm_client.h" /* submit, status, fetch: the farm's client side */
#endif
#ifdef NIMBLE_CLI_HAVE_COMPILE
extern const nimble_cli_command nimble_cmd_compile; /* cmd_compile.c, with the compiler driver */
#endif
#ifdef NIMBLE_CLI_COMPILE_EXEC
extern const nimble_cli_command nimble_cmd_compile_exec; /* compile_exec.c: runs nimble-compile */
#endif
#ifdef NIMBLE_CLI_HAVE_KEYS
extern const nimble_cli_command nimble_cmd_keys; /* cmd_keys.c, where libsodium exists */
#endif

/* Only the subcommands this build has; the ones still to come are listed in
 * docs/cli.md, not here. nimble-compile, the program `nimble compile` runs,
 * is this file with the compiler linked in and only compile and help. */
#ifdef NIMBLE_CLI_COMPILE_PROGRAM
static const nimble_cli_command *const kCommands[] = {&kHelpCommand, &nimble_cmd_compile};
#else
static const nimble_cli_command *const kCommands[] = {
    &nimble_cmd_config,
    &kHelpCommand,
    &nimble_cmd_inspect,
#ifdef NIMBLE_CLI_COMPILE_EXEC
    &nimble_cmd_compile_exec,
#endif
#ifdef NIMBLE_CLI_HAVE_RUN
    &nimble_cmd_run,
#endif
#ifdef NIMBLE_CLI_HAVE_FARM
    &nimble_cmd_submit,
    &nimble_cmd_status,
    &nimble_cmd_fetch,
    &nimble_cmd_profile,
    &nimble_cmd_tune_records,
#endif
#ifdef NIMBLE_CLI_HAVE_KEYS
    &nimble_cmd_keys,
#endif
};
#endif
static const size_t kNumCommands = sizeof kCommands / sizeof kCommands[0];

static const nimble_cli_command *find_command(const char *name) {
  for (size_t i = 0; i < kNumCommands; i++)
    if (strcmp(kCommands[i]->name, name) == 0) return kCommands[i];
  return NULL;
}

static void print_main_help(FILE *f) {
  fprintf(f,
          "Usage: nimble [OPTIONS] COMMAND [ARGS...]\n"
          "\n"
          "The client of Nimble, a compiler service for dynamic neural networks.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < kNumCommands; i++)
    fprintf(f, "  %-12s %s\n", kCommands[i]->name, kCommands[i]->summary);
  fprintf(f,
          "\n"
          "Options (before or after the command):\n"
          "  --scheduler URL  the scheduler's endpoint (tcp://HOST:PORT)\n"
          "  --store URL      the artifact store (http://HOST:PORT)\n"
          "  --token TOKEN    the bearer token for the scheduler and the store\n"
          "  --config FILE    read FILE instead of the default config file\n"
          "  -h, --help       show this help (or a command's, after it)\n"
          "  --version        print the version and exit\n"
          "\n"
          "Settings come from flags, then NIMBLE_SCHEDULER, NIMBLE_STORE and\n"
          "NIMBLE_TOKEN, then the config file ($NIMBLE_CONFIG, else\n"
          "$XDG_CONFIG_HOME/nimble/config, else ~/.config/nimble/config).\n"
          "\n"
          "Exit codes: 0 success, 1 the operation failed, 2 usage error,\n"
          "3 an input could not be read or imported, 4 invalid configuration.\n"
          "\n"
          "Run 'nimble help COMMAND' for a command's options.\n");
}

void nimble_cli_print_command_help(const nimble_cli_command *cmd, FILE *f) {
  fprintf(f, "Usage: nimble %s\n\n%s\n\n%s", cmd->usage, cmd->summary, cmd->help);
}

int nimble_cli_usage_error(const nimble_cli_command *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nimble%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (cmd)
    fprintf(stderr, "\nUsage: nimble %s\nTry 'nimble %s --help'.\n", cmd->usage, cmd->name);
  else
    fprintf(stderr, "\nTry 'nimble --help'.\n");
  return NIMBLE_EXIT_USAGE;
}

void nimble_cli_report(nimble_status_t s) {
  if (!s) return;
  fprintf(stderr, "nimble: %s\n", nimble_status_message(s));
  nimble_status_free(s);
}

int nimble_cli_load_config(nimble_cli_ctx *ctx) {
  if (ctx->config_loaded) return NIMBLE_EXIT_OK;
  char *path = NULL;
  bool must_exist = false;
  nimble_status_t s = nimble_cli_config_locate(ctx->config_flag, &path, &must_exist);
  if (!s && path) s = nimble_cli_config_load_file(&ctx->config, path, must_exist);
  free(path);
  if (!s) s = nimble_cli_config_apply_env(&ctx->config);
  if (s) {
    nimble_cli_report(s);
    return NIMBLE_EXIT_CONFIG;
  }
  ctx->config_loaded = true;
  return NIMBLE_EXIT_OK;
}

/* ---- help ------------------------------------------------------------------ */

static int run_help(nimble_cli_ctx *ctx, int argc, char **argv) {
  if (argc == 1) {
    print_main_help(stdout);
    return NIMBLE_EXIT_OK;
  }
  if (argc > 2) return nimble_cli_usage_error(&kHelpCommand, "expected one command name");
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    nimble_cli_print_command_help(&kHelpCommand, stdout);
    return NIMBLE_EXIT_OK;
  }
  const nimble_cli_command *cmd = find_command(argv[1]);
  if (!cmd) return nimble_cli_usage_error(NULL, "unknown command '%s'", argv[1]);
  if (!cmd->help) { /* its program prints it: `compile --help` */
    char *args[] = {argv[1], "--help", NULL};
    return cmd->run(ctx, 2, args);
  }
  nimble_cli_print_command_help(cmd, stdout);
  return NIMBLE_EXIT_OK;
}

static const nimble_cli_command kHelpCommand = {
    "help",
    "Show the commands, or one command's options.",
    "help [COMMAND]",
    "With no argument, lists the commands; with one, shows its usage and options.\n",
    run_help,
};

/* ---- global options ---------------------------------------------------------- */

/* Recognises a global option at argv[*i] ("--store URL" or "--store=URL")
 * and applies it. Returns 1 when consumed, 0 when not a global option, or -1
 * after reporting a usage error. */
static int take_global_option(nimble_cli_ctx *ctx, int argc, char **argv, int *i) {
  static const char *const kValued[] = {"--scheduler", "--store", "--token", "--config"};
  const char *arg = argv[*i];
  for (size_t k = 0; k < sizeof kValued / sizeof kValued[0]; k++) {
    size_t n = strlen(kValued[k]);
    if (strncmp(arg, kValued[k], n) != 0 || (arg[n] != '\0' && arg[n] != '=')) continue;
    const char *value;
    if (arg[n] == '=') {
      value = arg + n + 1;
    } else {
      if (*i + 1 >= argc) {
        nimble_cli_usage_error(NULL, "option %s needs a value", kValued[k]);
        return -1;
      }
      value = argv[++*i];
    }
    if (strcmp(kValued[k], "--config") == 0) {
      if (!value[0]) {
        nimble_cli_usage_error(NULL, "option --config needs a file name");
        return -1;
      }
      ctx->config_flag = value;
      return 1;
    }
    nimble_cli_key_t key;
    nimble_cli_config_key_from_name(kValued[k] + 2, &key);
    nimble_status_t s =
        nimble_cli_config_set(&ctx->config, key, value, NIMBLE_CLI_SRC_FLAG, kValued[k]);
    if (s) {
      nimble_cli_usage_error(NULL, "%s", nimble_status_message(s));
      nimble_status_free(s);
      return -1;
    }
    return 1;
  }
  return 0;
}

static int run_main(nimble_cli_ctx *ctx, int argc, char **argv) {
  /* Global options before the command. */
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      print_main_help(stdout);
      return NIMBLE_EXIT_OK;
    }
    if (strcmp(a, "--version") == 0) {
      printf("nimble %s\n", NIMBLE_VERSION_STRING);
      return NIMBLE_EXIT_OK;
    }
    int r = take_global_option(ctx, argc, argv, &i);
    if (r < 0) return NIMBLE_EXIT_USAGE;
    if (r == 1) continue;
    if (a[0] == '-' && a[1] != '\0')
      return nimble_cli_usage_error(NULL, "unknown option '%s'", a);
    break;
  }
  if (i == argc) {
    fprintf(stderr, "nimble: no command given\n");
    print_main_help(stderr);
    return NIMBLE_EXIT_USAGE;
  }
  const nimble_cli_command *cmd = find_command(argv[i]);
  if (!cmd) return nimble_cli_usage_error(NULL, "unknown command '%s'", argv[i]);

  /* The command's arguments, with global options after it taken out (up to
   * a "--", after which everything is an operand). */
  char **args = calloc((size_t)(argc - i) + 1, sizeof *args);
  if (!args) {
    fprintf(stderr, "nimble: out of memory\n");
    return NIMBLE_EXIT_FAILURE;
  }
  int n = 0;
  args[n++] = argv[i];
  bool operands_only = false;
  for (int j = i + 1; j < argc; j++) {
    if (!operands_only && strcmp(argv[j], "--") == 0) operands_only = true;
    if (!operands_only) {
      int r = take_global_option(ctx, argc, argv, &j);
      if (r < 0) {
        free(args);
        return NIMBLE_EXIT_USAGE;
      }
      if (r == 1) continue;
    }
    args[n++] = argv[j];
  }
  args[n] = NULL;
  int rc = cmd->run(ctx, n, args);
  free(args);
  return rc;
}

int main(int argc, char **argv) {
  nimble_cli_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  nimble_cli_config_init(&ctx.config);
  int rc = run_main(&ctx, argc, argv);
  nimble_cli_config_deinit(&ctx.config);
  /* A write error on stdout (a full disk, a closed pipe) is a failure the
   * user must hear about, not a silent truncation. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "nimble: error writing the output\n");
    if (rc == NIMBLE_EXIT_OK) rc = NIMBLE_EXIT_FAILURE;
  }
  return rc;
}
