/* Runs the real `nimble` binary for the client suites and captures what it
 * printed and how it exited. */
#ifndef NIMBLE_TESTS_CLI_RUN_H
#define NIMBLE_TESTS_CLI_RUN_H

typedef struct cli_result {
  int exit_code; /* -1 when killed by a signal */
  char *out;     /* stdout, NUL-terminated; caller frees via cli_result_free */
  char *err;     /* stderr */
} cli_result;

/* Runs $NIMBLE_CLI_BIN with `args` (NULL-terminated, without argv[0]).
 * The child's environment is the test's, minus every NIMBLE_* variable the
 * client reads, with HOME set to an empty scratch folder and
 * XDG_CONFIG_HOME unset (so no user config leaks in), then `env` applied:
 * "K=V" sets, "K" unsets (NULL-terminated, may be NULL). Fails the test
 * when the binary cannot be run. */
cli_result cli_run(const char *const *args, const char *const *env);
/* The same with the child's stdout sent to `stdout_path` (e.g. /dev/full);
 * r.out is then empty. */
cli_result cli_run_to(const char *stdout_path, const char *const *args, const char *const *env);
void cli_result_free(cli_result *r);

/* A scratch folder for this process (created once, removed at exit). */
const char *cli_scratch_dir(void);
/* Writes `text` to a file in the scratch folder; returns its path
 * (malloc'ed: the caller frees). */
char *cli_write_file(const char *name, const char *text);
/* The path of a file in the source tree ($NIMBLE_SOURCE_DIR/rel); caller frees. */
char *cli_source_path(const char *rel);

#endif
