/* Runs the `nimble` binary in a child process with a controlled
 * environment and captures its output through temporary files (pipes
 * could fill and block a chatty child). */
#include "cli_run.h"

#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_scratch[256];

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  /* Tests chmod files to 0; removal needs only the folder's permission. */
  if (remove(path) != 0) fprintf(stderr, "cli_run: could not remove %s\n", path);
  return 0;
}

static void remove_scratch(void) {
  if (g_scratch[0]) nftw(g_scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *cli_scratch_dir(void) {
  if (!g_scratch[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_scratch, sizeof g_scratch, "%s/nimble-cli-test-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(g_scratch) != NULL, "mkdtemp failed");
    atexit(remove_scratch);
    char home[300];
    snprintf(home, sizeof home, "%s/home", g_scratch);
    ck_assert(mkdir(home, 0700) == 0);
  }
  return g_scratch;
}

char *cli_write_file(const char *name, const char *text) {
  char *path;
  ck_assert(asprintf(&path, "%s/%s", cli_scratch_dir(), name) > 0);
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot create %s", path);
  ck_assert(fwrite(text, 1, strlen(text), f) == strlen(text));
  ck_assert(fclose(f) == 0);
  return path;
}

char *cli_source_path(const char *rel) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_msg(src != NULL, "NIMBLE_SOURCE_DIR is not set (run the suite through ctest)");
  char *path;
  ck_assert(asprintf(&path, "%s/%s", src, rel) > 0);
  return path;
}

static char *slurp(int fd) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  ck_assert(buf != NULL);
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    if (len + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      ck_assert(buf != NULL);
    }
    ssize_t n = read(fd, buf + len, cap - len - 1);
    if (n <= 0) break;
    len += (size_t)n;
  }
  buf[len] = '\0';
  return buf;
}

static int temp_fd(const char *what) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s-XXXXXX", cli_scratch_dir(), what);
  int fd = mkstemp(path);
  ck_assert_msg(fd >= 0, "mkstemp failed");
  unlink(path);
  return fd;
}

cli_result cli_run(const char *const *args, const char *const *env) {
  return cli_run_to(NULL, args, env);
}

cli_result cli_run_to(const char *stdout_path, const char *const *args, const char *const *env) {
  const char *bin = getenv("NIMBLE_CLI_BIN");
  ck_assert_msg(bin != NULL, "NIMBLE_CLI_BIN is not set (run the suite through ctest)");
  char home[300];
  snprintf(home, sizeof home, "%s/home", cli_scratch_dir());
  int out_fd = stdout_path ? open(stdout_path, O_WRONLY | O_CLOEXEC) : temp_fd("stdout");
  int err_fd = temp_fd("stderr");
  ck_assert_msg(out_fd >= 0, "cannot open %s", stdout_path ? stdout_path : "a temporary file");

  size_t n = 0;
  while (args && args[n]) n++;
  char **argv = calloc(n + 2, sizeof *argv);
  ck_assert(argv != NULL);
  argv[0] = (char *)bin;
  for (size_t i = 0; i < n; i++) argv[i + 1] = (char *)args[i];

  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork failed");
  if (pid == 0) {
    static const char *const kCleared[] = {"NIMBLE_SCHEDULER", "NIMBLE_STORE", "NIMBLE_TOKEN",
                                           "NIMBLE_CONFIG", "XDG_CONFIG_HOME", "COLUMNS"};
    for (size_t i = 0; i < sizeof kCleared / sizeof kCleared[0]; i++) unsetenv(kCleared[i]);
    setenv("HOME", home, 1);
    for (size_t i = 0; env && env[i]; i++) {
      const char *eq = strchr(env[i], '=');
      if (!eq) {
        unsetenv(env[i]);
        continue;
      }
      char *k = strndup(env[i], (size_t)(eq - env[i]));
      setenv(k, eq + 1, 1);
      free(k);
    }
    int in_fd = open("/dev/null", O_RDONLY);
    if (in_fd < 0 || dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
    execv(bin, argv);
    _exit(127);
  }
  free(argv);
  int status = 0;
  ck_assert(waitpid(pid, &status, 0) == pid);
  cli_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ck_assert_msg(r.exit_code != 127 && r.exit_code != 126, "could not run %s", bin);
  r.out = stdout_path ? strdup("") : slurp(out_fd);
  r.err = slurp(err_fd);
  close(out_fd);
  close(err_fd);
  return r;
}

void cli_result_free(cli_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}
