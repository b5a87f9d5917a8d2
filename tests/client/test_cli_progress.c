/* The progress reporter, rendered into a memory stream and compared with
 * the bytes written out by hand: live TTY lines (cursor movement), plain
 * log lines and JSON lines. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "nimble/cli_progress.h"
#include "nimble_test.h"

/* A memory stream; the reporter keeps the FILE*, so it stays open and
 * `taken` marks how much the test has looked at. */
typedef struct mem_out {
  FILE *f;
  char *buf;
  size_t len;
  size_t taken;
} mem_out;

static void mem_open(mem_out *m) {
  m->buf = NULL;
  m->len = 0;
  m->taken = 0;
  m->f = open_memstream(&m->buf, &m->len);
  ck_assert(m->f != NULL);
}

/* What was written since the last call (caller frees). */
static char *mem_take(mem_out *m) {
  fflush(m->f);
  char *copy = strndup(m->buf ? m->buf + m->taken : "", m->len - m->taken);
  m->taken = m->len;
  return copy;
}

static void mem_close(mem_out *m) {
  fclose(m->f);
  free(m->buf);
}

#define ASSERT_TAKEN(m, want)          \
  do {                                 \
    char *got_ = mem_take(m);          \
    ck_assert_str_eq(got_, (want));    \
    free(got_);                        \
  } while (0)

START_TEST(test_plain_mode_prints_a_line_per_state_change) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_PLAIN, 80, &p));
  size_t x86, arm;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86", &x86));
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "aarch64", &arm));
  ASSERT_TAKEN(&m, "x86: pending\naarch64: pending\n");
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, x86, "compiling", 10, NULL));
  ASSERT_TAKEN(&m, "x86: compiling 10%\n");
  /* Only the percentage moved: a log does not repeat the line. */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, x86, "compiling", 60, NULL));
  ASSERT_TAKEN(&m, "");
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, arm, "failed", -1, "worker lost"));
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, x86, "done", 100, "sha256:ab12"));
  ASSERT_TAKEN(&m, "aarch64: failed - worker lost\nx86: done 100% - sha256:ab12\n");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_tty_mode_redraws_each_target_on_its_own_line) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_TTY, 80, &p));
  size_t a, b, c;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86", &a));
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "aarch64", &b));
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "cuda", &c));
  ASSERT_TAKEN(&m, "x86: pending\naarch64: pending\ncuda: pending\n");
  /* The cursor rests below the last line: x86 is 3 lines up. */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 40, NULL));
  ASSERT_TAKEN(&m, "\033[3A\r\033[Kx86: compiling 40%\r\033[3B");
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, c, "queued", -1, NULL));
  ASSERT_TAKEN(&m, "\033[1A\r\033[Kcuda: queued\r\033[1B");
  /* On a terminal the percentage is live; an identical update draws nothing. */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 41, NULL));
  ASSERT_TAKEN(&m, "\033[3A\r\033[Kx86: compiling 41%\r\033[3B");
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 41, NULL));
  ASSERT_TAKEN(&m, "");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_tty_lines_are_cut_to_the_width_minus_one) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_TTY, 24, &p));
  size_t a;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86", &a));
  free(mem_take(&m));
  /* 23 columns: 20 of "x86: compiling 40% - a long detail" and "...". */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 40, "a long detail"));
  ASSERT_TAKEN(&m, "\033[1A\r\033[Kx86: compiling 40% -...\r\033[1B");
  /* Multi-byte characters count once each and are never split. */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                                "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                                "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                                                "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
                                          -1, NULL));
  /* "x86: " (5) + 15 e-acutes + "..." = 23 columns. */
  ASSERT_TAKEN(&m, "\033[1A\r\033[Kx86: \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                   "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                   "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...\r\033[1B");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_control_characters_cannot_break_the_display) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_PLAIN, 80, &p));
  size_t a;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86\r", &a));
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "failed", -1, "bad\nline\033[2J"));
  ASSERT_TAKEN(&m, "x86 : pending\nx86 : failed - bad line [2J\n");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_json_mode_prints_one_object_per_update) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_JSON, 0, &p));
  size_t a, b;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86", &a));
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "cuda:arch=sm_80", &b));
  ASSERT_TAKEN(&m, "");
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 40, NULL));
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "compiling", 55, NULL));
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, b, "done", -1, "sha256:\"q\""));
  char *out = mem_take(&m);
  ck_assert_str_eq(out,
                   "{\"target\":\"x86\",\"state\":\"compiling\",\"percent\":40}\n"
                   "{\"target\":\"x86\",\"state\":\"compiling\",\"percent\":55}\n"
                   "{\"target\":\"cuda:arch=sm_80\",\"state\":\"done\",\"detail\":"
                   "\"sha256:\\\"q\\\"\"}\n");
  /* And each line parses on its own. */
  char *save = NULL;
  int lines = 0;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    ck_assert_msg(o != NULL, "line %d: %s", lines, err.text);
    ck_assert(json_is_string(json_object_get(o, "target")));
    json_decref(o);
    lines++;
  }
  ck_assert_int_eq(lines, 3);
  free(out);
  /* A detail that is not UTF-8 (a server's Latin-1 message) still makes a
   * valid line, with U+FFFD for the bad byte. */
  NIMBLE_ASSERT_OK(nimble_cli_progress_update(p, a, "failed", -1, "d\xe9j\xc3\xa0"));
  ASSERT_TAKEN(&m,
               "{\"target\":\"x86\",\"state\":\"failed\",\"detail\":\"d\xef\xbf\xbdj\xc3\xa0\"}\n");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_bad_updates_are_errors_naming_the_target) {
  mem_out m;
  mem_open(&m);
  nimble_cli_progress *p;
  NIMBLE_ASSERT_OK(nimble_cli_progress_create(m.f, NIMBLE_CLI_PROGRESS_PLAIN, 80, &p));
  size_t a;
  NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "x86", &a));
  NIMBLE_ASSERT_ERROR(nimble_cli_progress_update(p, 5, "done", -1, NULL), NIMBLE_OUT_OF_RANGE,
                      "no target #5 (1 known)");
  NIMBLE_ASSERT_ERROR(nimble_cli_progress_update(p, a, "done", 101, NULL), NIMBLE_OUT_OF_RANGE,
                      "target 'x86': percent 101 outside 0..100");
  NIMBLE_ASSERT_ERROR(nimble_cli_progress_update(p, a, "", -1, NULL), NIMBLE_INVALID_ARGUMENT,
                      "target 'x86': empty state");
  NIMBLE_ASSERT_ERROR(nimble_cli_progress_add(p, "", &a), NIMBLE_INVALID_ARGUMENT,
                      "empty target name");
  for (int i = 1; i < NIMBLE_CLI_PROGRESS_MAX_TARGETS; i++)
    NIMBLE_ASSERT_OK(nimble_cli_progress_add(p, "t", &a));
  NIMBLE_ASSERT_ERROR(nimble_cli_progress_add(p, "one-too-many", &a), NIMBLE_RESOURCE_EXHAUSTED,
                      "more than 64 targets");
  nimble_cli_progress_destroy(p);
  mem_close(&m);
}
END_TEST

START_TEST(test_mode_follows_the_stream_and_the_json_flag) {
  mem_out m;
  mem_open(&m);
  ck_assert_int_eq(nimble_cli_progress_mode_for(m.f, true), NIMBLE_CLI_PROGRESS_JSON);
  ck_assert_int_eq(nimble_cli_progress_mode_for(m.f, false), NIMBLE_CLI_PROGRESS_PLAIN);
  mem_close(&m);

  /* A pseudo-terminal is a terminal, with the width we give it. */
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ck_assert(master >= 0);
  ck_assert(grantpt(master) == 0 && unlockpt(master) == 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ck_assert(slave >= 0);
  struct winsize ws = {.ws_row = 24, .ws_col = 57};
  ck_assert(ioctl(slave, TIOCSWINSZ, &ws) == 0);
  FILE *tty = fdopen(slave, "w");
  ck_assert(tty != NULL);
  setenv("TERM", "xterm", 1);
  ck_assert_int_eq(nimble_cli_progress_mode_for(tty, false), NIMBLE_CLI_PROGRESS_TTY);
  ck_assert_int_eq(nimble_cli_progress_mode_for(tty, true), NIMBLE_CLI_PROGRESS_JSON);
  ck_assert_int_eq(nimble_cli_progress_terminal_width(tty), 57);
  setenv("TERM", "dumb", 1);
  ck_assert_int_eq(nimble_cli_progress_mode_for(tty, false), NIMBLE_CLI_PROGRESS_PLAIN);
  fclose(tty);
  close(master);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli_progress");
  TCase *tc = tcase_create("progress");
  tcase_add_test(tc, test_plain_mode_prints_a_line_per_state_change);
  tcase_add_test(tc, test_tty_mode_redraws_each_target_on_its_own_line);
  tcase_add_test(tc, test_tty_lines_are_cut_to_the_width_minus_one);
  tcase_add_test(tc, test_control_characters_cannot_break_the_display);
  tcase_add_test(tc, test_json_mode_prints_one_object_per_update);
  tcase_add_test(tc, test_bad_updates_are_errors_naming_the_target);
  tcase_add_test(tc, test_mode_follows_the_stream_and_the_json_flag);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
