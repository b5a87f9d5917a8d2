/* Runs the compiler in a child process under limits (private to the worker). */
#ifndef NIMBLE_WORKER_COMPILE_CHILD_H
#define NIMBLE_WORKER_COMPILE_CHILD_H

#include <stdint.h>
#include <sys/types.h>

#include "nimble/status.h"

/* The fd number the compiler writes progress lines to. */
#define NIMBLE_WORKER_PROGRESS_FD 3

typedef struct compile_limits {
  long timeout_s;    /* wall clock */
  long cpu_limit_s;  /* RLIMIT_CPU */
  long mem_limit_mb; /* RLIMIT_AS; <= 0 none */
} compile_limits;

typedef struct compile_child {
  pid_t pid;           /* 0 when none */
  int progress_fd;     /* read end of the progress pipe, -1 when closed */
  char stderr_path[4096];
  int64_t deadline_ms; /* monotonic */
  const char *what;    /* names it in errors: "the compiler" (static string) */
  char line[256];      /* partial progress line */
  size_t line_len;
} compile_child;

/* Starts argv[0] with argv (borrowed), stdout to /dev/null, stderr to
 * stderr_path, fd NIMBLE_WORKER_PROGRESS_FD the write end of a pipe, limits
 * applied and SIGKILL on the worker's death. `what` (a static string, NULL:
 * "the compiler") names the child in error texts. */
nimble_status_t compile_child_start(compile_child *c, char *const argv[], const char *stderr_path,
                                    const compile_limits *limits, const char *what);

/* One well-formed line of the compiler's progress fd (docs/farm.md §4):
 * "PHASE PERCENT", "PHASE PERCENT DONE/TOTAL CACHED" (code generation's
 * kernels), or "kcache-new KEY" (key[0] != 0: a kernel the compile built
 * and stored in the kernel cache; phase is then ""). */
typedef struct compile_progress_line {
  char phase[33];
  int percent;
  int has_kernels;
  long done, total, cached;
  char key[65];
} compile_progress_line;

/* Reads what progress there is; calls fn for each complete line that is
 * well formed (others are ignored). */
void compile_child_read_progress(compile_child *c,
                                 void (*fn)(void *user, const compile_progress_line *line),
                                 void *user);

/* Non-blocking: *out_done 1 once the child exited (or was killed for its
 * deadline); then *out_error is NULL on success or the reason (the caller
 * frees it), built from the exit status and the stderr text. */
void compile_child_poll(compile_child *c, const compile_limits *limits, int *out_done,
                        char **out_error);

/* Kills and reaps the child if there is one; closes the pipe. */
void compile_child_kill(compile_child *c);

#endif
