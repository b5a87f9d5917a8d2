/* Not a test: times conv2d / pooling kernels of the reference models'
 * shape classes, single thread, with and without the runtime's sgemm
 * (OpenBLAS), and prints GFLOP/s (medians of 9 runs).
 *   bench_compute_conv [IR_FILE [I]]   IR_FILE: also write the optimised
 *                                      LLVM IR of shape I's kernel there
 *                                      (default the first, 0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute_harness.h"
#include "nimble/codegen.h"
#include "nimble/passes.h"
#include "nimble_test.h"

typedef struct shape {
  const char *what;
  int64_t C, H, W, O, K, s, p, g;
} shape;

static const shape kShapes[] = {
    {"cnn conv2 3x3 32->64 16x16", 32, 16, 16, 64, 3, 1, 1, 1},
    {"cnn conv3 3x3 64->128 8x8", 64, 8, 8, 128, 3, 1, 1, 1},
    {"squeezenet conv1 7x7/2 3->96 224", 3, 224, 224, 96, 7, 2, 0, 1},
    {"squeezenet fire4 3x3 32->128 54x54", 32, 54, 54, 128, 3, 1, 1, 1},
    {"squeezenet fire8 3x3 64->256 27x27", 64, 27, 27, 256, 3, 1, 1, 1},
    {"squeezenet 1x1 512->1000 13x13", 512, 13, 13, 1000, 1, 1, 0, 1},
    {"mobilenet 1x1 96->24 56x56", 96, 56, 56, 24, 1, 1, 0, 1},
    {"mobilenet dw 3x3 144 56x56", 144, 56, 56, 144, 3, 1, 1, 144},
    {"mobilenet dw 3x3/2 144 56x56", 144, 56, 56, 144, 3, 2, 1, 144},
    {"mobilenet 1x1 16->96 112x112", 16, 112, 112, 96, 1, 1, 0, 1},
    {"mobilenet conv1 3x3/2 3->32 224", 3, 224, 224, 32, 3, 2, 1, 1},
    {"mobilenet dw 3x3 32 112x112", 32, 112, 112, 32, 3, 1, 1, 32},
    {"mobilenet dw 3x3/2 96 112x112", 96, 112, 112, 96, 3, 2, 1, 96},
    {"mobilenet dw 3x3 384 14x14", 384, 14, 14, 384, 3, 1, 1, 384},
    {"mobilenet dw 3x3 960 7x7", 960, 7, 7, 960, 3, 1, 1, 960},
    {"mobilenet 1x1 320->1280 7x7", 320, 7, 7, 1280, 1, 1, 0, 1},
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *g_ir_file;
static size_t g_ir_shape;

START_TEST(bench) {
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; i++) {
    const shape *s = &kShapes[i];
    char text[512];
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(1, %lld, %lld, %lld), float32], %%k: Tensor[(%lld, %lld, %lld, %lld), float32], "
             "%%b: Tensor[(%lld,), float32]) {\n  relu(conv2d(%%x, %%k, %%b, strides=[%lld, %lld], "
             "pads=[%lld, %lld, %lld, %lld], groups=%lld))\n}\n",
             (long long)s->C, (long long)s->H, (long long)s->W, (long long)s->O, (long long)(s->C / s->g),
             (long long)s->K, (long long)s->K, (long long)s->O, (long long)s->s, (long long)s->s, (long long)s->p,
             (long long)s->p, (long long)s->p, (long long)s->p, (long long)s->g);
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m = ch_compile_module(arena, text);
    const char *prim = ch_find_primitive(m, "fused.conv2d");
    ch_kernel k;
    ch_kernel_build(m, prim, false, NULL, &k);
    if (i == g_ir_shape && g_ir_file) {
      nimble_codegen_options_t o = nimble_codegen_default_options();
      o.keep_ir = 1;
      nimble_codegen_output_t out;
      const nimble_ln_kernel *ks[1] = {k.kernel};
      if (nimble_codegen_build(ks, 1, &o, &out) == NULL) {
        FILE *fp = fopen(g_ir_file, "w");
        if (fp) {
          char *t = NULL;
          nimble_ln_kernel_print(k.kernel, &t);
          fprintf(fp, "%s\n%s", t ? t : "", out.llvm_ir);
          free(t);
          fclose(fp);
        }
        nimble_codegen_output_deinit(&out);
      }
    }
    int64_t OH = (s->H + 2 * s->p - s->K) / s->s + 1, OW = (s->W + 2 * s->p - s->K) / s->s + 1;
    double flops = 2.0 * (double)(s->O * OH * OW) * (double)(s->C / s->g * s->K * s->K);
    ch_tensor x, w, b, y;
    ch_tensor_f32(&x, 4, (int64_t[]){1, s->C, s->H, s->W}, &seed, -1, 1);
    ch_tensor_f32(&w, 4, (int64_t[]){s->O, s->C / s->g, s->K, s->K}, &seed, -1, 1);
    ch_tensor_f32(&b, 1, (int64_t[]){s->O}, &seed, -1, 1);
    ch_tensor_f32(&y, 4, (int64_t[]){1, s->O, OH, OW}, &seed, 0, 0);
    ch_tensor *args[4] = {&x, &w, &b, &y};
    printf("%-40s", s->what);
    for (int sg = 0; sg < 2; sg++) {
      ch_env env;
      ch_env_init(&env, sg == 1);
      double t[9];
      ch_call(&k, &env, args, 4);
      for (int r = 0; r < 9; r++) {
        double t0 = now();
        int reps = 0;
        do {
          if (ch_call(&k, &env, args, 4) != 0) {
            ck_abort_msg("%s: %s", s->what, env.error);
          }
          reps++;
        } while (now() - t0 < 0.02);
        t[r] = (now() - t0) / reps;
      }
      qsort(t, 9, sizeof t[0], cmp);
      printf("  %s %7.3f ms %6.1f GFLOP/s", sg ? "sgemm" : "own  ", t[4] * 1e3, flops / t[4] * 1e-9);
    }
    printf("\n");
    fflush(stdout);
    ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&b), ch_tensor_free(&y);
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
  }
}
END_TEST

int main(int argc, char **argv) {
  g_ir_file = argc > 1 ? argv[1] : NULL;
  g_ir_shape = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 0;
  Suite *s = suite_create("bench_compute_conv");
  TCase *tc = tcase_create("bench");
  tcase_set_timeout(tc, 1200);
  tcase_add_test(tc, bench);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
