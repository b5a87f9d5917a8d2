/* `nimble compile` in the `nimble` program: it runs `nimble-compile`, the
 * program beside it that links the compiler (LLVM among it). Keeping LLVM
 * out of `nimble` keeps the farm commands quick to start: loading
 * libLLVM-16 and its dependencies takes ~70 ms, more than a cached
 * `nimble submit` needs in all. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The directory of the running executable, with a trailing '/', into buf. */
static int self_dir(char *buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0 || (size_t)n >= size - 1) return -1;
  buf[n] = '\0';
  char *slash = strrchr(buf, '/');
  if (!slash) return -1;
  slash[1] = '\0';
  return 0;
}

static int run_compile_exec(nimble_cli_ctx *ctx, int argc, char **argv) {
  (void)ctx; /* compile reads no farm settings */
  char path[PATH_MAX];
  if (self_dir(path, sizeof path - sizeof "nimble-compile") != 0) {
    fprintf(stderr, "nimble compile: cannot find this program's directory (/proc/self/exe): %s\n",
            strerror(errno));
    return NIMBLE_EXIT_FAILURE;
  }
  strcat(path, "nimble-compile");
  /* nimble-compile takes nimble's command line: "nimble-compile compile ARGS". */
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (!args) {
    fprintf(stderr, "nimble compile: out of memory\n");
    return NIMBLE_EXIT_FAILURE;
  }
  args[0] = path;
  for (int i = 0; i < argc; i++) args[i + 1] = argv[i];
  fflush(stdout);
  execv(path, args);
  int err = errno;
  free(args);
  fprintf(stderr, "nimble compile: cannot run %s: %s (it is installed beside nimble)\n", path, strerror(err));
  return NIMBLE_EXIT_FAILURE;
}

/* help NULL: `nimble help compile` asks nimble-compile for it. */
const nimble_cli_command nimble_cmd_compile_exec = {
    "compile",
    "Compile a model (.onnx) or program (.nir) into an executable, locally.",
    "compile MODEL --target=SPEC -o OUT.nimble [OPTIONS] (nimble compile --help lists them)",
    NULL,
    run_compile_exec,
};
