/* The fetcher against a real nimble-store on loopback: an executable built
 * with the runtime's builder is split into parts and pushed (with the store
 * client library), then fetched by tag and by digest and run, outputs
 * checked against sums computed by hand. Later starts use the cache (no
 * blob GET); a stopped store still starts from the cache; damaged cache
 * entries and blobs whose bytes do not match the manifest are caught. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fetch_push.h"
#include "http_peer.h"
#include "nimble/fetch.h"
#include "rt_test_util.h"
#ifdef NIMBLE_RUN_PATH
#include "nimble/tensor_io.h"
#endif

/* ---- A store per test ---------------------------------------------------- */

typedef struct env {
  char dir[256];    /* temp dir: store/ and cache/ under it */
  char store[300];  /* fixture dir */
  char cache[300];
  char addr[64];    /* "127.0.0.1:PORT" */
  int running;
  const char *store_args; /* extra nimble-store arguments, or NULL */
} env;

static int fixture_args(const char *cmd, const char *dir, const char *extra) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_msg(src != NULL, "NIMBLE_SOURCE_DIR is not set");
  char line[1024];
  snprintf(line, sizeof line, "bash '%s/tests/support/store_fixture.sh' %s '%s' %s >'%s.%s.log' 2>&1",
           src, cmd, dir, extra, dir, cmd);
  return system(line);
}

static int fixture(const char *cmd, const char *dir) { return fixture_args(cmd, dir, ""); }

static void store_start(env *e) {
  ck_assert_int_eq(fixture_args("start", e->store, e->store_args ? e->store_args : ""), 0);
  char path[400];
  snprintf(path, sizeof path, "%s/addr", e->store);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(e->addr, sizeof e->addr, f));
  fclose(f);
  e->addr[strcspn(e->addr, "\r\n")] = '\0';
  e->running = 1;
}

static void store_stop(env *e) {
  if (!e->running) return;
  ck_assert_int_eq(fixture("stop", e->store), 0);
  e->running = 0;
}

static void env_init_args(env *e, const char *store_args) {
  memset(e, 0, sizeof *e);
  e->store_args = store_args;
  snprintf(e->dir, sizeof e->dir, "%s/nimble-fetch-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(e->dir));
  snprintf(e->store, sizeof e->store, "%s/store", e->dir);
  snprintf(e->cache, sizeof e->cache, "%s/cache", e->dir);
  store_start(e);
}

static void env_init(env *e) { env_init_args(e, NULL); }

static void env_deinit(env *e) {
  store_stop(e);
  char line[600];
  snprintf(line, sizeof line, "rm -rf '%s'", e->dir);
  ck_assert_int_eq(system(line), 0);
}

/* ---- The artifact -------------------------------------------------------- */

/* main(a: f32[4], b: f32[4]) -> c = a + b, through the test kernels' vadd. */
typedef struct artifact {
  void *part[4];
  size_t size[4];
  char digest[72]; /* the manifest's */
} artifact;

static const nimble_part_kind_t kKinds[4] = {NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE,
                                             NIMBLE_PART_CONSTANTS, NIMBLE_PART_KERNELS_CPU};

/* With the metadata part's target `target` (NULL: the test target "test"). */
static void build_parts_for(artifact *a, const char *target) {
  nimble_executable_builder *b = rt_builder();
  if (target) {
    nimble_builder_destroy(b);
    size_t kn;
    const void *kernels = rt_kernels(&kn);
    NIMBLE_ASSERT_OK(nimble_builder_create(target, &b));
    NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, kernels, kn));
  }
  int64_t k = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 2, 6);
  int64_t shape[1] = {4};
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, shape);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, shape, NULL), rt_info("b", RT_F32, 1, shape, NULL)};
  nimble_tensor_info_t out = rt_info("c", RT_F32, 1, shape, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  for (int i = 0; i < 4; i++) NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, kKinds[i], &a->part[i], &a->size[i]));
  nimble_builder_destroy(b);
}


/* Layers under the artifact manifest's media types (protocol's names),
 * the manifest as protocol's encoder writes it. */
static void push_for(env *e, artifact *a, const char *repo, const char *tag, const char *target) {
  build_parts_for(a, target);
  fetch_push_part p[4] = {
      {fetch_protocol_metadata_type, a->part[0], a->size[0]},
      {fetch_protocol_bytecode_type, a->part[1], a->size[1]},
      {fetch_protocol_constants_type, a->part[2], a->size[2]},
      {fetch_protocol_kernels_x86_64_type, a->part[3], a->size[3]},
  };
  fetch_push_artifact(e->addr, repo, tag, p, 4, a->digest);
}

static void push(env *e, artifact *a, const char *repo, const char *tag) {
  push_for(e, a, repo, tag, NULL);
}

static void artifact_free(artifact *a) {
  for (int i = 0; i < 4; i++) free(a->part[i]);
}

static uint64_t parts_bytes(const artifact *a) {
  return a->size[0] + a->size[1] + a->size[2] + a->size[3];
}

static void assert_runs(nimble_executable *exe) {
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
  int64_t shape[1] = {4};
  DLTensor tx = rt_tensor(x, RT_F32, 1, shape), ty = rt_tensor(y, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &ty));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *c;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &c));
  const float *z = c->dl_tensor.data;
  ck_assert_float_eq(z[0], 11);
  ck_assert_float_eq(z[1], 22);
  ck_assert_float_eq(z[2], 33);
  ck_assert_float_eq(z[3], 44);
  c->deleter(c);
  nimble_vm_destroy(vm);
}

/* ---- Counting what the fetcher does ---------------------------------------- */

typedef struct counts {
  int manifest_gets, blob_gets, warnings;
  int unverified; /* "publisher not verified" warnings, counted apart */
  char last_warning[1024];
  int resumed;             /* blob GETs that carried a Range */
  long resumed_status;     /* the last one's HTTP status */
  char resumed_range[64];
} counts;

static void on_event(void *user, const nimble_fetch_event_t *ev) {
  counts *c = user;
  if (ev->kind == NIMBLE_FETCH_EVENT_REQUEST) {
    if (ev->is_blob) c->blob_gets++;
    else c->manifest_gets++;
    if (ev->range) {
      c->resumed++;
      c->resumed_status = ev->http_status;
      snprintf(c->resumed_range, sizeof c->resumed_range, "%s", ev->range);
    }
  } else if (strstr(ev->message, "the publisher of this artifact is not verified")) {
    c->unverified++; /* every fetch without trusted keys: test_fetch_trust checks it */
  } else {
    c->warnings++;
    snprintf(c->last_warning, sizeof c->last_warning, "%s", ev->message);
  }
}

static nimble_fetch_options_t options(env *e, counts *c) {
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.cache_dir = e->cache;
  o.connect_timeout_ms = 2000;
  o.max_attempts = 2;
  o.on_event = on_event;
  o.event_user = c;
  memset(c, 0, sizeof *c);
  return o;
}

static void ref_tag(char *buf, size_t n, env *e, const char *repo, const char *tag) {
  snprintf(buf, n, "http://%s/%s:%s", e->addr, repo, tag);
}

static void ref_digest(char *buf, size_t n, env *e, const char *repo, const char *digest) {
  snprintf(buf, n, "http://%s/%s@%s", e->addr, repo, digest);
}

/* Path of a cached blob. */
static void cache_blob_path(char *buf, size_t n, env *e, const void *data, size_t size) {
  char d[72];
  fetch_reference_digest(data, size, d);
  snprintf(buf, n, "%s/blobs/sha256/%s", e->cache, d + 7);
}

static void flip_byte(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  uint8_t c;
  ck_assert_int_eq(pread(fd, &c, 1, at), 1);
  c ^= 0x5A;
  ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
  close(fd);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- Tests ---------------------------------------------------------------- */

START_TEST(test_fetch_by_tag_runs_and_the_second_start_gets_no_blob) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  nimble_fetch_stats_t st;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact_stats(&o, ref, &exe, &st));
  assert_runs(exe);
  nimble_executable_release(exe);
  /* config + 4 parts, each GET once; the manifest once. */
  ck_assert_int_eq(c.manifest_gets, 1);
  ck_assert_int_eq(c.blob_gets, 5);
  ck_assert_uint_eq(st.blobs_fetched, 5);
  ck_assert_uint_eq(st.blobs_from_cache, 0);
  ck_assert_uint_gt(st.bytes_fetched, parts_bytes(&a)); /* plus the config blob */
  ck_assert_int_eq(st.offline, 0);
  ck_assert_str_eq(st.manifest_digest, a.digest);
  ck_assert_int_eq(c.warnings, 0);
  /* The cache holds every part under its digest, and the tag record. */
  for (int i = 0; i < 4; i++) {
    char path[600];
    cache_blob_path(path, sizeof path, &e, a.part[i], a.size[i]);
    ck_assert_msg(file_exists(path), "%s is not cached", path);
  }

  /* Second start: the manifest is asked for, no blob. */
  o = options(&e, &c);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact_stats(&o, ref, &exe, &st));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.manifest_gets, 1);
  ck_assert_int_eq(c.blob_gets, 0);
  ck_assert_uint_eq(st.blobs_fetched, 0);
  ck_assert_uint_eq(st.blobs_from_cache, 5);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_fetch_by_digest_runs_and_shares_the_cache_with_the_tag) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "models/vadd", "v1");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  ref_digest(ref, sizeof ref, &e, "models/vadd", a.digest);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.blob_gets, 5);
  /* Again by digest: the digest pins the bytes, so the store is not asked
   * at all, not even for the manifest. */
  o = options(&e, &c);
  nimble_fetch_stats_t st;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact_stats(&o, ref, &exe, &st));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.manifest_gets + c.blob_gets, 0);
  ck_assert_int_eq(c.warnings, 0);
  ck_assert_int_eq(st.offline, 0);
  /* The same artifact by tag: blobs come from the cache. */
  o = options(&e, &c);
  ref_tag(ref, sizeof ref, &e, "models/vadd", "v1");
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  nimble_executable_release(exe);
  ck_assert_int_eq(c.blob_gets, 0);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_stopped_store_starts_from_the_cache_with_a_warning) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512], dref[512], other[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  ref_digest(dref, sizeof dref, &e, "team/vadd", a.digest);
  ref_tag(other, sizeof other, &e, "team/vadd", "never-fetched");
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  nimble_executable_release(exe);
  store_stop(&e);

  o = options(&e, &c);
  nimble_fetch_stats_t st;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact_stats(&o, ref, &exe, &st));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(st.offline, 1);
  ck_assert_uint_eq(st.blobs_from_cache, 5);
  ck_assert_str_eq(st.manifest_digest, a.digest);
  ck_assert_int_eq(c.warnings, 1);
  ck_assert_msg(strstr(c.last_warning, "store unreachable") != NULL, "warning: %s", c.last_warning);
  ck_assert_int_eq(c.blob_gets, 0);

  /* By digest, offline: straight from the cache. */
  o = options(&e, &c);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, dref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);

  /* A tag never fetched cannot be resolved offline. */
  o = options(&e, &c);
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, other, &exe), NIMBLE_UNAVAILABLE,
                      "has no record of this tag");
  ck_assert_ptr_null(exe);

  /* options.offline never touches the network, even with the store back. */
  store_start(&e);
  o = options(&e, &c);
  o.offline = 1;
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86"); /* a new port: a new store key */
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNAVAILABLE, "no record of this tag");
  ck_assert_int_eq(c.manifest_gets + c.blob_gets, 0);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_damaged_cached_blob_is_fetched_again_when_online) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  nimble_executable_release(exe);

  char path[600], want[72];
  cache_blob_path(path, sizeof path, &e, a.part[1], a.size[1]); /* bytecode */
  fetch_reference_digest(a.part[1], a.size[1], want);
  flip_byte(path, 20);
  o = options(&e, &c);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.blob_gets, 1);
  ck_assert_int_eq(c.warnings, 1);
  ck_assert_msg(strstr(c.last_warning, want) != NULL, "warning lacks the digest: %s", c.last_warning);
  /* The cache holds the right bytes again. */
  size_t n;
  void *bytes = rt_read_file(path, &n);
  ck_assert_uint_eq(n, a.size[1]);
  ck_assert_mem_eq(bytes, a.part[1], n);
  free(bytes);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_damaged_cached_blob_offline_is_data_loss_naming_the_digest) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512], want[72], path[600];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  nimble_executable_release(exe);
  store_stop(&e);

  cache_blob_path(path, sizeof path, &e, a.part[3], a.size[3]); /* the kernels */
  fetch_reference_digest(a.part[3], a.size[3], want);
  flip_byte(path, (off_t)(a.size[3] / 2));
  o = options(&e, &c);
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_DATA_LOSS, want);
  ck_assert_ptr_null(exe);

  /* A damaged cached manifest is caught the same way. */
  snprintf(path, sizeof path, "%s/blobs/sha256/%s", e.cache, a.digest + 7);
  flip_byte(path, 3);
  o = options(&e, &c);
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_DATA_LOSS, a.digest);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_served_bytes_that_do_not_match_the_manifest_are_data_loss_and_nothing_is_cached) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  /* The store's copy of the constants blob rots on disk (same size). */
  char want[72], path[600];
  fetch_reference_digest(a.part[2], a.size[2], want);
  snprintf(path, sizeof path, "%s/root/blobs/sha256/%.2s/%s", e.store, want + 7, want + 7);
  ck_assert_msg(file_exists(path), "store layout changed: %s", path);
  flip_byte(path, 17);

  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_DATA_LOSS, want);
  ck_assert_ptr_null(exe);
  /* Nothing of this artifact entered the cache: no blob, no manifest, no tag. */
  for (int i = 0; i < 4; i++) {
    cache_blob_path(path, sizeof path, &e, a.part[i], a.size[i]);
    ck_assert_msg(!file_exists(path), "%s was cached", path);
  }
  snprintf(path, sizeof path, "%s/blobs/sha256/%s", e.cache, a.digest + 7);
  ck_assert(!file_exists(path));
  store_stop(&e);
  o = options(&e, &c);
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNAVAILABLE, "no record");
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_store_errors_and_foreign_manifests_are_named) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  nimble_executable *exe;
  ref_tag(ref, sizeof ref, &e, "team/vadd", "nope");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_NOT_FOUND, "HTTP 404");
  ref_tag(ref, sizeof ref, &e, "team/absent", "x86");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_NOT_FOUND, "team/absent");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, "http://127.0.0.1:1/Bad:x", &exe),
                      NIMBLE_INVALID_ARGUMENT, "a name component must start");

  /* A manifest without the metadata layer (protocol's encoder refuses to
   * write one; here the layer is renamed into another CPU's kernels, which
   * this host skips) is refused before any blob is fetched, naming what is
   * missing. */
  fetch_push_part q[5] = {{fetch_protocol_metadata_type, a.part[0], a.size[0]},
                          {fetch_protocol_bytecode_type, a.part[1], a.size[1]},
                          {fetch_protocol_constants_type, a.part[2], a.size[2]},
                          {fetch_protocol_kernels_x86_64_type, a.part[3], a.size[3]},
                          {fetch_protocol_kernels_aarch64_type, "w", 1}};
  char d[72];
  fetch_push_artifact_edited(e.addr, "team/vadd", "nometa", q, 4, fetch_protocol_metadata_type,
                             fetch_protocol_kernels_aarch64_type, d);
  o = options(&e, &c);
  ref_tag(ref, sizeof ref, &e, "team/vadd", "nometa");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_FAILED_PRECONDITION,
                      "has no 'application/vnd.nimble.executable.metadata.v1' layer");
  ck_assert_int_eq(c.blob_gets, 0);

  /* An unknown layer type is refused, and so are the names the runtime
   * used before docs/artifacts.md made one set. */
  fetch_push_artifact_edited(e.addr, "team/vadd", "unknown", q, 5,
                             fetch_protocol_kernels_aarch64_type,
                             "application/vnd.nimble.weights.v1", d);
  ref_tag(ref, sizeof ref, &e, "team/vadd", "unknown");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNIMPLEMENTED,
                      "layers[4]: unknown media type 'application/vnd.nimble.weights.v1'");
  fetch_push_artifact_edited(e.addr, "team/vadd", "old", q, 4, fetch_protocol_bytecode_type,
                             "application/vnd.nimble.executable.bytecode.v1", d);
  ref_tag(ref, sizeof ref, &e, "team/vadd", "old");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNIMPLEMENTED,
                      "layers[1]: unknown media type 'application/vnd.nimble.executable.bytecode.v1'");
  ck_assert_int_eq(c.blob_gets, 0);

  /* A different target's kernels are skipped, not fetched. */
  q[4] = (fetch_push_part){fetch_protocol_kernels_aarch64_type, "elf", 3};
  fetch_push_artifact(e.addr, "team/vadd", "fat", q, 5, d);
  ref_tag(ref, sizeof ref, &e, "team/vadd", "fat");
  o = options(&e, &c);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  /* config + the 4 parts; the aarch64 kernels are neither fetched nor cached. */
  ck_assert_int_eq(c.blob_gets, 5);
  char path[600];
  cache_blob_path(path, sizeof path, &e, "elf", 3);
  ck_assert(!file_exists(path));
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

/* The kernels layer's triple (in its media type) and the metadata part's
 * target must agree: x86 kernels under an aarch64 executable are refused
 * after loading, before anything runs. */
START_TEST(test_kernels_of_another_cpu_than_the_metadata_target_are_refused) {
#if defined(__x86_64__)
  env e;
  env_init(&e);
  artifact a, b;
  push_for(&e, &a, "team/vadd", "arm", "aarch64-linux-gnu");
  push_for(&e, &b, "team/vadd", "x86", "x86_64-linux-gnu");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  nimble_executable *exe = NULL;
  ref_tag(ref, sizeof ref, &e, "team/vadd", "arm");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_FAILED_PRECONDITION,
                      "layers[3] holds x86_64-linux-gnu kernels, but the metadata part says the "
                      "executable's target is 'aarch64-linux-gnu'");
  ck_assert_ptr_null(exe);
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  ck_assert_str_eq(nimble_executable_target(exe), "x86_64-linux-gnu");
  assert_runs(exe);
  nimble_executable_release(exe);
  artifact_free(&a);
  artifact_free(&b);
  env_deinit(&e);
#endif
}
END_TEST

START_TEST(test_an_unreachable_store_without_a_cache_is_unavailable) {
  char dir[] = "/tmp/nimble-fetch-empty-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.cache_dir = dir;
  o.max_attempts = 2;
  nimble_executable *exe;
  /* Port 1 on loopback: connection refused. */
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, "http://127.0.0.1:1/m:t", &exe), NIMBLE_UNAVAILABLE,
                      "no record of this tag");
  NIMBLE_ASSERT_ERROR(
      nimble_fetch_artifact(&o, "http://127.0.0.1:1/m@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", &exe),
      NIMBLE_UNAVAILABLE, "not in the cache");
  o.struct_size = 8;
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, "http://127.0.0.1:1/m:t", &exe),
                      NIMBLE_INVALID_ARGUMENT, "struct_size");
  char line[128];
  snprintf(line, sizeof line, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(line), 0);
}
END_TEST

START_TEST(test_the_cache_directory_follows_the_environment) {
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  char *d;
  setenv("NIMBLE_CACHE_DIR", "/x/nc", 1);
  setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  setenv("HOME", "/x/home", 1);
  NIMBLE_ASSERT_OK(nimble_fetch_cache_dir(&o, &d));
  ck_assert_str_eq(d, "/x/nc");
  free(d);
  unsetenv("NIMBLE_CACHE_DIR");
  NIMBLE_ASSERT_OK(nimble_fetch_cache_dir(&o, &d));
  ck_assert_str_eq(d, "/x/xdg/nimble");
  free(d);
  unsetenv("XDG_CACHE_HOME");
  NIMBLE_ASSERT_OK(nimble_fetch_cache_dir(&o, &d));
  ck_assert_str_eq(d, "/x/home/.cache/nimble");
  free(d);
  o.cache_dir = "/x/opt";
  NIMBLE_ASSERT_OK(nimble_fetch_cache_dir(&o, &d));
  ck_assert_str_eq(d, "/x/opt");
  free(d);
  o.cache_dir = NULL;
  unsetenv("HOME");
  NIMBLE_ASSERT_ERROR(nimble_fetch_cache_dir(&o, &d), NIMBLE_FAILED_PRECONDITION, "NIMBLE_CACHE_DIR");
}
END_TEST

START_TEST(test_a_store_that_authenticates_reads_gets_the_bearer_token) {
  env e;
  env_init_args(&e, "--auth-reads");
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  unsetenv("NIMBLE_TOKEN");
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNAUTHENTICATED, "HTTP 401");
  o.token = "wrong-token";
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNAUTHENTICATED, "HTTP 401");
  /* From the environment. */
  o.token = NULL;
  setenv("NIMBLE_TOKEN", "test-token", 1);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  unsetenv("NIMBLE_TOKEN");
  /* From the options. */
  o = options(&e, &c);
  o.token = "test-token";
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  nimble_executable_release(exe);
  ck_assert_int_eq(c.blob_gets, 0);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_blob_over_the_size_cap_is_refused_before_it_is_fetched) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  /* The kernels are the biggest part; the others fit under the cap. */
  uint64_t biggest = 0;
  for (int i = 0; i < 4; i++) biggest = a.size[i] > biggest ? a.size[i] : biggest;
  ck_assert_uint_eq(biggest, a.size[3]);
  o.max_blob_size = biggest - 1;
  char ref[512], want[72];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  fetch_reference_digest(a.part[3], a.size[3], want);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_RESOURCE_EXHAUSTED, want);
  ck_assert_int_eq(c.blob_gets, 4); /* config, metadata, bytecode, constants */
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_blob_transfer_cut_mid_way_resumes_with_range) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  /* Every GET is its own connection; the first that moves more than 4000
   * bytes to us (the kernels, the only part that big) is cut once. */
  ck_assert_uint_gt(a.size[3], 8000);
  for (int i = 0; i < 3; i++) ck_assert_uint_lt(a.size[i], 3000);
  int port = atoi(strchr(e.addr, ':') + 1);
  tcp_cutter *cut = tcp_cutter_start(port, -1, 4000);
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  char ref[512];
  snprintf(ref, sizeof ref, "http://127.0.0.1:%d/team/vadd:x86", tcp_cutter_port(cut));
  nimble_executable *exe;
  nimble_fetch_stats_t st;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact_stats(&o, ref, &exe, &st));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(tcp_cutter_cuts(cut), 1);
  ck_assert_int_eq(c.resumed, 1);
  ck_assert_int_eq(c.resumed_status, 206);
  long long from = -1;
  ck_assert_int_eq(sscanf(c.resumed_range, "bytes=%lld-", &from), 1);
  ck_assert_msg(from > 0 && (uint64_t)from < a.size[3], "resumed from %lld", from);
  ck_assert_int_eq(c.blob_gets, 6); /* 5 blobs, one of them twice */
  ck_assert_uint_eq(st.blobs_fetched, 5);
  tcp_cutter_stop(cut);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_an_unusable_cache_directory_still_lets_an_online_start_run) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c);
  /* A path under a regular file can never be created. */
  char bad[400];
  snprintf(bad, sizeof bad, "%s/store.start.log/cache", e.dir);
  o.cache_dir = bad;
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_ge(c.warnings, 1);
  ck_assert_msg(strstr(c.last_warning, "the cache was not updated") != NULL, "%s", c.last_warning);
  store_stop(&e);
  o = options(&e, &c);
  o.cache_dir = bad;
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_UNAVAILABLE, "no record of this tag");
  ck_assert_int_eq(c.warnings, 2); /* the cache cannot be used; the store is unreachable */
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

#ifdef NIMBLE_RUN_PATH
/* Runs nimble-run on `model` with inputs a.npy and b.npy in dir; stderr is
 * kept in dir/stderr. Returns the exit status. */
static int nimble_run(env *e, const char *model, char *err, size_t errcap) {
  char line[2048];
  snprintf(line, sizeof line,
           "NIMBLE_CACHE_DIR='%s' '%s' '%s' --input a='%s/a.npy' --input b='%s/b.npy' "
           "--output-dir '%s' 2>'%s/stderr' >/dev/null",
           e->cache, NIMBLE_RUN_PATH, model, e->dir, e->dir, e->dir, e->dir);
  int rc = system(line);
  snprintf(line, sizeof line, "%s/stderr", e->dir);
  size_t n;
  char *text = rt_read_file(line, &n);
  snprintf(err, errcap, "%.*s", (int)n, text);
  free(text);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void assert_output(env *e) {
  char path[400];
  snprintf(path, sizeof path, "%s/c.npy", e->dir);
  nimble_tensor_file_t f = {0};
  NIMBLE_ASSERT_OK(nimble_tensor_io_read_npy(path, &f));
  ck_assert_int_eq(f.tensor.ndim, 1);
  ck_assert_int_eq(f.tensor.shape[0], 4);
  const float *z = f.data;
  ck_assert_float_eq(z[0], 11);
  ck_assert_float_eq(z[3], 44);
  nimble_tensor_file_deinit(&f);
  unlink(path);
}

START_TEST(test_nimble_run_takes_a_reference_then_starts_from_the_cache_offline) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
  int64_t shape[1] = {4};
  DLTensor tx = rt_tensor(x, RT_F32, 1, shape), ty = rt_tensor(y, RT_F32, 1, shape);
  char path[400], ref[512], err[4096];
  snprintf(path, sizeof path, "%s/a.npy", e.dir);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &tx));
  snprintf(path, sizeof path, "%s/b.npy", e.dir);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &ty));
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");

  ck_assert_int_eq(nimble_run(&e, ref, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "fetched 5 blobs (") != NULL, "stderr: %s", err);
  assert_output(&e);
  ck_assert_int_eq(nimble_run(&e, ref, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "loaded from cache") != NULL, "stderr: %s", err);
  assert_output(&e);
  store_stop(&e);
  ck_assert_int_eq(nimble_run(&e, ref, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "warning: store unreachable") != NULL, "stderr: %s", err);
  ck_assert_msg(strstr(err, "loaded from cache") != NULL, "stderr: %s", err);
  assert_output(&e);
  /* A bad reference: exit 1 and one line naming the problem. */
  ck_assert_int_eq(nimble_run(&e, "http://127.0.0.1:1/Bad:x", err, sizeof err), 1);
  ck_assert_msg(strstr(err, "a name component must start") != NULL, "stderr: %s", err);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST
#endif

int main(void) {
  Suite *s = suite_create("fetch_store");
  TCase *tc = tcase_create("store");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fetch_by_tag_runs_and_the_second_start_gets_no_blob);
  tcase_add_test(tc, test_fetch_by_digest_runs_and_shares_the_cache_with_the_tag);
  tcase_add_test(tc, test_a_stopped_store_starts_from_the_cache_with_a_warning);
  tcase_add_test(tc, test_a_damaged_cached_blob_is_fetched_again_when_online);
  tcase_add_test(tc, test_a_damaged_cached_blob_offline_is_data_loss_naming_the_digest);
  tcase_add_test(tc, test_served_bytes_that_do_not_match_the_manifest_are_data_loss_and_nothing_is_cached);
  tcase_add_test(tc, test_store_errors_and_foreign_manifests_are_named);
  tcase_add_test(tc, test_kernels_of_another_cpu_than_the_metadata_target_are_refused);
  tcase_add_test(tc, test_an_unreachable_store_without_a_cache_is_unavailable);
  tcase_add_test(tc, test_the_cache_directory_follows_the_environment);
  tcase_add_test(tc, test_a_store_that_authenticates_reads_gets_the_bearer_token);
  tcase_add_test(tc, test_a_blob_over_the_size_cap_is_refused_before_it_is_fetched);
  tcase_add_test(tc, test_a_blob_transfer_cut_mid_way_resumes_with_range);
  tcase_add_test(tc, test_an_unusable_cache_directory_still_lets_an_online_start_run);
#ifdef NIMBLE_RUN_PATH
  tcase_add_test(tc, test_nimble_run_takes_a_reference_then_starts_from_the_cache_offline);
#endif
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
