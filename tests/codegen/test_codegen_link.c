/* The linked kernel object names what it needs: a kernel calling libm
 * (logf) is a shared object with DT_NEEDED libm.so.6, for x86_64 and for
 * aarch64, linked by the target's GNU ld (the default) or by ld.lld-16,
 * so that it loads in processes that do not link libm themselves
 * (nimble-run). The dynamic section is read here by a small ELF64 reader
 * of its own (section headers, SHT_DYNAMIC and its string table, the
 * dynamic symbol table), not by the linker that wrote it. */
#include "codegen_harness.h"

enum { SHT_DYNSYM_ = 11, SHT_DYNAMIC_ = 6, DT_NEEDED_ = 1, DT_SONAME_ = 14 };

static uint64_t rd(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

typedef struct elf_view {
  const uint8_t *b;
  size_t n;
  unsigned machine;
  char needed[8][64];
  int n_needed;
  int has_soname;
  char undefined[64][64]; /* undefined dynamic symbols */
  int n_undefined;
} elf_view;

/* A NUL-terminated string inside the file at off, or NULL. */
static const char *str_at(const elf_view *e, uint64_t off) {
  if (off >= e->n) return NULL;
  const char *s = (const char *)e->b + off;
  return memchr(s, 0, e->n - off) ? s : NULL;
}

static void elf_read(const uint8_t *b, size_t n, elf_view *e) {
  memset(e, 0, sizeof *e);
  e->b = b;
  e->n = n;
  ck_assert_uint_ge(n, 64);
  ck_assert_int_eq(memcmp(b, "\177ELF", 4), 0);
  ck_assert_int_eq(b[4], 2); /* ELFCLASS64 */
  ck_assert_int_eq(b[5], 1); /* little-endian */
  ck_assert_uint_eq(rd(b + 16, 2), 3); /* ET_DYN */
  e->machine = (unsigned)rd(b + 18, 2);
  uint64_t shoff = rd(b + 40, 8), shentsize = rd(b + 58, 2), shnum = rd(b + 60, 2);
  ck_assert_uint_eq(shentsize, 64);
  ck_assert_uint_le(shoff + shnum * 64, n);
  for (uint64_t i = 0; i < shnum; i++) {
    const uint8_t *sh = b + shoff + i * 64;
    uint64_t type = rd(sh + 4, 4), off = rd(sh + 24, 8), size = rd(sh + 32, 8), link = rd(sh + 40, 4),
             entsize = rd(sh + 56, 8);
    if (type != SHT_DYNAMIC_ && type != SHT_DYNSYM_) continue;
    ck_assert_uint_lt(link, shnum);
    uint64_t stroff = rd(b + shoff + link * 64 + 24, 8);
    ck_assert_uint_le(off + size, n);
    if (type == SHT_DYNAMIC_) {
      for (uint64_t k = 0; k + 16 <= size; k += 16) {
        uint64_t tag = rd(b + off + k, 8), val = rd(b + off + k + 8, 8);
        if (tag == 0) break;
        const char *s = str_at(e, stroff + val);
        if (tag == DT_NEEDED_ && s && e->n_needed < 8) snprintf(e->needed[e->n_needed++], 64, "%s", s);
        if (tag == DT_SONAME_) e->has_soname = 1;
      }
    } else {
      ck_assert_uint_eq(entsize, 24);
      for (uint64_t k = 24; k + 24 <= size; k += 24) { /* symbol 0 is the null symbol */
        const uint8_t *sym = b + off + k;
        uint64_t name = rd(sym, 4), shndx = rd(sym + 6, 2);
        const char *s = str_at(e, stroff + name);
        if (shndx == 0 && s && s[0] && e->n_undefined < 64) snprintf(e->undefined[e->n_undefined++], 64, "%s", s);
      }
    }
  }
}

static int has(char list[][64], int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0) return 1;
  return 0;
}

/* log over a 1-D f32 tensor, linked for `triple` by `linker` (NULL: the
 * default, the target's GNU ld on this machine). */
static void build_log_kernel(const char *triple, const char *linker, nimble_codegen_output_t *out) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  int rank = 1;
  nimble_ln_op_t op = NIMBLE_LN_LOG;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "klog", 1, &rank, 1, nimble_codegen_combine_unary, &op, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = triple;
  o.lld = linker;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &o, out));
  nimble_ln_arena_destroy(A);
}

static void check_names_libm(const char *triple, unsigned machine, const char *linker) {
  nimble_codegen_output_t out;
  build_log_kernel(triple, linker, &out);
  elf_view e;
  elf_read(out.shared_object, out.shared_object_size, &e);
  ck_assert_uint_eq(e.machine, machine);
  /* It does call into libm ... */
  ck_assert_msg(has(e.undefined, e.n_undefined, "logf"), "%s: logf is not an undefined symbol", triple);
  /* ... and says where that lives: libm.so.6, and nothing else (not the name-only
   * libm's path, no soname of its own). */
  ck_assert_int_eq(e.n_needed, 1);
  ck_assert_str_eq(e.needed[0], "libm.so.6");
  ck_assert_int_eq(e.has_soname, 0);
  nimble_codegen_output_deinit(&out);
}

/* With either linker: the target's GNU ld (the default) and ld.lld-16. */
static const char *const kLinkers[] = {NULL, "ld.lld-16"};

START_TEST(test_an_x86_64_kernel_calling_logf_needs_libm_so_6) {
  check_names_libm("x86_64-linux-gnu", 62, kLinkers[_i]);
}
END_TEST

START_TEST(test_an_aarch64_kernel_calling_logf_needs_libm_so_6) {
  check_names_libm("aarch64-linux-gnu", 183, kLinkers[_i]);
}
END_TEST

/* The default linker is the machine's GNU ld where $PATH has it (setup.sh
 * installs both), and ld.lld-16 where it does not. */
START_TEST(test_the_default_linker_is_the_targets_gnu_ld_else_lld) {
  uint8_t x86[20] = {0x7f, 'E', 'L', 'F', 2, 1}, a64[20] = {0x7f, 'E', 'L', 'F', 2, 1};
  x86[18] = 62;
  a64[18] = 183;
  ck_assert_str_eq(nimble_codegen_default_linker(x86, sizeof x86), "x86_64-linux-gnu-ld.bfd");
  ck_assert_str_eq(nimble_codegen_default_linker(a64, sizeof a64), "aarch64-linux-gnu-ld.bfd");
  char *path = strdup(getenv("PATH"));
  setenv("PATH", "/nonexistent", 1);
  ck_assert_str_eq(nimble_codegen_default_linker(x86, sizeof x86), "ld.lld-16");
  ck_assert_str_eq(nimble_codegen_default_linker(a64, sizeof a64), "ld.lld-16");
  setenv("PATH", path, 1);
  free(path);
}
END_TEST

/* The object loads and computes in this process through the harness
 * (dlopen of a memfd, as the runtime does), the libm entry resolved. */
START_TEST(test_the_x86_64_kernel_with_libm_needed_loads_and_computes_log) {
  nimble_codegen_output_t out;
  build_log_kernel("x86_64-linux-gnu", kLinkers[_i], &out);
  harness_lib lib;
  harness_load_bytes(out.shared_object, out.shared_object_size, &lib);
  nimble_codegen_output_deinit(&out);
  float x[5] = {1.0f, 2.0f, 0.5f, 10.0f, 1e-3f}, y[5] = {0};
  int64_t n = 5;
  DLTensor tx = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0}, ty = tx;
  ty.data = y;
  DLTensor *args[2] = {&tx, &ty};
  harness_env he;
  harness_env_init(&he, 1, 0);
  ck_assert_int_eq(harness_sym(&lib, "klog")(args, 2, &he.env), 0);
  for (int i = 0; i < 5; i++) ck_assert_float_eq_tol(y[i], logf(x[i]), 1e-6f * fabsf(logf(x[i])) + 1e-7f);
  dlclose(lib.handle);
  close(lib.fd);
}
END_TEST

/* Not an object of either target: refused before a linker runs. */
START_TEST(test_linking_something_that_is_not_an_x86_64_or_aarch64_object_is_refused) {
  uint8_t junk[64] = {0x7f, 'E', 'L', 'F', 2, 1};
  junk[18] = 40; /* EM_ARM */
  uint8_t *so = NULL;
  size_t n = 0;
  NIMBLE_ASSERT_ERROR(nimble_codegen_link_shared(junk, sizeof junk, NULL, &so, &n), NIMBLE_INVALID_ARGUMENT,
                      "not a 64-bit little-endian x86_64 or aarch64 ELF");
  ck_assert_ptr_null(so);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_link");
  TCase *tc = tcase_create("link");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_an_x86_64_kernel_calling_logf_needs_libm_so_6, 0, 2);
  tcase_add_loop_test(tc, test_an_aarch64_kernel_calling_logf_needs_libm_so_6, 0, 2);
  tcase_add_test(tc, test_the_default_linker_is_the_targets_gnu_ld_else_lld);
  tcase_add_loop_test(tc, test_the_x86_64_kernel_with_libm_needed_loads_and_computes_log, 0, 2);
  tcase_add_test(tc, test_linking_something_that_is_not_an_x86_64_or_aarch64_object_is_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
