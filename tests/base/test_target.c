/* Target specs: canonical spellings, triples, option validation, lists. */
#include <stdio.h>
#include <string.h>

#include "nimble_test.h"

#include "nimble/target.h"

static void expect_canonical(const char *spec, const char *want) {
  nimble_target_t t;
  char out[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_ASSERT_OK(nimble_target_parse(spec, &t));
  nimble_target_format(&t, out);
  ck_assert_msg(strcmp(out, want) == 0, "'%s' formats as '%s', want '%s'", spec, out, want);
  /* The canonical spelling is a fixed point. */
  nimble_target_t again;
  char out2[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_ASSERT_OK(nimble_target_parse(out, &again));
  nimble_target_format(&again, out2);
  ck_assert_str_eq(out2, out);
  ck_assert(nimble_target_equal(&t, &again));
}

START_TEST(test_bare_kinds_are_their_own_canonical_spelling) {
  expect_canonical("x86", "x86");
  expect_canonical("aarch64", "aarch64");
  expect_canonical("cuda", "cuda");
}
END_TEST

START_TEST(test_options_equal_to_defaults_are_omitted) {
  expect_canonical("x86:cpu=x86-64-v3", "x86");
  expect_canonical("aarch64:cpu=generic", "aarch64");
  expect_canonical("cuda:arch=sm_80", "cuda");
  expect_canonical("cuda:cpu=x86-64-v3,arch=sm_80", "cuda");
}
END_TEST

START_TEST(test_options_are_sorted_by_key) {
  expect_canonical("x86:cpu=skylake-avx512", "x86:cpu=skylake-avx512");
  expect_canonical("aarch64:cpu=neoverse-n1", "aarch64:cpu=neoverse-n1");
  expect_canonical("cuda:arch=sm_90", "cuda:arch=sm_90");
  expect_canonical("x86:features=avx512f,cpu=znver4", "x86:cpu=znver4,features=avx512f");
  expect_canonical("cuda:features=fma,cpu=haswell,arch=sm_86",
                   "cuda:arch=sm_86,cpu=haswell,features=fma");
}
END_TEST

START_TEST(test_features_are_sorted_deduplicated_and_keep_their_sign) {
  expect_canonical("x86:features=-prefer-256-bit", "x86:features=-prefer-256-bit");
  expect_canonical("x86:features=fma+avx2+fma", "x86:features=avx2+fma");
  expect_canonical("x86:features=+fma+-prefer-256-bit+avx512f",
                   "x86:features=avx512f+fma+-prefer-256-bit");
  expect_canonical("aarch64:features=sve+dotprod", "aarch64:features=dotprod+sve");
}
END_TEST

START_TEST(test_triples_follow_the_design) {
  nimble_target_t t;
  NIMBLE_ASSERT_OK(nimble_target_parse("x86", &t));
  ck_assert_int_eq(t.kind, NIMBLE_TARGET_X86);
  ck_assert_str_eq(nimble_target_host_triple(&t), "x86_64-linux-gnu");
  ck_assert_ptr_null(nimble_target_device_triple(&t));
  ck_assert_ptr_null(nimble_target_cuda_arch(&t));
  ck_assert_str_eq(nimble_target_cpu(&t), "x86-64-v3");

  NIMBLE_ASSERT_OK(nimble_target_parse("aarch64", &t));
  ck_assert_str_eq(nimble_target_host_triple(&t), "aarch64-linux-gnu");
  ck_assert_ptr_null(nimble_target_device_triple(&t));
  ck_assert_str_eq(nimble_target_cpu(&t), "generic");

  NIMBLE_ASSERT_OK(nimble_target_parse("cuda", &t));
  ck_assert_str_eq(nimble_target_host_triple(&t), "x86_64-linux-gnu");
  ck_assert_str_eq(nimble_target_device_triple(&t), "nvptx64-nvidia-cuda");
  ck_assert_str_eq(nimble_target_cuda_arch(&t), "sm_80");
  ck_assert_str_eq(nimble_target_cpu(&t), "x86-64-v3");
  ck_assert_str_eq(nimble_target_kind_name(t.kind), "cuda");

  NIMBLE_ASSERT_OK(nimble_target_parse("cuda:arch=sm_90,cpu=znver3", &t));
  ck_assert_str_eq(nimble_target_cuda_arch(&t), "sm_90");
  ck_assert_str_eq(nimble_target_cpu(&t), "znver3");
}
END_TEST

/* A kind by its bare name, and nothing else: no options, no prefixes. */
START_TEST(test_kind_names_map_both_ways) {
  for (int k = 0; k < NIMBLE_TARGET_KIND_COUNT; k++) {
    nimble_target_kind_t got = (nimble_target_kind_t)-1;
    ck_assert_int_eq(nimble_target_kind_from_name(nimble_target_kind_name((nimble_target_kind_t)k), &got), 1);
    ck_assert_int_eq(got, k);
  }
  ck_assert_int_eq(nimble_target_kind_from_name("aarch64", NULL), 1);
  ck_assert_int_eq(nimble_target_kind_from_name("x86:cpu=znver4", NULL), 0);
  ck_assert_int_eq(nimble_target_kind_from_name("x8", NULL), 0);
  ck_assert_int_eq(nimble_target_kind_from_name("x866", NULL), 0);
  ck_assert_int_eq(nimble_target_kind_from_name("", NULL), 0);
  ck_assert_int_eq(nimble_target_kind_from_name(NULL, NULL), 0);
}
END_TEST

START_TEST(test_llvm_features_add_base_features_and_signs) {
  nimble_target_t t;
  char f[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_ASSERT_OK(nimble_target_parse("x86", &t));
  nimble_target_llvm_features(&t, f);
  ck_assert_str_eq(f, "");
  NIMBLE_ASSERT_OK(nimble_target_parse("aarch64", &t));
  nimble_target_llvm_features(&t, f);
  ck_assert_str_eq(f, "+neon");
  NIMBLE_ASSERT_OK(nimble_target_parse("x86:cpu=skylake-avx512,features=-prefer-256-bit+fma", &t));
  nimble_target_llvm_features(&t, f);
  ck_assert_str_eq(f, "+fma,-prefer-256-bit");
  NIMBLE_ASSERT_OK(nimble_target_parse("aarch64:features=dotprod+-sve", &t));
  nimble_target_llvm_features(&t, f);
  ck_assert_str_eq(f, "+neon,+dotprod,-sve");
}
END_TEST

static void expect_error(const char *spec, const char *fragment) {
  nimble_target_t t;
  NIMBLE_ASSERT_ERROR(nimble_target_parse(spec, &t), NIMBLE_INVALID_ARGUMENT, fragment);
}

START_TEST(test_unknown_targets_and_options_are_named) {
  expect_error("x87", "unknown target 'x87'");
  expect_error("X86", "unknown target 'X86'");
  expect_error("", "empty target");
  expect_error("x86:", "no options after ':'");
  expect_error("x86:speed=fast", "unknown option 'speed' (x86 takes cpu, features)");
  expect_error("x86:arch=sm_80", "unknown option 'arch'");
  expect_error("cuda:opt=3", "cuda takes arch, cpu, features");
  expect_error("x86:cpu", "option 'cpu' is not key=value");
  expect_error("x86:cpu=haswell,", "empty option");
  expect_error("x86:cpu=haswell,cpu=znver4", "option 'cpu' given twice");
  expect_error("x86,cpu=haswell", "options must follow ':'");
}
END_TEST

START_TEST(test_option_values_are_validated) {
  expect_error("x86:cpu=pentium", "unknown cpu 'pentium' for x86 (known: x86-64,");
  expect_error("aarch64:cpu=skylake", "unknown cpu 'skylake' for aarch64");
  expect_error("x86:cpu=neoverse-n1", "unknown cpu 'neoverse-n1' for x86");
  expect_error("x86:cpu=native", "cpu=native is not allowed");
  expect_error("x86:cpu=", "unknown cpu ''");
  expect_error("cuda:arch=sm_35", "unknown cuda arch 'sm_35' (known: sm_75, sm_80");
  expect_error("cuda:arch=compute_80", "unknown cuda arch 'compute_80'");
  expect_error("x86:features=", "features: empty value");
  expect_error("x86:features=avx2++fma", "features: empty feature name at offset 5");
  expect_error("x86:features=AVX2", "character 'A' at offset 0");
  expect_error("x86:features=avx2+-avx2", "'avx2' is both enabled and disabled");
  expect_error("x86:features=--avx2", "character '-' at offset 1");
  /* Errors quote the whole spec so the user sees which one. */
  expect_error("x86:cpu=pentium", "target 'x86:cpu=pentium'");
}
END_TEST

START_TEST(test_overlong_and_hostile_specs_are_refused) {
  char big[600];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  memcpy(big, "x86:features=", 13);
  expect_error(big, "longer than 255 bytes");
  /* 224 bytes of features fit the spec limit but not the features field. */
  char f[256] = "x86:features=";
  size_t n = strlen(f);
  for (int i = 0; i < 75; i++) n += (size_t)sprintf(f + n, "%s%c%c", i ? "+" : "", 'a' + i / 26, 'a' + i % 26);
  expect_error(f, "features:");
  nimble_target_t t;
  NIMBLE_ASSERT_ERROR(nimble_target_parse_n("x86\0:cpu=haswell", 16, &t), NIMBLE_INVALID_ARGUMENT,
                      "unknown target 'x86?'");
  NIMBLE_ASSERT_ERROR(nimble_target_parse(NULL, &t), NIMBLE_INVALID_ARGUMENT, "missing");
}
END_TEST

START_TEST(test_parse_n_reads_only_its_length) {
  nimble_target_t t;
  char out[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_ASSERT_OK(nimble_target_parse_n("cuda:arch=sm_90,garbage", 15, &t));
  nimble_target_format(&t, out);
  ck_assert_str_eq(out, "cuda:arch=sm_90");
}
END_TEST

static void expect_list(const char *text, size_t want_n, const char *const *want) {
  nimble_target_t ts[NIMBLE_TARGET_LIST_MAX];
  size_t n = 0;
  NIMBLE_ASSERT_OK(nimble_target_list_parse(text, ts, NIMBLE_TARGET_LIST_MAX, &n));
  ck_assert_uint_eq(n, want_n);
  for (size_t i = 0; i < n; i++) {
    char out[NIMBLE_TARGET_SPEC_MAX + 1];
    nimble_target_format(&ts[i], out);
    ck_assert_str_eq(out, want[i]);
  }
}

START_TEST(test_lists_split_at_commas_and_keep_options_with_their_target) {
  static const char *const a[] = {"x86", "aarch64", "cuda"};
  expect_list("x86,aarch64,cuda", 3, a);
  static const char *const b[] = {"x86:cpu=znver4,features=-avx512f", "aarch64:cpu=neoverse-n1",
                                  "cuda:arch=sm_90"};
  expect_list("x86:cpu=znver4,features=-avx512f,aarch64:cpu=neoverse-n1,cuda:arch=sm_90", 3, b);
  static const char *const c[] = {"cuda:arch=sm_86,cpu=haswell", "x86"};
  expect_list("cuda:cpu=haswell,arch=sm_86,x86", 2, c);
  static const char *const d[] = {"x86"};
  expect_list("x86", 1, d);
}
END_TEST

START_TEST(test_lists_refuse_duplicates_empties_and_overflow) {
  nimble_target_t ts[NIMBLE_TARGET_LIST_MAX];
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("x86,x86:cpu=x86-64-v3", ts, 16, &n),
                      NIMBLE_INVALID_ARGUMENT, "'x86' is listed twice (items 1 and 2)");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("", ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "empty list");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("x86,,cuda", ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "item 2: target '': empty target");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse(",x86", ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "item 1");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("x86,cuda,", ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "trailing ','");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("x86,arm", ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "item 2: target 'arm': unknown target");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse("x86,cuda", ts, 1, &n), NIMBLE_INVALID_ARGUMENT,
                      "more than 1 targets");
  NIMBLE_ASSERT_ERROR(nimble_target_list_parse(NULL, ts, 16, &n), NIMBLE_INVALID_ARGUMENT,
                      "missing");
}
END_TEST

/* Every cpu on the allow-lists parses and survives a round trip; this keeps
 * the lists and the formatter in step. */
START_TEST(test_every_listed_cpu_round_trips) {
  static const char *const specs[] = {
      "x86:cpu=x86-64", "x86:cpu=x86-64-v4", "x86:cpu=sapphirerapids", "x86:cpu=znver4",
      "aarch64:cpu=cortex-a72", "aarch64:cpu=neoverse-v2", "aarch64:cpu=apple-m1",
      "cuda:arch=sm_75", "cuda:arch=sm_89", "cuda:cpu=skylake-avx512"};
  for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) expect_canonical(specs[i], specs[i]);
}
END_TEST

/* Deterministic fuzz: mutated specs and lists give an error or a target
 * whose canonical spelling parses back to itself, never a crash. */
START_TEST(test_mutated_specs_never_crash) {
  static const char *const seeds[] = {"x86:cpu=skylake-avx512,features=avx512f+-prefer-256-bit",
                                      "cuda:arch=sm_90,cpu=znver3", "aarch64:cpu=neoverse-n1",
                                      "x86,aarch64,cuda:arch=sm_86"};
  static const char alphabet[] = "x86:cuda,aarch64=+-_.cpuarchfeaturessm_09\xff ";
  uint32_t rng = 12345;
  for (int iter = 0; iter < 20000; iter++) {
    const char *seed = seeds[iter % 4];
    char buf[128];
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    for (int m = 0; m < 1 + iter % 4; m++) {
      rng = rng * 1103515245u + 12345u;
      size_t at = (rng >> 8) % (n + 1);
      rng = rng * 1103515245u + 12345u;
      char c = alphabet[(rng >> 8) % (sizeof(alphabet) - 1)];
      switch ((rng >> 20) % 3) {
        case 0: if (at < n) buf[at] = c; break;               /* replace */
        case 1: n = at; break;                                 /* truncate */
        default: if (n < sizeof(buf) - 1) { memmove(buf + at + 1, buf + at, n - at); buf[at] = c; n++; }
      }
    }
    buf[n] = '\0';
    nimble_target_t t, back;
    nimble_status_t s = nimble_target_parse(buf, &t);
    if (!s) {
      char out[NIMBLE_TARGET_SPEC_MAX + 1], out2[NIMBLE_TARGET_SPEC_MAX + 1];
      nimble_target_format(&t, out);
      NIMBLE_ASSERT_OK(nimble_target_parse(out, &back));
      nimble_target_format(&back, out2);
      ck_assert_str_eq(out, out2);
    } else {
      ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
      nimble_status_free(s);
    }
    nimble_target_t ts[NIMBLE_TARGET_LIST_MAX];
    size_t count;
    nimble_status_free(nimble_target_list_parse(buf, ts, NIMBLE_TARGET_LIST_MAX, &count));
  }
}
END_TEST

/* cpu=native: only through nimble_target_parse_local (a local compile),
 * for this machine's own kind; the farm's parse refuses it. */
START_TEST(test_cpu_native_is_for_local_builds_of_this_machines_kind) {
  nimble_target_t t;
  char out[NIMBLE_TARGET_SPEC_MAX + 1];
  nimble_status_t s;
#if defined(__x86_64__)
  NIMBLE_ASSERT_OK(nimble_target_parse_local("x86:cpu=native", &t));
  ck_assert(nimble_target_is_native(&t));
  nimble_target_format(&t, out);
  ck_assert_str_eq(out, "x86:cpu=native");
  NIMBLE_ASSERT_OK(nimble_target_parse_local("cuda:cpu=native,arch=sm_90", &t));
  nimble_target_format(&t, out);
  ck_assert_str_eq(out, "cuda:arch=sm_90,cpu=native");
  s = nimble_target_parse_local("aarch64:cpu=native", &t);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(nimble_status_message(s), "which is not a aarch64 CPU"), "%s", nimble_status_message(s));
  nimble_status_free(s);
#elif defined(__aarch64__)
  /* The runtime's tests also run here under qemu-aarch64. */
  NIMBLE_ASSERT_OK(nimble_target_parse_local("aarch64:cpu=native", &t));
  ck_assert(nimble_target_is_native(&t));
  nimble_target_format(&t, out);
  ck_assert_str_eq(out, "aarch64:cpu=native");
  s = nimble_target_parse_local("x86:cpu=native", &t);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(nimble_status_message(s), "which is not a x86 CPU"), "%s", nimble_status_message(s));
  nimble_status_free(s);
#endif
  NIMBLE_ASSERT_OK(nimble_target_parse_local("x86:cpu=haswell", &t));
  ck_assert(!nimble_target_is_native(&t));
  (void)s;
  (void)out;
  expect_error("x86:cpu=native", "cpu=native is not allowed");
  expect_error("aarch64:cpu=native", "cpu=native is not allowed");
  expect_error("cuda:cpu=native", "cpu=native is not allowed");
}
END_TEST

int main(void) {
  Suite *s = suite_create("target");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_kind_names_map_both_ways);
  tcase_add_test(tc, test_bare_kinds_are_their_own_canonical_spelling);
  tcase_add_test(tc, test_options_equal_to_defaults_are_omitted);
  tcase_add_test(tc, test_options_are_sorted_by_key);
  tcase_add_test(tc, test_features_are_sorted_deduplicated_and_keep_their_sign);
  tcase_add_test(tc, test_triples_follow_the_design);
  tcase_add_test(tc, test_llvm_features_add_base_features_and_signs);
  tcase_add_test(tc, test_unknown_targets_and_options_are_named);
  tcase_add_test(tc, test_option_values_are_validated);
  tcase_add_test(tc, test_overlong_and_hostile_specs_are_refused);
  tcase_add_test(tc, test_parse_n_reads_only_its_length);
  tcase_add_test(tc, test_lists_split_at_commas_and_keep_options_with_their_target);
  tcase_add_test(tc, test_lists_refuse_duplicates_empties_and_overflow);
  tcase_add_test(tc, test_every_listed_cpu_round_trips);
  tcase_add_test(tc, test_mutated_specs_never_crash);
  tcase_add_test(tc, test_cpu_native_is_for_local_builds_of_this_machines_kind);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
