/* The farm's kernel cache (issue #15, docs/farm.md "The farm's kernel
 * cache"): a farm on loopback (farm_harness.h: real redis-server,
 * nimble-store, nimble-scheduler) with two real nimble-worker processes
 * running the real `nimble` compiler, each with a kernel cache folder of
 * its own. Worker A compiles one program; worker B then compiles a second
 * program that shares kernels with it and must take those kernels from A's
 * entries (fetched from the store into its own folder) instead of LLVM.
 *
 * Independent references: the kernels' keys are the files a local
 * `nimble compile` leaves in a fresh cache folder (kernel objects told from
 * the linked library by their ELF type, read here), so the hits B must get
 * are the keys the two programs' local compiles have in common; blob
 * digests are recomputed with libsodium from the folders' files; the
 * artifact's layers are compared with a local `nimble compile
 * --no-kernel-cache` of the same program. */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "farm_harness.h"
#include "nimble_test.h"

/* seq_encoder.nir (tests/client/programs), and a program with the same
 * encoder and another pooling: they share the encoder's kernels. */
static const char kProgramA[] =
    "def @main(%tokens: Tensor[(batch, ?, 64), float32], %w: Tensor[(64, 32), float32],\n"
    "          %b: Tensor[(32,), float32]) {\n"
    "  let %h = add(matmul(%tokens, %w), %b);\n"
    "  let %a = relu(%h);\n"
    "  let %pooled = mean(%a, axes=[1]);\n"
    "  (%pooled, %a)\n"
    "}\n";
static const char kProgramB[] =
    "def @main(%tokens: Tensor[(batch, ?, 64), float32], %w: Tensor[(64, 32), float32],\n"
    "          %b: Tensor[(32,), float32]) {\n"
    "  let %h = add(matmul(%tokens, %w), %b);\n"
    "  let %a = relu(%h);\n"
    "  let %pooled = max(%a, axes=[1]);\n"
    "  (%pooled, %a)\n"
    "}\n";
static const char kProgramC[] =
    "def @main(%tokens: Tensor[(batch, ?, 64), float32], %w: Tensor[(64, 32), float32],\n"
    "          %b: Tensor[(32,), float32]) {\n"
    "  let %h = add(matmul(%tokens, %w), %b);\n"
    "  let %a = relu(%h);\n"
    "  let %pooled = min(%a, axes=[1]);\n"
    "  (%pooled, %a)\n"
    "}\n";

/* The local cache file: magic (8), key (64), size (8), sha256 (32), payload. */
enum { KC_HEADER = 8 + 64 + 8 + 32 };
#define MAX_KEYS 64

typedef struct keyset {
  char keys[MAX_KEYS][65];
  char digests[MAX_KEYS][72]; /* sha256 of the payload, by libsodium */
  int n;
} keyset;

static char g_compiler[512];
/* Workers running the real compiler get no address-space limit: in the
 * sanitizer build its ASan runtime reserves terabytes of shadow at start
 * and aborts under any RLIMIT_AS (the limit is test_farm_failures'
 * business, with the stand-in compiler). */
#define NO_MEM_LIMIT "--mem-limit-mb", "0"

#include <time.h>
/* Where the time goes: a line per step on stderr. */
static void step(const char *what) {
  static struct timespec t0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (!t0.tv_sec) t0 = t;
  fprintf(stderr, "[%7.3f s] %s\n", (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9, what);
}

static void sha256_digest(const void *bytes, size_t n, char out[72]) {
  uint8_t h[32];
  crypto_hash_sha256(h, bytes, n);
  memcpy(out, "sha256:", 7);
  for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(size > 0 ? (size_t)size : 1);
  *n = b ? fread(b, 1, (size_t)size, f) : 0;
  fclose(f);
  return b;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* The kernel objects (ELF relocatable files, e_type 1) in cache folder
 * dir, with their payloads' digests; the linked library's entry (ET_DYN)
 * is left out. */
static void kernel_keys(const char *dir, keyset *out) {
  memset(out, 0, sizeof *out);
  DIR *top = opendir(dir);
  ck_assert_msg(top != NULL, "no cache folder %s", dir);
  struct dirent *sub;
  while ((sub = readdir(top))) {
    if (strlen(sub->d_name) != 2) continue;
    char subdir[1024];
    snprintf(subdir, sizeof subdir, "%s/%s", dir, sub->d_name);
    DIR *d = opendir(subdir);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strlen(e->d_name) != 64) continue;
      char path[1400];
      /* d_name is 64 characters here; the check keeps gcc's
       * format-truncation analysis (fatal in the asan build) satisfied. */
      if (snprintf(path, sizeof path, "%s/%.64s", subdir, e->d_name) >= (int)sizeof path) continue;
      size_t n = 0;
      uint8_t *b = read_file(path, &n);
      ck_assert_ptr_nonnull(b);
      ck_assert_msg(n > KC_HEADER + 18 && !memcmp(b, "NIMBLKC1", 8) && !memcmp(b + 8, e->d_name, 64),
                    "%s is not a kernel cache entry", path);
      const uint8_t *elf = b + KC_HEADER;
      ck_assert(!memcmp(elf, "\x7f" "ELF", 4));
      int type = elf[16] | elf[17] << 8;
      if (type == 1) {
        ck_assert_int_lt(out->n, MAX_KEYS);
        memcpy(out->keys[out->n], e->d_name, 64);
        out->keys[out->n][64] = '\0';
        sha256_digest(elf, n - KC_HEADER, out->digests[out->n]);
        out->n++;
      }
      free(b);
    }
    closedir(d);
  }
  closedir(top);
}

static int keyset_find(const keyset *s, const char *key) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->keys[i], key)) return i;
  return -1;
}

/* A local compile of program file `prog` into parts folder `parts` with
 * its own fresh cache folder `cache` (NULL: --no-kernel-cache). */
static void local_compile(const char *prog, const char *parts, const char *cache) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && '%s' compile '%s' --target=x86 --format=nir --emit-parts '%s' %s%s%s "
           ">'%s.log' 2>&1",
           parts, g_compiler, prog, parts, cache ? "--kernel-cache '" : "--no-kernel-cache",
           cache ? cache : "", cache ? "'" : "", parts);
  ck_assert_msg(system(cmd) == 0, "local compile of %s failed (see %s.log)", prog, parts);
}

/* SUBMIT of a .nir program for x86; returns the job id (caller frees). */
static char *submit(farm *f, const char *model, const char *name) {
  json_t *body = json_pack("{s:s,s:s,s:s,s:[s]}", "model", model, "format", "nir", "name", name,
                           "targets", "x86");
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert_msg(farm_request(f, NIMBLE_MSG_SUBMIT, body, NULL, &type, &reply) == 0, "no reply");
  ck_assert_msg(type == NIMBLE_MSG_ACCEPTED, "SUBMIT answered %s", json_dumps(reply, 0));
  char *job = strdup(json_string_value(json_object_get(reply, "job")));
  json_decref(reply);
  return job;
}

/* Polls the job until it is finished (done, failed or cancelled). */
static json_t *wait_finished(farm *f, const char *job) {
  for (int i = 0; i < 600; i++) {
    json_t *s = farm_wait_job(f, job, "done", 100, NULL);
    const char *st = json_string_value(json_object_get(s, "state"));
    if (st && (!strcmp(st, "done") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))) return s;
    json_decref(s);
  }
  ck_abort_msg("job %s did not finish in 60 s", job);
  return NULL;
}

static const json_t *task0(const json_t *status) {
  return json_array_get(json_object_get(status, "tasks"), 0);
}

static long long kernels_field(const json_t *status, const char *k) {
  const json_t *v = json_object_get(json_object_get(task0(status), "kernels"), k);
  return json_is_integer(v) ? json_integer_value(v) : -1;
}

static long long redis_int(farm *f, const char *fmt, const char *arg) {
  redisReply *r = redisCommand(f->redis, fmt, arg);
  ck_assert_ptr_nonnull(r);
  long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                : -1;
  freeReplyObject(r);
  return v;
}

/* Every layer of the published artifact name:x86 equals the local parts'
 * file of its title (sha256 by libsodium); returns the layers compared. */
static int assert_artifact_equals_parts(farm *f, const char *name, const char *parts) {
  uint8_t *bytes = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_store_pull_manifest(f->store, name, "x86", &bytes, &n, NULL, NULL));
  json_t *m = json_loadb((const char *)bytes, n, 0, NULL);
  free(bytes);
  ck_assert_ptr_nonnull(m);
  size_t i;
  json_t *l;
  int compared = 0;
  json_array_foreach(json_object_get(m, "layers"), i, l) {
    const char *title = json_string_value(
        json_object_get(json_object_get(l, "annotations"), "org.opencontainers.image.title"));
    ck_assert_ptr_nonnull(title);
    char path[1200], mine[72];
    snprintf(path, sizeof path, "%s/%s", parts, title);
    size_t size = 0;
    uint8_t *b = read_file(path, &size);
    ck_assert_msg(b != NULL, "the local compile has no %s", title);
    sha256_digest(b, size, mine);
    free(b);
    ck_assert_msg(!strcmp(mine, json_string_value(json_object_get(l, "digest"))),
                  "layer %s: local %s, farm %s", title, mine,
                  json_string_value(json_object_get(l, "digest")));
    compared++;
  }
  json_decref(m);
  return compared;
}

static int file_contains(const char *path, const char *text) {
  size_t n = 0;
  uint8_t *b = read_file(path, &n);
  if (!b) return 0;
  char *s = realloc(b, n + 1);
  if (!s) {
    free(b);
    return 0;
  }
  s[n] = '\0';
  int found = strstr(s, text) != NULL;
  free(s);
  return found;
}

typedef struct kc_farm {
  farm f;
  char dir_a[400], dir_b[400];
  char prog_a[400], prog_b[400];
  keyset local_a, local_b; /* the kernels of each program, from local compiles */
  int shared;              /* keys the two have in common */
} kc_farm;

/* The farm, the two programs' kernel keys from local compiles, and worker
 * A's compile of program A. */
static void setup_and_compile_a(kc_farm *k, const char *const *sched_extra, int with_b) {
  /* A worker that stopped is dropped after 1 s of silence, so that B's
   * task is never delivered to A's dead connection. */
  const char *extra[8] = {"--worker-timeout-ms", "1000"};
  for (int i = 0; sched_extra && sched_extra[i] && i < 5; i++) extra[2 + i] = sched_extra[i];
  farm_config cfg = {.lease_ms = 60000, .sched_extra = extra};
  step("farm starting");
  farm_start(&k->f, &cfg);
  step("farm started");
  farm *f = &k->f;
  snprintf(k->dir_a, sizeof k->dir_a, "%s/kcache-a", f->dir);
  snprintf(k->dir_b, sizeof k->dir_b, "%s/kcache-b", f->dir);
  snprintf(k->prog_a, sizeof k->prog_a, "%s/a.nir", f->dir);
  snprintf(k->prog_b, sizeof k->prog_b, "%s/b.nir", f->dir);
  write_text(k->prog_a, kProgramA);
  write_text(k->prog_b, kProgramB);
  char cache[500], parts[500];
  snprintf(cache, sizeof cache, "%s/local-cache-a", f->dir);
  snprintf(parts, sizeof parts, "%s/local-parts-a", f->dir);
  local_compile(k->prog_a, parts, cache);
  kernel_keys(cache, &k->local_a);
  if (with_b) {
    snprintf(cache, sizeof cache, "%s/local-cache-b", f->dir);
    snprintf(parts, sizeof parts, "%s/local-parts-b", f->dir);
    local_compile(k->prog_b, parts, cache);
    kernel_keys(cache, &k->local_b);
    k->shared = 0;
    for (int i = 0; i < k->local_b.n; i++) k->shared += keyset_find(&k->local_a, k->local_b.keys[i]) >= 0;
    ck_assert_msg(k->shared >= 1 && k->shared < k->local_b.n, "the programs share %d of %d kernels",
                  k->shared, k->local_b.n);
  }
  step("local compiles done");
  ck_assert_int_ge(k->local_a.n, 2);

  const char *wa[] = {"--compiler", g_compiler, NO_MEM_LIMIT, "--kcache-dir", k->dir_a, "--compile-jobs", "2", NULL};
  int ia = farm_start_worker(f, "w-a", "x86", wa);
  char model[72];
  farm_push_model(f, kProgramA, model);
  char *job = submit(f, model, "team/enc-a");
  json_t *s = wait_finished(f, job);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "job A: %s",
                json_dumps(s, 0));
  /* A cold worker: every kernel compiled, none fetched. */
  ck_assert_int_eq(kernels_field(s, "total"), k->local_a.n);
  ck_assert_int_eq(kernels_field(s, "cached"), 0);
  ck_assert_int_eq(kernels_field(s, "fetched"), 0);
  json_decref(s);
  free(job);
  step("job A done");
  /* Worker A goes; B compiles alone from now on. */
  farm_kill_worker(f, ia, SIGTERM);
  ck_assert(farm_wait_redis_field(f, "nimble:worker:w-a", "connected", "0", 10000));
  step("worker A stopped and dropped");
}

/* The index after A: its kernels, each naming the blob of its object. */
static void assert_index_holds(kc_farm *k, const keyset *ks) {
  farm *f = &k->f;
  ck_assert_int_eq(redis_int(f, "HLEN nimble:kcache:%s", "x86"), ks->n);
  ck_assert_int_eq(redis_int(f, "GET nimble:kcache:%s:seq", "x86"), ks->n);
  for (int i = 0; i < ks->n; i++) {
    char key[100];
    snprintf(key, sizeof key, "nimble:kcache:x86");
    char *d = farm_redis_hget(f, key, ks->keys[i]);
    ck_assert_msg(d != NULL, "kernel %s is not in the index", ks->keys[i]);
    ck_assert_str_eq(d, ks->digests[i]);
    /* The blob is in the store, its bytes the object's. */
    nimble_digest_t dg;
    NIMBLE_ASSERT_OK(nimble_digest_parse(d, &dg));
    uint8_t *bytes = NULL;
    size_t n = 0;
    NIMBLE_ASSERT_OK(nimble_store_pull_blob(f->store, "nimble-kcache", &dg, &bytes, &n));
    char mine[72];
    sha256_digest(bytes, n, mine);
    ck_assert_str_eq(mine, d);
    free(bytes);
    free(d);
  }
}

START_TEST(test_a_kernel_built_on_one_worker_is_a_cache_hit_on_another) {
  kc_farm k;
  setup_and_compile_a(&k, NULL, 1);
  farm *f = &k.f;
  /* A's compile shared every kernel it built: the keys its local compile
   * has, with the digests of the objects in worker A's folder. */
  keyset in_a;
  kernel_keys(k.dir_a, &in_a);
  ck_assert_int_eq(in_a.n, k.local_a.n);
  for (int i = 0; i < k.local_a.n; i++) ck_assert_int_ge(keyset_find(&in_a, k.local_a.keys[i]), 0);
  assert_index_holds(&k, &in_a);

  /* Worker B, with an empty folder, compiles program B. */
  const char *wb[] = {"--compiler", g_compiler, NO_MEM_LIMIT, "--kcache-dir", k.dir_b, "--compile-jobs", "1",
                      "--metrics", "127.0.0.1:0", NULL};
  farm_start_worker(f, "w-b", "x86", wb);
  char model[72];
  farm_push_model(f, kProgramB, model);
  char *job = submit(f, model, "team/enc-b");
  json_t *s = wait_finished(f, job);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "job B: %s",
                json_dumps(s, 0));
  /* It was sent A's entries, fetched them all, and its compile found the
   * shared kernels in its folder: exactly the keys the programs share. */
  step("job B done");
  ck_assert_int_eq(kernels_field(s, "fetched"), in_a.n);
  ck_assert_int_eq(kernels_field(s, "total"), k.local_b.n);
  ck_assert_int_eq(kernels_field(s, "done"), k.local_b.n);
  ck_assert_int_eq(kernels_field(s, "cached"), k.shared);
  json_decref(s);
  /* `nimble status` says the same. */
  char cmd[4096], want[200], out[500];
  snprintf(out, sizeof out, "%s/status-b.out", f->dir);
  snprintf(cmd, sizeof cmd, "'%s' --scheduler '%s' status %s >'%s' 2>&1", g_compiler, f->clients_ep, job, out);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(want, sizeof want, "(%d/%d kernels, %d cached, %d farm entries fetched)", k.local_b.n, k.local_b.n,
           k.shared, in_a.n);
  ck_assert_msg(file_contains(out, want), "nimble status does not say '%s'", want);
  free(job);
  /* B's folder: A's objects byte for byte (digests as A's), and its own. */
  keyset in_b;
  kernel_keys(k.dir_b, &in_b);
  for (int i = 0; i < in_a.n; i++) {
    int j = keyset_find(&in_b, in_a.keys[i]);
    ck_assert_int_ge(j, 0);
    ck_assert_str_eq(in_b.digests[j], in_a.digests[i]);
  }
  /* B's /metrics say the same. */
  ck_assert_int_eq(farm_worker_metric(f, "w-b", "nimble_worker_kernel_cache_hits_total{target=\"x86\"}"), k.shared);
  ck_assert_int_eq(farm_worker_metric(f, "w-b", "nimble_worker_kernel_cache_misses_total{target=\"x86\"}"),
                   k.local_b.n - k.shared);
  ck_assert_int_eq(farm_worker_metric(f, "w-b", "nimble_worker_kcache_fetched_total{target=\"x86\"}"), in_a.n);
  ck_assert_int_eq(farm_worker_metric(f, "w-b", "nimble_worker_kcache_shared_total{target=\"x86\"}"),
                   k.local_b.n - k.shared);
  /* The index grew by B's new kernels only. */
  ck_assert_int_eq(redis_int(f, "HLEN nimble:kcache:%s", "x86"), in_a.n + k.local_b.n - k.shared);
  /* The artifact is the bytes of a compile with no kernel cache at all. */
  char parts[500];
  snprintf(parts, sizeof parts, "%s/uncached-parts-b", f->dir);
  local_compile(k.prog_b, parts, NULL);
  ck_assert_int_ge(assert_artifact_equals_parts(f, "team/enc-b", parts), 3);
  char log[500];
  snprintf(log, sizeof log, "%s/worker-w-b.log", f->dir);
  ck_assert(file_contains(log, "farm kernel cache:"));

  /* `nimble submit -v` of a third program sharing the encoder: its
   * progress names the kernels, and -v the hits. */
  char prog_c[500], err[500];
  snprintf(prog_c, sizeof prog_c, "%s/c.nir", f->dir);
  snprintf(out, sizeof out, "%s/submit-c.out", f->dir);
  snprintf(err, sizeof err, "%s/submit-c.err", f->dir);
  write_text(prog_c, kProgramC);
  snprintf(cmd, sizeof cmd,
           "NIMBLE_EVENTS='%s' '%s' --scheduler '%s' --store '%s' --token test-token submit '%s' "
           "--targets=x86 --name team/enc-c --json -v --timeout 60 >'%s' 2>'%s'",
           f->events_ep, g_compiler, f->clients_ep, f->store_url, prog_c, out, err);
  if (system(cmd) != 0) {
    size_t en = 0;
    char *text = (char *)read_file(err, &en);
    ck_abort_msg("nimble submit failed: %.*s", (int)en, text ? text : "");
  }
  ck_assert_msg(file_contains(err, "kernel cache hits"), "no -v line in %s", err);
  json_t *doc = json_load_file(out, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  json_t *kc = json_object_get(json_array_get(json_object_get(doc, "targets"), 0), "kernels");
  ck_assert_msg(json_is_object(kc), "no kernels in %s", out);
  /* Program C's encoder kernels were all in B's folder already. */
  ck_assert_int_ge(json_integer_value(json_object_get(kc, "cached")), k.shared);
  json_decref(doc);
  farm_stop(f);
}
END_TEST

/* A blob whose bytes were damaged in the store is refused (its digest does
 * not match) and never used: B builds that kernel itself, and the artifact
 * is still the uncached compile's bytes. */
START_TEST(test_a_corrupted_blob_is_refused_and_the_kernel_is_rebuilt) {
  kc_farm k;
  setup_and_compile_a(&k, NULL, 1);
  farm *f = &k.f;
  keyset in_a;
  kernel_keys(k.dir_a, &in_a);
  /* Damage the blob of a kernel B needs: one byte in the middle. */
  int victim = -1;
  for (int i = 0; i < in_a.n && victim < 0; i++)
    if (keyset_find(&k.local_b, in_a.keys[i]) >= 0) victim = i;
  ck_assert_int_ge(victim, 0);
  char path[1000];
  const char *hex = in_a.digests[victim] + 7;
  snprintf(path, sizeof path, "%s/blobs/sha256/%.2s/%s", f->store_root, hex, hex);
  size_t n = 0;
  uint8_t *b = read_file(path, &n);
  ck_assert_msg(b != NULL, "no blob file %s", path);
  b[n / 2] ^= 0x40;
  FILE *fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_int_eq(fwrite(b, 1, n, fp), n);
  fclose(fp);
  free(b);

  const char *wb[] = {"--compiler", g_compiler, NO_MEM_LIMIT, "--kcache-dir", k.dir_b, NULL};
  farm_start_worker(f, "w-b", "x86", wb);
  char model[72];
  farm_push_model(f, kProgramB, model);
  char *job = submit(f, model, "team/enc-b");
  json_t *s = wait_finished(f, job);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(s, "state")), "done"), "job B: %s",
                json_dumps(s, 0));
  ck_assert_int_eq(kernels_field(s, "fetched"), in_a.n - 1);
  ck_assert_int_eq(kernels_field(s, "cached"), k.shared - 1);
  json_decref(s);
  free(job);
  char log[500];
  snprintf(log, sizeof log, "%s/worker-w-b.log", f->dir);
  ck_assert_msg(file_contains(log, "not used"), "worker B logged no refused entry");
  ck_assert(file_contains(log, in_a.digests[victim]));
  /* B's entry for that key is the object it built, the bytes A built. */
  keyset in_b;
  kernel_keys(k.dir_b, &in_b);
  int j = keyset_find(&in_b, in_a.keys[victim]);
  ck_assert_int_ge(j, 0);
  ck_assert_str_eq(in_b.digests[j], in_a.digests[victim]);
  char parts[500];
  snprintf(parts, sizeof parts, "%s/uncached-parts-b", f->dir);
  local_compile(k.prog_b, parts, NULL);
  ck_assert_int_ge(assert_artifact_equals_parts(f, "team/enc-b", parts), 3);
  farm_stop(f);
}
END_TEST

/* The files in cache folder dir (0 when it is empty or absent). */
static int count_entries(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "find '%s' -type f 2>/dev/null | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

/* --no-kcache on the scheduler: nothing is recorded. --kcache-cap 2 keeps
 * the two newest entries. A verified build's copies compile with no
 * kernel cache at all: nothing fetched into, or written to, their
 * workers' folders, nothing new in the index. */
START_TEST(test_the_farm_cache_off_records_nothing_and_the_cap_evicts_the_oldest) {
  const char *off[] = {"--no-kcache", NULL};
  kc_farm k;
  setup_and_compile_a(&k, off, 0);
  farm *f = &k.f;
  ck_assert_int_eq(redis_int(f, "HLEN nimble:kcache:%s", "x86"), 0);
  /* ... and the worker, told so by TASKs without kcache_seq, uploaded no
   * kernel: none of the objects in its folder is a blob in the store. */
  keyset in_a;
  kernel_keys(k.dir_a, &in_a);
  ck_assert_int_eq(in_a.n, k.local_a.n);
  for (int i = 0; i < in_a.n; i++) {
    nimble_digest_t d;
    NIMBLE_ASSERT_OK(nimble_digest_parse(in_a.digests[i], &d));
    int exists = -1;
    NIMBLE_ASSERT_OK(nimble_store_blob_exists(f->store, "nimble-kcache", &d, &exists, NULL));
    ck_assert_int_eq(exists, 0);
  }
  farm_stop(f);

  const char *cap[] = {"--kcache-cap", "2", NULL};
  setup_and_compile_a(&k, cap, 0);
  f = &k.f;
  ck_assert_int_eq(redis_int(f, "HLEN nimble:kcache:%s", "x86"), 2);
  ck_assert_int_eq(redis_int(f, "ZCARD nimble:kcache:%s:order", "x86"), 2);
  ck_assert_int_eq(redis_int(f, "GET nimble:kcache:%s:seq", "x86"), k.local_a.n);
  /* The two kept are the last two sequence numbers. */
  redisReply *r = redisCommand(f->redis, "ZRANGE nimble:kcache:x86:order 0 -1 WITHSCORES");
  ck_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
  ck_assert_int_eq(atoll(r->element[1]->str), k.local_a.n - 1);
  ck_assert_int_eq(atoll(r->element[3]->str), k.local_a.n);
  freeReplyObject(r);

  char dir_c[500], dir_d[500];
  snprintf(dir_c, sizeof dir_c, "%s/kcache-c", f->dir);
  snprintf(dir_d, sizeof dir_d, "%s/kcache-d", f->dir);
  const char *wc[] = {"--compiler", g_compiler, NO_MEM_LIMIT, "--kcache-dir", dir_c, NULL};
  const char *wd[] = {"--compiler", g_compiler, NO_MEM_LIMIT, "--kcache-dir", dir_d, NULL};
  farm_start_worker(f, "w-c", "x86", wc);
  farm_start_worker(f, "w-d", "x86", wd);
  char model[72];
  farm_push_model(f, kProgramB, model);
  json_t *body = json_pack("{s:s,s:s,s:s,s:[s],s:i}", "model", model, "format", "nir", "name", "team/verified",
                           "targets", "x86", "verify", 2);
  nimble_msg_type_t type;
  json_t *reply;
  ck_assert(farm_request(f, NIMBLE_MSG_SUBMIT, body, NULL, &type, &reply) == 0 && type == NIMBLE_MSG_ACCEPTED);
  char *job = strdup(json_string_value(json_object_get(reply, "job")));
  json_decref(reply);
  json_t *st = wait_finished(f, job);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "done"), "verified job: %s",
                json_dumps(st, 0));
  json_decref(st);
  free(job);
  step("verified build done");
  ck_assert_int_eq(count_entries(dir_c), 0);
  ck_assert_int_eq(count_entries(dir_d), 0);
  ck_assert_int_eq(redis_int(f, "GET nimble:kcache:%s:seq", "x86"), k.local_a.n);
  farm_stop(f);
}
END_TEST

/* A worker catches up with a large index over its tasks, at most 256
 * entries each, in the index's order, and starts over when the index's
 * counter is behind what it was sent (Redis lost the index). Entries made
 * by the test: blobs pushed to the store and recorded in Redis by hand;
 * the compiler is the stand-in (it ignores the kernel cache), so the
 * worker's folder holds exactly what it fetched. */
START_TEST(test_a_worker_catches_up_256_entries_a_task_and_starts_over_after_a_lost_index) {
  farm fa;
  farm *f = &fa;
  farm_config cfg = {.lease_ms = 60000};
  farm_start(f, &cfg);
  enum { N = 300 };
  static char keys[N][65], digests[N][72], payloads[N][32];
  for (int i = 0; i < N; i++) {
    snprintf(payloads[i], sizeof payloads[i], "kernel object %d", i);
    char seed[32];
    snprintf(seed, sizeof seed, "key %d", i);
    sha256_digest(seed, strlen(seed), digests[i]); /* a key: 64 hex digits */
    memcpy(keys[i], digests[i] + 7, 65);
    nimble_digest_t d;
    NIMBLE_ASSERT_OK(nimble_store_push_blob(f->store, "nimble-kcache", payloads[i], strlen(payloads[i]), &d));
    nimble_digest_format(&d, digests[i]);
    char member[160];
    snprintf(member, sizeof member, "%.64s=%.71s", keys[i], digests[i]);
    freeReplyObject(redisCommand(f->redis, "HSET nimble:kcache:x86 %s %s", keys[i], digests[i]));
    freeReplyObject(redisCommand(f->redis, "ZADD nimble:kcache:x86:order %d %s", i + 1, member));
  }
  freeReplyObject(redisCommand(f->redis, "SET nimble:kcache:x86:seq %d", N));
  char dir[500];
  snprintf(dir, sizeof dir, "%.300s/kcache-w", f->dir);
  const char *extra[] = {"--kcache-dir", dir, NULL};
  farm_start_worker(f, "w", "x86", extra);
  const char *targets[] = {"x86", NULL};
  long long want_fetched[2] = {256, N - 256};
  for (int round = 0; round < 2; round++) {
    char text[64], model[72];
    snprintf(text, sizeof text, "model: round %d\n", round);
    farm_push_model(f, text, model);
    json_t *acc = farm_submit(f, model, "team/stand-in", targets, NULL);
    char *job = strdup(json_string_value(json_object_get(acc, "job")));
    json_decref(acc);
    json_t *st = wait_finished(f, job);
    ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
    ck_assert_int_eq(kernels_field(st, "fetched"), want_fetched[round]);
    json_decref(st);
    free(job);
    ck_assert_int_eq(count_entries(dir), round == 0 ? 256 : N);
  }
  /* Every entry is in the folder under its key, holding the blob's bytes
   * (the local cache's layout: magic, key, size, digest, payload). */
  for (int i = 0; i < N; i++) {
    char path[700];
    snprintf(path, sizeof path, "%.400s/%.2s/%.64s", dir, keys[i], keys[i]);
    size_t n = 0;
    uint8_t *b = read_file(path, &n);
    ck_assert_msg(b != NULL, "entry %d (%s) was not fetched", i, keys[i]);
    size_t len = strlen(payloads[i]);
    ck_assert_int_eq(n, KC_HEADER + len);
    ck_assert(!memcmp(b, "NIMBLKC1", 8) && !memcmp(b + 8, keys[i], 64));
    ck_assert(!memcmp(b + KC_HEADER, payloads[i], len));
    free(b);
  }
  /* Redis lost the index; two new entries under sequence numbers 1 and 2:
   * the worker, sent up to 300, is sent both. */
  freeReplyObject(redisCommand(f->redis, "DEL nimble:kcache:x86 nimble:kcache:x86:order"));
  char seed[] = "kernel object after the loss";
  nimble_digest_t d;
  char nd[72], nk[65], member[160];
  NIMBLE_ASSERT_OK(nimble_store_push_blob(f->store, "nimble-kcache", seed, strlen(seed), &d));
  nimble_digest_format(&d, nd);
  memcpy(nk, nd + 7, 65);
  snprintf(member, sizeof member, "%.64s=%.71s", nk, nd);
  freeReplyObject(redisCommand(f->redis, "HSET nimble:kcache:x86 %s %s", nk, nd));
  freeReplyObject(redisCommand(f->redis, "ZADD nimble:kcache:x86:order 1 %s", member));
  snprintf(member, sizeof member, "%.64s=%.71s", keys[0], digests[0]);
  freeReplyObject(redisCommand(f->redis, "ZADD nimble:kcache:x86:order 2 %s", member));
  freeReplyObject(redisCommand(f->redis, "SET nimble:kcache:x86:seq 2"));
  char model[72];
  farm_push_model(f, "model: after the loss\n", model);
  json_t *acc = farm_submit(f, model, "team/stand-in", targets, NULL);
  char *job = strdup(json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  json_t *st = wait_finished(f, job);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  /* One new entry fetched; the other was in the folder already. */
  ck_assert_int_eq(kernels_field(st, "fetched"), 1);
  json_decref(st);
  free(job);
  ck_assert_int_eq(count_entries(dir), N + 1);
  farm_stop(f);
}
END_TEST

int main(void) {
  if (sodium_init() < 0) return 1;
  const char *build = getenv("NIMBLE_BUILD_DIR");
  snprintf(g_compiler, sizeof g_compiler, "%s/client/nimble", build ? build : ".");
  /* Case "kcache" runs the real compiler; case "index" (the stand-in
   * compiler) runs without it. ctest runs them as two tests
   * (CK_RUN_CASE), so that each stays short. */
  const char *only = getenv("CK_RUN_CASE");
  int index_only = only && !strcmp(only, "index");
  if (!index_only && (!build || access(g_compiler, X_OK) != 0)) {
    printf("skipped: no compiler at %s\n", g_compiler);
    return 77;
  }
  Suite *s = suite_create("farm_kcache");
  TCase *tc = tcase_create("kcache");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_a_kernel_built_on_one_worker_is_a_cache_hit_on_another);
  tcase_add_test(tc, test_a_corrupted_blob_is_refused_and_the_kernel_is_rebuilt);
  tcase_add_test(tc, test_the_farm_cache_off_records_nothing_and_the_cap_evicts_the_oldest);
  suite_add_tcase(s, tc);
  TCase *ti = tcase_create("index");
  tcase_set_timeout(ti, 120);
  tcase_add_test(ti, test_a_worker_catches_up_256_entries_a_task_and_starts_over_after_a_lost_index);
  suite_add_tcase(s, ti);
  return nimble_test_run(s);
}
