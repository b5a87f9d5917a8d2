/* Target specs: parsing, validation and the canonical spelling. */
#include "nimble/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/text_quote.h"

typedef struct kind_info {
  const char *name;
  const char *host_triple;
  const char *device_triple; /* NULL: no device */
  const char *default_cpu;
  const char *base_features; /* always enabled, LLVM spelling, may be "" */
  const char *const *cpus;   /* allow-list, NULL-terminated */
} kind_info;

/* CPU names LLVM 16 knows that make sense for a build farm. `native` is
 * deliberately absent: an artifact must not depend on the worker it was
 * built on. */
static const char *const kX86Cpus[] = {
    "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "haswell", "broadwell",
    "skylake", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
    "icelake-client", "icelake-server", "tigerlake", "sapphirerapids",
    "alderlake", "znver1", "znver2", "znver3", "znver4", NULL};

static const char *const kAarch64Cpus[] = {
    "generic", "cortex-a53", "cortex-a55", "cortex-a57", "cortex-a72",
    "cortex-a76", "cortex-a78", "cortex-x1", "neoverse-n1", "neoverse-n2",
    "neoverse-v1", "neoverse-v2", "a64fx", "ampere1", "apple-m1", "carmel",
    "thunderx2t99", NULL};

/* GPU archs that both LLVM 16's NVPTX backend and CUDA 13's ptxas accept. */
static const char *const kCudaArchs[] = {"sm_75", "sm_80", "sm_86", "sm_87",
                                         "sm_89", "sm_90", NULL};
#define DEFAULT_CUDA_ARCH "sm_80"

static const kind_info kKinds[] = {
    [NIMBLE_TARGET_X86] = {"x86", "x86_64-linux-gnu", NULL, "x86-64-v3", "", kX86Cpus},
    [NIMBLE_TARGET_AARCH64] = {"aarch64", "aarch64-linux-gnu", NULL, "generic", "+neon",
                               kAarch64Cpus},
    [NIMBLE_TARGET_CUDA] = {"cuda", "x86_64-linux-gnu", "nvptx64-nvidia-cuda", "x86-64-v3",
                            "", kX86Cpus},
};
#define KIND_COUNT (sizeof(kKinds) / sizeof(kKinds[0]))

static const kind_info *info_of(const nimble_target_t *t) {
  return (unsigned)t->kind < KIND_COUNT ? &kKinds[t->kind] : &kKinds[0];
}

_Static_assert(KIND_COUNT == NIMBLE_TARGET_KIND_COUNT, "target.h's kind count");

const char *nimble_target_kind_name(nimble_target_kind_t kind) {
  return (unsigned)kind < KIND_COUNT ? kKinds[kind].name : "unknown";
}

/* The kind whose name is the len bytes at name; KIND_COUNT if none. */
static size_t kind_index(const char *name, size_t len) {
  size_t k = 0;
  for (; k < KIND_COUNT; k++)
    if (strlen(kKinds[k].name) == len && memcmp(kKinds[k].name, name, len) == 0) break;
  return k;
}

int nimble_target_kind_from_name(const char *name, nimble_target_kind_t *out) {
  size_t k = name ? kind_index(name, strlen(name)) : KIND_COUNT;
  if (k == KIND_COUNT) return 0;
  if (out) *out = (nimble_target_kind_t)k;
  return 1;
}

const char *nimble_target_host_triple(const nimble_target_t *t) { return info_of(t)->host_triple; }
const char *nimble_target_device_triple(const nimble_target_t *t) {
  return info_of(t)->device_triple;
}
const char *nimble_target_cpu(const nimble_target_t *t) { return t->cpu; }
const char *nimble_target_cuda_arch(const nimble_target_t *t) {
  return t->kind == NIMBLE_TARGET_CUDA ? t->arch : NULL;
}

/* Writes the allow-list as "a, b, c" for error messages. */
static void join_list(const char *const *items, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (size_t i = 0; items[i]; i++) {
    int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", items[i]);
    if (w < 0 || (size_t)w >= cap - n) break;
    n += (size_t)w;
  }
}

static int in_list(const char *const *items, const char *s, size_t len) {
  for (size_t i = 0; items[i]; i++)
    if (strlen(items[i]) == len && memcmp(items[i], s, len) == 0) return 1;
  return 0;
}

/* A feature name as LLVM spells them: lowercase letters, digits, '.', '_'
 * and '-' (not first). */
static int is_feature_char(char c, int first) {
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return 1;
  return !first && (c == '.' || c == '_' || c == '-');
}

typedef struct feature_item {
  const char *name;
  size_t len;
  int enabled;
} feature_item;

static int compare_items(const void *a, const void *b) {
  const feature_item *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->name, y->name, n);
  if (c) return c;
  return (x->len > y->len) - (x->len < y->len);
}

/* Parses a `features` value into its canonical form: items sorted by name,
 * duplicates folded, enabled ones bare, disabled ones with '-'. */
static nimble_status_t parse_features(const char *v, size_t len, char *out, size_t cap) {
  feature_item items[96];
  size_t count = 0, i = 0;
  if (len == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "features: empty value");
  if (v[0] == '+') i = 1; /* tolerate LLVM's habit of "+name" for the first */
  while (i <= len) {
    size_t start = i;
    int enabled = 1;
    if (i < len && v[i] == '-') {
      enabled = 0;
      start = ++i;
    }
    while (i < len && v[i] != '+') {
      if (!is_feature_char(v[i], i == start)) {
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "features: character '%c' at offset %zu is not allowed "
                                  "in a feature name",
                                  (v[i] > 32 && v[i] < 127) ? v[i] : '?', i);
      }
      i++;
    }
    if (i == start) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "features: empty feature name at offset %zu", start);
    }
    if (count == sizeof(items) / sizeof(items[0])) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "features: more than %zu features",
                                count);
    }
    items[count++] = (feature_item){v + start, i - start, enabled};
    i++; /* skip '+' (or step past the end) */
  }
  qsort(items, count, sizeof(items[0]), compare_items);
  size_t n = 0, kept = 0;
  for (size_t k = 0; k < count; k++) {
    if (kept && compare_items(&items[k], &items[kept - 1]) == 0) {
      if (items[k].enabled != items[kept - 1].enabled) {
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "features: '%.*s' is both enabled and disabled",
                                  (int)items[k].len, items[k].name);
      }
      continue;
    }
    items[kept++] = items[k];
  }
  for (size_t k = 0; k < kept; k++) {
    size_t need = (k ? 1 : 0) + (items[k].enabled ? 0 : 1) + items[k].len;
    if (n + need >= cap) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "features: value longer than %zu bytes",
                                cap - 1);
    }
    if (k) out[n++] = '+';
    if (!items[k].enabled) out[n++] = '-';
    memcpy(out + n, items[k].name, items[k].len);
    n += items[k].len;
  }
  out[n] = '\0';
  return nimble_ok();
}

/* Checks one `key=value` option and stores it in t. `seen` is a bit set of
 * keys already given. */
static nimble_status_t apply_option(nimble_target_t *t, const char *opt, size_t len,
                                    unsigned *seen, int allow_native) {
  const kind_info *info = info_of(t);
  const char *eq = memchr(opt, '=', len);
  if (len == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "empty option");
  if (!eq) {
    char q[72];
    nimble_text_quote(opt, len, q, sizeof(q));
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "option '%s' is not key=value", q);
  }
  size_t klen = (size_t)(eq - opt), vlen = len - klen - 1;
  const char *v = eq + 1;
  unsigned bit;
  if (klen == 3 && memcmp(opt, "cpu", 3) == 0) {
    bit = 1;
  } else if (klen == 8 && memcmp(opt, "features", 8) == 0) {
    bit = 2;
  } else if (klen == 4 && memcmp(opt, "arch", 4) == 0 && t->kind == NIMBLE_TARGET_CUDA) {
    bit = 4;
  } else {
    char q[72];
    nimble_text_quote(opt, klen, q, sizeof(q));
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown option '%s' (%s takes %s)", q,
                              info->name,
                              t->kind == NIMBLE_TARGET_CUDA ? "arch, cpu, features"
                                                            : "cpu, features");
  }
  if (*seen & bit) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "option '%.*s' given twice", (int)klen,
                              opt);
  }
  *seen |= bit;
  char list[512];
  switch (bit) {
    case 1:
      if (vlen == 6 && memcmp(v, "native", 6) == 0) {
        if (!allow_native)
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                    "cpu=native is not allowed: an artifact must not depend on "
                                    "the worker that built it; name the cpu");
        /* The host code is for this machine: only when it is that kind. */
#if defined(__x86_64__)
        int host_is_kind = t->kind == NIMBLE_TARGET_X86 || t->kind == NIMBLE_TARGET_CUDA;
#elif defined(__aarch64__)
        int host_is_kind = t->kind == NIMBLE_TARGET_AARCH64;
#else
        int host_is_kind = 0;
#endif
        if (!host_is_kind)
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                    "cpu=native means this machine's CPU, which is not a %s CPU",
                                    info->name);
        strcpy(t->cpu, "native");
        return nimble_ok();
      }
      if (!in_list(info->cpus, v, vlen)) {
        join_list(info->cpus, list, sizeof(list));
        char q[72];
        nimble_text_quote(v, vlen, q, sizeof(q));
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown cpu '%s' for %s (known: %s)", q,
                                  info->name, list);
      }
      memcpy(t->cpu, v, vlen);
      t->cpu[vlen] = '\0';
      return nimble_ok();
    case 2:
      return parse_features(v, vlen, t->features, sizeof(t->features));
    default:
      if (!in_list(kCudaArchs, v, vlen)) {
        join_list(kCudaArchs, list, sizeof(list));
        char q[72];
        nimble_text_quote(v, vlen, q, sizeof(q));
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown cuda arch '%s' (known: %s)", q,
                                  list);
      }
      memcpy(t->arch, v, vlen);
      t->arch[vlen] = '\0';
      return nimble_ok();
  }
}

static nimble_status_t parse_spec(const char *spec, size_t len, int allow_native, nimble_target_t *out) {
  if (len == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "empty target");
  if (len > NIMBLE_TARGET_SPEC_MAX) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "longer than %d bytes",
                              NIMBLE_TARGET_SPEC_MAX);
  }
  const char *colon = memchr(spec, ':', len);
  size_t kind_len = colon ? (size_t)(colon - spec) : len;
  nimble_target_t t;
  memset(&t, 0, sizeof(t));
  size_t k = kind_index(spec, kind_len);
  if (k == KIND_COUNT && !colon && (memchr(spec, '=', len) || memchr(spec, ',', len))) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "not a target: options must follow ':' (as in x86:cpu=haswell)");
  }
  if (k == KIND_COUNT) {
    char q[72];
    nimble_text_quote(spec, kind_len, q, sizeof(q));
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "unknown target '%s' (known: x86, aarch64, cuda)", q);
  }
  t.kind = (nimble_target_kind_t)k;
  strcpy(t.cpu, kKinds[k].default_cpu);
  if (t.kind == NIMBLE_TARGET_CUDA) strcpy(t.arch, DEFAULT_CUDA_ARCH);
  if (colon) {
    const char *p = colon + 1, *end = spec + len;
    unsigned seen = 0;
    if (p == end) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "no options after ':'");
    for (;;) {
      const char *comma = memchr(p, ',', (size_t)(end - p));
      const char *stop = comma ? comma : end;
      NIMBLE_RETURN_IF_ERROR(apply_option(&t, p, (size_t)(stop - p), &seen, allow_native));
      if (!comma) break;
      p = comma + 1;
    }
  }
  *out = t;
  return nimble_ok();
}

static nimble_status_t parse_n(const char *spec, size_t len, int allow_native, nimble_target_t *out_target) {
  if (!spec) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "target: missing");
  nimble_status_t s = parse_spec(spec, len, allow_native, out_target);
  if (s) {
    char quoted[80];
    nimble_text_quote(spec, len, quoted, sizeof(quoted));
    return nimble_status_annotate(s, "target '%s'", quoted);
  }
  return nimble_ok();
}

nimble_status_t nimble_target_parse_n(const char *spec, size_t len, nimble_target_t *out_target) {
  return parse_n(spec, len, 0, out_target);
}

nimble_status_t nimble_target_parse(const char *spec, nimble_target_t *out_target) {
  if (!spec) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "target: missing");
  return parse_n(spec, strlen(spec), 0, out_target);
}

nimble_status_t nimble_target_parse_local(const char *spec, nimble_target_t *out_target) {
  if (!spec) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "target: missing");
  return parse_n(spec, strlen(spec), 1, out_target);
}

int nimble_target_is_native(const nimble_target_t *target) { return strcmp(target->cpu, "native") == 0; }

void nimble_target_format(const nimble_target_t *t, char out[NIMBLE_TARGET_SPEC_MAX + 1]) {
  const kind_info *info = info_of(t);
  size_t n = 0, cap = NIMBLE_TARGET_SPEC_MAX + 1;
  int first = 1;
  /* Keys in sorted order: arch, cpu, features. Bounded fields make every
   * write fit (asserted by the sizes in target.h). */
#define APPEND(...) n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__)
  APPEND("%s", info->name);
  if (t->kind == NIMBLE_TARGET_CUDA && strcmp(t->arch, DEFAULT_CUDA_ARCH) != 0) {
    APPEND("%sarch=%s", first ? ":" : ",", t->arch);
    first = 0;
  }
  if (strcmp(t->cpu, info->default_cpu) != 0) {
    APPEND("%scpu=%s", first ? ":" : ",", t->cpu);
    first = 0;
  }
  if (t->features[0]) {
    APPEND("%sfeatures=%s", first ? ":" : ",", t->features);
    first = 0;
  }
#undef APPEND
}

nimble_status_t nimble_target_canonicalize(const char *text, char out[NIMBLE_TARGET_SPEC_MAX + 1]) {
  nimble_target_t t;
  NIMBLE_RETURN_IF_ERROR(nimble_target_parse(text, &t));
  nimble_target_format(&t, out);
  return nimble_ok();
}

int nimble_target_equal(const nimble_target_t *a, const nimble_target_t *b) {
  char x[NIMBLE_TARGET_SPEC_MAX + 1], y[NIMBLE_TARGET_SPEC_MAX + 1];
  nimble_target_format(a, x);
  nimble_target_format(b, y);
  return strcmp(x, y) == 0;
}

void nimble_target_llvm_features(const nimble_target_t *t, char out[NIMBLE_TARGET_SPEC_MAX + 1]) {
  const kind_info *info = info_of(t);
  size_t n = strlen(info->base_features);
  memcpy(out, info->base_features, n);
  /* Canonical features are "a+-b+c": each item becomes "+a", "-b", "+c". */
  const char *f = t->features;
  while (*f) {
    if (n) out[n++] = ',';
    if (*f != '-') out[n++] = '+';
    while (*f && *f != '+') out[n++] = *f++;
    if (*f == '+') f++;
  }
  out[n] = '\0';
}

/* A piece of a target list starts an option when its first '=' comes before
 * any ':' (kind names contain neither). */
static int piece_is_option(const char *p, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (p[i] == ':') return 0;
    if (p[i] == '=') return 1;
  }
  return 0;
}

nimble_status_t nimble_target_list_parse(const char *text, nimble_target_t *out, size_t cap,
                                         size_t *out_count) {
  if (!text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "targets: missing");
  size_t len = strlen(text), count = 0, i = 0;
  if (len == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "targets: empty list");
  while (i < len) {
    /* A spec runs from i to the first comma followed by a non-option. */
    size_t end = i;
    for (;;) {
      const char *comma = memchr(text + end, ',', len - end);
      if (!comma) {
        end = len;
        break;
      }
      size_t next = (size_t)(comma - text) + 1;
      const char *after = memchr(text + next, ',', len - next);
      size_t piece_len = (after ? (size_t)(after - text) : len) - next;
      if (piece_len > 0 && piece_is_option(text + next, piece_len)) {
        end = next; /* keep going: the option belongs to this spec */
        continue;
      }
      end = (size_t)(comma - text);
      break;
    }
    if (count == cap || count == NIMBLE_TARGET_LIST_MAX) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "targets: more than %zu targets",
                                count);
    }
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_parse_n(text + i, end - i, &out[count]),
                               "targets: item %zu", count + 1);
    for (size_t k = 0; k < count; k++) {
      if (nimble_target_equal(&out[k], &out[count])) {
        char spec[NIMBLE_TARGET_SPEC_MAX + 1];
        nimble_target_format(&out[count], spec);
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "targets: '%s' is listed twice (items %zu and %zu)", spec,
                                  k + 1, count + 1);
      }
    }
    count++;
    i = end + 1;
    if (end < len && i == len) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "targets: trailing ','");
    }
  }
  *out_count = count;
  return nimble_ok();
}
