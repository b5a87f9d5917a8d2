/* The fetcher's publisher check against a real nimble-store on loopback:
 * artifacts (the runtime builder's vadd, outputs checked by hand) are
 * pushed and signed as the scheduler signs them (fetch_push_signature:
 * protocol's signature object tagged `<tag>.sig`), with keys made by
 * nimble_sign_keygen. With trusted keys only a signature for this
 * repository, tag and manifest under one of them loads; unsigned, foreign,
 * tampered and replayed artifacts are refused before any blob is fetched,
 * with messages naming the reference and the key. Without keys, one
 * warning. nimble-run is run as a process for the user's path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fetch_push.h"
#include "nimble/fetch.h"
#include "nimble/signature.h"
#include "rt_test_util.h"
#ifdef NIMBLE_RUN_PATH
#include "nimble/tensor_io.h"
#endif

/* ---- A store and keys per test ------------------------------------------- */

typedef struct env {
  char dir[256];
  char store[300];
  char cache[300];
  char addr[64];
  int running;
  char key[2][300];     /* secret key files k0, k1 */
  char pub[2][65];      /* their public keys, hex */
  char trusted[300];    /* trusted keys file: written per test */
} env;

static int fixture(const char *cmd, const char *dir) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_msg(src != NULL, "NIMBLE_SOURCE_DIR is not set");
  char line[1024];
  snprintf(line, sizeof line, "bash '%s/tests/support/store_fixture.sh' %s '%s' >'%s.%s.log' 2>&1", src,
           cmd, dir, dir, cmd);
  return system(line);
}

static void store_start(env *e) {
  ck_assert_int_eq(fixture("start", e->store), 0);
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

static void env_init(env *e) {
  memset(e, 0, sizeof *e);
  snprintf(e->dir, sizeof e->dir, "%s/nimble-trust-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(e->dir));
  snprintf(e->store, sizeof e->store, "%s/store", e->dir);
  snprintf(e->cache, sizeof e->cache, "%s/cache", e->dir);
  snprintf(e->trusted, sizeof e->trusted, "%s/trusted.keys", e->dir);
  for (int i = 0; i < 2; i++) {
    snprintf(e->key[i], sizeof e->key[i], "%s/k%d.key", e->dir, i);
    uint8_t pub[NIMBLE_SIGN_KEY_BYTES];
    NIMBLE_ASSERT_OK(nimble_sign_keygen(e->key[i], pub));
    nimble_sign_key_hex(pub, e->pub[i]);
  }
  ck_assert_str_ne(e->pub[0], e->pub[1]);
  store_start(e);
}

static void env_deinit(env *e) {
  store_stop(e);
  char line[600];
  snprintf(line, sizeof line, "rm -rf '%s'", e->dir);
  ck_assert_int_eq(system(line), 0);
}

/* The trusted keys file: the public keys of the listed key indexes. */
static void trust(env *e, int n, const int *which) {
  FILE *f = fopen(e->trusted, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "# the farm's keys\n");
  for (int i = 0; i < n; i++) fprintf(f, "ed25519 %s key-%d\n", e->pub[which[i]], which[i]);
  fclose(f);
}

/* ---- The artifact (as in test_fetch_store) -------------------------------- */

typedef struct artifact {
  void *part[4];
  size_t size[4];
  char digest[72];
} artifact;

static const nimble_part_kind_t kKinds[4] = {NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE,
                                             NIMBLE_PART_CONSTANTS, NIMBLE_PART_KERNELS_CPU};

static void build_parts(artifact *a) {
  nimble_executable_builder *b = rt_builder();
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

static void parts_of(const artifact *a, fetch_push_part p[4]) {
  const char *types[4] = {fetch_protocol_metadata_type, fetch_protocol_bytecode_type,
                          fetch_protocol_constants_type, fetch_protocol_kernels_x86_64_type};
  for (int i = 0; i < 4; i++) p[i] = (fetch_push_part){types[i], a->part[i], a->size[i]};
}

static void push(env *e, artifact *a, const char *repo, const char *tag) {
  build_parts(a);
  fetch_push_part p[4];
  parts_of(a, p);
  fetch_push_artifact(e->addr, repo, tag, p, 4, a->digest);
}

static void artifact_free(artifact *a) {
  for (int i = 0; i < 4; i++) free(a->part[i]);
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

/* ---- Fetching ------------------------------------------------------------ */

/* 1 when `url` GETs one of the artifact's parts (the kernels among them);
 * a refused fetch must have fetched none. */
static int is_part_url(const artifact *a, const char *url) {
  for (int i = 0; i < 4; i++) {
    char d[72];
    fetch_reference_digest(a->part[i], a->size[i], d);
    if (strstr(url, d)) return 1;
  }
  return 0;
}

typedef struct counts {
  const artifact *a; /* whose part GETs are counted */
  int part_gets, unverified, other_warnings;
  char unverified_text[1024];
} counts;

static void on_event(void *user, const nimble_fetch_event_t *ev) {
  counts *c = user;
  if (ev->kind == NIMBLE_FETCH_EVENT_REQUEST) {
    if (ev->is_blob && c->a && is_part_url(c->a, ev->url)) c->part_gets++;
  } else if (strstr(ev->message, "the publisher of this artifact is not verified")) {
    c->unverified++;
    snprintf(c->unverified_text, sizeof c->unverified_text, "%s", ev->message);
  } else {
    c->other_warnings++;
  }
}

static nimble_fetch_options_t options(env *e, counts *c, const char *keys) {
  nimble_fetch_options_t o;
  nimble_fetch_options_init(&o);
  o.cache_dir = e->cache;
  o.connect_timeout_ms = 2000;
  o.max_attempts = 2;
  o.on_event = on_event;
  o.event_user = c;
  o.trusted_keys = keys;
  memset(c, 0, sizeof *c);
  return o;
}

static void ref_tag(char *buf, size_t n, env *e, const char *repo, const char *tag) {
  snprintf(buf, n, "http://%s/%s:%s", e->addr, repo, tag);
}

/* Fetching `ref` with `keys` is refused: PERMISSION_DENIED, the message
 * names the reference and holds `fragment` (and `fragment2`, may be NULL),
 * and none of a's parts was fetched: the check comes first. */
static void assert_refused(env *e, const artifact *a, const char *ref, const char *keys,
                           const char *fragment, const char *fragment2) {
  counts c;
  nimble_fetch_options_t o = options(e, &c, keys);
  c.a = a;
  nimble_executable *exe = NULL;
  nimble_status_t s = nimble_fetch_artifact(&o, ref, &exe);
  ck_assert_msg(s != NULL, "%s loaded, expected a refusal with '%s'", ref, fragment);
  const char *msg = nimble_status_message(s);
  ck_assert_msg(nimble_status_code(s) == NIMBLE_PERMISSION_DENIED, "%s: %s", nimble_status_code_name(nimble_status_code(s)), msg);
  ck_assert_msg(strstr(msg, ref) != NULL, "message does not name the reference: %s", msg);
  ck_assert_msg(strstr(msg, fragment) != NULL, "message lacks '%s': %s", fragment, msg);
  ck_assert_msg(!fragment2 || strstr(msg, fragment2) != NULL, "message lacks '%s': %s", fragment2, msg);
  ck_assert_ptr_null(exe);
  ck_assert_int_eq(c.part_gets, 0);
  nimble_status_free(s);
}

START_TEST(test_a_signed_artifact_loads_runs_and_starts_offline_still_checked) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[0], a.digest);
  trust(&e, 1, (int[]){0});
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c, e.trusted);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.unverified, 0);
  ck_assert_int_eq(c.other_warnings, 0);

  /* Offline: the cached signature object is checked the same way. */
  store_stop(&e);
  o = options(&e, &c, e.trusted);
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.other_warnings, 1); /* store unreachable */
  trust(&e, 1, (int[]){1});
  assert_refused(&e, &a, ref, e.trusted, e.pub[0], "which is not in trusted keys");
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_two_trusted_keys_let_the_farm_rotate_to_the_second) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[1], a.digest);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  trust(&e, 2, (int[]){0, 1});
  counts c;
  nimble_fetch_options_t o = options(&e, &c, e.trusted);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  /* The old key alone no longer vouches for what the new one signed. */
  trust(&e, 1, (int[]){0});
  assert_refused(&e, &a, ref, e.trusted, e.pub[1], "which is not in trusted keys");
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_an_unsigned_artifact_is_refused_with_keys_and_warned_about_without) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  trust(&e, 1, (int[]){0});
  assert_refused(&e, &a, ref, e.trusted, "unsigned: no signature x86.sig", e.trusted);
  /* NIMBLE_TRUSTED_KEYS is the default. */
  setenv("NIMBLE_TRUSTED_KEYS", e.trusted, 1);
  assert_refused(&e, &a, ref, NULL, "unsigned", e.trusted);
  unsetenv("NIMBLE_TRUSTED_KEYS");
  counts c;
  nimble_fetch_options_t o = options(&e, &c, NULL);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  ck_assert_int_eq(c.unverified, 1);
  ck_assert_msg(strstr(c.unverified_text, ref) != NULL, "%s", c.unverified_text);
  ck_assert_ptr_null(strchr(c.unverified_text, '\n'));
  /* Something that is not a signature object under x86.sig (here the
   * artifact's own manifest) is no signature either. */
  fetch_copy_tag(e.addr, "team/vadd", "x86", "x86.sig");
  assert_refused(&e, &a, ref, e.trusted, "the signature x86.sig cannot be used", "not a signature manifest");
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_signature_by_a_foreign_key_is_refused_naming_it) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[1], a.digest);
  char ref[512], want[200];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  trust(&e, 1, (int[]){0});
  snprintf(want, sizeof want, "signed by key ed25519 %s", e.pub[1]);
  assert_refused(&e, &a, ref, e.trusted, want, e.trusted);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_manifest_bytes_changed_under_a_signed_tag_are_refused) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[0], a.digest);
  /* The same parts, the manifest re-encoded with one byte more, pushed
   * under the tag without a new signature. */
  fetch_push_part p[4];
  parts_of(&a, p);
  char tampered[72];
  fetch_push_artifact_edited(e.addr, "team/vadd", "x86", p, 4, "\"schemaVersion\":2", "\"schemaVersion\": 2",
                             tampered);
  ck_assert_str_ne(tampered, a.digest);
  char ref[512], want[300];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  trust(&e, 1, (int[]){0});
  snprintf(want, sizeof want, "is for manifest %s, but the store served manifest %s", a.digest, tampered);
  assert_refused(&e, &a, ref, e.trusted, want, e.pub[0]);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_an_old_signed_manifest_replayed_under_a_new_tag_is_refused) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "v1");
  fetch_push_signature(e.addr, "team/vadd", "v1", e.key[0], a.digest);
  /* Someone with the store token copies v1 and its signature to v2. */
  fetch_copy_tag(e.addr, "team/vadd", "v1", "v2");
  fetch_copy_tag(e.addr, "team/vadd", "v1.sig", "v2.sig");
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "v2");
  trust(&e, 1, (int[]){0});
  assert_refused(&e, &a, ref, e.trusted, "is for team/vadd:v1, not team/vadd:v2", e.pub[0]);
  /* The copy's fields edited to say v2: the signature, made for v1, no
   * longer verifies (libsodium's check, end to end). */
  nimble_sign_key_t k;
  NIMBLE_ASSERT_OK(nimble_sign_key_load(e.key[0], &k));
  char *obj;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_signature_object(&k, "team/vadd", "v1", a.digest, &obj, &n));
  nimble_sign_key_deinit(&k);
  char *at = strstr(obj, "\"tag\":\"v1\"");
  ck_assert_ptr_nonnull(at);
  at[8] = '2';
  fetch_push_signature_object(e.addr, "team/vadd", "v2", obj, n);
  free(obj);
  assert_refused(&e, &a, ref, e.trusted, "does not verify under key ed25519", e.pub[0]);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_digest_references_need_their_tag_when_keys_are_set) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[0], a.digest);
  trust(&e, 1, (int[]){0});
  char ref[512];
  snprintf(ref, sizeof ref, "http://%s/team/vadd@%s", e.addr, a.digest);
  assert_refused(&e, &a, ref, e.trusted, "use NAME:TAG@", NULL);
  snprintf(ref, sizeof ref, "http://%s/team/vadd:x86@%s", e.addr, a.digest);
  counts c;
  nimble_fetch_options_t o = options(&e, &c, e.trusted);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_fetch_artifact(&o, ref, &exe));
  assert_runs(exe);
  nimble_executable_release(exe);
  /* Pinned to a digest the tag's signature is not for. */
  snprintf(ref, sizeof ref, "http://%s/team/vadd:v9@%s", e.addr, a.digest);
  assert_refused(&e, &a, ref, e.trusted, "unsigned: no signature v9.sig", NULL);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

START_TEST(test_a_malformed_trusted_keys_file_is_an_error_naming_it) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  FILE *f = fopen(e.trusted, "w");
  ck_assert_ptr_nonnull(f);
  fputs("ssh-ed25519 AAAAC3Nza\n", f);
  fclose(f);
  char ref[512];
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");
  counts c;
  nimble_fetch_options_t o = options(&e, &c, e.trusted);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(nimble_fetch_artifact(&o, ref, &exe), NIMBLE_INVALID_ARGUMENT, e.trusted);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST

#ifdef NIMBLE_RUN_PATH
/* nimble-run REF with `extra` arguments and environment `envs`; stderr in
 * err. Returns the exit status. */
static int nimble_run(env *e, const char *envs, const char *ref, const char *extra, char *err,
                      size_t errcap) {
  char line[4096];
  snprintf(line, sizeof line,
           "%s NIMBLE_CACHE_DIR='%s' '%s' '%s' %s --input a='%s/a.npy' --input b='%s/b.npy' "
           "--output-dir '%s' 2>'%s/stderr' >/dev/null",
           envs, e->cache, NIMBLE_RUN_PATH, ref, extra, e->dir, e->dir, e->dir, e->dir);
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
  const float *z = f.data;
  ck_assert_float_eq(z[0], 11);
  ck_assert_float_eq(z[3], 44);
  nimble_tensor_file_deinit(&f);
  unlink(path);
}

START_TEST(test_nimble_run_checks_the_publisher_with_trusted_keys) {
  env e;
  env_init(&e);
  artifact a;
  push(&e, &a, "team/vadd", "x86");
  fetch_push_signature(e.addr, "team/vadd", "x86", e.key[0], a.digest);
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
  int64_t shape[1] = {4};
  DLTensor tx = rt_tensor(x, RT_F32, 1, shape), ty = rt_tensor(y, RT_F32, 1, shape);
  char path[400], ref[512], err[4096], arg[400], envs[400];
  snprintf(path, sizeof path, "%s/a.npy", e.dir);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &tx));
  snprintf(path, sizeof path, "%s/b.npy", e.dir);
  NIMBLE_ASSERT_OK(nimble_tensor_io_write_npy(path, &ty));
  ref_tag(ref, sizeof ref, &e, "team/vadd", "x86");

  trust(&e, 1, (int[]){0});
  snprintf(arg, sizeof arg, "--trusted-keys '%s'", e.trusted);
  ck_assert_int_eq(nimble_run(&e, "", ref, arg, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "not verified") == NULL, "stderr: %s", err);
  assert_output(&e);

  /* A foreign key through the environment: exit 1, one line naming the
   * reference and the signing key; no output written. */
  trust(&e, 1, (int[]){1});
  snprintf(envs, sizeof envs, "NIMBLE_TRUSTED_KEYS='%s'", e.trusted);
  ck_assert_int_eq(nimble_run(&e, envs, ref, "", err, sizeof err), 1);
  ck_assert_msg(strstr(err, ref) && strstr(err, e.pub[0]) && strstr(err, "not trusted"), "stderr: %s", err);
  ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
  snprintf(path, sizeof path, "%s/c.npy", e.dir);
  ck_assert_int_ne(access(path, F_OK), 0);

  /* No keys: it runs, with one warning line. */
  ck_assert_int_eq(nimble_run(&e, "", ref, "", err, sizeof err), 0);
  ck_assert_msg(strstr(err, "warning: ") && strstr(err, "the publisher of this artifact is not verified"),
                "stderr: %s", err);
  assert_output(&e);
  /* A local file cannot be checked: --trusted-keys on one is a usage error. */
  snprintf(arg, sizeof arg, "--trusted-keys '%s'", e.trusted);
  ck_assert_int_eq(nimble_run(&e, "", path, arg, err, sizeof err), 2);
  ck_assert_msg(strstr(err, "is a local file") != NULL, "stderr: %s", err);
  artifact_free(&a);
  env_deinit(&e);
}
END_TEST
#endif

int main(void) {
  Suite *s = suite_create("fetch_trust");
  TCase *tc = tcase_create("trust");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_a_signed_artifact_loads_runs_and_starts_offline_still_checked);
  tcase_add_test(tc, test_two_trusted_keys_let_the_farm_rotate_to_the_second);
  tcase_add_test(tc, test_an_unsigned_artifact_is_refused_with_keys_and_warned_about_without);
  tcase_add_test(tc, test_a_signature_by_a_foreign_key_is_refused_naming_it);
  tcase_add_test(tc, test_manifest_bytes_changed_under_a_signed_tag_are_refused);
  tcase_add_test(tc, test_an_old_signed_manifest_replayed_under_a_new_tag_is_refused);
  tcase_add_test(tc, test_digest_references_need_their_tag_when_keys_are_set);
  tcase_add_test(tc, test_a_malformed_trusted_keys_file_is_an_error_naming_it);
#ifdef NIMBLE_RUN_PATH
  tcase_add_test(tc, test_nimble_run_checks_the_publisher_with_trusted_keys);
#endif
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
