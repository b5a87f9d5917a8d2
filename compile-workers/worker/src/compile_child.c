/* The compiler runs in a child process so that a model that crashes it,
 * loops, or eats memory costs one task, not the worker: RLIMIT_AS and
 * RLIMIT_CPU bound it, a wall-clock deadline kills it, and PR_SET_PDEATHSIG
 * kills it if the worker itself dies. */
#include "compile_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

nimble_status_t compile_child_start(compile_child *c, char *const argv[], const char *stderr_path,
                                    const compile_limits *limits, const char *what) {
  memset(c, 0, sizeof *c);
  c->what = what ? what : "the compiler";
  c->progress_fd = -1;
  snprintf(c->stderr_path, sizeof c->stderr_path, "%s", stderr_path);
  int errfd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (errfd < 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "'%s': %s", stderr_path, strerror(errno));
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    close(errfd);
    return nimble_status_make(NIMBLE_IO_ERROR, "pipe: %s", strerror(errno));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(errfd);
    close(p[0]);
    close(p[1]);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    /* Child: only async-signal-safe calls until exec. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull < 0) _exit(127);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(errfd, 2);
    if (p[1] == NIMBLE_WORKER_PROGRESS_FD) {
      fcntl(p[1], F_SETFD, 0);
    } else {
      dup2(p[1], NIMBLE_WORKER_PROGRESS_FD);
    }
    if (limits->mem_limit_mb > 0) {
      struct rlimit r;
      r.rlim_cur = r.rlim_max = (rlim_t)limits->mem_limit_mb << 20;
      setrlimit(RLIMIT_AS, &r);
    }
    if (limits->cpu_limit_s > 0) {
      struct rlimit r;
      r.rlim_cur = (rlim_t)limits->cpu_limit_s;
      r.rlim_max = (rlim_t)limits->cpu_limit_s + 1;
      setrlimit(RLIMIT_CPU, &r);
    }
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    for (int fd = NIMBLE_WORKER_PROGRESS_FD + 1; fd < 1024; fd++) close(fd);
    execv(argv[0], argv);
    static const char msg[] = "cannot execute the compiler\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(127);
    _exit(127);
  }
  close(errfd);
  close(p[1]);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  c->pid = pid;
  c->progress_fd = p[0];
  c->deadline_ms = now_ms() + (limits->timeout_s > 0 ? limits->timeout_s : 600) * 1000;
  return nimble_ok();
}

/* Digits into *out, at most max; returns the end, or NULL. */
static const char *parse_count(const char *p, long max, long *out) {
  if (*p < '0' || *p > '9') return NULL;
  long v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > max) return NULL;
  }
  *out = v;
  return p;
}

/* "kcache-new KEY": KEY is 64 lowercase hex digits. */
static int parse_kcache_new(const char *line, compile_progress_line *out) {
  static const char kPrefix[] = "kcache-new ";
  if (strncmp(line, kPrefix, sizeof kPrefix - 1)) return 0;
  const char *k = line + sizeof kPrefix - 1;
  size_t n = 0;
  for (; k[n]; n++)
    if (!((k[n] >= '0' && k[n] <= '9') || (k[n] >= 'a' && k[n] <= 'f'))) return 0;
  if (n != 64) return 0;
  memset(out, 0, sizeof *out);
  memcpy(out->key, k, 65);
  return 1;
}

/* "PHASE PERCENT" or "PHASE PERCENT DONE/TOTAL CACHED". */
static int parse_progress(const char *line, compile_progress_line *out) {
  if (parse_kcache_new(line, out)) return 1;
  memset(out, 0, sizeof *out);
  char *phase = out->phase;
  size_t n = 0;
  while (line[n] && line[n] != ' ') {
    char ch = line[n];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) return 0;
    if (++n > 32) return 0;
  }
  if (n == 0 || line[n] != ' ') return 0;
  memcpy(phase, line, n);
  phase[n] = '\0';
  const char *p = line + n + 1;
  long v;
  if (!(p = parse_count(p, 100, &v))) return 0;
  out->percent = (int)v;
  if (!*p) return 1;
  long done, total, cached;
  if (*p != ' ' || !(p = parse_count(p + 1, 1000000, &done)) || *p != '/' ||
      !(p = parse_count(p + 1, 1000000, &total)) || *p != ' ' ||
      !(p = parse_count(p + 1, 1000000, &cached)) || *p || cached > done || done > total)
    return 0;
  out->has_kernels = 1;
  out->done = done;
  out->total = total;
  out->cached = cached;
  return 1;
}

void compile_child_read_progress(compile_child *c,
                                 void (*fn)(void *user, const compile_progress_line *line),
                                 void *user) {
  if (c->progress_fd < 0) return;
  char buf[1024];
  for (;;) {
    ssize_t n = read(c->progress_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) { /* the compiler closed it */
        close(c->progress_fd);
        c->progress_fd = -1;
      }
      return;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') {
        c->line[c->line_len] = '\0';
        if (c->line_len && c->line[c->line_len - 1] == '\r') c->line[c->line_len - 1] = '\0';
        compile_progress_line l;
        if (parse_progress(c->line, &l)) fn(user, &l);
        c->line_len = 0;
      } else if (c->line_len + 1 < sizeof c->line) {
        c->line[c->line_len++] = buf[i];
      } /* an over-long line is cut; it will not parse */
    }
  }
}

/* The last 16 KiB of the compiler's stderr as printable text ("" if none):
 * bytes that are not printable ASCII become '?', so the text is valid UTF-8
 * on the wire whatever the compiler wrote. */
static char *stderr_text(const char *path) {
  FILE *f = fopen(path, "rb");
  char *out = calloc(16 * 1024 + 1, 1);
  if (!f || !out) {
    if (f) fclose(f);
    return out;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  if (size > 16 * 1024) fseek(f, size - 16 * 1024, SEEK_SET);
  else fseek(f, 0, SEEK_SET);
  size_t n = fread(out, 1, 16 * 1024, f);
  fclose(f);
  while (n && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\r')) n--;
  out[n] = '\0';
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)out[i];
    if (ch != '\n' && ch != '\t' && (ch < 0x20 || ch > 0x7e)) out[i] = '?';
  }
  return out;
}

static char *join_reason(const char *head, const char *text) {
  size_t n = strlen(head) + strlen(text) + 4;
  char *r = malloc(n);
  if (!r) return NULL;
  if (*text)
    snprintf(r, n, "%s: %s", head, text);
  else
    snprintf(r, n, "%s", head);
  return r;
}

void compile_child_poll(compile_child *c, const compile_limits *limits, int *out_done,
                        char **out_error) {
  *out_done = 0;
  *out_error = NULL;
  if (!c->pid) return;
  int status;
  pid_t r = waitpid(c->pid, &status, WNOHANG);
  char head[256];
  if (r == 0) {
    if (now_ms() < c->deadline_ms) return;
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    waitpid(c->pid, &status, 0);
    snprintf(head, sizeof head, "%s ran past its wall-clock limit of %ld s and was killed",
             c->what, limits->timeout_s);
  } else if (r < 0) {
    snprintf(head, sizeof head, "lost %s process: %s", c->what, strerror(errno));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    c->pid = 0;
    *out_done = 1;
    return;
  } else if (WIFEXITED(status)) {
    snprintf(head, sizeof head, "%s failed (exit status %d)", c->what, WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *extra = "";
    if (sig == SIGXCPU) extra = "; it used up its CPU-time limit";
    snprintf(head, sizeof head, "%s was killed by signal %d (%s)%s", c->what, sig,
             strsignal(sig), extra);
  } else {
    snprintf(head, sizeof head, "%s stopped (status 0x%x)", c->what, status);
  }
  c->pid = 0;
  char *text = stderr_text(c->stderr_path);
  *out_error = join_reason(head, text ? text : "");
  free(text);
  *out_done = 1;
}

void compile_child_kill(compile_child *c) {
  if (c->pid) {
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    c->pid = 0;
  }
  if (c->progress_fd >= 0) {
    close(c->progress_fd);
    c->progress_fd = -1;
  }
}
