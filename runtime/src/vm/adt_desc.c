/* The descriptions of ADT inputs (docs/executable.md): an ADT input's dims
 * describe it. Dim 0 has its IR type as text, each further dim a
 * constructor, "Type.Ctor(field,...)"; a field is a type name or a tensor,
 * "<dtype>[<dims>]" with "?" for an Any dim. A type's constructors are
 * consecutive, in tag order; the input's own type comes first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/layout.h"
#include "vm/vm.h"
#include "vm/vm_inputs.h"

int nimble_tensor_info_is_adt(const nimble_tensor_info_t *info) {
  return info && info->dtype.code == kDLOpaqueHandle && info->dtype.bits == 64 && info->dtype.lanes == 1;
}

static int is_name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

int nimble_adt_desc_span_eq(const char *a, size_t alen, const char *b, size_t blen) {
  return alen == blen && memcmp(a, b, alen) == 0;
}

/* Splits the next field off *p (up to `end`): a field ends at a ',' outside
 * brackets. */
void nimble_adt_desc_next_field(const char **p, const char *end, const char **field, size_t *len) {
  const char *q = *p;
  int depth = 0;
  while (q < end && (depth > 0 || *q != ',')) {
    if (*q == '[') depth++;
    if (*q == ']') depth--;
    q++;
  }
  *field = *p;
  *len = (size_t)(q - *p);
  *p = q < end ? q + 1 : q;
}

/* Constructor description i (dim i + 1) is malformed. */
static nimble_status_t bad_desc(const char *entry, const nimble_tensor_info_t *in, uint32_t i) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "entry '%s': input '%s': constructor description %u ('%s') is malformed", entry,
                            in->name, i, in->dims[i + 1].symbol ? in->dims[i + 1].symbol : "");
}

/* Parses a tensor field "<dtype>[<dims>]"; 0 when it is not one. */
static int parse_tensor_field(const char *f, size_t len, nimble_adt_field_t *out) {
  const char *end = f + len, *open = memchr(f, '[', len);
  if (!open || len < 2 || end[-1] != ']') return 0;
  static const struct { const char *name; uint8_t code; } bases[] = {
      {"float", kDLFloat}, {"bfloat", kDLBfloat}, {"uint", kDLUInt}, {"int", kDLInt}};
  int found = 0;
  for (size_t b = 0; b < sizeof bases / sizeof bases[0] && !found; b++) {
    size_t bl = strlen(bases[b].name);
    if ((size_t)(open - f) <= bl || memcmp(f, bases[b].name, bl) != 0) continue;
    unsigned bits = 0;
    for (const char *q = f + bl; q < open; q++) {
      if (*q < '0' || *q > '9' || bits > 1000) return 0;
      bits = bits * 10 + (unsigned)(*q - '0');
    }
    /* uint1 is the runtime's bool */
    if (bits != 8 && bits != 16 && bits != 32 && bits != 64 && !(bits == 1 && bases[b].code == kDLUInt))
      return 0;
    out->dtype.code = bases[b].code;
    out->dtype.bits = (uint8_t)bits;
    out->dtype.lanes = 1;
    found = 1;
  }
  if (!found) return 0;
  out->is_adt = 0;
  out->adt_type = NULL;
  out->adt_type_len = 0;
  out->ndim = 0;
  const char *p = open + 1, *dims_end = end - 1;
  while (p < dims_end) {
    const char *d;
    size_t dl;
    nimble_adt_desc_next_field(&p, dims_end, &d, &dl);
    if (out->ndim == 32 || dl == 0) return 0;
    int64_t v = 0;
    if (dl == 1 && d[0] == '?') {
      v = -1;
    } else {
      for (size_t k = 0; k < dl; k++) {
        if (d[k] < '0' || d[k] > '9' || v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (d[k] - '0');
      }
    }
    out->dims[out->ndim++] = v;
  }
  return 1;
}

/* Parses one field into *out; 0 when malformed. ADT fields must name a type
 * of the table. */
int nimble_adt_desc_parse_field(const adt_table *t, const char *f, size_t len, nimble_adt_field_t *out) {
  if (len && f[len - 1] == ']') return parse_tensor_field(f, len, out);
  if (len == 0) return 0;
  for (size_t k = 0; k < len; k++)
    if (!is_name_char(f[k])) return 0;
  for (uint32_t i = 0; i < t->n; i++)
    if (nimble_adt_desc_span_eq(t->c[i].type, t->c[i].type_len, f, len)) {
      memset(out, 0, sizeof *out);
      out->is_adt = 1;
      out->adt_type = t->c[i].type;
      out->adt_type_len = t->c[i].type_len;
      return 1;
    }
  return 0;
}

nimble_status_t nimble_adt_desc_table(const char *entry, const nimble_tensor_info_t *in, adt_table *t) {
  if (!nimble_tensor_info_is_adt(in))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' is a tensor, not an ADT", entry,
                              in->name);
  if (in->ndim < 2 || in->ndim > 32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "entry '%s': input '%s' describes %d constructors",
                              entry, in->name, in->ndim - 1);
  t->n = (uint32_t)in->ndim - 1;
  for (uint32_t i = 0; i < t->n; i++) {
    const char *s = in->dims[i + 1].symbol;
    if (!s) return bad_desc(entry, in, i);
    size_t len = strlen(s);
    const char *dot = memchr(s, '.', len), *open = memchr(s, '(', len);
    if (!dot || !open || dot > open || dot == s || open == dot + 1 || s[len - 1] != ')')
      return bad_desc(entry, in, i);
    ctor_desc *c = &t->c[i];
    c->type = s;
    c->type_len = (size_t)(dot - s);
    c->name = dot + 1;
    c->name_len = (size_t)(open - dot - 1);
    c->fields = open + 1;
    c->fields_len = (size_t)(s + len - 1 - (open + 1));
    for (size_t k = 0; k < c->type_len; k++)
      if (!is_name_char(c->type[k])) return bad_desc(entry, in, i);
    for (size_t k = 0; k < c->name_len; k++)
      if (!is_name_char(c->name[k])) return bad_desc(entry, in, i);
    c->num_fields = 0;
    for (const char *p = c->fields, *end = c->fields + c->fields_len; p < end;) {
      const char *f;
      size_t fl;
      nimble_adt_desc_next_field(&p, end, &f, &fl);
      c->num_fields++;
    }
    /* A type's constructors are consecutive; a type appears in one run. */
    if (i > 0 && nimble_adt_desc_span_eq(t->c[i - 1].type, t->c[i - 1].type_len, c->type, c->type_len)) {
      c->tag = t->c[i - 1].tag + 1;
      c->type_start = t->c[i - 1].type_start;
    } else {
      for (uint32_t j = 0; j < i; j++)
        if (nimble_adt_desc_span_eq(t->c[j].type, t->c[j].type_len, c->type, c->type_len)) return bad_desc(entry, in, i);
      c->tag = 0;
      c->type_start = i;
    }
    for (uint32_t j = c->type_start; j < i; j++)
      if (nimble_adt_desc_span_eq(t->c[j].name, t->c[j].name_len, c->name, c->name_len)) return bad_desc(entry, in, i);
  }
  for (uint32_t i = 0; i < t->n; i++) {
    uint32_t end = i;
    while (end < t->n && t->c[end].type_start == t->c[i].type_start) end++;
    t->c[i].type_count = end - t->c[i].type_start;
  }
  /* Every field parses and names a type of the table. */
  for (uint32_t i = 0; i < t->n; i++) {
    const ctor_desc *c = &t->c[i];
    for (const char *p = c->fields, *end = c->fields + c->fields_len; p < end;) {
      const char *f;
      size_t fl;
      nimble_adt_field_t fd;
      nimble_adt_desc_next_field(&p, end, &f, &fl);
      if (!nimble_adt_desc_parse_field(t, f, fl, &fd)) return bad_desc(entry, in, i);
    }
  }
  return nimble_ok();
}

static nimble_status_t entry_table(const nimble_entry_info_t *entry, uint32_t input, adt_table *t) {
  if (!entry) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "NULL entry");
  if (input >= entry->num_inputs)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s' has %u inputs, no input %u", entry->name,
                              entry->num_inputs, input);
  return nimble_adt_desc_table(entry->name, &entry->inputs[input], t);
}

static nimble_status_t find_ctor(const nimble_entry_info_t *entry, uint32_t input, const adt_table *t,
                                 const char *name, const ctor_desc **out) {
  if (!name) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "NULL constructor name");
  const char *dot = strchr(name, '.');
  const char *cname = dot ? dot + 1 : name;
  for (uint32_t i = 0; i < t->n; i++) {
    const ctor_desc *c = &t->c[i];
    if (dot && !nimble_adt_desc_span_eq(c->type, c->type_len, name, (size_t)(dot - name))) continue;
    if (nimble_adt_desc_span_eq(c->name, c->name_len, cname, strlen(cname))) {
      *out = c;
      return nimble_ok();
    }
  }
  return nimble_status_make(NIMBLE_NOT_FOUND, "entry '%s': input '%s' has no constructor '%s'", entry->name,
                            entry->inputs[input].name, name);
}

nimble_status_t nimble_entry_find_constructor(const nimble_entry_info_t *entry, uint32_t input,
                                              const char *name, int32_t *tag, uint32_t *num_fields) {
  adt_table t;
  const ctor_desc *c;
  NIMBLE_RETURN_IF_ERROR(entry_table(entry, input, &t));
  NIMBLE_RETURN_IF_ERROR(find_ctor(entry, input, &t, name, &c));
  if (tag) *tag = c->tag;
  if (num_fields) *num_fields = c->num_fields;
  return nimble_ok();
}

nimble_status_t nimble_entry_constructor_field(const nimble_entry_info_t *entry, uint32_t input,
                                               const char *name, uint32_t field, nimble_adt_field_t *out) {
  adt_table t;
  const ctor_desc *c;
  if (!out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "constructor_field: NULL out");
  NIMBLE_RETURN_IF_ERROR(entry_table(entry, input, &t));
  NIMBLE_RETURN_IF_ERROR(find_ctor(entry, input, &t, name, &c));
  if (field >= c->num_fields)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "entry '%s': constructor %.*s has %u fields, no field %u",
                              entry->name, (int)c->name_len, c->name, c->num_fields, field);
  const char *p = c->fields, *end = c->fields + c->fields_len, *f = NULL;
  size_t fl = 0;
  for (uint32_t k = 0; k <= field; k++) nimble_adt_desc_next_field(&p, end, &f, &fl);
  nimble_adt_desc_parse_field(&t, f, fl, out); /* build_table checked it */
  return nimble_ok();
}
