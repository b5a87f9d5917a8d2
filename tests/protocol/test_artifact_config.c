/* Artifact config blobs: canonical bytes, signatures, validation errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#include "nimble/artifact_config.h"
#include "nimble/manifest.h"

#define SHA_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Hand-written; Python's sorted compact json.dumps agrees, and
 * `printf '%s' "$C" | sha256sum` gives the digest. */
static const char kConfig[] =
    "{\"compilerVersion\":\"0.1.0\",\"entries\":[{\"inputs\":["
    "{\"dtype\":\"float32\",\"name\":\"x\",\"shape\":[\"batch\",3,\"?\"]},"
    "{\"name\":\"tree\",\"type\":\"Tree[Tensor[(1, 300), float32]]\"}],\"name\":\"main\","
    "\"outputs\":[{\"dtype\":\"int64\",\"name\":\"y\",\"shape\":[]}]}],"
    "\"model\":\"" SHA_ABC "\",\"schemaVersion\":1,\"target\":\"aarch64:cpu=neoverse-n1\"}";
static const char kConfigDigest[] =
    "sha256:def8373538024b1aa21414e3a0b3fd393fc47194ad0336acc37d9bcc70d3e852";

static void build_example(nimble_artifact_config_t *c) {
  nimble_digest_t model;
  nimble_entry_sig_t *e;
  ck_assert_ptr_null(nimble_digest_parse(SHA_ABC, &model));
  nimble_artifact_config_init(c);
  NIMBLE_ASSERT_OK(nimble_artifact_config_set_build(c, "aarch64:cpu=neoverse-n1", "0.1.0", &model,
                                                    NULL));
  NIMBLE_ASSERT_OK(nimble_artifact_config_add_entry(c, "main", &e));
  nimble_config_dim_t dims[3] = {{0, "batch"}, {3, NULL}, {0, "?"}};
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 0, "x", NIMBLE_CONFIG_DTYPE_FLOAT32, dims, 3));
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_value(e, 0, "tree", "Tree[Tensor[(1, 300), float32]]"));
  NIMBLE_ASSERT_OK(nimble_entry_sig_add_tensor(e, 1, "y", NIMBLE_CONFIG_DTYPE_INT64, NULL, 0));
}

static void expect_bytes(const nimble_artifact_config_t *c, const char *want) {
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_artifact_config_encode(c, &out, &n));
  ck_assert_uint_eq(n, strlen(want));
  ck_assert_str_eq(out, want);
  free(out);
}

START_TEST(test_encoding_gives_the_hand_written_canonical_bytes) {
  nimble_artifact_config_t c;
  build_example(&c);
  expect_bytes(&c, kConfig);
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&c, &out, &n));
  nimble_digest_t d;
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_compute(out, n, &d);
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, kConfigDigest);
  free(out);
  nimble_artifact_config_deinit(&c);
}
END_TEST

START_TEST(test_decoding_gives_the_signature_back) {
  nimble_artifact_config_t c;
  NIMBLE_ASSERT_OK(nimble_artifact_config_decode(kConfig, strlen(kConfig), &c));
  ck_assert_str_eq(c.target, "aarch64:cpu=neoverse-n1");
  ck_assert_str_eq(c.compiler_version, "0.1.0");
  ck_assert_int_eq(c.has_compiler_build, 0);
  const nimble_entry_sig_t *e = nimble_artifact_config_find_entry(&c, "main");
  ck_assert_ptr_nonnull(e);
  ck_assert_ptr_null(nimble_artifact_config_find_entry(&c, "other"));
  ck_assert_uint_eq(e->input_count, 2);
  ck_assert_uint_eq(e->output_count, 1);
  const nimble_value_sig_t *x = &e->inputs[0];
  ck_assert_str_eq(x->name, "x");
  ck_assert_ptr_null(x->type);
  ck_assert_int_eq(x->dtype, NIMBLE_CONFIG_DTYPE_FLOAT32);
  ck_assert_uint_eq(x->rank, 3);
  ck_assert_str_eq(x->dims[0].symbol, "batch");
  ck_assert_ptr_null(x->dims[1].symbol);
  ck_assert_int_eq(x->dims[1].value, 3);
  ck_assert_str_eq(x->dims[2].symbol, "?");
  ck_assert_str_eq(e->inputs[1].type, "Tree[Tensor[(1, 300), float32]]");
  ck_assert_uint_eq(e->outputs[0].rank, 0);
  ck_assert_int_eq(e->outputs[0].dtype, NIMBLE_CONFIG_DTYPE_INT64);
  expect_bytes(&c, kConfig);
  nimble_artifact_config_deinit(&c);
}
END_TEST

START_TEST(test_build_digest_round_trips_and_dtypes_have_their_names) {
  nimble_artifact_config_t c;
  nimble_digest_t build;
  build_example(&c);
  ck_assert_ptr_null(nimble_digest_parse(SHA_EMPTY, &build));
  NIMBLE_ASSERT_OK(nimble_artifact_config_set_build(&c, "x86:cpu=x86-64-v3", "0.2.0", &c.model,
                                                    &build));
  ck_assert_str_eq(c.target, "x86"); /* stored canonical */
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&c, &out, &n));
  ck_assert_ptr_nonnull(strstr(out, "{\"compilerBuild\":\"" SHA_EMPTY "\",\"compilerVersion\":\"0.2.0\","));
  nimble_artifact_config_t back;
  NIMBLE_ASSERT_OK(nimble_artifact_config_decode(out, n, &back));
  ck_assert_int_eq(back.has_compiler_build, 1);
  ck_assert(nimble_digest_equal(&back.compiler_build, &build));
  expect_bytes(&back, out);
  free(out);
  nimble_artifact_config_deinit(&back);
  nimble_artifact_config_deinit(&c);

  static const char *const names[] = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                      "uint32", "uint64", "float16", "bfloat16", "float32",
                                      "float64"};
  for (int i = 0; i < NIMBLE_CONFIG_DTYPE_COUNT_; i++) {
    nimble_config_dtype_t d;
    ck_assert_str_eq(nimble_config_dtype_name((nimble_config_dtype_t)i), names[i]);
    NIMBLE_ASSERT_OK(nimble_config_dtype_parse(names[i], &d));
    ck_assert_int_eq(d, i);
  }
  nimble_config_dtype_t d;
  NIMBLE_ASSERT_ERROR(nimble_config_dtype_parse("float", &d), NIMBLE_INVALID_ARGUMENT,
                      "unknown dtype 'float'");
}
END_TEST

static nimble_status_t decode_with(const char *from, const char *to) {
  const char *at = strstr(kConfig, from);
  ck_assert_msg(at != NULL, "'%s' not in the example", from);
  size_t pre = (size_t)(at - kConfig), fl = strlen(from), tl = strlen(to);
  size_t n = strlen(kConfig) - fl + tl;
  char *buf = malloc(n + 1);
  memcpy(buf, kConfig, pre);
  memcpy(buf + pre, to, tl);
  strcpy(buf + pre + tl, at + fl);
  nimble_artifact_config_t c;
  nimble_status_t s = nimble_artifact_config_decode(buf, n, &c);
  if (s) ck_assert_uint_eq(c.entry_count, 0);
  nimble_artifact_config_deinit(&c);
  free(buf);
  return s;
}

START_TEST(test_top_level_errors_name_the_member) {
  NIMBLE_ASSERT_ERROR(decode_with("\"schemaVersion\":1", "\"schemaVersion\":2"),
                      NIMBLE_UNIMPLEMENTED, "artifact config: schemaVersion: 2 is not supported");
  NIMBLE_ASSERT_ERROR(decode_with("aarch64:cpu=neoverse-n1", "aarch64:cpu=generic"),
                      NIMBLE_INVALID_ARGUMENT,
                      "target: 'aarch64:cpu=generic' is not canonical (write 'aarch64')");
  NIMBLE_ASSERT_ERROR(decode_with("aarch64:cpu=neoverse-n1", "riscv"), NIMBLE_INVALID_ARGUMENT,
                      "target: target 'riscv': unknown target");
  NIMBLE_ASSERT_ERROR(decode_with("\"compilerVersion\":\"0.1.0\",", ""), NIMBLE_INVALID_ARGUMENT,
                      "compilerVersion: missing");
  NIMBLE_ASSERT_ERROR(decode_with("\"compilerVersion\":\"0.1.0\"", "\"compilerVersion\":\"\""),
                      NIMBLE_INVALID_ARGUMENT, "compilerVersion: empty string");
  NIMBLE_ASSERT_ERROR(decode_with("\"model\":\"sha256:ba", "\"model\":\"sha256:zz"),
                      NIMBLE_INVALID_ARGUMENT, "model: digest:");
  NIMBLE_ASSERT_ERROR(decode_with("\"model\":", "\"compilerBuild\":true,\"model\":"),
                      NIMBLE_INVALID_ARGUMENT, "compilerBuild: expected a digest string, got a boolean");
  NIMBLE_ASSERT_ERROR(decode_with("\"entries\":[{", "\"entries\":[],\"x\":[{"),
                      NIMBLE_INVALID_ARGUMENT, "entries: needs at least 1 item, got 0");
  NIMBLE_ASSERT_ERROR(decode_with("\"entries\":[{", "\"entries\":[7,{"), NIMBLE_INVALID_ARGUMENT,
                      "entries[0]: expected an object, got an integer");
}
END_TEST

START_TEST(test_signature_errors_name_the_entry_value_and_dim) {
  NIMBLE_ASSERT_ERROR(decode_with("\"batch\"", "\"2batch\""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[0].shape[0]: '2batch' is neither \"?\" nor a name");
  NIMBLE_ASSERT_ERROR(decode_with("\"batch\"", "\"\""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[0].shape[0]: a symbolic dimension has 1 to 64 bytes, got 0");
  NIMBLE_ASSERT_ERROR(decode_with(",3,", ",-3,"), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[0].shape[1]: -3 is negative");
  NIMBLE_ASSERT_ERROR(decode_with(",3,", ",3.5,"), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[0].shape[1]: expected an integer or a symbol string, got a "
                      "real number");
  NIMBLE_ASSERT_ERROR(decode_with(",3,", ",null,"), NIMBLE_INVALID_ARGUMENT,
                      "shape[1]: expected an integer or a symbol string, got null");
  NIMBLE_ASSERT_ERROR(decode_with("\"float32\"", "\"float33\""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[0].dtype: unknown dtype 'float33'");
  NIMBLE_ASSERT_ERROR(decode_with("\"dtype\":\"int64\",", ""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].outputs[0].dtype: missing");
  NIMBLE_ASSERT_ERROR(decode_with(",\"shape\":[]", ""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].outputs[0].shape: missing");
  NIMBLE_ASSERT_ERROR(decode_with("{\"name\":\"tree\",", "{\"dtype\":\"bool\",\"name\":\"tree\","),
                      NIMBLE_INVALID_ARGUMENT, "entries[0].inputs[1]: has 'type' and also 'dtype'");
  NIMBLE_ASSERT_ERROR(decode_with("\"name\":\"tree\"", "\"name\":\"x\""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs[1].name: 'x' is used twice (also entries[0].inputs[0])");
  NIMBLE_ASSERT_ERROR(decode_with("\"name\":\"main\"", "\"name\":\"\""), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].name: empty string");
  NIMBLE_ASSERT_ERROR(decode_with(",\"outputs\":[", ",\"outputs\":{},\"x\":["),
                      NIMBLE_INVALID_ARGUMENT, "entries[0].outputs: expected an array, got an object");
  NIMBLE_ASSERT_ERROR(decode_with("[\"batch\",3,\"?\"]",
                                  "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"),
                      NIMBLE_INVALID_ARGUMENT, "entries[0].inputs[0].shape: 33 items is more than 32");
  NIMBLE_ASSERT_ERROR(decode_with("\"shape\":[]", "\"shape\":[9223372036854775808]"),
                      NIMBLE_INVALID_ARGUMENT, "too big");
}
END_TEST

START_TEST(test_entries_must_have_unique_names) {
  nimble_artifact_config_t c;
  nimble_entry_sig_t *e;
  build_example(&c);
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_add_entry(&c, "main", &e), NIMBLE_INVALID_ARGUMENT,
                      "entries[1].name: entry 'main' is defined twice (also entries[0])");
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_add_entry(&c, "", &e), NIMBLE_INVALID_ARGUMENT,
                      "entries[1].name: empty");
  ck_assert_uint_eq(c.entry_count, 1);
  NIMBLE_ASSERT_OK(nimble_artifact_config_add_entry(&c, "init", &e));
  ck_assert_uint_eq(c.entry_count, 2);
  nimble_artifact_config_deinit(&c);
}
END_TEST

START_TEST(test_builder_refuses_bad_values_and_keeps_the_rest) {
  nimble_artifact_config_t c;
  build_example(&c);
  nimble_entry_sig_t *e = &c.entries[0];
  nimble_config_dim_t bad_sym[1] = {{0, "a b"}};
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_tensor(e, 0, "z", NIMBLE_CONFIG_DTYPE_BOOL, bad_sym, 1),
                      NIMBLE_INVALID_ARGUMENT, "inputs[2].shape[0]: 'a b' is neither");
  nimble_config_dim_t neg[1] = {{-1, NULL}};
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_tensor(e, 1, "z", NIMBLE_CONFIG_DTYPE_BOOL, neg, 1),
                      NIMBLE_INVALID_ARGUMENT, "outputs[1].shape[0]: -1 is negative");
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_tensor(e, 1, "y", NIMBLE_CONFIG_DTYPE_BOOL, NULL, 0),
                      NIMBLE_INVALID_ARGUMENT, "outputs[1].name: 'y' is used twice");
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_tensor(e, 1, "z", (nimble_config_dtype_t)99, NULL, 0),
                      NIMBLE_INVALID_ARGUMENT, "outputs[1].dtype: 99 is not a dtype");
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_tensor(e, 1, "z", NIMBLE_CONFIG_DTYPE_BOOL, neg, 33),
                      NIMBLE_INVALID_ARGUMENT, "rank 33 is more than 32");
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_value(e, 1, "z", ""), NIMBLE_INVALID_ARGUMENT,
                      "outputs[1].type: empty");
  NIMBLE_ASSERT_ERROR(nimble_entry_sig_add_value(e, 1, NULL, "T"), NIMBLE_INVALID_ARGUMENT,
                      "outputs[1].name: empty");
  ck_assert_uint_eq(e->input_count, 2);
  ck_assert_uint_eq(e->output_count, 1);
  expect_bytes(&c, kConfig); /* refused values left no trace */
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_set_build(&c, "cuda:arch=sm_10", "1", &c.model, NULL),
                      NIMBLE_INVALID_ARGUMENT, "target: target 'cuda:arch=sm_10': unknown cuda arch");
  ck_assert_str_eq(c.target, "aarch64:cpu=neoverse-n1");
  nimble_artifact_config_deinit(&c);

  nimble_artifact_config_init(&c);
  char *out;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_encode(&c, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "artifact config: target: missing");
  nimble_artifact_config_deinit(&c);
}
END_TEST

START_TEST(test_hostile_documents_get_clear_errors) {
  nimble_artifact_config_t c;
  size_t big = NIMBLE_MANIFEST_MAX_SIZE + 1;
  char *buf = calloc(1, big);
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_decode(buf, big, &c), NIMBLE_RESOURCE_EXHAUSTED,
                      "over the limit of 4194304 bytes");
  free(buf);
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_decode("\"x\"", 3, &c), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON");
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_decode("{}", 2, &c), NIMBLE_INVALID_ARGUMENT,
                      "schemaVersion: missing");
  /* Many values, each valid: the per-entry cap applies. */
  size_t cap = 1100 * 48 + 512, n = 0;
  buf = malloc(cap);
  n += (size_t)snprintf(buf + n, cap - n,
                        "{\"compilerVersion\":\"1\",\"entries\":[{\"inputs\":[");
  for (int i = 0; i < 1025; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s{\"name\":\"v%d\",\"type\":\"T\"}", i ? "," : "", i);
  n += (size_t)snprintf(buf + n, cap - n,
                        "],\"name\":\"main\",\"outputs\":[]}],\"model\":\"" SHA_ABC
                        "\",\"schemaVersion\":1,\"target\":\"x86\"}");
  NIMBLE_ASSERT_ERROR(nimble_artifact_config_decode(buf, n, &c), NIMBLE_INVALID_ARGUMENT,
                      "entries[0].inputs: 1025 items is more than 1024");
  free(buf);
}
END_TEST

START_TEST(test_mutated_configs_never_crash_or_leak) {
  size_t len = strlen(kConfig);
  char *buf = malloc(len + 16);
  static const char bytes[] = "{}[]\":,0123456789-.?_aZ \\\xff";
  uint32_t rng = 4242;
  int accepted = 0;
  for (int iter = 0; iter < 6000; iter++) {
    size_t n = len;
    memcpy(buf, kConfig, len);
    for (int k = 0; k < 1 + iter % 3 && n > 0; k++) {
      rng = rng * 1664525u + 1013904223u;
      size_t at = (rng >> 8) % n;
      rng = rng * 1664525u + 1013904223u;
      char ch = bytes[(rng >> 8) % (sizeof(bytes) - 1)];
      switch ((rng >> 24) % 4) {
        case 0: buf[at] = ch; break;
        case 1: n = at; break;
        case 2: if (n < len + 15) { memmove(buf + at + 1, buf + at, n - at); buf[at] = ch; n++; } break;
        default: if (buf[at] >= 'a' && buf[at] <= 'z') buf[at] = (char)('a' + (rng >> 4) % 26);
      }
    }
    nimble_artifact_config_t c;
    nimble_status_t s = nimble_artifact_config_decode(buf, n, &c);
    if (s) {
      nimble_status_code_t code = nimble_status_code(s);
      ck_assert_msg(code == NIMBLE_INVALID_ARGUMENT || code == NIMBLE_UNIMPLEMENTED,
                    "unexpected %s: %s", nimble_status_code_name(code), nimble_status_message(s));
      nimble_status_free(s);
      continue;
    }
    accepted++;
    char *out, *out2;
    size_t on, on2;
    nimble_artifact_config_t again;
    NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&c, &out, &on));
    NIMBLE_ASSERT_OK(nimble_artifact_config_decode(out, on, &again));
    NIMBLE_ASSERT_OK(nimble_artifact_config_encode(&again, &out2, &on2));
    ck_assert_str_eq(out, out2);
    free(out);
    free(out2);
    nimble_artifact_config_deinit(&again);
    nimble_artifact_config_deinit(&c);
  }
  ck_assert_int_gt(accepted, 0);
  free(buf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("artifact_config");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_encoding_gives_the_hand_written_canonical_bytes);
  tcase_add_test(tc, test_decoding_gives_the_signature_back);
  tcase_add_test(tc, test_build_digest_round_trips_and_dtypes_have_their_names);
  tcase_add_test(tc, test_top_level_errors_name_the_member);
  tcase_add_test(tc, test_signature_errors_name_the_entry_value_and_dim);
  tcase_add_test(tc, test_entries_must_have_unique_names);
  tcase_add_test(tc, test_builder_refuses_bad_values_and_keeps_the_rest);
  tcase_add_test(tc, test_hostile_documents_get_clear_errors);
  tcase_add_test(tc, test_mutated_configs_never_crash_or_leak);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
