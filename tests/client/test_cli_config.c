/* The configuration library on its own: parsing, precedence between
 * sources, the file's location and token masking. (test_cli_commands
 * checks the same through the binary.) */
#include <stdlib.h>
#include <string.h>

#include "nimble/cli_config.h"
#include "nimble_test.h"

static nimble_status_t parse(nimble_cli_config *cfg, const char *text) {
  return nimble_cli_config_parse(cfg, "cfg", text, strlen(text));
}

START_TEST(test_defaults_apply_until_something_is_set) {
  nimble_cli_config cfg;
  nimble_cli_config_init(&cfg);
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_SCHEDULER), "tcp://127.0.0.1:5555");
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_STORE), "http://127.0.0.1:5000");
  ck_assert_ptr_null(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_TOKEN));
  ck_assert_int_eq(cfg.settings[NIMBLE_CLI_KEY_STORE].source, NIMBLE_CLI_SRC_DEFAULT);
  nimble_cli_config_deinit(&cfg);
}
END_TEST

START_TEST(test_a_weaker_source_never_replaces_a_stronger_one) {
  nimble_cli_config cfg;
  nimble_cli_config_init(&cfg);
  /* Flags are applied first in main(); the file and environment later. */
  NIMBLE_ASSERT_OK(nimble_cli_config_set(&cfg, NIMBLE_CLI_KEY_STORE, "http://flag:1",
                                         NIMBLE_CLI_SRC_FLAG, "--store"));
  NIMBLE_ASSERT_OK(nimble_cli_config_set(&cfg, NIMBLE_CLI_KEY_STORE, "http://env:2",
                                         NIMBLE_CLI_SRC_ENV, "NIMBLE_STORE"));
  NIMBLE_ASSERT_OK(parse(&cfg, "store = http://file:3\n"));
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_STORE), "http://flag:1");
  ck_assert_str_eq(cfg.settings[NIMBLE_CLI_KEY_STORE].origin, "--store");
  /* The environment beats the file whatever the order. */
  NIMBLE_ASSERT_OK(nimble_cli_config_set(&cfg, NIMBLE_CLI_KEY_SCHEDULER, "tcp://env:2",
                                         NIMBLE_CLI_SRC_ENV, "NIMBLE_SCHEDULER"));
  NIMBLE_ASSERT_OK(parse(&cfg, "scheduler = tcp://file:3\n"));
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_SCHEDULER), "tcp://env:2");
  nimble_cli_config_deinit(&cfg);
}
END_TEST

START_TEST(test_parser_takes_crlf_comments_and_quotes) {
  nimble_cli_config cfg;
  nimble_cli_config_init(&cfg);
  NIMBLE_ASSERT_OK(parse(&cfg,
                         "# comment\r\n"
                         "\t store\t=\thttp://a:1 # trailing\r\n"
                         "token = \"tok#en-value\"\r\n"
                         "scheduler = tcp://h#x:1"));  /* no final newline; '#' inside */
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_STORE), "http://a:1");
  ck_assert_str_eq(cfg.settings[NIMBLE_CLI_KEY_STORE].origin, "cfg:2");
  ck_assert_int_eq(cfg.settings[NIMBLE_CLI_KEY_STORE].source, NIMBLE_CLI_SRC_FILE);
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_SCHEDULER), "tcp://h#x:1");
  ck_assert_str_eq(cfg.settings[NIMBLE_CLI_KEY_SCHEDULER].origin, "cfg:4");
  ck_assert_str_eq(nimble_cli_config_get(&cfg, NIMBLE_CLI_KEY_TOKEN), "tok#en-value");
  nimble_cli_config_deinit(&cfg);
}
END_TEST

START_TEST(test_quoted_token_with_spaces_is_still_rejected) {
  /* Quotes keep '#', but a token is sent in an HTTP header: no spaces. */
  nimble_cli_config cfg;
  nimble_cli_config_init(&cfg);
  NIMBLE_ASSERT_ERROR(parse(&cfg, "token = \"  keep#this  \"\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:1: 'token' must not contain spaces");
  nimble_cli_config_deinit(&cfg);
}
END_TEST

START_TEST(test_parse_errors_name_the_line) {
  nimble_cli_config cfg;
  nimble_cli_config_init(&cfg);
  NIMBLE_ASSERT_ERROR(parse(&cfg, "\n\n\nstores = http://x:1\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:4: unknown key 'stores'");
  NIMBLE_ASSERT_ERROR(parse(&cfg, "store http://x:1\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:1: expected 'key = value', found 'store http://x:1'");
  NIMBLE_ASSERT_ERROR(parse(&cfg, "store = https://\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:1: store must be an http:// or https:// URL, got 'https://'");
  NIMBLE_ASSERT_ERROR(parse(&cfg, "scheduler = tcp://\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:1: scheduler must be a tcp://HOST:PORT or ipc://PATH endpoint");
  NIMBLE_ASSERT_ERROR(parse(&cfg, "token = a\x01z\n"), NIMBLE_INVALID_ARGUMENT,
                      "cfg:1: 'token' must not contain spaces or control characters");
  /* Nothing of the failed parses stuck. */
  ck_assert_int_eq(cfg.settings[NIMBLE_CLI_KEY_STORE].source, NIMBLE_CLI_SRC_DEFAULT);
  nimble_cli_config_deinit(&cfg);
}
END_TEST

START_TEST(test_locate_prefers_flag_then_env_then_xdg_then_home) {
  char *path;
  bool must;
  setenv("HOME", "/h", 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("NIMBLE_CONFIG");
  NIMBLE_ASSERT_OK(nimble_cli_config_locate(NULL, &path, &must));
  ck_assert_str_eq(path, "/h/.config/nimble/config");
  ck_assert(!must);
  free(path);
  /* A relative XDG_CONFIG_HOME is invalid per the XDG spec: ignored. */
  setenv("XDG_CONFIG_HOME", "rel", 1);
  NIMBLE_ASSERT_OK(nimble_cli_config_locate(NULL, &path, &must));
  ck_assert_str_eq(path, "/h/.config/nimble/config");
  free(path);
  setenv("XDG_CONFIG_HOME", "/x", 1);
  NIMBLE_ASSERT_OK(nimble_cli_config_locate(NULL, &path, &must));
  ck_assert_str_eq(path, "/x/nimble/config");
  ck_assert(!must);
  free(path);
  setenv("NIMBLE_CONFIG", "/n.conf", 1);
  NIMBLE_ASSERT_OK(nimble_cli_config_locate(NULL, &path, &must));
  ck_assert_str_eq(path, "/n.conf");
  ck_assert(must);
  free(path);
  NIMBLE_ASSERT_OK(nimble_cli_config_locate("/flag.conf", &path, &must));
  ck_assert_str_eq(path, "/flag.conf");
  ck_assert(must);
  free(path);
  /* Nowhere to look: no file, no error. */
  unsetenv("NIMBLE_CONFIG");
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("HOME");
  NIMBLE_ASSERT_OK(nimble_cli_config_locate(NULL, &path, &must));
  ck_assert_ptr_null(path);
}
END_TEST

START_TEST(test_token_mask_shows_at_most_the_last_four_characters) {
  char buf[64];
  ck_assert_str_eq(nimble_cli_config_mask_token(NULL, buf, sizeof buf), "(unset)");
  ck_assert_str_eq(nimble_cli_config_mask_token("short", buf, sizeof buf), "****");
  ck_assert_str_eq(nimble_cli_config_mask_token("fifteen-chars-x", buf, sizeof buf), "****");
  ck_assert_str_eq(nimble_cli_config_mask_token("sixteen-chars-xy", buf, sizeof buf), "****s-xy");
  /* A tiny buffer truncates, still NUL-terminated. */
  ck_assert_str_eq(nimble_cli_config_mask_token("sixteen-chars-xy", buf, 3), "**");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli_config");
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, test_defaults_apply_until_something_is_set);
  tcase_add_test(tc, test_a_weaker_source_never_replaces_a_stronger_one);
  tcase_add_test(tc, test_parser_takes_crlf_comments_and_quotes);
  tcase_add_test(tc, test_quoted_token_with_spaces_is_still_rejected);
  tcase_add_test(tc, test_parse_errors_name_the_line);
  tcase_add_test(tc, test_locate_prefers_flag_then_env_then_xdg_then_home);
  tcase_add_test(tc, test_token_mask_shows_at_most_the_last_four_characters);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
