/* nimble-store as a process: command line, ready file, SIGTERM, and what a
 * SIGKILL in the middle of an upload leaves behind. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nimble_test.h"
#include "store_harness.h"

#define HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

/* Runs nimble-store with `args` (a shell fragment), capturing output. */
static int run_cli(const char *args, char *out, size_t out_size) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", store_bin_path(), args);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(out, 1, out_size - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(test_help_names_every_option_and_version_prints_the_version) {
  char out[8192];
  ck_assert_int_eq(run_cli("--help", out, sizeof out), 0);
  const char *options[] = {"--listen",         "--root",          "--token-file",
                           "--auth-reads",     "--max-blob-size", "--max-connections",
                           "--upload-timeout", "--ready-file",    "--quiet",
                           "--version",        "SIGTERM"};
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
    ck_assert_msg(strstr(out, options[i]), "--help does not mention %s", options[i]);
  ck_assert_int_eq(run_cli("--version", out, sizeof out), 0);
  ck_assert_str_eq(out, "nimble-store " NIMBLE_VERSION_STRING "\n");
}
END_TEST

START_TEST(test_bad_command_lines_fail_with_a_message) {
  /* A root of this test's own (not a fixed /tmp path another process may
   * have made a file), so each refusal is the one the line is about. */
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  char out[8192], args[1200];
  ck_assert_int_eq(run_cli("--frobnicate", out, sizeof out), 2);
  ck_assert(strstr(out, "unknown option '--frobnicate'"));
  ck_assert_int_eq(run_cli("--root /tmp", out, sizeof out), 2);
  ck_assert(strstr(out, "--listen and --root are required"));
  snprintf(args, sizeof args, "--listen 127.0.0.1:0 --root %s --max-blob-size 12Q", p.root);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 2);
  ck_assert(strstr(out, "--max-blob-size '12Q'"));
  snprintf(args, sizeof args, "--listen nohost --root %s", p.root);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "expected HOST:PORT"), "%s", out);
  snprintf(args, sizeof args, "--listen 127.0.0.1:99999 --root %s", p.root);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "above 65535"), "%s", out);
  snprintf(args, sizeof args, "--listen 127.0.0.1:0 --root %s --token-file /nonexistent/t", p.root);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "cannot read token file /nonexistent/t"), "%s", out);
  snprintf(args, sizeof args, "--listen 127.0.0.1:0 --root %s --auth-reads", p.root);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "--auth-reads needs --token-file"), "%s", out);
  /* A root that cannot be a directory. */
  ck_assert_int_eq(run_cli("--listen 127.0.0.1:0 --root /dev/null/store", out, sizeof out), 1);
  ck_assert_msg(
      strstr(out, "opening store at /dev/null/store: /dev/null exists and is not a directory"),
      "%s", out);
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_empty_token_file_refuses_to_start) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  char path[400], args[1200], out[4096];
  snprintf(path, sizeof path, "%s/tokens", p.dir);
  FILE *f = fopen(path, "w");
  fputs("# nobody\n", f);
  fclose(f);
  snprintf(args, sizeof args, "--listen 127.0.0.1:0 --root %s --token-file %s", p.root, path);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "holds no token"), "%s", out);
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_sigterm_exits_zero_and_keeps_what_was_stored) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  char u[300];
  snprintf(u, sizeof u, "%s/v2/k/blobs/uploads/?digest=" HELLO, p.base);
  http_result r;
  http_do("POST", u, STORE_TEST_TOKEN, "hello", 5, NULL, &r);
  ck_assert_int_eq(r.status, 201);
  http_result_free(&r);
  /* A second server cannot take the same address, and says so. */
  char args[600], out[4096];
  snprintf(args, sizeof args, "--listen %s --root %s/other", p.addr, p.dir);
  ck_assert_int_eq(run_cli(args, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "cannot listen on") && strstr(out, "in use"), "%s", out);
  int status = store_proc_stop(&p, SIGTERM);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "wait status %d", status);
  /* Restarted on the same root, the blob is still there. */
  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  snprintf(u, sizeof u, "%s/v2/k/blobs/" HELLO, p.base);
  http_do("GET", u, NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.body, "hello");
  http_result_free(&r);
  status = store_proc_stop(&p, SIGINT);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "SIGINT: wait status %d", status);
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_sigterm_during_an_upload_exits_zero_and_stores_nothing) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  int fd = raw_connect(p.addr);
  ck_assert_int_ge(fd, 0);
  char req[512];
  int n = snprintf(req, sizeof req,
                   "POST /v2/k/blobs/uploads/?digest=" HELLO
                   " HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer " STORE_TEST_TOKEN
                   "\r\nContent-Length: 1000000\r\n\r\nhel"); /* streamed: large */
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  char uploads[400], blobs[400];
  snprintf(uploads, sizeof uploads, "%s/uploads", p.root);
  snprintf(blobs, sizeof blobs, "%s/blobs", p.root);
  ck_assert(wait_file_count(uploads, 1, 5000));
  int status = store_proc_stop(&p, SIGTERM);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "wait status %d", status);
  close(fd);
  ck_assert_int_eq(count_files(blobs), 0);
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_sigkill_mid_upload_then_restart_leaves_nothing_visible) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  /* A chunked session with bytes in it, and a monolithic upload cut off
   * mid-body, when the server dies. */
  char u[300];
  snprintf(u, sizeof u, "%s/v2/k/blobs/uploads/", p.base);
  http_result r;
  http_do("POST", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  char *loc = http_header(&r, "Location");
  http_result_free(&r);
  snprintf(u, sizeof u, "%s%s", p.base, loc);
  http_do("PATCH", u, STORE_TEST_TOKEN, "hel", 3, NULL, &r);
  ck_assert_int_eq(r.status, 202);
  http_result_free(&r);
  int fd = raw_connect(p.addr);
  char req[512];
  int n = snprintf(req, sizeof req,
                   "POST /v2/k/blobs/uploads/?digest=" HELLO
                   " HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer " STORE_TEST_TOKEN
                   "\r\nContent-Length: 1000000\r\n\r\nhell"); /* streamed: large */
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  char uploads[400], blobs[400];
  snprintf(uploads, sizeof uploads, "%s/uploads", p.root);
  snprintf(blobs, sizeof blobs, "%s/blobs", p.root);
  ck_assert(wait_file_count(uploads, 2, 5000));
  store_proc_stop(&p, SIGKILL);
  close(fd);
  ck_assert_int_eq(count_files(blobs), 0);

  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  ck_assert_int_eq(count_files(uploads), 0); /* start-up cleaned the temporaries */
  ck_assert_int_eq(count_files(blobs), 0);
  snprintf(u, sizeof u, "%s/v2/k/blobs/" HELLO, p.base);
  http_do("HEAD", u, NULL, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 404);
  http_result_free(&r);
  snprintf(u, sizeof u, "%s%s", p.base, loc);
  http_do("GET", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 404);
  http_result_free(&r);
  free(loc);
  int status = store_proc_stop(&p, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_request_log_has_method_path_status_bytes_and_time) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  ck_assert_int_eq(store_proc_start(&p, NULL), 0);
  char u[300];
  snprintf(u, sizeof u, "%s/v2/k/blobs/uploads/?digest=" HELLO, p.base);
  http_result r;
  http_do("POST", u, STORE_TEST_TOKEN, "hello", 5, NULL, &r);
  http_result_free(&r);
  store_proc_stop(&p, SIGTERM);
  char path[400], log[8192] = {0};
  snprintf(path, sizeof path, "%s/log", p.dir);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(log, 1, sizeof log - 1, f);
  log[n] = '\0';
  fclose(f);
  ck_assert_msg(strstr(log, "POST /v2/k/blobs/uploads/ 201 in=5 out=0 "), "%s", log);
  ck_assert(strstr(log, "ms\n"));
  store_dir_remove(&p);
}
END_TEST

START_TEST(test_idle_uploads_expire_after_the_upload_timeout) {
  store_proc p;
  ck_assert_int_eq(store_dir_create(&p), 0);
  const char *extra[] = {"--upload-timeout", "1", NULL};
  ck_assert_int_eq(store_proc_start(&p, extra), 0);
  char u[300];
  snprintf(u, sizeof u, "%s/v2/k/blobs/uploads/", p.base);
  http_result r;
  http_do("POST", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 202);
  char *loc = http_header(&r, "Location");
  http_result_free(&r);
  snprintf(u, sizeof u, "%s%s", p.base, loc);
  free(loc);
  char uploads[400];
  snprintf(uploads, sizeof uploads, "%s/uploads", p.root);
  ck_assert_int_eq(count_files(uploads), 1);
  ck_assert(wait_file_count(uploads, 0, 8000)); /* expiry runs every second */
  http_do("GET", u, STORE_TEST_TOKEN, NULL, 0, NULL, &r);
  ck_assert_int_eq(r.status, 404);
  http_result_free(&r);
  int status = store_proc_stop(&p, SIGTERM);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store_dir_remove(&p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_lifecycle");
  TCase *tc = tcase_create("process");
  tcase_add_test(tc, test_help_names_every_option_and_version_prints_the_version);
  tcase_add_test(tc, test_bad_command_lines_fail_with_a_message);
  tcase_add_test(tc, test_empty_token_file_refuses_to_start);
  tcase_add_test(tc, test_sigterm_exits_zero_and_keeps_what_was_stored);
  tcase_add_test(tc, test_sigterm_during_an_upload_exits_zero_and_stores_nothing);
  tcase_add_test(tc, test_sigkill_mid_upload_then_restart_leaves_nothing_visible);
  tcase_add_test(tc, test_request_log_has_method_path_status_bytes_and_time);
  tcase_add_test(tc, test_idle_uploads_expire_after_the_upload_timeout);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
