/* Progress lines per target: live on a terminal, plain in logs, JSON for
 * scripts. */
#include "nimble/cli_progress.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "json_text.h"

typedef struct target_state {
  char *name;
  char *state;
  char *detail;
  int percent;
} target_state;

struct nimble_cli_progress {
  FILE *out;
  nimble_cli_progress_mode_t mode;
  int width;
  size_t count;
  target_state targets[NIMBLE_CLI_PROGRESS_MAX_TARGETS];
};

nimble_cli_progress_mode_t nimble_cli_progress_mode_for(FILE *f, bool json) {
  if (json) return NIMBLE_CLI_PROGRESS_JSON;
  const char *term = getenv("TERM");
  if (isatty(fileno(f)) && !(term && strcmp(term, "dumb") == 0)) return NIMBLE_CLI_PROGRESS_TTY;
  return NIMBLE_CLI_PROGRESS_PLAIN;
}

int nimble_cli_progress_terminal_width(FILE *f) {
  struct winsize ws;
  if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  const char *cols = getenv("COLUMNS");
  if (cols) {
    char *end;
    long v = strtol(cols, &end, 10);
    if (*end == '\0' && v > 0 && v < 10000) return (int)v;
  }
  return 80;
}

nimble_status_t nimble_cli_progress_create(FILE *out, nimble_cli_progress_mode_t mode, int width,
                                       nimble_cli_progress **result) {
  *result = NULL;
  if (!out || mode > NIMBLE_CLI_PROGRESS_JSON)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "progress: no output or bad mode");
  nimble_cli_progress *p = calloc(1, sizeof *p);
  if (!p) return NIMBLE_OOM();
  p->out = out;
  p->mode = mode;
  p->width = width > 0 ? width : nimble_cli_progress_terminal_width(out);
  /* Below this a line cannot hold a name and a state; keep it usable. */
  if (p->width < 20) p->width = 20;
  *result = p;
  return nimble_ok();
}

void nimble_cli_progress_destroy(nimble_cli_progress *p) {
  if (!p) return;
  for (size_t i = 0; i < p->count; i++) {
    free(p->targets[i].name);
    free(p->targets[i].state);
    free(p->targets[i].detail);
  }
  free(p);
}

/* A copy with control characters replaced by spaces: a newline or an
 * escape sequence inside an error message would break the line
 * bookkeeping of the live display and forge output in a log. */
static char *sanitized_copy(const char *s) {
  if (!s) return NULL;
  char *c = strdup(s);
  if (!c) return NULL;
  for (unsigned char *q = (unsigned char *)c; *q; q++)
    if (*q < 0x20 || *q == 0x7f) *q = ' ';
  return c;
}

/* "x86: compiling 40% - detail" into a malloc'ed string, truncated to
 * `max_cols` columns (counting UTF-8 code points) when max_cols > 0. */
static char *render_line(const target_state *t, int max_cols) {
  char pct[16] = "";
  if (t->percent >= 0) snprintf(pct, sizeof pct, " %d%%", t->percent);
  char *line;
  if (asprintf(&line, "%s: %s%s%s%s", t->name, t->state, pct, t->detail ? " - " : "",
               t->detail ? t->detail : "") < 0)
    return NULL;
  if (max_cols > 0) {
    int cols = 0;
    for (size_t i = 0; line[i]; i++) {
      if (((unsigned char)line[i] & 0xC0) == 0x80) continue; /* continuation byte */
      if (cols == max_cols) {
        /* Cut before this code point; mark the cut when there is room. */
        size_t cut = i;
        if (max_cols >= 4) {
          /* Replace the last three code points with "...". */
          int back = 3;
          while (back > 0 && cut > 0) {
            cut--;
            while (cut > 0 && ((unsigned char)line[cut] & 0xC0) == 0x80) cut--;
            back--;
          }
          memcpy(line + cut, "...", 4);
        } else {
          line[cut] = '\0';
        }
        break;
      }
      cols++;
    }
  }
  return line;
}

static nimble_status_t write_json(nimble_cli_progress *p, const target_state *t) {
  json_t *o = json_object();
  if (!o) return NIMBLE_OOM();
  int bad = json_object_set_new(o, "target", nimble_cli_json_text(t->name));
  bad |= json_object_set_new(o, "state", nimble_cli_json_text(t->state));
  if (t->percent >= 0) bad |= json_object_set_new(o, "percent", json_integer(t->percent));
  if (t->detail) bad |= json_object_set_new(o, "detail", nimble_cli_json_text(t->detail));
  char *text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!text)
    return NIMBLE_OOM();
  fprintf(p->out, "%s\n", text);
  free(text);
  return nimble_ok();
}

/* Draws target i: a new line below the others (`fresh`) or in place. */
static nimble_status_t draw(nimble_cli_progress *p, size_t i, bool fresh) {
  const target_state *t = &p->targets[i];
  if (p->mode == NIMBLE_CLI_PROGRESS_JSON) {
    NIMBLE_RETURN_IF_ERROR(write_json(p, t));
  } else {
    /* One column is kept free: writing into the last column makes some
     * terminals wrap, which would shift every line below. */
    char *line = render_line(t, p->mode == NIMBLE_CLI_PROGRESS_TTY ? p->width - 1 : 0);
    if (!line) return NIMBLE_OOM();
    if (p->mode == NIMBLE_CLI_PROGRESS_TTY && !fresh) {
      size_t up = p->count - i;
      fprintf(p->out, "\033[%zuA\r\033[K%s\r\033[%zuB", up, line, up);
    } else {
      fprintf(p->out, "%s\n", line);
    }
    free(line);
  }
  fflush(p->out);
  return nimble_ok();
}

static bool same_str(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

nimble_status_t nimble_cli_progress_add(nimble_cli_progress *p, const char *target, size_t *index) {
  if (!target || !target[0])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "progress: empty target name");
  if (strlen(target) > NIMBLE_CLI_PROGRESS_MAX_NAME)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "progress: target name longer than %d bytes",
                              NIMBLE_CLI_PROGRESS_MAX_NAME);
  if (p->count == NIMBLE_CLI_PROGRESS_MAX_TARGETS)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "progress: more than %d targets",
                              NIMBLE_CLI_PROGRESS_MAX_TARGETS);
  target_state *t = &p->targets[p->count];
  t->name = sanitized_copy(target);
  t->state = strdup("pending");
  t->detail = NULL;
  t->percent = -1;
  if (!t->name || !t->state) {
    free(t->name);
    free(t->state);
    return NIMBLE_OOM();
  }
  *index = p->count++;
  /* JSON readers learn of a target from its first update; a terminal and
   * a log show every target from the start. */
  if (p->mode == NIMBLE_CLI_PROGRESS_JSON) return nimble_ok();
  return draw(p, *index, true);
}

nimble_status_t nimble_cli_progress_update(nimble_cli_progress *p, size_t index, const char *state,
                                       int percent, const char *detail) {
  if (index >= p->count)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "progress: no target #%zu (%zu known)",
                              index, p->count);
  if (!state || !state[0])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "progress for target '%s': empty state",
                              p->targets[index].name);
  if (percent < -1 || percent > 100)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE,
                              "progress for target '%s': percent %d outside 0..100",
                              p->targets[index].name, percent);
  target_state *t = &p->targets[index];
  char *new_state = sanitized_copy(state);
  char *new_detail = detail ? sanitized_copy(detail) : NULL;
  if (!new_state || (detail && !new_detail)) {
    free(new_state);
    free(new_detail);
    return NIMBLE_OOM();
  }
  bool changed = !same_str(t->state, new_state) || !same_str(t->detail, new_detail);
  bool percent_changed = t->percent != percent;
  free(t->state);
  free(t->detail);
  t->state = new_state;
  t->detail = new_detail;
  t->percent = percent;
  if (p->mode == NIMBLE_CLI_PROGRESS_PLAIN && !changed) return nimble_ok();
  if (p->mode != NIMBLE_CLI_PROGRESS_PLAIN && !changed && !percent_changed) return nimble_ok();
  return draw(p, index, false);
}
