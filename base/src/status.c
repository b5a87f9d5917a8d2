/* Status objects: a code and a message, owned by whoever holds them. */
#include "nimble/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nimble_status {
  nimble_status_code_t code;
  char message[]; /* NUL-terminated */
};

/* Returned when we cannot allocate a status: a failure must never turn into
 * a success because memory ran out. It is recognised by address and never
 * freed. */
static struct {
  nimble_status_code_t code;
  char message[32];
} oom_status = {NIMBLE_RESOURCE_EXHAUSTED, "out of memory"};
#define OOM_STATUS ((nimble_status_t)&oom_status)

nimble_status_t nimble_status_makev(nimble_status_code_t code, const char *fmt,
                                    va_list ap) {
  if (code == NIMBLE_OK) return nimble_ok();
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  struct nimble_status *s = malloc(sizeof(*s) + (size_t)n + 1);
  if (!s) return OOM_STATUS;
  s->code = code;
  vsnprintf(s->message, (size_t)n + 1, fmt, ap);
  return s;
}

nimble_status_t nimble_status_make(nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  return s;
}

nimble_status_t nimble_status_annotate(nimble_status_t status, const char *fmt, ...) {
  if (!status) return status;
  char ctx[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof(ctx), fmt, ap);
  va_end(ap);
  nimble_status_t out = nimble_status_make(status->code, "%s: %s", ctx, status->message);
  if (out == OOM_STATUS) return status; /* keep the original rather than lose it */
  nimble_status_free(status);
  return out;
}

nimble_status_code_t nimble_status_code(nimble_status_t status) {
  return status ? status->code : NIMBLE_OK;
}

const char *nimble_status_message(nimble_status_t status) {
  return status ? status->message : "";
}

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
