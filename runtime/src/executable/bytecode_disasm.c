/* The disassembler: an executable's kernels and bytecode as text, one line
 * per instruction, operands named and formatted by the instruction table
 * (nimble/bytecode.h). `nimble inspect m.nimble` prints it; tests print it
 * when a program misbehaves. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "executable/executable.h"
#include "nimble/bytecode.h"

typedef struct text_buf {
  char *s;
  size_t n, cap;
  int oom;
} text_buf;

static void put(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *t, const char *fmt, ...) {
  if (t->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      t->oom = 1;
      return;
    }
    if (t->s && t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap <= t->n + (size_t)k) cap *= 2;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = 1;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

/* The next space-separated name of `names` (advanced), or "?". */
static void next_name(const char **names, char *buf, size_t size) {
  const char *p = *names;
  while (*p == ' ') p++;
  size_t len = strcspn(p, " ");
  if (!len) {
    snprintf(buf, size, "?");
  } else {
    snprintf(buf, size, "%.*s", (int)len, p);
  }
  *names = p + len;
}

/* Operand k of kind `kind`; dtypes (C B L) and devices (D N) as one. */
static void put_operand(text_buf *t, const nimble_executable *exe, const nimble_function_t *fn, uint32_t pc,
                        const int64_t *o, uint32_t k, char kind) {
  long long v = (long long)o[k];
  char buf[64];
  switch (kind) {
    case 'r': put(t, "r%lld", v); break;
    case 'f':
      if (v >= 0 && v < (long long)exe->code.num_functions) put(t, "@%s", exe->code.functions[v].name);
      else put(t, "@%lld", v);
      break;
    case 'k':
      if (v >= 0 && v < (long long)exe->code.num_kernels)
        put(t, "#%lld %s%s", v, exe->code.kernels[v].symbol, exe->code.kernels[v].device == kDLCUDA ? " (cuda)" : "");
      else put(t, "#%lld", v);
      break;
    case 'c': put(t, "const#%lld", v); break;
    case 'j': put(t, "%+lld (pc %lld)", v, (long long)pc + v); break;
    case 'D': put(t, "%s:%lld", nimble_device_name((DLDeviceType)v), (long long)o[k + 1]); break;
    case 'C': {
      DLDataType dt = {(uint8_t)o[k], (uint8_t)o[k + 1], (uint16_t)o[k + 2]};
      put(t, "%s", nimble_format_dtype(dt, buf, sizeof buf));
      break;
    }
    default: put(t, "%lld", v); break;
  }
  (void)fn;
}

static void put_function(text_buf *t, const nimble_executable *exe, uint32_t index) {
  const nimble_function_t *fn = &exe->code.functions[index];
  put(t, "function %u @%s (%u params, %u registers, %u instructions)\n", index, fn->name, fn->num_params,
      fn->num_registers, fn->num_instructions);
  for (uint32_t pc = 0; pc < fn->num_instructions; pc++) {
    const nimble_instr_t *in = &fn->instructions[pc];
    const int64_t *o = fn->operands + in->first;
    char tail;
    const char *names;
    const char *schema = nimble_opcode_schema(in->op, &tail, &names);
    put(t, "  %4u  %-14s", pc, nimble_opcode_name(in->op));
    if (!schema) {
      put(t, "\n");
      continue;
    }
    uint32_t fixed = (uint32_t)strlen(schema);
    char name[64];
    for (uint32_t k = 0; k < fixed && k < in->num_operands; k++) {
      char kind = schema[k];
      next_name(&names, name, sizeof name);
      if (kind == 'N' || kind == 'B' || kind == 'L') continue; /* printed with their D / C */
      put(t, " %s=", name);
      put_operand(t, exe, fn, pc, o, k, kind);
    }
    if (tail) {
      next_name(&names, name, sizeof name);
      put(t, " %s=[", name);
      for (uint32_t k = fixed; k < in->num_operands; k++) {
        if (k > fixed) put(t, " ");
        put_operand(t, exe, fn, pc, o, k, tail);
      }
      put(t, "]");
    }
    put(t, "\n");
  }
}

nimble_status_t nimble_executable_disassemble(const nimble_executable *exe, char **out) {
  if (!exe || !out) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "disassemble: NULL argument");
  *out = NULL;
  text_buf t = {0};
  put(&t, "target %s, format version %u, %u kernels, %u constants, %u functions\n", exe->meta.target,
      exe->format_version, exe->code.num_kernels, exe->consts.num_constants, exe->code.num_functions);
  for (uint32_t e = 0; e < exe->meta.num_entries; e++)
    put(&t, "entry %s -> @%s\n", exe->meta.entries[e].name, exe->code.functions[exe->meta.entry_functions[e]].name);
  for (uint32_t k = 0; k < exe->code.num_kernels; k++)
    put(&t, "kernel #%u %s %s\n", k, exe->code.kernels[k].device == kDLCUDA ? "cuda" : "cpu",
        exe->code.kernels[k].symbol);
  for (uint32_t f = 0; f < exe->code.num_functions; f++) put_function(&t, exe, f);
  if (t.oom) {
    free(t.s);
    return NIMBLE_OOM_IN("disassemble");
  }
  *out = t.s;
  return nimble_ok();
}
