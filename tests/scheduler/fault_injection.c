/* Fault injection on a loopback farm (issue #16, docs/reliability.md): real
 * redis-server, nimble-store, nimble-scheduler and nimble-workers, with
 * processes SIGKILLed and connections reset at seeded random points while
 * jobs run. Each scenario counts, independently of the farm's own view:
 *
 *   completed   the job reached `done` through the scheduler's STATUS, the
 *               tag of its repository names the manifest the task reports,
 *               and the manifest and every blob it references, pulled from
 *               the store, hash (libsodium SHA-256, not protocol's digest
 *               code) to their digests
 *   lost        a job that did not reach `done` within its bound
 *   duplicated  a repository holding more than one manifest revision for
 *               its one target, or a tag naming another manifest than the
 *               task's
 *   partial     a blob file in the store whose bytes do not hash to its
 *               name (what the store would serve), after every injection
 *   resumed     direct client uploads cut by the fault that completed
 *
 *   fault_injection [--worker-kills N] [--scheduler-kills N] [--redis-kills N]
 *                   [--store-kills N] [--net-cuts N] [--seed S] [--only NAME]
 *
 * Run by ctest with short counts (label trust) and by bench/faults/run.sh
 * with the full ones. Prints one table line per scenario and exits non-zero
 * when any count is wrong. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "farm_harness.h"
#include "nimble_test.h"

static int g_worker_kills = 5, g_sched_kills = 2, g_redis_kills = 2, g_store_kills = 3,
           g_net_cuts = 3;
static unsigned g_seed;
static const char *g_only;

typedef struct row {
  const char *name;
  int injections, hits; /* hits: injections that landed mid-task / on a live transfer */
  int submitted, completed, lost, duplicated, bad_artifacts, partial, recompiles;
  int uploads, resumed;
  double seconds;
  int ran;
} row;

enum { R_WORKER, R_SCHED, R_REDIS, R_STORE, R_NET, R_COUNT };
static row g_rows[R_COUNT] = {
    {.name = "worker SIGKILL"},  {.name = "scheduler SIGKILL+restart"},
    {.name = "redis SIGKILL (AOF)"}, {.name = "store SIGKILL mid-upload"},
    {.name = "network cut worker<->store"},
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift32: the seed printed reproduces every delay. */
static unsigned g_rng;
static unsigned rnd(unsigned n) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 17;
  g_rng ^= g_rng << 5;
  return n ? g_rng % n : 0;
}

static void sha256_hex(const void *data, size_t n, char hex[65]) {
  unsigned char h[32];
  crypto_hash_sha256(h, data, n);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

/* Every blob file in the store (what GET serves, with sendfile from the
 * file) whose bytes do not hash to its name. */
static int partial_blobs(farm *f) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/blobs/sha256", f->store_root);
  int bad = 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sub[700];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    DIR *d2 = opendir(sub);
    if (!d2) continue;
    struct dirent *b;
    while ((b = readdir(d2))) {
      if (b->d_name[0] == '.') continue;
      char path[1000];
      snprintf(path, sizeof path, "%s/%s", sub, b->d_name);
      FILE *fp = fopen(path, "rb");
      if (!fp) continue;
      crypto_hash_sha256_state st;
      crypto_hash_sha256_init(&st);
      static unsigned char buf[1 << 16];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, fp)) > 0) crypto_hash_sha256_update(&st, buf, n);
      fclose(fp);
      unsigned char h[32];
      crypto_hash_sha256_final(&st, h);
      char hex[65];
      for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
      if (strcmp(hex, b->d_name) != 0) {
        fprintf(stderr, "PARTIAL BLOB VISIBLE: %s hashes to %s\n", path, hex);
        bad++;
      }
    }
    closedir(d2);
  }
  closedir(d);
  return bad;
}

/* Pulls one blob and checks its bytes against the digest independently. */
static int blob_ok(farm *f, const char *repo, const char *digest) {
  nimble_digest_t d;
  if (!digest) return 0;
  nimble_status_t ps = nimble_digest_parse(digest, &d);
  if (ps) {
    nimble_status_free(ps);
    return 0;
  }
  uint8_t *bytes = NULL;
  size_t n = 0;
  nimble_status_t st = nimble_store_pull_blob(f->store, repo, &d, &bytes, &n);
  if (st) {
    fprintf(stderr, "pull %s@%s: %s\n", repo, digest, nimble_status_message(st));
    nimble_status_free(st);
    return 0;
  }
  char hex[65];
  sha256_hex(bytes, n, hex);
  free(bytes);
  return !strcmp(hex, digest + 7);
}

static int revisions(farm *f, const char *repo) {
  char dir[700];
  snprintf(dir, sizeof dir, "%s/repositories/%s/_manifests/revisions/sha256", f->store_root, repo);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

typedef struct job {
  char id[96], name[64], model[72];
} job;

static void submit_job(farm *f, row *r, job *j, const char *name, const char *text) {
  snprintf(j->name, sizeof j->name, "%s", name);
  farm_push_model(f, text, j->model);
  const char *targets[] = {"x86", NULL};
  json_t *acc = farm_submit(f, j->model, name, targets, NULL);
  snprintf(j->id, sizeof j->id, "%s", json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  r->submitted++;
}

/* Counts the job into the row: done, artifact whole, one manifest. */
static void check_job(farm *f, row *r, const job *j, long timeout_ms) {
  json_t *st = farm_wait_job(f, j->id, "done", timeout_ms, NULL);
  const char *state = st ? json_string_value(json_object_get(st, "state")) : "(no reply)";
  if (!st || strcmp(state, "done") != 0) {
    char *txt = st ? json_dumps(st, 0) : NULL;
    fprintf(stderr, "LOST: job %s (%s) is %s after %ld ms: %s\n", j->id, j->name, state,
            timeout_ms, txt ? txt : "");
    free(txt);
    r->lost++;
    json_decref(st);
    return;
  }
  const char *manifest = json_string_value(
      json_object_get(json_array_get(json_object_get(st, "tasks"), 0), "manifest"));
  int ok = manifest != NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  nimble_digest_t got;
  if (ok) {
    nimble_status_t s = nimble_store_pull_manifest(f->store, j->name, "x86", &bytes, &n, NULL, &got);
    if (s) {
      fprintf(stderr, "job %s: pulling %s:x86: %s\n", j->id, j->name, nimble_status_message(s));
      nimble_status_free(s);
      ok = 0;
    }
  }
  if (ok) {
    char hex[65];
    sha256_hex(bytes, n, hex);
    if (strcmp(hex, manifest + 7) != 0) {
      fprintf(stderr, "DUPLICATE: %s:x86 is sha256:%s, the task says %s\n", j->name, hex, manifest);
      r->duplicated++;
    }
    json_t *m = json_loadb((const char *)bytes, n, 0, NULL);
    ok = m != NULL;
    if (ok && !blob_ok(f, j->name, json_string_value(json_object_get(json_object_get(m, "config"), "digest"))))
      ok = 0;
    json_t *layers = m ? json_object_get(m, "layers") : NULL;
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l) {
      if (!blob_ok(f, j->name, json_string_value(json_object_get(l, "digest")))) ok = 0;
    }
    if (!json_array_size(layers)) ok = 0;
    json_decref(m);
  }
  free(bytes);
  int revs = revisions(f, j->name);
  if (revs != 1) {
    fprintf(stderr, "DUPLICATE: repository %s holds %d manifest revisions\n", j->name, revs);
    r->duplicated++;
  }
  if (ok) r->completed++;
  else {
    fprintf(stderr, "BAD ARTIFACT: job %s (%s)\n", j->id, j->name);
    r->bad_artifacts++;
  }
  int compiles = farm_count_compiles(f, j->model + 7);
  if (compiles > 1) r->recompiles += compiles - 1;
  json_decref(st);
}

static void task_key(farm *f, const job *j, char out[200]) {
  char key[140];
  snprintf(key, sizeof key, "nimble:job:%s", j->id);
  char *tid = farm_redis_hget(f, key, "task:0");
  ck_assert(tid != NULL);
  snprintf(out, 200, "nimble:task:%s", tid);
  free(tid);
}

static int task_running(farm *f, const char *tkey) {
  char *s = farm_redis_hget(f, tkey, "state");
  int running = s && !strcmp(s, "running");
  free(s);
  return running;
}

static void finish_row(row *r, double t0) {
  r->seconds = now_s() - t0;
  r->ran = 1;
  fprintf(stderr, "%s: %d injections done\n", r->name, r->injections);
}

static void assert_row(const row *r) {
  ck_assert_msg(r->lost == 0 && r->duplicated == 0 && r->bad_artifacts == 0 && r->partial == 0 &&
                    r->completed == r->submitted && r->resumed == r->uploads,
                "%s: %d submitted, %d completed, %d lost, %d duplicated, %d bad artifacts, "
                "%d partial blobs, %d/%d uploads resumed",
                r->name, r->submitted, r->completed, r->lost, r->duplicated, r->bad_artifacts,
                r->partial, r->resumed, r->uploads);
}

/* --- worker SIGKILL at a random point of a task ------------------------- */
START_TEST(test_worker_kills_lose_and_duplicate_nothing) {
  if (g_worker_kills <= 0) return;
  row *r = &g_rows[R_WORKER];
  g_rng = g_seed ^ 0x1111u;
  double t0 = now_s();
  farm f;
  farm_config cfg = {.lease_ms = 1500};
  farm_start(&f, &cfg);
  char ids[2][32];
  int slot[2];
  int next_id = 0;
  for (int k = 0; k < 2; k++) {
    snprintf(ids[k], sizeof ids[k], "wk%d", next_id++);
    slot[k] = farm_start_worker(&f, ids[k], "x86", NULL);
  }
  for (int i = 0; i < g_worker_kills; i++) {
    job j;
    char name[64], text[128];
    snprintf(name, sizeof name, "faults/worker-%d", i);
    snprintf(text, sizeof text, "model WK%d seed %u\nsleep 500\n", i, g_seed);
    submit_job(&f, r, &j, name, text);
    char tkey[200];
    task_key(&f, &j, tkey);
    ck_assert_msg(farm_wait_redis_field(&f, tkey, "worker", NULL, 20000), "no worker took %s", j.id);
    char *who = farm_redis_hget(&f, tkey, "worker");
    int k = who && !strcmp(who, ids[1]) ? 1 : 0;
    free(who);
    /* A random point from delivery to past the end of the compile: model
     * fetch, compile, push, RESULT. */
    farm_sleep_ms((long)rnd(900));
    if (task_running(&f, tkey)) r->hits++;
    farm_kill_worker(&f, slot[k], SIGKILL);
    r->injections++;
    snprintf(ids[k], sizeof ids[k], "wk%d", next_id++);
    slot[k] = farm_start_worker(&f, ids[k], "x86", NULL);
    check_job(&f, r, &j, 30000);
    r->partial += partial_blobs(&f);
  }
  farm_stop(&f);
  finish_row(r, t0);
  assert_row(r);
}
END_TEST

/* --- scheduler SIGKILL mid-job and restart ------------------------------ */
START_TEST(test_scheduler_kills_lose_and_duplicate_nothing) {
  if (g_sched_kills <= 0) return;
  row *r = &g_rows[R_SCHED];
  g_rng = g_seed ^ 0x2222u;
  double t0 = now_s();
  farm f;
  farm_config cfg = {.lease_ms = 8000};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "ws1", "x86", NULL);
  for (int i = 0; i < g_sched_kills; i++) {
    job j, q;
    char name[64], text[128];
    snprintf(name, sizeof name, "faults/sched-%d", i);
    snprintf(text, sizeof text, "model SK%d seed %u\nsleep 600\n", i, g_seed);
    submit_job(&f, r, &j, name, text);
    /* A second job queued behind it on the one worker. */
    snprintf(name, sizeof name, "faults/sched-%d-queued", i);
    snprintf(text, sizeof text, "model SQ%d seed %u\nsleep 100\n", i, g_seed);
    submit_job(&f, r, &q, name, text);
    char tkey[200];
    task_key(&f, &j, tkey);
    ck_assert(farm_wait_redis_field(&f, tkey, "worker", NULL, 20000));
    farm_sleep_ms((long)rnd(900));
    if (task_running(&f, tkey)) r->hits++;
    farm_stop_scheduler(&f, SIGKILL);
    r->injections++;
    farm_sleep_ms(100 + (long)rnd(400));
    farm_start_scheduler(&f);
    check_job(&f, r, &j, 30000);
    check_job(&f, r, &q, 30000);
    r->partial += partial_blobs(&f);
  }
  farm_stop(&f);
  finish_row(r, t0);
  assert_row(r);
}
END_TEST

/* --- redis SIGKILL with AOF on ------------------------------------------ */
START_TEST(test_redis_kills_lose_and_duplicate_nothing) {
  if (g_redis_kills <= 0) return;
  row *r = &g_rows[R_REDIS];
  g_rng = g_seed ^ 0x3333u;
  double t0 = now_s();
  farm f;
  farm_config cfg = {.aof = 1, .lease_ms = 2000};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "wr1", "x86", NULL);
  for (int i = 0; i < g_redis_kills; i++) {
    job j, q;
    char name[64], text[128];
    snprintf(name, sizeof name, "faults/redis-%d", i);
    snprintf(text, sizeof text, "model RK%d seed %u\nsleep 600\n", i, g_seed);
    submit_job(&f, r, &j, name, text);
    snprintf(name, sizeof name, "faults/redis-%d-queued", i);
    snprintf(text, sizeof text, "model RQ%d seed %u\nsleep 100\n", i, g_seed);
    submit_job(&f, r, &q, name, text);
    char tkey[200];
    task_key(&f, &j, tkey);
    ck_assert(farm_wait_redis_field(&f, tkey, "worker", NULL, 20000));
    farm_sleep_ms((long)rnd(900));
    if (task_running(&f, tkey)) r->hits++;
    farm_crash_redis(&f);
    r->injections++;
    check_job(&f, r, &j, 30000);
    check_job(&f, r, &q, 30000);
    r->partial += partial_blobs(&f);
  }
  farm_stop(&f);
  finish_row(r, t0);
  assert_row(r);
}
END_TEST

/* A direct upload through its own client, in a thread: it must complete
 * despite the fault (the client retries; a chunked upload resumes from the
 * Range the store reports). */
typedef struct upload {
  pthread_t thread;
  char url[128], path[400];
  nimble_digest_t digest;
  nimble_status_t status;
} upload;

static void *upload_main(void *arg) {
  upload *u = arg;
  nimble_store_client_options_t so = {.base_url = u->url,
                                      .token = "test-token",
                                      .chunk_size = 1 << 20,
                                      .max_attempts = 20,
                                      .backoff_base_ms = 50,
                                      .backoff_max_ms = 500,
                                      .retry_budget_ms = 60000,
                                      .stall_timeout_ms = 10000};
  nimble_store_client *c = NULL;
  u->status = nimble_store_client_create(&so, &c);
  if (!u->status) u->status = nimble_store_push_blob_file(c, "faults/uploads", u->path, &u->digest, NULL);
  nimble_store_client_destroy(c);
  return NULL;
}

/* Writes `mb` MiB of seeded bytes to path; returns their hex digest. */
static void write_random_file(const char *path, int mb, unsigned seed, char hex[65]) {
  FILE *fp = fopen(path, "wb");
  ck_assert(fp != NULL);
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  static unsigned buf[1 << 16];
  unsigned x = seed | 1u;
  for (int m = 0; m < mb * 4; m++) {
    for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      buf[i] = x;
    }
    ck_assert(fwrite(buf, 1, sizeof buf, fp) == sizeof buf);
    crypto_hash_sha256_update(&st, (unsigned char *)buf, sizeof buf);
  }
  fclose(fp);
  unsigned char h[32];
  crypto_hash_sha256_final(&st, h);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

/* Bytes in upload session files right now (the store's uploads/). */
static long long uploading_bytes(farm *f) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/uploads", f->store_root);
  DIR *d = opendir(dir);
  if (!d) return 0;
  long long total = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[800];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (stat(p, &st) == 0) total += st.st_size;
  }
  closedir(d);
  return total;
}

static int blob_visible(farm *f, const char *hex) {
  char path[600];
  snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", f->store_root, hex, hex);
  struct stat st;
  return stat(path, &st) == 0;
}

/* Starts an upload of a fresh file, waits until the store holds part of it
 * (its session file has bytes), then a seeded delay of a few ms. */
static void start_upload_and_wait_mid(farm *f, upload *u, const char *url, int i, unsigned salt,
                                      char hex[65], int *mid) {
  memset(u, 0, sizeof *u);
  snprintf(u->url, sizeof u->url, "%s", url);
  snprintf(u->path, sizeof u->path, "%s/upload-%u-%d.bin", f->dir, salt, i);
  write_random_file(u->path, 24, g_seed ^ salt ^ (unsigned)i * 2654435761u, hex);
  ck_assert(pthread_create(&u->thread, NULL, upload_main, u) == 0);
  *mid = 0;
  for (int k = 0; k < 2000; k++) {
    if (uploading_bytes(f) > 0) {
      *mid = 1;
      break;
    }
    farm_sleep_ms(2);
  }
  farm_sleep_ms((long)rnd(40));
}

static void finish_upload(farm *f, row *r, upload *u, const char *hex) {
  pthread_join(u->thread, NULL);
  r->uploads++;
  if (u->status) {
    fprintf(stderr, "UPLOAD NOT RESUMED: %s\n", nimble_status_message(u->status));
    nimble_status_free(u->status);
    return;
  }
  char got[65];
  nimble_digest_format_hex(&u->digest, got);
  char digest[80];
  snprintf(digest, sizeof digest, "sha256:%s", hex);
  if (!strcmp(got, hex) && blob_ok(f, "faults/uploads", digest)) r->resumed++;
  else fprintf(stderr, "UPLOAD WRONG: pushed %s, expected %s\n", got, hex);
  unlink(u->path);
}

/* --- store SIGKILL mid-upload ------------------------------------------- */
START_TEST(test_store_kills_show_no_partial_blob_and_uploads_resume) {
  if (g_store_kills <= 0) return;
  row *r = &g_rows[R_STORE];
  g_rng = g_seed ^ 0x4444u;
  double t0 = now_s();
  farm f;
  farm_config cfg = {.lease_ms = 3000};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "wt1", "x86", NULL);
  for (int i = 0; i < g_store_kills; i++) {
    job j;
    char name[64], text[128];
    snprintf(name, sizeof name, "faults/store-%d", i);
    snprintf(text, sizeof text, "model ST%d seed %u\nsleep %u\n", i, g_seed, 100 + rnd(500));
    submit_job(&f, r, &j, name, text);
    upload u;
    char hex[65];
    int mid;
    start_upload_and_wait_mid(&f, &u, f.store_url, i, 0x4444u, hex, &mid);
    if (mid) r->hits++;
    farm_kill_store(&f, SIGKILL);
    r->injections++;
    /* Nothing of the cut upload is visible, before or after the restart. */
    r->partial += partial_blobs(&f);
    if (blob_visible(&f, hex)) fprintf(stderr, "upload %d had finished before the kill\n", i);
    farm_sleep_ms((long)rnd(300));
    farm_start_store(&f);
    r->partial += partial_blobs(&f);
    finish_upload(&f, r, &u, hex);
    check_job(&f, r, &j, 40000);
    r->partial += partial_blobs(&f);
  }
  farm_stop(&f);
  finish_row(r, t0);
  assert_row(r);
}
END_TEST

/* --- network cut between worker and store ------------------------------- */
START_TEST(test_network_cuts_lose_nothing_and_uploads_resume) {
  if (g_net_cuts <= 0) return;
  row *r = &g_rows[R_NET];
  g_rng = g_seed ^ 0x5555u;
  double t0 = now_s();
  farm f;
  farm_config cfg = {.lease_ms = 3000};
  farm_start(&f, &cfg);
  const char *hostport = f.store_url + strlen("http://");
  int port = atoi(strrchr(hostport, ':') + 1);
  int pport = farm_proxy_start(&f, "127.0.0.1", port);
  snprintf(f.worker_store_url, sizeof f.worker_store_url, "http://127.0.0.1:%d", pport);
  farm_start_worker(&f, "wn1", "x86", NULL);
  /* A model of ~900 KiB: its fetch and its constants part are transfers a
   * cut can land in. */
  size_t big = 900u << 10;
  char *text = malloc(big + 128);
  for (int i = 0; i < g_net_cuts; i++) {
    job j;
    char name[64];
    snprintf(name, sizeof name, "faults/net-%d", i);
    int h = snprintf(text, 128, "model NC%d seed %u\nsleep %u\n", i, g_seed, 100 + rnd(400));
    for (size_t k = (size_t)h; k < big; k++) text[k] = (k % 64 == 63) ? '\n' : 'a' + (char)(k % 26);
    text[big] = '\0';
    submit_job(&f, r, &j, name, text);
    upload u;
    char hex[65];
    int mid;
    start_upload_and_wait_mid(&f, &u, f.worker_store_url, i, 0x5555u, hex, &mid);
    int cut = farm_proxy_cut(&f);
    r->injections++;
    if (cut > 0 && mid) r->hits++;
    r->partial += partial_blobs(&f);
    finish_upload(&f, r, &u, hex);
    check_job(&f, r, &j, 40000);
    r->partial += partial_blobs(&f);
  }
  free(text);
  farm_stop(&f);
  finish_row(r, t0);
  assert_row(r);
}
END_TEST

static void print_table(void) {
  printf("\nfault injection, seed %u\n", g_seed);
  printf("| scenario | injections | landed mid-task/transfer | jobs submitted | completed | lost | "
         "duplicated artifacts | bad artifacts | partial blobs visible | recompiles | uploads "
         "resumed | time (s) |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < R_COUNT; i++) {
    row *r = &g_rows[i];
    if (!r->ran) continue;
    char up[32] = "-";
    if (r->uploads) snprintf(up, sizeof up, "%d/%d", r->resumed, r->uploads);
    printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %.1f |\n", r->name,
           r->injections, r->hits, r->submitted, r->completed, r->lost, r->duplicated,
           r->bad_artifacts, r->partial, r->recompiles, up, r->seconds);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  g_seed = (unsigned)time(NULL);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "fault_injection: %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--worker-kills")) g_worker_kills = atoi(v);
    else if (!strcmp(a, "--scheduler-kills")) g_sched_kills = atoi(v);
    else if (!strcmp(a, "--redis-kills")) g_redis_kills = atoi(v);
    else if (!strcmp(a, "--store-kills")) g_store_kills = atoi(v);
    else if (!strcmp(a, "--net-cuts")) g_net_cuts = atoi(v);
    else if (!strcmp(a, "--seed")) g_seed = (unsigned)strtoul(v, NULL, 10);
    else if (!strcmp(a, "--only")) g_only = v;
    else {
      fprintf(stderr, "fault_injection: unknown argument %s\n", a);
      return 2;
    }
    i++;
  }
  if (!g_seed) g_seed = 1;
  if (sodium_init() < 0) return 1;
  signal(SIGPIPE, SIG_IGN);
  printf("fault injection: seed %u (rerun with --seed %u)\n", g_seed, g_seed);
  fflush(stdout);
  Suite *s = suite_create("fault_injection");
  TCase *tc = tcase_create("faults");
  struct {
    const char *name;
    const TTest *test;
  } tests[] = {
      {"worker", test_worker_kills_lose_and_duplicate_nothing},
      {"scheduler", test_scheduler_kills_lose_and_duplicate_nothing},
      {"redis", test_redis_kills_lose_and_duplicate_nothing},
      {"store", test_store_kills_show_no_partial_blob_and_uploads_resume},
      {"net", test_network_cuts_lose_nothing_and_uploads_resume},
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
    if (!g_only || !strcmp(g_only, tests[i].name)) tcase_add_test(tc, tests[i].test);
  suite_add_tcase(s, tc);
  /* In one process, so that the table gathers every scenario's counts; the
   * bound is ctest's timeout (or bench/faults/run.sh's). */
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  print_table();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
