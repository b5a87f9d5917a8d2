/* Status: the one error type of the whole project.
 *
 * A function that can fail returns a nimble_status_t. NULL means success
 * (nimble_ok()); anything else is a heap object holding a code and a message
 * that names the thing at fault. Results come back through out-parameters.
 *
 *   nimble_status_t s = nimble_digest_parse(text, &d);
 *   if (s) return nimble_status_annotate(s, "while reading manifest %s", path);
 *
 * The caller owns a returned status: it either returns it (optionally
 * annotated) or handles it and calls nimble_status_free(). Printing and
 * exiting is the business of a program's main(), never a library.
 *
 * This module has no dependencies beyond libc, so the thin runtime links it.
 */
#ifndef NIMBLE_STATUS_H
#define NIMBLE_STATUS_H

#include "nimble/export.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nimble_status_code {
  NIMBLE_OK = 0,
  NIMBLE_INVALID_ARGUMENT = 1,  /* bad input: malformed file, bad option */
  NIMBLE_NOT_FOUND = 2,         /* a named thing does not exist */
  NIMBLE_ALREADY_EXISTS = 3,
  NIMBLE_PERMISSION_DENIED = 4, /* authenticated but not allowed */
  NIMBLE_UNAUTHENTICATED = 5,   /* missing or wrong token */
  NIMBLE_RESOURCE_EXHAUSTED = 6,/* out of memory, over a cap or a limit */
  NIMBLE_FAILED_PRECONDITION = 7,
  NIMBLE_OUT_OF_RANGE = 8,      /* index or offset outside its bounds */
  NIMBLE_UNIMPLEMENTED = 9,     /* unsupported operator, option, version */
  NIMBLE_INTERNAL = 10,         /* a bug: an invariant did not hold */
  NIMBLE_UNAVAILABLE = 11,      /* a service did not answer; retry may help */
  NIMBLE_DATA_LOSS = 12,        /* digest mismatch, truncated data */
  NIMBLE_DEADLINE_EXCEEDED = 13,
  NIMBLE_CANCELLED = 14,
  NIMBLE_IO_ERROR = 15,         /* the file system said no */
} nimble_status_code_t;

typedef struct nimble_status *nimble_status_t;

/* Success. */
#define nimble_ok() ((nimble_status_t)0)

/* Creates a status with a printf-style message of any length. Caller owns
 * the result. With code NIMBLE_OK it returns nimble_ok(). Never returns
 * NULL for a non-OK code: when memory is short it returns a static
 * out-of-memory status that nimble_status_free() knows not to free. */
NIMBLE_API nimble_status_t nimble_status_make(nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
NIMBLE_API nimble_status_t nimble_status_makev(nimble_status_code_t code, const char *fmt, va_list ap);

/* The same, recording where the status was made (`file` must be a string
 * that lives for the process, as __FILE__ does). In builds without NDEBUG
 * nimble_status_make and nimble_status_makev are these, called with the
 * caller's __FILE__ and __LINE__ (the macros below). */
NIMBLE_API nimble_status_t nimble_status_make_at(const char *file, int line, nimble_status_code_t code,
                                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
NIMBLE_API nimble_status_t nimble_status_makev_at(const char *file, int line, nimble_status_code_t code,
                                                  const char *fmt, va_list ap);

/* Prepends context of any length: "CONTEXT: old message". Takes ownership
 * of `status` and returns the status to pass on (possibly a new object,
 * which keeps the code, the subject and the source location). OK stays
 * OK. */
NIMBLE_API nimble_status_t nimble_status_annotate(nimble_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
NIMBLE_API nimble_status_t nimble_status_annotatev(nimble_status_t status, const char *fmt, va_list ap);

/* The code; NIMBLE_OK for nimble_ok(). */
NIMBLE_API nimble_status_code_t nimble_status_code(nimble_status_t status);

/* The message, borrowed from the status; "" for OK. */
NIMBLE_API const char *nimble_status_message(nimble_status_t status);

/* Where the status was first made (file, and *line when `line` is not
 * NULL), or NULL when it was made without a location (builds with NDEBUG,
 * the out-of-memory status, OK). Annotations keep it. */
NIMBLE_API const char *nimble_status_source(nimble_status_t status, int *line);

/* The subject a status already names, so that a layer that adds the same
 * context adds it once: a layer that names thing X in a message marks the
 * status with X; one that would prefix X checks first. Returns the status
 * (the static out-of-memory status is never marked). The subject is only
 * compared, never dereferenced. */
NIMBLE_API nimble_status_t nimble_status_set_subject(nimble_status_t status, const void *subject);
/* The subject marked last, or NULL. */
NIMBLE_API const void *nimble_status_subject(nimble_status_t status);

/* A short stable name for a code, e.g. "INVALID_ARGUMENT". */
NIMBLE_API const char *nimble_status_code_name(nimble_status_code_t code);

/* Frees a status; nimble_ok() is fine. */
NIMBLE_API void nimble_status_free(nimble_status_t status);

/* Returns the code and frees the status: for callers that only branch. */
NIMBLE_API nimble_status_code_t nimble_status_consume(nimble_status_t status);

/* ---- the macros every component uses ---- */

/* Returns the status of `expr` when it failed. */
#define NIMBLE_RETURN_IF_ERROR(expr)          \
  do {                                        \
    nimble_status_t nimble_status_tmp_ = (expr); \
    if (nimble_status_tmp_) return nimble_status_tmp_; \
  } while (0)

/* Returns the annotated status on failure; the format names the context. */
#define NIMBLE_RETURN_IF_ERROR_CTX(expr, ...)  \
  do {                                         \
    nimble_status_t nimble_status_tmp_ = (expr);  \
    if (nimble_status_tmp_)                    \
      return nimble_status_annotate(nimble_status_tmp_, __VA_ARGS__); \
  } while (0)

/* The status of a failed allocation: RESOURCE_EXHAUSTED "out of memory",
 * or "WHAT: out of memory" naming what was being done. */
#define NIMBLE_OOM() nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory")
#define NIMBLE_OOM_IN(what) nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", (what))

/* Statuses made in builds without NDEBUG record their source location. */
#if !defined(NDEBUG) && !defined(NIMBLE_STATUS_NO_LOCATIONS)
#define nimble_status_make(...) nimble_status_make_at(__FILE__, __LINE__, __VA_ARGS__)
#define nimble_status_makev(...) nimble_status_makev_at(__FILE__, __LINE__, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_STATUS_H */
