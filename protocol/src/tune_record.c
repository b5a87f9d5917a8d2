/* Tuning records (nimble/tune_record.h): parsing with every field checked,
 * since records arrive from files, the network and Redis, and writing. */
#include "nimble/tune_record.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/message.h"
#include "nimble/target.h"

nimble_tune_schedule_t nimble_tune_schedule_default(void) {
  /* The compiler's defaults (compute_internal.h, conv.c): what a kernel
   * gets without a record. */
  return (nimble_tune_schedule_t){.parallel = true, .min_task_work = 16384, .conv_block = 65536};
}

bool nimble_tune_schedule_equal(const nimble_tune_schedule_t *a, const nimble_tune_schedule_t *b) {
  return a->parallel == b->parallel && a->min_task_work == b->min_task_work && a->conv_block == b->conv_block &&
         a->avx512_clone == b->avx512_clone && a->vector_width == b->vector_width && a->interleave == b->interleave;
}

static const char *const kCloneNames[] = {"auto", "yes", "no"};
#define NUM_CLONE_NAMES ((int)(sizeof kCloneNames / sizeof *kCloneNames))

const char *nimble_tune_clone_name(int32_t clone) {
  return clone >= 0 && clone < NUM_CLONE_NAMES ? kCloneNames[clone] : kCloneNames[0];
}

/* The knobs a record's schedule may name, as the error for another lists them. */
static const char *const kKnobs[] = {"parallel",     "min_task_work", "conv_block",
                                     "avx512_clone", "vector_width",  "interleave"};
#define NUM_KNOBS (sizeof kKnobs / sizeof *kKnobs)

static bool hex_ok(const char *s, size_t n) {
  if (strlen(s) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

/* Printable ASCII without '"', '\\' and '|' (the scheduler joins cpu and
 * signature with '|' in its Redis field names). */
static bool text_ok(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\' || *s == '|') return false;
  return true;
}

#define BAD(...) nimble_status_make(NIMBLE_INVALID_ARGUMENT, __VA_ARGS__)

static nimble_status_t get_text(const json_t *j, const char *key, const char *w, bool required, char *out,
                                size_t size) {
  const json_t *v = json_object_get(j, key);
  if (!v) {
    if (!required) {
      out[0] = '\0';
      return nimble_ok();
    }
    return BAD("%stune record: '%s' is missing", w, key);
  }
  if (!json_is_string(v)) return BAD("%stune record: '%s' must be a string", w, key);
  const char *s = json_string_value(v);
  if (strlen(s) >= size) return BAD("%stune record: '%s' is longer than %zu characters", w, key, size - 1);
  if (!text_ok(s)) return BAD("%stune record: '%s' holds characters outside printable ASCII (or '|')", w, key);
  memcpy(out, s, strlen(s) + 1);
  return nimble_ok();
}

/* j's integer `key` in [lo, hi]; `name` calls it in errors. */
static nimble_status_t get_int(const json_t *j, const char *key, const char *name, const char *w, int64_t lo,
                               int64_t hi, int64_t *out) {
  const json_t *v = json_object_get(j, key);
  if (!json_is_integer(v)) return BAD("%stune record: '%s' must be an integer", w, name);
  json_int_t x = json_integer_value(v);
  if (x < lo || x > hi)
    return BAD("%stune record: '%s' = %lld is outside [%lld, %lld]", w, name, (long long)x, (long long)lo,
               (long long)hi);
  *out = x;
  return nimble_ok();
}

static nimble_status_t get_us(const json_t *j, const char *key, const char *w, double *out) {
  const json_t *v = json_object_get(j, key);
  if (!json_is_number(v)) return BAD("%stune record: '%s' must be a number", w, key);
  double x = json_number_value(v);
  if (!isfinite(x) || x < 0 || x > 1e12)
    return BAD("%stune record: '%s' = %g is not a time in microseconds", w, key, x);
  *out = x;
  return nimble_ok();
}

/* A schedule object (the record's, or a bucket's: `field` names it in
 * errors). */
static nimble_status_t schedule_from_json(const json_t *s, const char *w, const char *field,
                                          nimble_tune_schedule_t *out) {
  if (!json_is_object(s)) return BAD("%stune record: '%s' must be an object", w, field);
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)s, key, v) {
    size_t k = 0;
    while (k < NUM_KNOBS && strcmp(key, kKnobs[k])) k++;
    if (k < NUM_KNOBS) continue;
    char known[128] = "";
    for (k = 0; k < NUM_KNOBS; k++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", kKnobs[k]);
    return BAD("%stune record: %s knob '%s' is unknown (known: %s)", w, field, key, known);
  }
  const json_t *par = json_object_get(s, "parallel");
  if (!json_is_boolean(par)) return BAD("%stune record: '%s.parallel' must be true or false", w, field);
  out->parallel = json_is_true(par);
  char key_w[64];
  snprintf(key_w, sizeof key_w, "%s.min_task_work", field);
  NIMBLE_RETURN_IF_ERROR(
      get_int(s, "min_task_work", key_w, w, NIMBLE_TUNE_MIN_TASK_WORK_MIN, NIMBLE_TUNE_MIN_TASK_WORK_MAX,
              &out->min_task_work));
  snprintf(key_w, sizeof key_w, "%s.conv_block", field);
  NIMBLE_RETURN_IF_ERROR(
      get_int(s, "conv_block", key_w, w, NIMBLE_TUNE_CONV_BLOCK_MIN, NIMBLE_TUNE_CONV_BLOCK_MAX, &out->conv_block));
  const json_t *clone = json_object_get(s, "avx512_clone"); /* absent in records before it: auto */
  if (clone) {
    const char *name = json_is_string(clone) ? json_string_value(clone) : "";
    int i = 0;
    while (i < NUM_CLONE_NAMES && strcmp(name, kCloneNames[i])) i++;
    if (i == NUM_CLONE_NAMES)
      return BAD("%stune record: '%s.avx512_clone' must be \"auto\", \"yes\" or \"no\"", w, field);
    out->avx512_clone = i;
  }
  if (json_object_get(s, "vector_width")) { /* absent: the target's */
    int64_t vw;
    snprintf(key_w, sizeof key_w, "%s.vector_width", field);
    NIMBLE_RETURN_IF_ERROR(get_int(s, "vector_width", key_w, w, 4, 16, &vw));
    if (vw != 4 && vw != 8 && vw != 16) return BAD("%stune record: '%s' must be 4, 8 or 16", w, key_w);
    out->vector_width = (int32_t)vw;
  }
  if (json_object_get(s, "interleave")) { /* absent: LLVM's choice */
    int64_t il;
    snprintf(key_w, sizeof key_w, "%s.interleave", field);
    NIMBLE_RETURN_IF_ERROR(get_int(s, "interleave", key_w, w, 1, 4, &il));
    if (il == 3) return BAD("%stune record: '%s' must be 1, 2 or 4", w, key_w);
    out->interleave = (int32_t)il;
  }
  return nimble_ok();
}

nimble_status_t nimble_tune_record_from_json(const json_t *j, const char *where, nimble_tune_record_t *out) {
  char w[512] = "";
  if (where) snprintf(w, sizeof w, "%s: ", where);
  memset(out, 0, sizeof *out);
  if (!json_is_object(j)) return BAD("%stune record: expected an object", w);
  NIMBLE_RETURN_IF_ERROR(get_text(j, "signature", w, true, out->signature, sizeof out->signature));
  if (!hex_ok(out->signature, NIMBLE_TUNE_SIGNATURE_LEN))
    return BAD("%stune record: 'signature' must be 64 lowercase hex digits", w);
  NIMBLE_RETURN_IF_ERROR(get_text(j, "target", w, true, out->target, sizeof out->target));
  if (!out->target[0]) return BAD("%stune record: 'target' is empty", w);
  if (!nimble_target_kind_from_name(out->target, NULL))
    return BAD("%stune record: 'target' is '%s', not a target kind (x86, aarch64, cuda)", w, out->target);
  NIMBLE_RETURN_IF_ERROR(get_text(j, "cpu", w, true, out->cpu, sizeof out->cpu));
  if (!out->cpu[0]) return BAD("%stune record: 'cpu' is empty", w);
  NIMBLE_RETURN_IF_ERROR(get_text(j, "kernel", w, false, out->kernel, sizeof out->kernel));
  NIMBLE_RETURN_IF_ERROR(schedule_from_json(json_object_get(j, "schedule"), w, "schedule", &out->schedule));
  const json_t *b = json_object_get(j, "buckets"); /* absent: one schedule for every size */
  if (b) {
    if (!json_is_array(b) || json_array_size(b) < 1 || json_array_size(b) > NIMBLE_TUNE_MAX_BUCKETS)
      return BAD("%stune record: 'buckets' must be an array of 1 to %d objects", w, NIMBLE_TUNE_MAX_BUCKETS);
    for (size_t i = 0; i < json_array_size(b); i++) {
      const json_t *bi = json_array_get(b, i);
      char field[48];
      snprintf(field, sizeof field, "buckets[%zu]", i);
      if (!json_is_object(bi)) return BAD("%stune record: '%s' must be an object", w, field);
      nimble_tune_bucket_t *o = &out->buckets[i];
      const json_t *me = json_object_get(bi, "max_elements");
      if (!json_is_integer(me) || json_integer_value(me) < 1)
        return BAD("%stune record: '%s.max_elements' must be an integer of at least 1", w, field);
      o->max_elements = json_integer_value(me);
      if (i && o->max_elements <= out->buckets[i - 1].max_elements)
        return BAD("%stune record: '%s.max_elements' (%lld) must exceed the bucket's before it (%lld)", w, field,
                   (long long)o->max_elements, (long long)out->buckets[i - 1].max_elements);
      snprintf(field + strlen(field), sizeof field - strlen(field), ".schedule");
      NIMBLE_RETURN_IF_ERROR(schedule_from_json(json_object_get(bi, "schedule"), w, field, &o->schedule));
    }
    out->num_buckets = (int32_t)json_array_size(b);
  }
  NIMBLE_RETURN_IF_ERROR(get_us(j, "default_us", w, &out->default_us));
  NIMBLE_RETURN_IF_ERROR(get_us(j, "tuned_us", w, &out->tuned_us));
  int64_t threads;
  NIMBLE_RETURN_IF_ERROR(get_int(j, "threads", "threads", w, 1, 1024, &threads));
  out->threads = (int32_t)threads;
  return nimble_ok();
}

static json_t *schedule_to_json(const nimble_tune_schedule_t *sc) {
  json_t *s = json_pack("{s:b, s:I, s:I}", "parallel", (int)sc->parallel, "min_task_work",
                        (json_int_t)sc->min_task_work, "conv_block", (json_int_t)sc->conv_block);
  if (!s) return NULL;
  /* The later knobs only when not their defaults, so records that do not
   * use them read as before (older readers refuse knobs they do not know). */
  int32_t clone = sc->avx512_clone;
  if ((clone > NIMBLE_TUNE_CLONE_AUTO && clone <= NIMBLE_TUNE_CLONE_NO &&
       json_object_set_new(s, "avx512_clone", json_string(nimble_tune_clone_name(clone))) != 0) ||
      (sc->vector_width && json_object_set_new(s, "vector_width", json_integer(sc->vector_width)) != 0) ||
      (sc->interleave && json_object_set_new(s, "interleave", json_integer(sc->interleave)) != 0)) {
    json_decref(s);
    return NULL;
  }
  return s;
}

json_t *nimble_tune_record_to_json(const nimble_tune_record_t *r) {
  json_t *s = schedule_to_json(&r->schedule);
  if (!s) return NULL;
  json_t *j = json_pack("{s:s, s:s, s:s, s:o, s:f, s:f, s:i}", "signature", r->signature, "target", r->target, "cpu",
                        r->cpu, "schedule", s, "default_us", r->default_us, "tuned_us", r->tuned_us, "threads",
                        (int)r->threads);
  if (j && r->kernel[0] && json_object_set_new(j, "kernel", json_string(r->kernel)) != 0) {
    json_decref(j);
    return NULL;
  }
  /* Buckets only when there are some: older readers ignore the field and
   * run 'schedule' at every size, which is still correct. */
  json_t *b = j && r->num_buckets > 0 ? json_array() : NULL;
  for (int32_t i = 0; b && i < r->num_buckets && i < NIMBLE_TUNE_MAX_BUCKETS; i++) {
    json_t *bs = schedule_to_json(&r->buckets[i].schedule);
    json_t *bi = bs ? json_pack("{s:I, s:o}", "max_elements", (json_int_t)r->buckets[i].max_elements, "schedule", bs)
                    : NULL;
    if (!bi || json_array_append_new(b, bi) != 0) {
      json_decref(b);
      b = NULL;
    }
  }
  if (j && r->num_buckets > 0 && (!b || json_object_set_new(j, "buckets", b) != 0)) {
    json_decref(j);
    return NULL;
  }
  return j;
}

bool nimble_tune_record_rescheduled(const nimble_tune_record_t *r) {
  nimble_tune_schedule_t d = nimble_tune_schedule_default();
  return r->num_buckets > 0 || !nimble_tune_schedule_equal(&r->schedule, &d);
}

const nimble_tune_schedule_t *nimble_tune_record_schedule_for(const nimble_tune_record_t *r, int64_t elements) {
  for (int32_t i = 0; i < r->num_buckets && i < NIMBLE_TUNE_MAX_BUCKETS; i++)
    if (elements <= r->buckets[i].max_elements) return &r->buckets[i].schedule;
  return &r->schedule;
}

/* Every field is bounded, so a record's text always fits a message's
 * member (the reals print in at most 24 characters each). */
_Static_assert(NIMBLE_TUNE_SIGNATURE_LEN + 16 + NIMBLE_TUNE_CPU_MAX + NIMBLE_TUNE_KERNEL_MAX + 3 * 24 + 256 +
                       NIMBLE_TUNE_MAX_BUCKETS * (48 + 160) + 16 <
                   NIMBLE_TUNE_RECORD_TEXT_MAX,
               "a tune record's text must fit NIMBLE_TUNE_RECORD_TEXT_MAX");

char *nimble_tune_record_to_text(const nimble_tune_record_t *r) {
  json_t *j = nimble_tune_record_to_json(r);
  char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(j);
  return text;
}

nimble_status_t nimble_tune_record_from_text(const char *text, const char *where, nimble_tune_record_t *out) {
  memset(out, 0, sizeof *out);
  if (!text) return BAD("%s: tune record: expected a string", where ? where : "(record)");
  json_error_t e;
  json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &e);
  if (!j) return BAD("%s: tune record: not JSON: %s", where ? where : "(record)", e.text);
  nimble_status_t s = nimble_tune_record_from_json(j, where, out);
  json_decref(j);
  return s;
}

json_t *nimble_tune_records_to_texts(const nimble_tune_record_t *r, size_t n) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < n; i++) {
    char *text = nimble_tune_record_to_text(&r[i]);
    if (!text || json_array_append_new(arr, json_string(text)) != 0) {
      json_decref(arr);
      arr = NULL;
    }
    free(text);
  }
  return arr;
}

bool nimble_tune_wanted(const json_t *options) {
  const json_t *tune = json_object_get(options, "tune");
  return json_is_true(tune) || (json_is_string(tune) && !strcmp(json_string_value(tune), "true"));
}

nimble_status_t nimble_tune_records_from_json(const json_t *doc, const char *what, nimble_tune_record_t **out,
                                              size_t *count) {
  *out = NULL;
  *count = 0;
  if (!json_is_object(doc)) return BAD("%s: tune records: expected a JSON object", what);
  const char *fmt = json_string_value(json_object_get(doc, "format"));
  if (!fmt || strcmp(fmt, NIMBLE_TUNE_RECORDS_FORMAT) != 0)
    return BAD("%s: tune records: 'format' must be \"%s\"", what, NIMBLE_TUNE_RECORDS_FORMAT);
  const json_t *arr = json_object_get(doc, "records");
  if (!json_is_array(arr)) return BAD("%s: tune records: 'records' must be an array", what);
  size_t n = json_array_size(arr);
  if (n > NIMBLE_TUNE_MAX_RECORDS)
    return BAD("%s: tune records: %zu records, more than the %d allowed", what, n, NIMBLE_TUNE_MAX_RECORDS);
  nimble_tune_record_t *r = calloc(n ? n : 1, sizeof *r);
  if (!r) return NIMBLE_OOM_IN(what);
  for (size_t i = 0; i < n; i++) {
    /* The record's short name, then `what` before it: a long path cannot
     * crowd the record's index out of the message. */
    char where[32];
    snprintf(where, sizeof where, "record %zu", i);
    nimble_status_t s = nimble_tune_record_from_json(json_array_get(arr, i), where, &r[i]);
    if (s) {
      free(r);
      return nimble_status_annotate(s, "%s", what);
    }
  }
  *out = r;
  *count = n;
  return nimble_ok();
}

json_t *nimble_tune_records_to_json(const nimble_tune_record_t *r, size_t n) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_t *j = nimble_tune_record_to_json(&r[i]);
    if (!j || json_array_append_new(arr, j) != 0) {
      json_decref(arr);
      return NULL;
    }
  }
  if (!arr) return NULL;
  return json_pack("{s:s, s:o}", "format", NIMBLE_TUNE_RECORDS_FORMAT, "records", arr);
}

nimble_status_t nimble_tune_records_read_file(const char *path, nimble_tune_record_t **out, size_t *count) {
  *out = NULL;
  *count = 0;
  json_error_t e;
  json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
  if (!doc) {
    FILE *f = fopen(path, "rb");
    if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path, strerror(errno));
    fclose(f);
    return BAD("%s:%d:%d: tune records: %s", path, e.line, e.column, e.text);
  }
  nimble_status_t s = nimble_tune_records_from_json(doc, path, out, count);
  json_decref(doc);
  return s;
}

nimble_status_t nimble_tune_records_write_file(const char *path, const nimble_tune_record_t *r, size_t n) {
  json_t *doc = nimble_tune_records_to_json(r, n);
  if (!doc) return NIMBLE_OOM_IN(path);
  size_t len = strlen(path);
  char *tmp = malloc(len + 5);
  if (!tmp) {
    json_decref(doc);
    return NIMBLE_OOM_IN(path);
  }
  memcpy(tmp, path, len);
  memcpy(tmp + len, ".tmp", 5);
  int rc = json_dump_file(doc, tmp, JSON_INDENT(1) | JSON_SORT_KEYS);
  json_decref(doc);
  nimble_status_t s = nimble_ok();
  if (rc != 0) s = nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot write tune records", tmp);
  else if (rename(tmp, path) != 0) s = nimble_status_make(NIMBLE_IO_ERROR, "%s: %s", path, strerror(errno));
  if (s) remove(tmp);
  free(tmp);
  return s;
}
