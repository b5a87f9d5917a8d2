/* Tuning (nimble/compile.h, docs/tuning.md): a measured choice of each CPU
 * kernel's schedule on the machine that compiles.
 *
 * The space is small and every point keeps each output element's
 * arithmetic (nimble/tune_record.h), so the search is exhaustive over it
 * rather than random or model-guided: a model's kernels are measured all
 * at once, one compile per point, each kernel timed inside whole-model
 * runs (the caches and threads it really meets in a loop: the run before
 * a timed one warms them). The points' executables
 * run in interleaved rounds, so a slow spell of the machine hits every
 * point alike, and each round's time is compared with the default's in
 * the same round. A kernel's candidate point is the fastest on the even
 * rounds; it is taken only when, on the odd rounds, it beats the default
 * by TUNE_MIN_GAIN and TUNE_MIN_GAIN_US, so noise does not flip
 * schedules. Measured at several input sizes, a kernel whose output size
 * differs between them may get a schedule per range of it (size_buckets),
 * which the compile joins into one kernel that picks per call. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_internal.h"
#include "nimble/runtime.h"
#include "nimble/tensor_io.h"

/* The points tried besides the default, in order of expected worth (a
 * budget too short for all stops early). */
static const nimble_tune_schedule_t kPoints[] = {
    {.parallel = false, .min_task_work = 16384, .conv_block = 65536},
    {.parallel = true, .min_task_work = 4096, .conv_block = 65536},
    {.parallel = true, .min_task_work = 65536, .conv_block = 65536},
    {.parallel = true, .min_task_work = 16384, .conv_block = 16384},
    {.parallel = true, .min_task_work = 16384, .conv_block = 262144},
    /* Vector loops twice the target's width (x86: 16 lanes as two AVX2
     * registers an operation): squeezenet1_0's first max pool 277 -> 234
     * us. */
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .vector_width = 16},
    /* AVX-512 clones (x86 only, measured only where the CPU runs them)
     * for any kernel with a vector loop: mixed as a rule (docs/
     * benchmarks.md): mobilenet_v2's 28x28 depthwise layers 20 % faster,
     * its 7x7 ones 2.4-3.7x slower. */
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .avx512_clone = NIMBLE_TUNE_CLONE_YES},
    {.parallel = true, .min_task_work = 4096, .conv_block = 16384},
    {.parallel = true, .min_task_work = 65536, .conv_block = 262144},
    /* No clone for the kernels the rule clones, and half the width. */
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .avx512_clone = NIMBLE_TUNE_CLONE_NO},
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .vector_width = 4},
    /* LLVM's interleave count pinned to 1 and 4 (unpinned it picks per
     * loop; pinned, depthwise kernels ran 5-10 % faster or slower by
     * shape, docs/benchmarks.md, eighth session). */
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .interleave = 1},
    {.parallel = true, .min_task_work = 16384, .conv_block = 65536, .interleave = 4},
};
#define TUNE_NPOINTS (1 + sizeof kPoints / sizeof kPoints[0])
#define TUNE_MIN_GAIN 0.97
#define TUNE_MIN_GAIN_US 0.5
#define TUNE_MIN_ROUNDS 4 /* two to choose, two to judge */
#define TUNE_MAX_ROUNDS 200
#define TUNE_MAX_INPUTS 64
#define TUNE_MAX_SIZES 4 /* input sizes measured at: tune_inputs' '|'-separated sets */

typedef struct tune_input {
  char name[128];
  int ndim;
  int64_t dims[16];
} tune_input;

/* One point: its compile, loaded and ready to run. */
typedef struct tune_point {
  nimble_tune_schedule_t schedule;
  nimble_compile_result *r;
  nimble_executable *exe;
  nimble_vm *vm;
  const nimble_entry_info_t *entry;
  /* Per input size (tune_inputs' sets): the inputs and each workload's
   * time per round, us[size][workload * TUNE_MAX_ROUNDS + round]. */
  int sizes;
  DLTensor tensors[TUNE_MAX_SIZES][TUNE_MAX_INPUTS];
  void *data[TUNE_MAX_SIZES][TUNE_MAX_INPUTS];
  int64_t shapes[TUNE_MAX_SIZES][TUNE_MAX_INPUTS][16];
  double *us[TUNE_MAX_SIZES];
  /* Per input size, each workload's first output's elements at its last
   * call (the runtime's kernel timing): what size buckets split by. */
  int64_t *elems[TUNE_MAX_SIZES];
  nimble_kernel_time_t *kt;
  uint32_t nk;
  int *workload_of; /* [nk]: the workload index of each bytecode kernel, or -1 */
} tune_point;

static void point_deinit(tune_point *p) {
  for (int z = 0; z < TUNE_MAX_SIZES; z++) {
    for (int i = 0; i < TUNE_MAX_INPUTS; i++) free(p->data[z][i]);
    free(p->us[z]);
    free(p->elems[z]);
  }
  nimble_vm_destroy(p->vm);
  nimble_executable_release(p->exe);
  nimble_compile_result_destroy(p->r);
  free(p->kt);
  free(p->workload_of);
  memset(p, 0, sizeof *p);
}

/* "x=1x3x224x224;mask=1x128" (up to `stop`) into in[0 .. *n). */
static nimble_status_t parse_inputs(const char *spec, const char *stop_at, tune_input *in, int *n) {
  *n = 0;
  if (!spec) return nimble_ok();
  const char *p = spec;
  while (p < stop_at) {
    const char *end = memchr(p, ';', (size_t)(stop_at - p));
    size_t len = end ? (size_t)(end - p) : (size_t)(stop_at - p);
    const char *eq = memchr(p, '=', len);
    if (!eq || eq == p || (size_t)(eq - p) >= sizeof in->name)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs '%s': expected NAME=DIMS[;NAME=DIMS...]", spec);
    if (*n >= TUNE_MAX_INPUTS)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: more than %d inputs", TUNE_MAX_INPUTS);
    tune_input *t = &in[(*n)++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, p, (size_t)(eq - p));
    const char *d = eq + 1, *stop = p + len;
    while (d < stop) {
      char *e;
      long long v = strtoll(d, &e, 10);
      if (e == d || v < 0 || v > (1LL << 31) || t->ndim >= 16 || (e < stop && *e != 'x'))
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: input '%s': bad dims '%.*s'", t->name,
                                  (int)(stop - eq - 1), eq + 1);
      t->dims[t->ndim++] = v;
      d = e < stop ? e + 1 : e;
    }
    p = end ? end + 1 : p + len;
  }
  return nimble_ok();
}

/* "x=1x16x128|x=1x128x128": the input sizes to measure at, each parsed as
 * above into in[size][0 .. n[size]); *sizes of them (1 without a spec). */
static nimble_status_t parse_sizes(const char *spec, tune_input in[][TUNE_MAX_INPUTS], int *n, int *sizes) {
  *sizes = 1;
  n[0] = 0;
  if (!spec) return nimble_ok();
  *sizes = 0;
  const char *p = spec;
  for (;;) {
    const char *bar = strchr(p, '|');
    const char *stop = bar ? bar : p + strlen(p);
    if (*sizes == TUNE_MAX_SIZES)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: more than %d sizes ('|'-separated)",
                                TUNE_MAX_SIZES);
    if (stop == p)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs '%s': an empty size between '|'", spec);
    NIMBLE_RETURN_IF_ERROR(parse_inputs(p, stop, in[*sizes], &n[*sizes]));
    ++*sizes;
    if (!bar) return nimble_ok();
    p = bar + 1;
  }
}

/* The entry's inputs: random values as `nimble profile` makes them
 * (nimble_tensor_io_fill_random) of the shapes given, a symbolic dim not
 * given measured at 1. */
static nimble_status_t make_inputs(tune_point *p, int z, const tune_input *given, int ngiven) {
  const nimble_entry_info_t *e = p->entry;
  if (e->num_inputs > TUNE_MAX_INPUTS)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "entry '%s' has %u inputs; tuning takes at most %d", e->name,
                              e->num_inputs, TUNE_MAX_INPUTS);
  for (int g = 0; g < ngiven; g++) {
    uint32_t i = 0;
    while (i < e->num_inputs && strcmp(e->inputs[i].name, given[g].name)) i++;
    if (i == e->num_inputs)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: entry '%s' has no input '%s'", e->name,
                                given[g].name);
  }
  uint64_t seed = 0x9E3779B97F4A7C15ULL;
  for (uint32_t i = 0; i < e->num_inputs; i++) {
    const nimble_tensor_info_t *info = &e->inputs[i];
    if (nimble_tensor_info_is_adt(info))
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "input '%s' is a value of an algebraic data type; tuning makes "
                                "random tensors only", info->name);
    if (info->ndim < 0 || info->ndim > 16)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "input '%s' has rank %d; tuning takes rank 16 at most",
                                info->name, info->ndim);
    const tune_input *in = NULL;
    for (int g = 0; g < ngiven; g++)
      if (!strcmp(given[g].name, info->name)) in = &given[g];
    if (in && in->ndim != info->ndim)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: input '%s' has rank %d, not %d", info->name,
                                info->ndim, in->ndim);
    uint64_t n = 1;
    for (int32_t d = 0; d < info->ndim; d++) {
      int64_t v = in ? in->dims[d] : info->dims[d].value >= 0 ? info->dims[d].value : 1;
      if (info->dims[d].value >= 0 && v != info->dims[d].value)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune inputs: input '%s' dim %d is %lld, declared %lld",
                                  info->name, d, (long long)v, (long long)info->dims[d].value);
      p->shapes[z][i][d] = v;
      if (v && n > ((uint64_t)1 << 30) / (uint64_t)v)
        return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "tune inputs: input '%s' is too large", info->name);
      n *= (uint64_t)v;
    }
    DLDataType dt = info->dtype;
    size_t elem = (size_t)((dt.bits + 7) / 8) * (dt.lanes ? dt.lanes : 1);
    if (!(p->data[z][i] = aligned_alloc(64, ((n * elem + 63) / 64) * 64 + 64))) return NIMBLE_OOM_IN("tune inputs");
    NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_fill_random(p->data[z][i], n, dt, &seed, info->name));
    DLTensor *t = &p->tensors[z][i];
    memset(t, 0, sizeof *t);
    t->data = p->data[z][i];
    t->device = (DLDevice){kDLCPU, 0};
    t->ndim = info->ndim;
    t->dtype = dt;
    t->shape = p->shapes[z][i];
  }
  return nimble_ok();
}

static nimble_status_t run_once(tune_point *p, int z) {
  for (uint32_t i = 0; i < p->entry->num_inputs; i++)
    NIMBLE_RETURN_IF_ERROR(nimble_vm_set_input(p->vm, p->entry->name, i, &p->tensors[z][i]));
  NIMBLE_RETURN_IF_ERROR(nimble_vm_invoke(p->vm, p->entry->name));
  for (uint32_t i = 0; i < nimble_vm_num_outputs(p->vm); i++) {
    DLManagedTensor *out;
    NIMBLE_RETURN_IF_ERROR(nimble_vm_take_output(p->vm, i, &out));
    if (out->deleter) out->deleter(out);
  }
  return nimble_ok();
}

/* Loads p->r and prepares its runs. */
static nimble_status_t point_load(tune_point *p, uint32_t threads, const tune_input in[][TUNE_MAX_INPUTS],
                                  const int *nin, int sizes) {
  void *image = NULL;
  size_t size = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_compile_result_serialize(p->r, &image, &size));
  nimble_status_t s = nimble_executable_load_memory(image, size, 0, &p->exe);
  free(image);
  NIMBLE_RETURN_IF_ERROR(s);
  s = nimble_executable_find_entry(p->exe, "main", &p->entry);
  if (s && nimble_executable_num_entries(p->exe) > 0) {
    nimble_status_free(s);
    s = nimble_ok();
    p->entry = nimble_executable_entry_at(p->exe, 0);
  }
  NIMBLE_RETURN_IF_ERROR(s);
  nimble_vm_options_t vo;
  nimble_vm_options_init(&vo);
  vo.num_threads = threads;
  /* Each point's kernels timed on all the threads, as the schedules were
   * made for: a VM left to choose would time some rounds alone. */
  vo.fixed_threads = 1;
  NIMBLE_RETURN_IF_ERROR(nimble_vm_create(p->exe, &vo, &p->vm));
  p->sizes = sizes;
  size_t nw = p->r->num_workloads;
  for (int z = 0; z < sizes; z++) {
    if (sizes > 1) NIMBLE_RETURN_IF_ERROR_CTX(make_inputs(p, z, in[z], nin[z]), "size %d of %d", z + 1, sizes);
    else NIMBLE_RETURN_IF_ERROR(make_inputs(p, z, in[z], nin[z]));
    NIMBLE_RETURN_IF_ERROR(run_once(p, z)); /* warm-up: the memory pool fills, pages fault in */
    if (!(p->us[z] = calloc((nw ? nw : 1) * TUNE_MAX_ROUNDS, sizeof *p->us[z])) ||
        !(p->elems[z] = calloc(nw ? nw : 1, sizeof *p->elems[z])))
      return NIMBLE_OOM_IN("tuning");
  }
  NIMBLE_RETURN_IF_ERROR(nimble_vm_kernel_times(p->vm, 1, NULL, 0, &p->nk));
  p->kt = calloc(p->nk ? p->nk : 1, sizeof *p->kt);
  p->workload_of = calloc(p->nk ? p->nk : 1, sizeof *p->workload_of);
  if (!p->kt || !p->workload_of) return NIMBLE_OOM_IN("tuning");
  /* Read once to learn the symbols (and drop the warm-up's times). */
  NIMBLE_RETURN_IF_ERROR(run_once(p, 0));
  NIMBLE_RETURN_IF_ERROR(nimble_vm_kernel_times(p->vm, 1, p->kt, p->nk, NULL));
  for (uint32_t k = 0; k < p->nk; k++) {
    p->workload_of[k] = -1;
    for (size_t w = 0; w < nw && p->kt[k].symbol; w++)
      if (!strcmp(p->kt[k].symbol, p->r->workloads[w].symbol)) p->workload_of[k] = (int)w;
  }
  return nimble_ok();
}

/* One timed run of p at each input size, each after an untimed one;
 * each workload's time into us[size][... + round]. The untimed run brings
 * p's weights and buffers back into the caches the other points' runs
 * took them from: a model run in a loop, as users run one, finds them
 * there (cnn's 2 MB dense layer took 59 us cold in a round and 17-22 in
 * a loop, and a choice measured cold need not be the one for warm). */
static nimble_status_t point_round(tune_point *p, size_t round) {
  for (int z = 0; z < p->sizes; z++) {
    NIMBLE_RETURN_IF_ERROR(run_once(p, z));
    NIMBLE_RETURN_IF_ERROR(nimble_vm_kernel_times(p->vm, 1, NULL, 0, NULL)); /* drops its times */
    NIMBLE_RETURN_IF_ERROR(run_once(p, z));
    NIMBLE_RETURN_IF_ERROR(nimble_vm_kernel_times(p->vm, 1, p->kt, p->nk, NULL));
    for (uint32_t k = 0; k < p->nk; k++) {
      int w = p->workload_of[k];
      if (w < 0) continue;
      p->us[z][(size_t)w * TUNE_MAX_ROUNDS + round] += p->kt[k].total_ns * 1e-3;
      if (p->kt[k].calls) p->elems[z][w] = (int64_t)p->kt[k].out_elements;
    }
  }
  return nimble_ok();
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, size_t n) {
  double tmp[TUNE_MAX_ROUNDS];
  memcpy(tmp, v, n * sizeof *v);
  qsort(tmp, n, sizeof *tmp, cmp_double);
  return n ? (n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2])) : 0;
}

/* p's time in each round in the kernels of workload w's signature (w the
 * first of them) into sum[0 .. rounds): kernels that compute the same nest
 * (mobilenet_v2's repeated blocks) share one record, so they are timed as
 * one, where each alone picked a schedule of its own by noise and the
 * compile applied the first. */
static void signature_times(const tune_point *p, int z, const nimble_compile_result *r0, size_t w, size_t rounds,
                            double *sum) {
  for (size_t i = 0; i < rounds; i++) sum[i] = 0;
  for (size_t v = w; v < r0->num_workloads; v++) {
    if (strcmp(r0->workloads[v].signature, r0->workloads[w].signature)) continue;
    for (size_t i = 0; i < rounds; i++) sum[i] += p->us[z][v * TUNE_MAX_ROUNDS + i];
  }
}

/* The median of x / y (y: the same round's default) over the rounds from
 * `first` in steps of 2 (the even or the odd ones) where y ran. */
static double half_median(const double *x, const double *y, size_t rounds, size_t first) {
  double v[TUNE_MAX_ROUNDS];
  size_t n = 0;
  for (size_t i = first; i < rounds; i += 2)
    if (y[i] > 0) v[n++] = x[i] / y[i];
  return median(v, n);
}

/* Point p's time over the default's for the kernels of workload w's
 * signature, on the even (`first` 0) or the odd rounds (1), each round
 * against the default's in the same round (dt[size], its medians def_z):
 * the geometric mean over the sizes the kernels ran at (each counts
 * alike) of those in `mask` (bit z: size z), 0 if p has no time at one of
 * them. *time (may be NULL): the default's medians times p's ratios,
 * summed over those sizes. */
static double point_ratio(const tune_point *p, const nimble_compile_result *r0, size_t w, size_t rounds,
                          size_t first, const double dt[][TUNE_MAX_ROUNDS], const double *def_z, int sizes,
                          unsigned mask, double *time) {
  double ct[TUNE_MAX_ROUNDS], lr = 0, sum = 0;
  int ran = 0;
  for (int z = 0; z < sizes; z++) {
    if (!(def_z[z] > 0) || !(mask >> z & 1)) continue;
    signature_times(p, z, r0, w, rounds, ct);
    double q = half_median(ct, dt[z], rounds, first);
    if (!(q > 0)) return 0;
    lr += log(q);
    sum += def_z[z] * q;
    ran++;
  }
  if (time) *time = sum;
  return ran ? exp(lr / ran) : 0;
}

/* The point chosen for workload w's signature over the sizes in `mask`:
 * the fastest on the even rounds, taken when on the odd ones it beats the
 * default by TUNE_MIN_GAIN and TUNE_MIN_GAIN_US, else 0 (the default).
 * Each round's time is against the default's in the same round: the
 * fastest of thirteen medians judged on the rounds that chose it beat the
 * default by its noise alone (at 2 threads here, 25 of mobilenet_v2's 33
 * signatures "gained" 5-20 % and the model none). *time: the chosen
 * point's time over those sizes (the default's when 0); *alternatives:
 * the points whose code for w differs from the default's and from every
 * earlier point's. */
static size_t choose(const tune_point *pts, size_t npts, size_t w, size_t rounds, const double dt[][TUNE_MAX_ROUNDS],
                     const double *def_z, int sizes, unsigned mask, double *time, size_t *alternatives) {
  const nimble_compile_result *r0 = pts[0].r;
  double def = 0, best_sel = 1, best = 0;
  for (int z = 0; z < sizes; z++)
    if (mask >> z & 1) def += def_z[z];
  *time = def;
  *alternatives = 0;
  size_t bi = 0;
  for (size_t i = 1; i < npts && def > 0; i++) {
    /* Only code that differs: from the default's, and from an earlier
     * point's (min_task_work 4096 with two conv_blocks is one kernel
     * outside convolutions, and two timings of it would pick a record by
     * noise). */
    const char *variant = pts[i].r->workloads[w].variant;
    bool seen = !strcmp(variant, r0->workloads[w].variant);
    for (size_t j = 1; j < i && !seen; j++) seen = !strcmp(variant, pts[j].r->workloads[w].variant);
    if (seen) continue;
    ++*alternatives;
    double sel = point_ratio(&pts[i], r0, w, rounds, 0, dt, def_z, sizes, mask, NULL);
    if (sel > 0 && sel < best_sel) {
      best_sel = sel;
      bi = i;
    }
  }
  if (!bi) return 0;
  double ratio = point_ratio(&pts[bi], r0, w, rounds, 1, dt, def_z, sizes, mask, &best);
  if (!(ratio > 0) || ratio > TUNE_MIN_GAIN || def - best < TUNE_MIN_GAIN_US) return 0;
  *time = best;
  return bi;
}

/* Size buckets (docs/tuning.md): where the sizes measured give workload
 * w's kernels outputs of different sizes, the point chosen at each (on
 * those sizes alone) replaces `all`, the one chosen for all sizes, where
 * it beats that by TUNE_MIN_GAIN and TUNE_MIN_GAIN_US on the odd rounds;
 * if that happens anywhere, rec gets a schedule per bucket of output
 * elements, the bound between two measured sizes at their geometric mean,
 * and the largest size's schedule as its own. Not where a signature's
 * kernels differ in size at one input size (the bucket would be another
 * per kernel), nor where the choices differ in the AVX-512 clone (one
 * clone serves every size). Returns whether rec got buckets. */
static bool size_buckets(const tune_point *pts, size_t npts, size_t w, size_t rounds,
                         const double dt[][TUNE_MAX_ROUNDS], const double *def_z, int sizes, size_t all,
                         nimble_tune_record_t *rec) {
  const nimble_compile_result *r0 = pts[0].r;
  int64_t vals[TUNE_MAX_SIZES];
  int ng = 0;
  for (int z = 0; z < sizes; z++) {
    int64_t e = pts[0].elems[z][w];
    if (e <= 0) return false;
    for (size_t v = w + 1; v < r0->num_workloads; v++)
      if (!strcmp(r0->workloads[v].signature, r0->workloads[w].signature) && pts[0].elems[z][v] != e) return false;
    int at = 0; /* vals rising, each once */
    while (at < ng && vals[at] < e) at++;
    if (at < ng && vals[at] == e) continue;
    memmove(&vals[at + 1], &vals[at], (size_t)(ng - at) * sizeof *vals);
    vals[at] = e;
    ng++;
  }
  if (ng < 2) return false;
  size_t choice[TUNE_MAX_SIZES], alternatives;
  double total = 0;
  bool differ = false;
  for (int g = 0; g < ng; g++) {
    unsigned mask = 0;
    double t_all = 0, t;
    for (int z = 0; z < sizes; z++)
      if (pts[0].elems[z][w] == vals[g]) {
        mask |= 1u << z;
        t_all += def_z[z];
      }
    /* The point chosen for all sizes, at these (odd rounds, as judged). */
    if (all && !(point_ratio(&pts[all], r0, w, rounds, 1, dt, def_z, sizes, mask, &t_all) > 0)) return false;
    size_t c = choose(pts, npts, w, rounds, dt, def_z, sizes, mask, &t, &alternatives);
    /* A size keeps the all-sizes choice unless its own beats that one
     * there as a choice must beat the default: noise alone would split
     * records into buckets that gain nothing. */
    if (c != all && (t > TUNE_MIN_GAIN * t_all || t_all - t < TUNE_MIN_GAIN_US)) {
      c = all;
      t = t_all;
    }
    choice[g] = c;
    total += t;
    differ |= c != all;
    if (pts[c].r->workloads[w].clone != pts[all].r->workloads[w].clone) return false;
  }
  if (!differ) return false;
  nimble_tune_schedule_t def = nimble_tune_schedule_default();
  rec->num_buckets = 0;
  for (int g = 0; g < ng; g++) {
    if (g + 1 < ng && choice[g + 1] == choice[g]) continue; /* one bucket with the next */
    const nimble_tune_schedule_t *sc = choice[g] ? &pts[choice[g]].schedule : &def;
    if (g + 1 == ng) {
      rec->schedule = *sc;
    } else {
      nimble_tune_bucket_t *b = &rec->buckets[rec->num_buckets++];
      b->max_elements = (int64_t)floor(sqrt((double)vals[g] * (double)vals[g + 1]));
      if (b->max_elements < vals[g]) b->max_elements = vals[g];
      b->schedule = *sc;
    }
  }
  rec->tuned_us = total;
  return true;
}

/* Whether this process would run a kernel's AVX-512 clone (the runtime's
 * kernel_library.c): a point choosing clones is measured only then, since
 * elsewhere it would time the AVX2 kernel under another name. */
static bool host_runs_clones(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const char *v = getenv("NIMBLE_AVX512");
  return __builtin_cpu_supports("x86-64-v4") && !(v && strcmp(v, "0") == 0);
#else
  return false;
#endif
}

static uint32_t cpus_available(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (uint32_t)CPU_COUNT(&set);
  return 1;
}

static void progress(const nimble_compile_options_t *o, const nimble_tune_options_t *t, int percent) {
  if (t->progress) t->progress(o->progress_user, percent);
}

/* The points compiled and measured; the new records into the report. */
static nimble_status_t search_sizes(const char *path, const nimble_compile_options_t *o,
                                    const nimble_tune_options_t *t, tune_point *pts, size_t *npts,
                                    nimble_tune_report_t *rep, double t0, tune_input in[][TUNE_MAX_INPUTS]) {
  double budget = t->budget_s > 0 ? t->budget_s : 60;
  uint32_t threads = t->threads ? t->threads : cpus_available();
  int nin[TUNE_MAX_SIZES] = {0}, sizes = 1;
  NIMBLE_RETURN_IF_ERROR(parse_sizes(t->inputs, in, nin, &sizes));
  rep->sizes = (size_t)sizes;
  const nimble_compile_result *r0 = pts[0].r;
  size_t nw = r0->num_workloads;
  char cpu[NIMBLE_TUNE_CPU_MAX + 1];
  nimble_compile_host_cpu_key(cpu, sizeof cpu);
  /* Compile the points (half the budget at most), keeping those that
   * change the code of a kernel still without a record. */
  nimble_compile_options_t po = *o;
  po.progress = NULL;
  po.codegen_progress = NULL;
  size_t k = 0;
  bool clones_run = host_runs_clones();
  for (; k + 1 < TUNE_NPOINTS && nimble_compile_now() - t0 < budget / 2; k++) {
    if (kPoints[k].avx512_clone != NIMBLE_TUNE_CLONE_AUTO && !clones_run) continue;
    po.schedule_override = &kPoints[k];
    tune_point *p = &pts[*npts];
    p->schedule = kPoints[k];
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_compile_file(path, &po, &p->r), "tuning point %zu", k + 1);
    rep->points++;
    bool changes = p->r->num_workloads == nw;
    bool any = false;
    for (size_t w = 0; changes && w < nw; w++) {
      if (strcmp(p->r->workloads[w].symbol, r0->workloads[w].symbol)) changes = false;
      else if (!r0->workloads[w].from_record && strcmp(p->r->workloads[w].variant, r0->workloads[w].variant))
        any = true;
    }
    if (!changes || !any) {
      nimble_compile_result_destroy(p->r);
      p->r = NULL;
    } else {
      ++*npts;
    }
    progress(o, t, (int)(40 * (k + 1) / (TUNE_NPOINTS - 1)));
  }
  /* A budget that ran out before every point compiled says nothing about
   * the points left: kernels none of the compiled points changed get no
   * record then, so that a later compile with more time searches them. */
  bool all_points = k + 1 == TUNE_NPOINTS;
  size_t round = 0;
  if (!all_points)
    snprintf(rep->skipped, sizeof rep->skipped,
             "the budget (%g s) ran out with %zu of %zu schedule points compiled: %s", budget, k,
             (size_t)TUNE_NPOINTS - 1,
             *npts == 1 ? "nothing measured, no records" : "kernels none of them changes get no record");
  if (*npts == 1) {
    if (all_points)
      snprintf(rep->skipped, sizeof rep->skipped, "no schedule point changes a kernel without a record");
  } else {
    /* An entry tuning cannot make inputs for (ADT values, an unusual
     * dtype) is compiled untuned, saying why. */
    nimble_status_t s = point_load(&pts[0], threads, in, nin, sizes);
    if (s && nimble_status_code(s) == NIMBLE_UNIMPLEMENTED) {
      snprintf(rep->skipped, sizeof rep->skipped, "nothing measured: %s", nimble_status_message(s));
      nimble_status_free(s);
      return nimble_ok();
    }
    NIMBLE_RETURN_IF_ERROR_CTX(s, "tuning: running the default schedule");
    for (size_t i = 1; i < *npts; i++)
      NIMBLE_RETURN_IF_ERROR_CTX(point_load(&pts[i], threads, in, nin, sizes), "tuning: running point %zu", i);
  }
  /* Interleaved rounds until the budget is spent (TUNE_MIN_ROUNDS at least). */
  while (*npts > 1 && round < TUNE_MAX_ROUNDS && (round < TUNE_MIN_ROUNDS || nimble_compile_now() - t0 < budget)) {
    for (size_t i = 0; i < *npts; i++) NIMBLE_RETURN_IF_ERROR(point_round(&pts[i], round));
    round++;
    double spent = (nimble_compile_now() - t0) / budget;
    progress(o, t, 40 + (int)(59 * (spent < 1 ? spent : 1)));
  }
  rep->rounds = round;
  /* Each signature without a record (its kernels timed together): the
   * fastest point whose code differs. One no point changes, or whose
   * kernels did not run on these inputs, gets the default schedule, so
   * the next compile does not search again (when every point was
   * compiled; see all_points). */
  rep->records = calloc(nw ? nw : 1, sizeof *rep->records);
  if (!rep->records) return NIMBLE_OOM_IN("tuning");
  for (size_t w = 0; w < nw; w++) {
    const nimble_compile_workload_t *wl = &r0->workloads[w];
    if (wl->from_record) continue;
    bool seen = false; /* its signature's record made at an earlier kernel */
    for (size_t v = 0; v < w && !seen; v++) seen = !strcmp(r0->workloads[v].signature, wl->signature);
    if (seen) continue;
    int timed = *npts > 1 ? sizes : 0; /* the sizes the points ran at (none when only the default compiled) */
    double dt[TUNE_MAX_SIZES][TUNE_MAX_ROUNDS], def_z[TUNE_MAX_SIZES] = {0}, def = 0, best;
    for (int z = 0; z < timed; z++) {
      signature_times(&pts[0], z, r0, w, round, dt[z]);
      def_z[z] = median(dt[z], round);
      def += def_z[z];
    }
    size_t alternatives;
    size_t bi = choose(pts, *npts, w, round, dt, def_z, timed, (1u << timed) - 1, &best, &alternatives);
    rep->measured += alternatives;
    if (!all_points && alternatives == 0) continue;
    nimble_tune_record_t *rec = &rep->records[rep->num_records++];
    snprintf(rec->signature, sizeof rec->signature, "%s", wl->signature);
    snprintf(rec->target, sizeof rec->target, "%s", nimble_target_kind_name(r0->target.kind));
    snprintf(rec->cpu, sizeof rec->cpu, "%s", cpu);
    snprintf(rec->kernel, sizeof rec->kernel, "%s", wl->symbol);
    rec->schedule = bi ? pts[bi].schedule : nimble_tune_schedule_default();
    rec->default_us = def;
    rec->tuned_us = best;
    rec->threads = (int32_t)threads;
    if (alternatives && timed > 1 && size_buckets(pts, *npts, w, round, dt, def_z, timed, bi, rec)) rep->bucketed++;
  }
  return nimble_ok();
}

/* search_sizes with its parsed inputs on the heap (66 KB). */
static nimble_status_t search(const char *path, const nimble_compile_options_t *o, const nimble_tune_options_t *t,
                              tune_point *pts, size_t *npts, nimble_tune_report_t *rep, double t0) {
  tune_input(*in)[TUNE_MAX_INPUTS] = calloc(TUNE_MAX_SIZES, sizeof *in);
  if (!in) return NIMBLE_OOM_IN("tuning");
  nimble_status_t s = search_sizes(path, o, t, pts, npts, rep, t0, in);
  free(in);
  return s;
}

nimble_status_t nimble_compile_tune(const char *path, const nimble_compile_options_t *options,
                                    const nimble_tune_options_t *tune, nimble_tune_report_t *report,
                                    nimble_compile_result **out) {
  *out = NULL;
  memset(report, 0, sizeof *report);
  nimble_compile_options_t o;
  if (options) o = *options;
  else nimble_compile_options_init(&o);
  nimble_tune_options_t t;
  memset(&t, 0, sizeof t);
  if (tune) t = *tune;
  if (t.budget_s < 0 || t.budget_s > 86400)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tune budget %g s: expected 0..86400", t.budget_s);
  double t0 = nimble_compile_now();
  o.workloads = true;
  o.schedule_override = NULL;
  tune_point pts[TUNE_NPOINTS];
  memset(pts, 0, sizeof pts);
  pts[0].schedule = nimble_tune_schedule_default();
  NIMBLE_RETURN_IF_ERROR(nimble_compile_file(path, &o, &pts[0].r));
  nimble_compile_result *r0 = pts[0].r;
  report->kernels = r0->num_workloads;
  report->points = 1;
  for (size_t w = 0; w < r0->num_workloads; w++) report->kernels_recorded += r0->workloads[w].from_record;
  nimble_target_kind_t host =
#if defined(__x86_64__)
      NIMBLE_TARGET_X86;
#elif defined(__aarch64__)
      NIMBLE_TARGET_AARCH64;
#else
      (nimble_target_kind_t)-1;
#endif
  size_t npts = 1;
  nimble_status_t s = nimble_ok();
  if (r0->target.kind != host)
    snprintf(report->skipped, sizeof report->skipped, "target %s does not run on this machine; nothing measured",
             nimble_target_kind_name(r0->target.kind));
  else if (report->kernels == report->kernels_recorded)
    snprintf(report->skipped, sizeof report->skipped, "every kernel has a record");
  else
    s = search(path, &o, &t, pts, &npts, report, t0);
  progress(&o, &t, 100);
  /* The result: the first compile when no new record picks a schedule of
   * its own, else a compile with every record. */
  bool changed = false;
  for (size_t i = 0; !s && i < report->num_records; i++) changed |= nimble_tune_record_rescheduled(&report->records[i]);
  nimble_tune_record_t *all = NULL;
  if (!s && changed) {
    all = calloc(o.num_tune_records + report->num_records, sizeof *all);
    if (!all) s = NIMBLE_OOM_IN("tuning");
  }
  if (!s && changed) {
    if (o.num_tune_records) memcpy(all, o.tune_records, o.num_tune_records * sizeof *all);
    memcpy(all + o.num_tune_records, report->records, report->num_records * sizeof *all);
    o.tune_records = all;
    o.num_tune_records += report->num_records;
    s = nimble_compile_file(path, &o, out);
  } else if (!s) {
    *out = pts[0].r;
    pts[0].r = NULL;
  }
  free(all);
  for (size_t i = 0; i < TUNE_NPOINTS; i++) point_deinit(&pts[i]);
  report->seconds = nimble_compile_now() - t0;
  if (s) {
    free(report->records);
    report->records = NULL;
    report->num_records = 0;
  }
  return s;
}
