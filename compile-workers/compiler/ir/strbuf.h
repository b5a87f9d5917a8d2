/* A growable malloc'ed string for printers (private to the compiler). A
 * buffer that failed to grow stays failed; nimble_strbuf_finish reports it. */
#ifndef NIMBLE_COMPILER_STRBUF_H
#define NIMBLE_COMPILER_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "nimble/status.h"

typedef struct nimble_strbuf {
  char *data;
  size_t len;
  size_t cap;
  bool failed;
} nimble_strbuf;

void nimble_strbuf_init(nimble_strbuf *b);
void nimble_strbuf_deinit(nimble_strbuf *b);
void nimble_strbuf_append(nimble_strbuf *b, const char *s, size_t n);
void nimble_strbuf_puts(nimble_strbuf *b, const char *s);
void nimble_strbuf_printf(nimble_strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hands the string to the caller (*out, caller frees) or fails with
 * RESOURCE_EXHAUSTED; the buffer is empty afterwards either way. */
nimble_status_t nimble_strbuf_finish(nimble_strbuf *b, char **out);

#endif
