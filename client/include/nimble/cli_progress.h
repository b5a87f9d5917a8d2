/* Progress reporting for the client's farm commands (submit, status, fetch):
 * one line per target, rendered for whoever reads it.
 *
 * - TTY: one live line per target. Lines are drawn once, in the order the
 *   targets were added; an update redraws its own line in place (cursor up,
 *   carriage return, clear to end of line, cursor back down), truncated to
 *   the terminal width so a line never wraps and breaks the bookkeeping.
 * - PLAIN (a pipe or a log file): one line per change of a target's state
 *   or detail; percentage-only updates are not repeated, so a log stays
 *   short.
 * - JSON (--json): one JSON object per update and per line, for scripts:
 *   {"target":"x86","state":"compiling","percent":40,"detail":"..."};
 *   percent and detail appear only when known.
 *
 *   nimble_cli_progress *p;
 *   NIMBLE_RETURN_IF_ERROR(nimble_cli_progress_create(stderr,
 *       nimble_cli_progress_mode_for(stderr, json), 0, &p));
 *   size_t x86;
 *   nimble_cli_progress_add(p, "x86", &x86);
 *   nimble_cli_progress_update(p, x86, "compiling", 40, NULL);
 *   nimble_cli_progress_destroy(p);
 *
 * The reporter writes to a FILE* it borrows (tests render into a memory
 * stream); it never closes it.
 */
#ifndef NIMBLE_CLI_PROGRESS_H
#define NIMBLE_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nimble_cli_progress_mode {
  NIMBLE_CLI_PROGRESS_TTY = 0,
  NIMBLE_CLI_PROGRESS_PLAIN,
  NIMBLE_CLI_PROGRESS_JSON,
} nimble_cli_progress_mode_t;

/* The most targets one reporter tracks, and the longest name. */
#define NIMBLE_CLI_PROGRESS_MAX_TARGETS 64
#define NIMBLE_CLI_PROGRESS_MAX_NAME 128

typedef struct nimble_cli_progress nimble_cli_progress;

/* JSON when `json`, else TTY when `f` is a terminal (and TERM is not
 * "dumb"), else PLAIN. */
nimble_cli_progress_mode_t nimble_cli_progress_mode_for(FILE *f, bool json);

/* The terminal width of `f` (from the tty, else $COLUMNS), 80 when unknown. */
int nimble_cli_progress_terminal_width(FILE *f);

/* Creates a reporter writing to `out` (borrowed; must outlive it). `width`
 * bounds TTY lines; 0 asks the terminal. Caller frees with _destroy. */
nimble_status_t nimble_cli_progress_create(FILE *out, nimble_cli_progress_mode_t mode, int width,
                                       nimble_cli_progress **result);
void nimble_cli_progress_destroy(nimble_cli_progress *p);

/* Adds a target (state "pending") and draws its line in TTY mode; *index
 * names it in updates. Names are copied. */
nimble_status_t nimble_cli_progress_add(nimble_cli_progress *p, const char *target, size_t *index);

/* Reports a target's state ("queued", "compiling", "done", "failed", ...).
 * percent is 0..100, or -1 when unknown; detail (may be NULL) is a short
 * free text such as a digest or an error message. Strings are copied. */
nimble_status_t nimble_cli_progress_update(nimble_cli_progress *p, size_t index, const char *state,
                                       int percent, const char *detail);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_CLI_PROGRESS_H */
