/* Loopback farm for the scheduler suites (see farm_harness.h). */
#include "farm_harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static farm *g_current;

void farm_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *env_or_die(const char *name) {
  const char *v = getenv(name);
  ck_assert_msg(v && *v, "%s is not set (run the suite through ctest)", name);
  return v;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* What the kernel says of a process that has not exec'd in time: its
 * state and where it sleeps (to stderr, shown with the failure). */
static void print_stuck_child(pid_t pid, const char *exe) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  char *stat = read_text(path);
  snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
  char *wchan = read_text(path);
  if (stat) stat[strcspn(stat, "\n")] = '\0';
  fprintf(stderr, "farm harness: child %d had not exec'd %s after 5 s (stat: %.200s; wchan: %s); started again\n",
          (int)pid, exe, stat ? stat : "?", wchan ? wchan : "?");
  free(stat);
  free(wchan);
}

/* Whether pid has exec'd exe (its /proc/PID/exe is exe's file). */
static int has_execd(pid_t pid, const struct stat *exe) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  return stat(path, &st) == 0 && st.st_dev == exe->st_dev && st.st_ino == exe->st_ino;
}

static pid_t fork_exec(char *const argv[], int fd, int nul) {
  pid_t parent = getpid();
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    /* Only async-signal-safe calls until execv: the test process has
     * threads (ZeroMQ's, the sanitizers'). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    dup2(nul, 0);
    execv(argv[0], argv);
    static const char msg[] = "farm harness: execv failed\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  return pid;
}

/* fork+exec with output to log; the child dies with the test process.
 * The log is opened here, so it exists (maybe empty) even for a child
 * that never ran. A CI run once saw a worker whose log was never created
 * and that never registered (ASan stage, cause unknown): a child that has
 * not exec'd within 5 s is reported, killed and started once more, so a
 * stuck fork in the harness says so instead of failing the test it
 * serves as a timeout of the product. */
static pid_t spawn(char *const argv[], const char *log) {
  int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ck_assert_msg(fd >= 0, "cannot open %s: %s", log, strerror(errno));
  int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ck_assert_msg(nul >= 0, "cannot open /dev/null: %s", strerror(errno));
  struct stat exe;
  ck_assert_msg(stat(argv[0], &exe) == 0, "%s: %s", argv[0], strerror(errno));
  pid_t pid = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    pid = fork_exec(argv, fd, nul);
    long long end = now_ms() + 5000;
    int ran = 0;
    while (!ran && now_ms() < end) {
      /* Exited (not reaped: callers wait for it) or exec'd. */
      siginfo_t si = {0};
      ran = (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) ||
            has_execd(pid, &exe);
      if (!ran) farm_sleep_ms(2);
    }
    if (ran || attempt == 1) break;
    print_stuck_child(pid, argv[0]);
    int status;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  close(fd);
  close(nul);
  return pid;
}

static int stop_pid(pid_t pid, int sig, long timeout_ms) {
  if (pid <= 0) return 0;
  kill(pid, sig);
  long long end = now_ms() + timeout_ms;
  int status;
  while (now_ms() < end) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return r == pid ? status : 0;
    farm_sleep_ms(20);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

static int run_script(const char *script, const char *cmd, const char *dir, const char *extra) {
  char line[2048];
  snprintf(line, sizeof line, "mkdir -p '%s' && bash '%s/tests/support/%s' %s '%s' %s >> '%s/../fixtures.log' 2>&1", dir,
           env_or_die("NIMBLE_SOURCE_DIR"), script, cmd, dir, extra ? extra : "", dir);
  int rc = system(line);
  return rc;
}

static void read_addr(const char *dir, char host[64], int *port) {
  char path[400];
  snprintf(path, sizeof path, "%s/addr", dir);
  char *t = read_text(path);
  ck_assert_msg(t != NULL, "no %s", path);
  char *colon = strrchr(t, ':');
  ck_assert(colon != NULL);
  *colon = '\0';
  snprintf(host, 64, "%s", t);
  *port = atoi(colon + 1);
  free(t);
}

void farm_guard_start(farm_guard *g, const char *cleanup_cmd) {
  int p[2];
  ck_assert(pipe2(p, O_CLOEXEC) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    setsid();
    close(p[1]);
    for (int fd = 3; fd < 1024; fd++)
      if (fd != p[0]) close(fd);
    char buf[64];
    while (read(p[0], buf, sizeof buf) != 0) {
      if (errno != EINTR) break;
    }
    execl("/bin/sh", "sh", "-c", cleanup_cmd, (char *)NULL);
    _exit(127);
  }
  close(p[0]);
  g->fd = p[1];
  g->pid = pid;
}

void farm_guard_end(farm_guard *g) {
  if (g->fd > 0) close(g->fd);
  g->fd = -1;
  if (g->pid > 0) waitpid(g->pid, NULL, 0);
  g->pid = 0;
}

static int g_in_exit;

static void at_exit_stop(void) {
  g_in_exit = 1;
  if (g_current) farm_stop(g_current);
}

void farm_start_scheduler(farm *f) {
  char bin[512], ready[400], redis[128];
  snprintf(bin, sizeof bin, "%s/scheduler/nimble-scheduler", env_or_die("NIMBLE_BUILD_DIR"));
  snprintf(ready, sizeof ready, "%s/sched.ready", f->dir);
  snprintf(redis, sizeof redis, "%s:%d", f->redis_host, f->redis_port);
  unlink(ready);
  int restart = f->clients_ep[0] != '\0';
  char *argv[48];
  int a = 0;
  argv[a++] = bin;
  argv[a++] = "--clients";
  argv[a++] = restart ? f->clients_ep : "tcp://127.0.0.1:*";
  argv[a++] = "--workers";
  argv[a++] = restart ? f->workers_ep : "tcp://127.0.0.1:*";
  argv[a++] = "--events";
  argv[a++] = restart ? f->events_ep : "tcp://127.0.0.1:*";
  argv[a++] = "--redis";
  argv[a++] = redis;
  argv[a++] = "--store";
  argv[a++] = f->store_url;
  argv[a++] = "--ready-file";
  argv[a++] = ready;
  for (int i = 0; i < f->nsched_args; i++) argv[a++] = f->sched_args[i];
  argv[a] = NULL;
  f->sched_pid = spawn(argv, f->sched_log);
  for (int i = 0; i < 200; i++) {
    char *t = read_text(ready);
    if (t) {
      char *line = strtok(t, "\n");
      for (; line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "clients=", 8)) snprintf(f->clients_ep, sizeof f->clients_ep, "%s", line + 8);
        if (!strncmp(line, "workers=", 8)) snprintf(f->workers_ep, sizeof f->workers_ep, "%s", line + 8);
        if (!strncmp(line, "events=", 7)) snprintf(f->events_ep, sizeof f->events_ep, "%s", line + 7);
      }
      free(t);
      break;
    }
    int status;
    if (waitpid(f->sched_pid, &status, WNOHANG) == f->sched_pid) {
      f->sched_pid = 0;
      char *log = read_text(f->sched_log);
      ck_abort_msg("nimble-scheduler exited at start: %s", log ? log : "");
    }
    farm_sleep_ms(50);
  }
  ck_assert_msg(f->clients_ep[0], "nimble-scheduler did not write its ready file");
  if (!f->client) {
    f->client = zmq_socket(f->zctx, ZMQ_DEALER);
    int zero = 0, timeout = 10000;
    zmq_setsockopt(f->client, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->client, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_connect(f->client, f->clients_ep), 0);
  }
}

int farm_stop_scheduler(farm *f, int sig) {
  int status = stop_pid(f->sched_pid, sig, 10000);
  f->sched_pid = 0;
  return status;
}

static void add_arg(farm *f, int *a, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_arg(farm *f, int *a, const char *fmt, ...) {
  char tmp[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(f->sched_args[(*a)++], tmp, sizeof tmp);
}

void farm_start(farm *f, const farm_config *cfg) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/nimble-farm-test.XXXXXX");
  ck_assert(mkdtemp(f->dir) != NULL);
  g_current = f;
  static int registered;
  if (!registered++) atexit(at_exit_stop);
  snprintf(f->redis_dir, sizeof f->redis_dir, "%s/redis", f->dir);
  snprintf(f->store_dir, sizeof f->store_dir, "%s/store", f->dir);
  snprintf(f->store_root, sizeof f->store_root, "%s/root", f->store_dir);
  snprintf(f->sched_log, sizeof f->sched_log, "%s/scheduler.log", f->dir);
  snprintf(f->compile_log, sizeof f->compile_log, "%s/compiles.log", f->dir);
  {
    const char *src = env_or_die("NIMBLE_SOURCE_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "bash '%s/tests/support/redis_fixture.sh' stop '%s' >/dev/null 2>&1; "
             "bash '%s/tests/support/store_fixture.sh' stop '%s' >/dev/null 2>&1; "
             "[ -n \"$NIMBLE_FARM_KEEP\" ] || rm -rf '%s'",
             src, f->redis_dir, src, f->store_dir, f->dir);
    farm_guard_start(&f->guard, cmd);
  }
  ck_assert_msg(run_script("redis_fixture.sh", "start", f->redis_dir,
                           cfg && cfg->aof ? "--appendonly yes" : "--appendonly no") == 0,
                "redis_fixture.sh start failed (see %s/fixtures.log)", f->redis_dir);
  read_addr(f->redis_dir, f->redis_host, &f->redis_port);
  snprintf(f->store_args, sizeof f->store_args, "--quiet %s", cfg && cfg->store_args ? cfg->store_args : "");
  ck_assert_msg(run_script("store_fixture.sh", "start", f->store_dir, f->store_args) == 0,
                "store_fixture.sh start failed");
  char host[64];
  int port;
  read_addr(f->store_dir, host, &port);
  snprintf(f->store_url, sizeof f->store_url, "http://%s:%d", host, port);
  nimble_store_client_options_t so = {.base_url = f->store_url, .token = "test-token"};
  ck_assert(nimble_store_client_create(&so, &f->store) == NULL);
  struct timeval tv = {2, 0};
  f->redis = redisConnectWithTimeout(f->redis_host, f->redis_port, tv);
  ck_assert(f->redis && !f->redis->err);
  f->zctx = zmq_ctx_new();

  char lease[32];
  snprintf(lease, sizeof lease, "%ld", cfg && cfg->lease_ms ? cfg->lease_ms : 2000);
  int a = 0;
  add_arg(f, &a, "--lease-ms");
  add_arg(f, &a, "%s", lease);
  add_arg(f, &a, "--worker-timeout-ms");
  add_arg(f, &a, "3000");
  add_arg(f, &a, "--store-token-file");
  if (cfg && cfg->sched_store_token) {
    add_arg(f, &a, "%s/sched-store-token", f->dir);
    write_text(f->sched_args[a - 1], cfg->sched_store_token);
  } else {
    add_arg(f, &a, "%s/tokens", f->store_dir);
  }
  if (cfg && cfg->token) {
    add_arg(f, &a, "--token-file");
    add_arg(f, &a, "%s/client-tokens", f->dir);
    write_text(f->sched_args[a - 1], cfg->token);
  }
  if (cfg && cfg->curve_secret) {
    add_arg(f, &a, "--curve-secret");
    add_arg(f, &a, "%s/sched.secret", f->dir);
    write_text(f->sched_args[a - 1], cfg->curve_secret);
    add_arg(f, &a, "--worker-keys");
    add_arg(f, &a, "%s/worker-keys", f->dir);
    write_text(f->sched_args[a - 1], cfg->worker_keys);
  }
  if (cfg && cfg->signing_key) {
    add_arg(f, &a, "--signing-key");
    add_arg(f, &a, "%s", cfg->signing_key);
  }
  for (int i = 0; cfg && cfg->sched_extra && cfg->sched_extra[i]; i++) {
    ck_assert_msg(a < 24, "too many scheduler arguments");
    add_arg(f, &a, "%s", cfg->sched_extra[i]);
  }
  f->nsched_args = a;
  farm_start_scheduler(f);
}

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *ftw) {
  (void)s;
  (void)flag;
  (void)ftw;
  remove(p);
  return 0;
}

/* Sanitizer reports in the logs of the processes the farm ran (the
 * scheduler and workers built with -DNIMBLE_SANITIZE=ON report there). */
static char *sanitizer_report(farm *f) {
  const char *names[] = {"scheduler.log", "worker-*.log"};
  for (int i = 0; i < 2; i++) {
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' %s/%s 2>/dev/null | head -1",
             f->dir, names[i]);
    FILE *p = popen(cmd, "r");
    if (!p) continue;
    char line[512] = "";
    char *got = fgets(line, sizeof line, p);
    pclose(p);
    if (got && *line) return strdup(line);
  }
  return NULL;
}

void farm_stop(farm *f) {
  int at_exit = g_in_exit;
  if (g_current == f) g_current = NULL;
  for (int i = 0; i < f->nworkers; i++) {
    stop_pid(f->workers[i], SIGTERM, 5000);
    f->workers[i] = 0;
  }
  farm_stop_scheduler(f, SIGTERM);
  if (f->client) zmq_close(f->client);
  f->client = NULL;
  if (f->zctx) zmq_ctx_term(f->zctx);
  f->zctx = NULL;
  if (f->redis) redisFree(f->redis);
  f->redis = NULL;
  nimble_store_client_destroy(f->store);
  f->store = NULL;
  if (f->proxy_pid > 0) {
    close(f->proxy_cmd);
    close(f->proxy_reply);
    stop_pid(f->proxy_pid, SIGKILL, 5000);
    f->proxy_pid = 0;
  }
  if (f->redis_dir[0]) run_script("redis_fixture.sh", "stop", f->redis_dir, NULL);
  if (f->store_pid > 0) {
    stop_pid(f->store_pid, SIGTERM, 20000);
    f->store_pid = 0;
    char pidfile[400];
    snprintf(pidfile, sizeof pidfile, "%s/pid", f->store_dir);
    unlink(pidfile);
  } else if (f->store_dir[0]) {
    run_script("store_fixture.sh", "stop", f->store_dir, NULL);
  }
  char *report = at_exit ? NULL : sanitizer_report(f);
  if (report) {
    fprintf(stderr, "farm kept in %s for its sanitizer report\n", f->dir);
    setenv("NIMBLE_FARM_KEEP", "1", 1);
    farm_guard_end(&f->guard);
    ck_abort_msg("sanitizer report in %s", report);
  }
  if (getenv("NIMBLE_FARM_KEEP")) fprintf(stderr, "farm kept in %s\n", f->dir);
  else if (f->dir[0]) nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  farm_guard_end(&f->guard);
}

void farm_restart_redis(farm *f) {
  ck_assert(run_script("redis_fixture.sh", "stop", f->redis_dir, NULL) == 0);
  char extra[64];
  snprintf(extra, sizeof extra, "--appendonly yes --port %d", f->redis_port);
  ck_assert_msg(run_script("redis_fixture.sh", "start", f->redis_dir, extra) == 0,
                "redis did not restart on port %d", f->redis_port);
  redisFree(f->redis);
  struct timeval tv = {2, 0};
  f->redis = redisConnectWithTimeout(f->redis_host, f->redis_port, tv);
  ck_assert(f->redis && !f->redis->err);
}

int farm_start_worker(farm *f, const char *id, const char *targets, const char *const *extra) {
  return farm_start_worker_exe(f, "compile-workers/worker/nimble-worker", id, targets, extra);
}

int farm_start_worker_exe(farm *f, const char *exe, const char *id, const char *targets,
                          const char *const *extra) {
  int slot = -1;
  for (int k = 0; k < f->nworkers; k++)
    if (f->workers[k] <= 0) {
      slot = k;
      break;
    }
  ck_assert(slot >= 0 || f->nworkers < FARM_MAX_WORKERS);
  const char *build = env_or_die("NIMBLE_BUILD_DIR");
  char bin[512], compiler[512], log[400], tokens[400];
  snprintf(bin, sizeof bin, "%s/%s", build, exe);
  snprintf(compiler, sizeof compiler, "%s/tests/scheduler/farm_test_compiler", build);
  snprintf(log, sizeof log, "%s/worker-%s.log", f->dir, id);
  snprintf(tokens, sizeof tokens, "%s/tokens", f->store_dir);
  setenv("NIMBLE_TEST_COMPILER_LOG", f->compile_log, 1);
  char *argv[48];
  int a = 0;
  argv[a++] = bin;
  argv[a++] = "--scheduler";
  argv[a++] = f->worker_sched_ep[0] ? f->worker_sched_ep : f->workers_ep;
  argv[a++] = "--store";
  argv[a++] = f->worker_store_url[0] ? f->worker_store_url : f->store_url;
  argv[a++] = "--store-token-file";
  argv[a++] = tokens;
  argv[a++] = "--targets";
  argv[a++] = (char *)targets;
  argv[a++] = "--id";
  argv[a++] = (char *)id;
  argv[a++] = "--compiler";
  argv[a++] = compiler;
  argv[a++] = "--work-dir";
  argv[a++] = f->dir;
  argv[a++] = "--heartbeat-ms";
  argv[a++] = "200";
  for (int i = 0; extra && extra[i] && a < 46; i++) argv[a++] = (char *)extra[i];
  argv[a] = NULL;
  int i = slot >= 0 ? slot : f->nworkers++;
  f->workers[i] = spawn(argv, log);
  return i;
}

void farm_kill_worker(farm *f, int i, int sig) {
  stop_pid(f->workers[i], sig, 5000);
  f->workers[i] = 0;
}

int farm_worker_alive(farm *f, int i) {
  if (f->workers[i] <= 0) return 0;
  int status;
  return waitpid(f->workers[i], &status, WNOHANG) == 0;
}

void farm_push_model(farm *f, const char *text, char digest[72]) {
  nimble_digest_t d;
  nimble_status_t st = nimble_store_push_blob(f->store, "models", text, strlen(text), &d);
  ck_assert_msg(st == NULL, "pushing the model: %s", nimble_status_message(st));
  nimble_digest_format(&d, digest);
}

int farm_request(farm *f, nimble_msg_type_t type, json_t *body, const char *token,
                 nimble_msg_type_t *out_type, json_t **out_body) {
  if (token) json_object_set_new(body, "token", json_string(token));
  char *out;
  size_t n;
  nimble_status_t st = nimble_message_encode(type, body, &out, &n);
  json_decref(body);
  ck_assert_msg(st == NULL, "encode: %s", nimble_status_message(st));
  ck_assert(zmq_send(f->client, out, n, 0) == (int)n);
  free(out);
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, f->client, 0) < 0) {
    zmq_msg_close(&m);
    return -1;
  }
  st = nimble_message_decode(zmq_msg_data(&m), zmq_msg_size(&m), out_type, out_body);
  zmq_msg_close(&m);
  ck_assert_msg(st == NULL, "reply does not decode: %s", nimble_status_message(st));
  return 0;
}

json_t *farm_submit(farm *f, const char *model, const char *name, const char *const *targets,
                    const char *token) {
  json_t *t = json_array();
  for (int i = 0; targets[i]; i++) json_array_append_new(t, json_string(targets[i]));
  json_t *body = json_pack("{s:s,s:s,s:s,s:o}", "model", model, "format", "onnx", "name", name,
                           "targets", t);
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert_msg(farm_request(f, NIMBLE_MSG_SUBMIT, body, token, &type, &reply) == 0,
                "no reply to SUBMIT");
  if (type == NIMBLE_MSG_ERROR) {
    char *txt = json_dumps(reply, 0);
    ck_abort_msg("SUBMIT answered ERROR: %s", txt);
  }
  ck_assert_int_eq(type, NIMBLE_MSG_ACCEPTED);
  return reply;
}

/* The last lines of the scheduler's and the workers' logs, on stderr (ctest
 * shows them with the failure): a farm test that times out is otherwise
 * silent about why, and its folder is gone once it ends. */
void farm_print_logs(farm *f, const char *why) {
  fprintf(stderr, "---- farm logs (%s), from %s ----\n", why, f->dir);
  fflush(stderr);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "for l in '%s'/scheduler.log '%s'/worker-*.log; do [ -f \"$l\" ] || continue; "
           "echo \"== $l (last 40 lines)\"; tail -n 40 \"$l\"; done 1>&2", f->dir, f->dir);
  if (system(cmd) != 0) fprintf(stderr, "(could not print the logs)\n");
  fprintf(stderr, "---- end of farm logs ----\n");
}

json_t *farm_wait_job(farm *f, const char *job, const char *state, long timeout_ms,
                      const char *token) {
  long long end = now_ms() + timeout_ms;
  json_t *last = NULL;
  for (;;) {
    nimble_msg_type_t type;
    json_t *reply;
    int r = farm_request(f, NIMBLE_MSG_STATUS, json_pack("{s:s}", "job", job), token, &type, &reply);
    if (r == 0 && type == NIMBLE_MSG_JOB_STATUS) {
      json_decref(last);
      last = reply;
      if (!strcmp(json_string_value(json_object_get(reply, "state")), state)) return last;
    } else if (r == 0) {
      json_decref(reply);
    }
    if (now_ms() > end) {
      if (timeout_ms < 1000) return last; /* a probe of the job's state now */
      char why[200];
      snprintf(why, sizeof why, "job %s not '%s' after %ld ms", job, state, timeout_ms);
      farm_print_logs(f, why);
      return last;
    }
    farm_sleep_ms(100);
  }
}

char *farm_redis_hget(farm *f, const char *key, const char *field) {
  redisReply *r = redisCommand(f->redis, "HGET %s %s", key, field);
  char *v = NULL;
  if (r && r->type == REDIS_REPLY_STRING) v = strdup(r->str);
  if (r) freeReplyObject(r);
  return v;
}

int farm_wait_redis_field(farm *f, const char *key, const char *field, const char *value,
                          long timeout_ms) {
  long long end = now_ms() + timeout_ms;
  while (now_ms() < end) {
    char *v = farm_redis_hget(f, key, field);
    int ok = v && (value ? !strcmp(v, value) : *v != '\0');
    free(v);
    if (ok) return 1;
    farm_sleep_ms(50);
  }
  return 0;
}

int farm_count_compiles(farm *f, const char *needle) {
  char *t = read_text(f->compile_log);
  if (!t) return 0;
  int n = 0;
  for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"))
    if (!needle || strstr(line, needle)) n++;
  free(t);
  return n;
}

int farm_worker_log_contains(farm *f, const char *id, const char *text) {
  char path[400];
  snprintf(path, sizeof path, "%s/worker-%s.log", f->dir, id);
  char *t = read_text(path);
  int found = t && strstr(t, text) != NULL;
  free(t);
  return found;
}

long long farm_worker_metric(farm *f, const char *id, const char *series) {
  char path[400];
  snprintf(path, sizeof path, "%s/worker-%s.log", f->dir, id);
  char *text = read_text(path);
  ck_assert_msg(text != NULL, "no log for worker %s", id);
  char url[200] = "";
  const char *at = strstr(text, "metrics at ");
  if (at) sscanf(at + 11, "%199s", url);
  free(text);
  ck_assert_msg(url[0], "worker %s printed no metrics URL (start it with --metrics)", id);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "curl -sf '%s'", url);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  char line[1024];
  long long v = -1;
  size_t len = strlen(series);
  while (fgets(line, sizeof line, p))
    if (!strncmp(line, series, len) && line[len] == ' ') v = atoll(line + len + 1);
  pclose(p);
  return v;
}

int farm_sched_log_contains(farm *f, const char *text) {
  char *t = read_text(f->sched_log);
  int found = t && strstr(t, text) != NULL;
  free(t);
  return found;
}

/* The pid a fixture script wrote to DIR/pid, or 0. */
static pid_t read_pid(const char *dir) {
  char path[400];
  snprintf(path, sizeof path, "%s/pid", dir);
  char *t = read_text(path);
  pid_t pid = t ? (pid_t)atol(t) : 0;
  free(t);
  return pid;
}

/* Gone, or a zombie of a parent that is not us (the fixture's shell exited). */
static void wait_gone(pid_t pid, long timeout_ms) {
  long long end = now_ms() + timeout_ms;
  while (now_ms() < end) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *s = fopen(path, "r");
    if (!s) return;
    size_t n = fread(buf, 1, sizeof buf - 1, s);
    fclose(s);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    if (rp && rp[1] == ' ' && rp[2] == 'Z') return;
    farm_sleep_ms(10);
  }
  ck_abort_msg("process %d outlived SIGKILL for %ld ms", (int)pid, timeout_ms);
}

void farm_crash_redis(farm *f) {
  pid_t pid = read_pid(f->redis_dir);
  ck_assert_msg(pid > 0, "no redis pid in %s", f->redis_dir);
  kill(pid, SIGKILL);
  wait_gone(pid, 10000);
  char pidfile[400];
  snprintf(pidfile, sizeof pidfile, "%s/pid", f->redis_dir);
  unlink(pidfile);
  char extra[64];
  snprintf(extra, sizeof extra, "--appendonly yes --port %d", f->redis_port);
  ck_assert_msg(run_script("redis_fixture.sh", "start", f->redis_dir, extra) == 0,
                "redis did not restart on port %d", f->redis_port);
  redisFree(f->redis);
  struct timeval tv = {2, 0};
  f->redis = redisConnectWithTimeout(f->redis_host, f->redis_port, tv);
  ck_assert(f->redis && !f->redis->err);
}

void farm_kill_store(farm *f, int sig) {
  if (f->store_pid > 0) {
    stop_pid(f->store_pid, sig, 20000);
    f->store_pid = 0;
  } else {
    pid_t pid = read_pid(f->store_dir);
    ck_assert_msg(pid > 0, "no store pid in %s", f->store_dir);
    kill(pid, sig);
    wait_gone(pid, 20000);
  }
  char pidfile[400];
  snprintf(pidfile, sizeof pidfile, "%s/pid", f->store_dir);
  unlink(pidfile);
}

void farm_start_store(farm *f) {
  char bin[512], listen[64], ready[400], tokens[400], log[400], pidfile[400];
  snprintf(bin, sizeof bin, "%s/artifact-store/server/nimble-store", env_or_die("NIMBLE_BUILD_DIR"));
  snprintf(listen, sizeof listen, "%s", f->store_url + strlen("http://"));
  snprintf(ready, sizeof ready, "%s/addr.restart", f->store_dir);
  snprintf(tokens, sizeof tokens, "%s/tokens", f->store_dir);
  snprintf(log, sizeof log, "%s/log", f->store_dir);
  snprintf(pidfile, sizeof pidfile, "%s/pid", f->store_dir);
  unlink(ready);
  char args[256];
  snprintf(args, sizeof args, "%s", f->store_args);
  char *argv[40];
  int a = 0;
  argv[a++] = bin;
  argv[a++] = "--listen";
  argv[a++] = listen;
  argv[a++] = "--root";
  argv[a++] = f->store_root;
  argv[a++] = "--ready-file";
  argv[a++] = ready;
  argv[a++] = "--token-file";
  argv[a++] = tokens;
  for (char *tok = strtok(args, " "); tok && a < 38; tok = strtok(NULL, " ")) argv[a++] = tok;
  argv[a] = NULL;
  f->store_pid = spawn(argv, log);
  char pidtext[32];
  snprintf(pidtext, sizeof pidtext, "%d\n", (int)f->store_pid);
  write_text(pidfile, pidtext);
  for (int i = 0; i < 400; i++) {
    struct stat st;
    if (stat(ready, &st) == 0 && st.st_size > 0) return;
    int status;
    if (waitpid(f->store_pid, &status, WNOHANG) == f->store_pid) {
      f->store_pid = 0;
      char *t = read_text(log);
      ck_abort_msg("nimble-store did not restart on %s: %s", listen, t ? t : "");
    }
    farm_sleep_ms(25);
  }
  ck_abort_msg("nimble-store did not restart on %s in 10 s", listen);
}

/* The proxy: accepts on `lfd`, connects each client to the target, relays
 * both ways. A byte on `cmd` acts on every pair and answers their count:
 * 'c' resets them (and the held ones), 'h' holds them: open, relaying
 * nothing (a peer gone silent, as behind a NAT that dropped the flow). */
#define PROXY_MAX 64
static void proxy_main(int lfd, int cmd, int reply, const char *host, int port) {
  int cl[PROXY_MAX], up[PROXY_MAX], held[2 * PROXY_MAX];
  int n = 0, nheld = 0;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  to.sin_addr.s_addr = htonl(0x7f000001);
  (void)host; /* loopback only */
  static char buf[1 << 16];
  for (;;) {
    struct pollfd p[2 + 2 * PROXY_MAX];
    p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = cmd, .events = POLLIN};
    for (int i = 0; i < n; i++) {
      p[2 + 2 * i] = (struct pollfd){.fd = cl[i], .events = POLLIN};
      p[3 + 2 * i] = (struct pollfd){.fd = up[i], .events = POLLIN};
    }
    if (poll(p, (nfds_t)(2 + 2 * n), -1) < 0) continue;
    if (p[1].revents) {
      char c;
      if (read(cmd, &c, 1) != 1) _exit(0);
      int cut = n;
      if (c == 'h') {
        for (int i = 0; i < n && nheld + 2 <= 2 * PROXY_MAX; i++) {
          held[nheld++] = cl[i];
          held[nheld++] = up[i];
        }
      } else {
        struct linger lg = {1, 0};
        for (int i = 0; i < n; i++) {
          setsockopt(cl[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          setsockopt(up[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          close(cl[i]);
          close(up[i]);
        }
        for (int i = 0; i < nheld; i++) {
          setsockopt(held[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          close(held[i]);
        }
        nheld = 0;
      }
      n = 0;
      if (write(reply, &cut, sizeof cut) != (ssize_t)sizeof cut) _exit(0);
      continue;
    }
    int closed[PROXY_MAX] = {0};
    for (int i = 0; i < n; i++) {
      for (int side = 0; side < 2; side++) {
        if (!p[2 + 2 * i + side].revents) continue;
        int from = side ? up[i] : cl[i], to_fd = side ? cl[i] : up[i];
        ssize_t r = read(from, buf, sizeof buf);
        int ok = r > 0;
        for (ssize_t off = 0; ok && off < r;) {
          ssize_t w = write(to_fd, buf + off, (size_t)(r - off));
          if (w <= 0) ok = 0;
          else off += w;
        }
        if (!ok) closed[i] = 1;
      }
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (closed[i]) {
        close(cl[i]);
        close(up[i]);
      } else {
        cl[m] = cl[i];
        up[m] = up[i];
        m++;
      }
    }
    n = m;
    if (p[0].revents & POLLIN) {
      int c = accept(lfd, NULL, NULL);
      if (c < 0) continue;
      int u = socket(AF_INET, SOCK_STREAM, 0);
      if (n >= PROXY_MAX || u < 0 || connect(u, (struct sockaddr *)&to, sizeof to) != 0) {
        close(c);
        if (u >= 0) close(u);
        continue;
      }
      cl[n] = c;
      up[n] = u;
      n++;
    }
  }
}

int farm_proxy_start(farm *f, const char *host, int port) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert(lfd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(0x7f000001);
  ck_assert(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
  ck_assert(listen(lfd, 64) == 0);
  socklen_t len = sizeof a;
  ck_assert(getsockname(lfd, (struct sockaddr *)&a, &len) == 0);
  int cmd[2], reply[2];
  ck_assert(pipe2(cmd, O_CLOEXEC) == 0 && pipe2(reply, O_CLOEXEC) == 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    close(cmd[1]);
    close(reply[0]);
    proxy_main(lfd, cmd[0], reply[1], host, port);
    _exit(0);
  }
  close(lfd);
  close(cmd[0]);
  close(reply[1]);
  f->proxy_pid = pid;
  f->proxy_cmd = cmd[1];
  f->proxy_reply = reply[0];
  return ntohs(a.sin_port);
}

static int proxy_command(farm *f, char c) {
  ck_assert(write(f->proxy_cmd, &c, 1) == 1);
  int count = 0;
  ck_assert(read(f->proxy_reply, &count, sizeof count) == (ssize_t)sizeof count);
  return count;
}

int farm_proxy_cut(farm *f) { return proxy_command(f, 'c'); }

int farm_proxy_hold(farm *f) { return proxy_command(f, 'h'); }
