/* Status objects: a code and a message, owned by whoever holds them; in
 * builds without NDEBUG also the place where they were made. */
#include "nimble/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nimble_status {
  nimble_status_code_t code;
  const char *file; /* where it was made, or NULL */
  int line;
  const void *subject; /* what the message names already, or NULL */
  char message[];      /* NUL-terminated */
};

/* Returned when we cannot allocate a status: a failure must never turn into
 * a success because memory ran out. It is recognised by address and never
 * freed or changed. */
static struct {
  nimble_status_code_t code;
  const char *file;
  int line;
  const void *subject;
  char message[32];
} oom_status = {NIMBLE_RESOURCE_EXHAUSTED, NULL, 0, NULL, "out of memory"};
#define OOM_STATUS ((nimble_status_t)&oom_status)

nimble_status_t nimble_status_makev_at(const char *file, int line, nimble_status_code_t code,
                                       const char *fmt, va_list ap) {
  if (code == NIMBLE_OK) return nimble_ok();
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  struct nimble_status *s = malloc(sizeof(*s) + (size_t)n + 1);
  if (!s) return OOM_STATUS;
  s->code = code;
  s->file = file;
  s->line = line;
  s->subject = NULL;
  vsnprintf(s->message, (size_t)n + 1, fmt, ap);
  return s;
}

nimble_status_t nimble_status_make_at(const char *file, int line, nimble_status_code_t code,
                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev_at(file, line, code, fmt, ap);
  va_end(ap);
  return s;
}

/* The parentheses keep the debug-build macros of the same names away. */
nimble_status_t(nimble_status_makev)(nimble_status_code_t code, const char *fmt, va_list ap) {
  return nimble_status_makev_at(NULL, 0, code, fmt, ap);
}

nimble_status_t(nimble_status_make)(nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev_at(NULL, 0, code, fmt, ap);
  va_end(ap);
  return s;
}

nimble_status_t nimble_status_annotatev(nimble_status_t status, const char *fmt, va_list ap) {
  if (!status) return status;
  /* The context is formatted first, into a buffer of its own size, then
   * joined with ": " and the old message. */
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char *ctx = malloc((size_t)n + 3);
  if (!ctx) return status; /* keep the original rather than lose it */
  vsnprintf(ctx, (size_t)n + 1, fmt, ap);
  memcpy(ctx + n, ": ", 3);
  nimble_status_t out = nimble_status_make_at(status->file, status->line, status->code, "%s%s", ctx,
                                              status->message);
  free(ctx);
  if (out == OOM_STATUS) return status;
  out->subject = status->subject;
  nimble_status_free(status);
  return out;
}

nimble_status_t nimble_status_annotate(nimble_status_t status, const char *fmt, ...) {
  if (!status) return status;
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t out = nimble_status_annotatev(status, fmt, ap);
  va_end(ap);
  return out;
}

nimble_status_code_t nimble_status_code(nimble_status_t status) {
  return status ? status->code : NIMBLE_OK;
}

const char *nimble_status_message(nimble_status_t status) {
  return status ? status->message : "";
}

const char *nimble_status_source(nimble_status_t status, int *line) {
  if (!status || !status->file) return NULL;
  if (line) *line = status->line;
  return status->file;
}

nimble_status_t nimble_status_set_subject(nimble_status_t status, const void *subject) {
  if (status && status != OOM_STATUS) status->subject = subject;
  return status;
}

const void *nimble_status_subject(nimble_status_t status) { return status ? status->subject : NULL; }

const char *nimble_status_code_name(nimble_status_code_t code) {
  switch (code) {
    case NIMBLE_OK: return "OK";
    case NIMBLE_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case NIMBLE_NOT_FOUND: return "NOT_FOUND";
    case NIMBLE_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case NIMBLE_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case NIMBLE_UNAUTHENTICATED: return "UNAUTHENTICATED";
    case NIMBLE_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case NIMBLE_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case NIMBLE_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case NIMBLE_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case NIMBLE_INTERNAL: return "INTERNAL";
    case NIMBLE_UNAVAILABLE: return "UNAVAILABLE";
    case NIMBLE_DATA_LOSS: return "DATA_LOSS";
    case NIMBLE_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case NIMBLE_CANCELLED: return "CANCELLED";
    case NIMBLE_IO_ERROR: return "IO_ERROR";
  }
  return "UNKNOWN";
}

void nimble_status_free(nimble_status_t status) {
  if (status && status != OOM_STATUS) free(status);
}

nimble_status_code_t nimble_status_consume(nimble_status_t status) {
  nimble_status_code_t code = nimble_status_code(status);
  nimble_status_free(status);
  return code;
}
