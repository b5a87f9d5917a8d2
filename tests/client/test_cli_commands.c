/* The `nimble` binary's command line: help, version, usage errors and exit
 * codes, and the configuration (defaults, file, environment, flags) as
 * `nimble config` reports it. Every case runs the real binary. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef NIMBLE_CLI_TEST_HAS_KEYS
#include <sodium.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "nimble_test.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

#define ASSERT_CONTAINS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in:\n%s", (needle), (hay))
#define ASSERT_LACKS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) == NULL, "'%s' unexpectedly in:\n%s", (needle), (hay))

/* The lines of the "Commands:" section of the main help, names only. */
static void command_names(const char *help, char *out, size_t size) {
  const char *p = strstr(help, "Commands:\n");
  ck_assert_msg(p != NULL, "no Commands: section in\n%s", help);
  p += strlen("Commands:\n");
  out[0] = '\0';
  while (strncmp(p, "  ", 2) == 0) {
    p += 2;
    size_t n = strcspn(p, " \n");
    strncat(out, p, n < size - strlen(out) - 2 ? n : 0);
    strcat(out, ",");
    p = strchr(p, '\n');
    ck_assert(p != NULL);
    p++;
  }
}

/* submit, status and fetch are in binaries built with the store client. */
#ifdef NIMBLE_CLI_TEST_HAS_FARM
#define FARM_COMMANDS "submit,status,fetch,profile,tune-records,"
#else
#define FARM_COMMANDS ""
#endif
/* compile is in binaries built with the compiler driver. */
#ifdef NIMBLE_CLI_TEST_HAS_COMPILE
#define COMPILE_COMMANDS "compile,"
#else
#define COMPILE_COMMANDS ""
#endif

/* run is in binaries built with the runtime's nimble-run. */
#ifdef NIMBLE_CLI_TEST_HAS_RUN
#define RUN_COMMANDS "run,"
#else
#define RUN_COMMANDS ""
#endif

/* keys is in binaries built with libsodium (protocol's nimble_sign). */
#ifdef NIMBLE_CLI_TEST_HAS_KEYS
#define KEYS_COMMANDS "keys,"
#else
#define KEYS_COMMANDS ""
#endif

START_TEST(test_help_lists_exactly_the_commands_that_exist) {
  cli_result r = cli_run(ARGS("--help"), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  char names[256];
  command_names(r.out, names, sizeof names);
  ck_assert_str_eq(names, "config,help,inspect," COMPILE_COMMANDS RUN_COMMANDS FARM_COMMANDS
                           KEYS_COMMANDS);
  ASSERT_CONTAINS(r.out, "Usage: nimble [OPTIONS] COMMAND");
  ASSERT_CONTAINS(r.out, "2 usage error");
  ck_assert_str_eq(r.err, "");
  cli_result_free(&r);

  /* `nimble help` and `-h` say the same. */
  cli_result h = cli_run(ARGS("help"), NULL);
  cli_result s = cli_run(ARGS("-h"), NULL);
  ck_assert_int_eq(h.exit_code, 0);
  ck_assert_int_eq(s.exit_code, 0);
  r = cli_run(ARGS("--help"), NULL);
  ck_assert_str_eq(h.out, r.out);
  ck_assert_str_eq(s.out, r.out);
  cli_result_free(&r);
  cli_result_free(&h);
  cli_result_free(&s);
}
END_TEST

START_TEST(test_help_for_a_command_matches_its_own_help_flag) {
  cli_result a = cli_run(ARGS("help", "inspect"), NULL);
  cli_result b = cli_run(ARGS("inspect", "--help"), NULL);
  ck_assert_int_eq(a.exit_code, 0);
  ck_assert_int_eq(b.exit_code, 0);
  ck_assert_str_eq(a.out, b.out);
  const char *usage = "Usage: nimble inspect [--json] [--constants] FILE\n";
  ck_assert(strncmp(a.out, usage, strlen(usage)) == 0);
  ASSERT_CONTAINS(a.out, "--json");
  cli_result_free(&a);
  cli_result_free(&b);

  cli_result c = cli_run(ARGS("help", "config"), NULL);
  ck_assert_int_eq(c.exit_code, 0);
  ck_assert(strncmp(c.out, "Usage: nimble config [--json]\n", 30) == 0);
  cli_result_free(&c);
}
END_TEST

START_TEST(test_help_for_an_unknown_command_is_a_usage_error) {
  cli_result r = cli_run(ARGS("help", "frobnicate"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble: unknown command 'frobnicate'");
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_no_command_is_a_usage_error_with_help_on_stderr) {
  cli_result r = cli_run(NULL, NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble: no command given");
  ASSERT_CONTAINS(r.err, "Commands:");
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_unknown_command_is_a_usage_error) {
  cli_result r = cli_run(ARGS("frobnicate", "model.onnx"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble: unknown command 'frobnicate'");
  ASSERT_CONTAINS(r.err, "Try 'nimble --help'.");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_unknown_options_are_usage_errors_naming_the_option) {
  cli_result r = cli_run(ARGS("--frobnicate", "config"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble: unknown option '--frobnicate'");
  cli_result_free(&r);

  r = cli_run(ARGS("inspect", "--frob", "x.nir"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble inspect: unknown option '--frob'");
  ASSERT_CONTAINS(r.err, "Usage: nimble inspect [--json] [--constants] FILE");
  cli_result_free(&r);

  r = cli_run(ARGS("config", "extra"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble config: unexpected argument 'extra'");
  cli_result_free(&r);

  r = cli_run(ARGS("inspect"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "nimble inspect: no model file given");
  cli_result_free(&r);

  r = cli_run(ARGS("inspect", "a.nir", "b.nir"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "expected one file, got 'a.nir' and 'b.nir'");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_double_dash_ends_the_options) {
  /* After "--", "--store" is a file name, not an option. */
  cli_result r = cli_run(ARGS("inspect", "--", "--store"), NULL);
  ck_assert_int_eq(r.exit_code, 3);
  ASSERT_CONTAINS(r.err, "nimble: cannot open --store: No such file or directory");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_option_without_its_value_is_a_usage_error) {
  cli_result r = cli_run(ARGS("config", "--store"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "option --store needs a value");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_malformed_flag_value_is_a_usage_error_naming_the_flag) {
  cli_result r = cli_run(ARGS("--store", "ftp://host", "config"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "--store: store must be an http:// or https:// URL, got 'ftp://host'");
  cli_result_free(&r);

  r = cli_run(ARGS("config", "--scheduler=localhost:5555"), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  ASSERT_CONTAINS(r.err, "--scheduler: scheduler must be a tcp://HOST:PORT");
  cli_result_free(&r);
}
END_TEST

/* The version the top-level CMakeLists.txt declares, read independently. */
static void project_version(char *out, size_t size) {
  char *path = cli_source_path("CMakeLists.txt");
  FILE *f = fopen(path, "r");
  ck_assert(f != NULL);
  char line[512];
  out[0] = '\0';
  while (fgets(line, sizeof line, f)) {
    const char *p = strstr(line, "project(nimble VERSION ");
    if (!p) continue;
    p += strlen("project(nimble VERSION ");
    size_t n = strcspn(p, " )");
    ck_assert(n < size);
    memcpy(out, p, n);
    out[n] = '\0';
    break;
  }
  fclose(f);
  free(path);
  ck_assert_msg(out[0], "no project version in CMakeLists.txt");
}

START_TEST(test_version_prints_the_project_version) {
  char version[64], want[96];
  project_version(version, sizeof version);
  snprintf(want, sizeof want, "nimble %s\n", version);
  cli_result r = cli_run(ARGS("--version"), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  ck_assert_str_eq(r.out, want);
  cli_result_free(&r);
}
END_TEST

START_TEST(test_a_failed_write_of_the_output_is_a_failure) {
  /* /dev/full refuses every write: silence would pass truncated output
   * off as a success. */
  cli_result r = cli_run_to("/dev/full", ARGS("--help"), NULL);
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "nimble: error writing the output");
  cli_result_free(&r);
  char *prog = cli_source_path("examples/treelstm.nir");
  r = cli_run_to("/dev/full", ARGS("inspect", "--json", prog), NULL);
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "nimble: error writing the output");
  cli_result_free(&r);
  free(prog);
}
END_TEST

/* ---- configuration ---------------------------------------------------------- */

/* The line of `nimble config` output for `key`, without its newline. */
static char *line_for(const char *out, const char *key) {
  size_t n = strlen(key);
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncmp(p, key, n) == 0 && (p[n] == ' ' || p[n] == '=')) {
      size_t len = strcspn(p, "\n");
      return strndup(p, len);
    }
  }
  ck_abort_msg("no line for '%s' in:\n%s", key, out);
  return NULL;
}

/* Asserts the text form "KEY = VALUE ... # ORIGIN" of one setting. */
static void assert_setting(const char *out, const char *key, const char *value,
                           const char *origin) {
  char *line = line_for(out, key);
  char *eq = strchr(line, '=');
  ck_assert_msg(eq != NULL, "no '=' in '%s'", line);
  char *hash = strstr(line, " # ");
  ck_assert_msg(hash != NULL, "no origin in '%s'", line);
  char got_value[512];
  size_t vlen = (size_t)(hash - (eq + 2));
  ck_assert(vlen < sizeof got_value);
  memcpy(got_value, eq + 2, vlen);
  while (vlen && got_value[vlen - 1] == ' ') vlen--;
  got_value[vlen] = '\0';
  ck_assert_msg(strcmp(got_value, value) == 0, "%s: value '%s', want '%s'", key, got_value, value);
  ck_assert_msg(strcmp(hash + 3, origin) == 0, "%s: origin '%s', want '%s'", key, hash + 3, origin);
  free(line);
}

/* Writes the default-location config file ($HOME/.config/nimble/config). */
static char *write_home_config(const char *text) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/home/.config", cli_scratch_dir());
  mkdir(dir, 0700);
  snprintf(dir, sizeof dir, "%s/home/.config/nimble", cli_scratch_dir());
  mkdir(dir, 0700);
  return cli_write_file("home/.config/nimble/config", text);
}

START_TEST(test_config_shows_defaults_when_nothing_is_set) {
  cli_result r = cli_run(ARGS("config"), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  assert_setting(r.out, "scheduler", "tcp://127.0.0.1:5555", "default");
  assert_setting(r.out, "store", "http://127.0.0.1:5000", "default");
  ASSERT_CONTAINS(r.out, "# token is not set\n");
  char want[512];
  snprintf(want, sizeof want, "# config file: %s/home/.config/nimble/config (not found)\n",
           cli_scratch_dir());
  ASSERT_CONTAINS(r.out, want);
  cli_result_free(&r);
}
END_TEST

START_TEST(test_config_file_values_name_file_and_line) {
  char *path = write_home_config(
      "# Nimble client settings\n"
      "\n"
      "store = http://store.example:5000   # the team's store\n"
      "   scheduler=tcp://sched.example:5555\n"
      "token = \"tok#with-hash-0123456789\"\n");
  cli_result r = cli_run(ARGS("config"), NULL);
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  char origin[512];
  snprintf(origin, sizeof origin, "file: %s:3", path);
  assert_setting(r.out, "store", "http://store.example:5000", origin);
  snprintf(origin, sizeof origin, "file: %s:4", path);
  assert_setting(r.out, "scheduler", "tcp://sched.example:5555", origin);
  snprintf(origin, sizeof origin, "file: %s:5", path);
  /* The quoted value kept its '#'; only its last four characters show. */
  assert_setting(r.out, "token", "****6789", origin);
  ASSERT_LACKS(r.out, "tok#with");
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_environment_overrides_the_file) {
  char *path = write_home_config("store = http://from-file:1\nscheduler = tcp://from-file:2\n");
  cli_result r = cli_run(ARGS("config"), ENV("NIMBLE_STORE=https://from-env:3"));
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  assert_setting(r.out, "store", "https://from-env:3", "environment: NIMBLE_STORE");
  char origin[512];
  snprintf(origin, sizeof origin, "file: %s:2", path);
  assert_setting(r.out, "scheduler", "tcp://from-file:2", origin);
  cli_result_free(&r);

  /* An empty variable counts as unset. */
  r = cli_run(ARGS("config"), ENV("NIMBLE_STORE="));
  snprintf(origin, sizeof origin, "file: %s:1", path);
  assert_setting(r.out, "store", "http://from-file:1", origin);
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_flags_override_environment_and_file) {
  char *path = write_home_config("store = http://from-file:1\n");
  cli_result r = cli_run(ARGS("--store", "http://from-flag:4", "config", "--scheduler=tcp://f:5"),
                         ENV("NIMBLE_STORE=http://from-env:3", "NIMBLE_SCHEDULER=tcp://e:6"));
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  assert_setting(r.out, "store", "http://from-flag:4", "flag: --store");
  assert_setting(r.out, "scheduler", "tcp://f:5", "flag: --scheduler");
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_token_is_masked_from_every_source) {
  const char *token = "s3cr3t-token-0123456789abcdef";
  char *path = write_home_config("token = s3cr3t-token-0123456789abcdef\n");
  char origin[512];
  snprintf(origin, sizeof origin, "file: %s:1", path);
  cli_result r = cli_run(ARGS("config"), NULL);
  assert_setting(r.out, "token", "****cdef", origin);
  ASSERT_LACKS(r.out, token);
  cli_result_free(&r);

  r = cli_run(ARGS("config"), ENV("NIMBLE_TOKEN=another-secret-token-WXYZ"));
  assert_setting(r.out, "token", "****WXYZ", "environment: NIMBLE_TOKEN");
  ASSERT_LACKS(r.out, "another-secret");
  cli_result_free(&r);

  r = cli_run(ARGS("config", "--json", "--token", "flag-secret-token-9999"), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  ASSERT_LACKS(r.out, "flag-secret");
  ASSERT_CONTAINS(r.out, "\"****9999\"");
  cli_result_free(&r);

  /* A short token shows nothing of itself. */
  r = cli_run(ARGS("config", "--token", "abc123"), NULL);
  assert_setting(r.out, "token", "****", "flag: --token");
  ASSERT_LACKS(r.out, "abc123");
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_config_file_location_follows_nimble_config_then_xdg) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/xdg", cli_scratch_dir());
  mkdir(dir, 0700);
  snprintf(dir, sizeof dir, "%s/xdg/nimble", cli_scratch_dir());
  mkdir(dir, 0700);
  char *xdg_file = cli_write_file("xdg/nimble/config", "store = http://xdg:1\n");
  char *named = cli_write_file("named.conf", "store = http://named:2\n");
  char *home = write_home_config("store = http://home:3\n");
  char xdg_env[450], cfg_env[450], origin[512];
  snprintf(xdg_env, sizeof xdg_env, "XDG_CONFIG_HOME=%s/xdg", cli_scratch_dir());
  snprintf(cfg_env, sizeof cfg_env, "NIMBLE_CONFIG=%s", named);

  cli_result r = cli_run(ARGS("config"), NULL);
  snprintf(origin, sizeof origin, "file: %s:1", home);
  assert_setting(r.out, "store", "http://home:3", origin);
  cli_result_free(&r);

  r = cli_run(ARGS("config"), ENV(xdg_env));
  snprintf(origin, sizeof origin, "file: %s:1", xdg_file);
  assert_setting(r.out, "store", "http://xdg:1", origin);
  cli_result_free(&r);

  r = cli_run(ARGS("config"), ENV(xdg_env, cfg_env));
  snprintf(origin, sizeof origin, "file: %s:1", named);
  assert_setting(r.out, "store", "http://named:2", origin);
  cli_result_free(&r);

  /* --config beats NIMBLE_CONFIG. */
  r = cli_run(ARGS("--config", xdg_file, "config"), ENV(cfg_env));
  snprintf(origin, sizeof origin, "file: %s:1", xdg_file);
  assert_setting(r.out, "store", "http://xdg:1", origin);
  cli_result_free(&r);
  free(xdg_file);
  free(named);
  free(home);
}
END_TEST

START_TEST(test_missing_named_config_file_is_a_config_error) {
  char missing[400], env[450];
  snprintf(missing, sizeof missing, "%s/nope.conf", cli_scratch_dir());
  snprintf(env, sizeof env, "NIMBLE_CONFIG=%s", missing);
  cli_result r = cli_run(ARGS("config"), ENV(env));
  ck_assert_int_eq(r.exit_code, 4);
  char want[500];
  snprintf(want, sizeof want, "nimble: config file %s: No such file or directory", missing);
  ASSERT_CONTAINS(r.err, want);
  cli_result_free(&r);
}
END_TEST

START_TEST(test_config_json_reports_value_source_and_origin) {
  char *path = write_home_config("scheduler = ipc:///run/nimble.sock\n");
  cli_result r = cli_run(ARGS("config", "--json"), ENV("NIMBLE_STORE=http://env:1"));
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  json_error_t jerr;
  json_t *root = json_loads(r.out, 0, &jerr);
  ck_assert_msg(root != NULL, "not JSON (%s):\n%s", jerr.text, r.out);
  ck_assert_str_eq(json_string_value(json_object_get(root, "file")), path);
  ck_assert(json_is_true(json_object_get(root, "file_read")));
  json_t *settings = json_object_get(root, "settings");
  json_t *sched = json_object_get(settings, "scheduler");
  ck_assert_str_eq(json_string_value(json_object_get(sched, "value")), "ipc:///run/nimble.sock");
  ck_assert_str_eq(json_string_value(json_object_get(sched, "source")), "file");
  char origin[512];
  snprintf(origin, sizeof origin, "%s:1", path);
  ck_assert_str_eq(json_string_value(json_object_get(sched, "origin")), origin);
  json_t *store = json_object_get(settings, "store");
  ck_assert_str_eq(json_string_value(json_object_get(store, "value")), "http://env:1");
  ck_assert_str_eq(json_string_value(json_object_get(store, "source")), "environment");
  ck_assert_str_eq(json_string_value(json_object_get(store, "origin")), "NIMBLE_STORE");
  json_t *token = json_object_get(settings, "token");
  ck_assert(json_is_null(json_object_get(token, "value")));
  ck_assert_str_eq(json_string_value(json_object_get(token, "source")), "default");
  json_decref(root);
  cli_result_free(&r);
  free(path);
}
END_TEST

/* A config file with `text` gives exit code 4 and `fragment` after
 * "PATH:" on stderr. */
static void assert_config_error(const char *text, const char *fragment) {
  char *path = write_home_config(text);
  cli_result r = cli_run(ARGS("config"), NULL);
  ck_assert_msg(r.exit_code == 4, "rc %d for %s", r.exit_code, fragment);
  char want[1024];
  snprintf(want, sizeof want, "nimble: %s:%s", path, fragment);
  ASSERT_CONTAINS(r.err, want);
  ck_assert_str_eq(r.out, "");
  cli_result_free(&r);
  free(path);
}

START_TEST(test_malformed_config_files_are_errors_naming_file_and_line) {
  assert_config_error("# ok\nstor = http://x:1\n",
                      "2: unknown key 'stor' (known keys: scheduler, store, token)");
  assert_config_error("store = http://x:1\n\njust some words\n",
                      "3: expected 'key = value', found 'just some words'");
  assert_config_error("= http://x:1\n", "1: expected 'key = value', found '= http://x:1'");
  assert_config_error("store = http://a:1\nstore = http://b:2\n",
                      "2: 'store' is set twice (first at line 1)");
  assert_config_error("scheduler = \n", "1: empty value for 'scheduler'");
  assert_config_error("\n\nstore = localhost:5000\n",
                      "3: store must be an http:// or https:// URL, got 'localhost:5000'");
  assert_config_error("token = \"abc\n", "1: unterminated quoted value");
  assert_config_error("token = \"abc\" def\n", "1: unexpected text after the quoted value: 'def'");
  assert_config_error("token = two words\n", "1: 'token' must not contain spaces");
}
END_TEST

START_TEST(test_binary_and_oversized_config_files_are_rejected) {
  /* A NUL byte on line 2. */
  char *path = write_home_config("");
  FILE *f = fopen(path, "wb");
  ck_assert(f != NULL);
  fwrite("store = http://x:1\nto\0ken = y\n", 1, 30, f);
  fclose(f);
  cli_result r = cli_run(ARGS("config"), NULL);
  ck_assert_int_eq(r.exit_code, 4);
  char want[600];
  snprintf(want, sizeof want, "%s:2: NUL byte", path);
  ASSERT_CONTAINS(r.err, want);
  cli_result_free(&r);

  /* A line over the limit. */
  size_t n = 5000;
  char *big = malloc(n + 16);
  memcpy(big, "token = ", 8);
  memset(big + 8, 'a', n);
  memcpy(big + 8 + n, "\n", 2);
  free(path);
  path = write_home_config(big);
  free(big);
  r = cli_run(ARGS("config"), NULL);
  ck_assert_int_eq(r.exit_code, 4);
  snprintf(want, sizeof want, "%s:1: line longer than 4096 bytes", path);
  ASSERT_CONTAINS(r.err, want);
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_malformed_environment_value_is_a_config_error_naming_the_variable) {
  cli_result r = cli_run(ARGS("config"), ENV("NIMBLE_SCHEDULER=sched.example:5555"));
  ck_assert_int_eq(r.exit_code, 4);
  ASSERT_CONTAINS(r.err, "nimble: NIMBLE_SCHEDULER: scheduler must be a tcp://HOST:PORT");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_inspect_does_not_need_a_valid_config) {
  char *path = write_home_config("bogus = 1\n");
  char *prog = cli_write_file("id.nir", "def @main(%x: Tensor[(2,), float32]) { %x }\n");
  cli_result r = cli_run(ARGS("inspect", prog), NULL);
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  cli_result_free(&r);
  free(prog);
  free(path);
}
END_TEST

#ifdef NIMBLE_CLI_TEST_HAS_KEYS
/* keys generate writes a 0600 key whose public line libsodium, given the
 * seed on file, agrees with; show prints the same; an existing file is
 * never overwritten; a key others can read is refused (exit 3). */
START_TEST(test_keys_generate_and_show_print_the_public_line_libsodium_derives) {
  char path[600];
  snprintf(path, sizeof path, "%s/farm.key", cli_scratch_dir());
  unlink(path);
  cli_result r = cli_run(ARGS("keys", "generate", path, "farm 2026"), NULL);
  ck_assert_msg(r.exit_code == 0, "stderr: %s", r.err);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char line[200] = "";
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  fclose(f);
  ck_assert(strncmp(line, "ed25519-secret ", 15) == 0);
  uint8_t seed[32], pk[32], sk[64];
  ck_assert_int_eq(sodium_init() < 0, 0);
  ck_assert_int_eq(sodium_hex2bin(seed, 32, line + 15, 64, NULL, NULL, NULL), 0);
  crypto_sign_seed_keypair(pk, sk, seed);
  char hex[65], want[200];
  sodium_bin2hex(hex, sizeof hex, pk, 32);
  snprintf(want, sizeof want, "ed25519 %s farm 2026\n", hex);
  ck_assert_str_eq(r.out, want);
  cli_result_free(&r);

  r = cli_run(ARGS("keys", "show", path, "farm 2026"), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  ck_assert_str_eq(r.out, want);
  cli_result_free(&r);

  r = cli_run(ARGS("keys", "generate", path), NULL);
  ck_assert_int_eq(r.exit_code, 1);
  ASSERT_CONTAINS(r.err, "never overwritten");
  cli_result_free(&r);

  ck_assert_int_eq(chmod(path, 0640), 0);
  r = cli_run(ARGS("keys", "show", path), NULL);
  ck_assert_int_eq(r.exit_code, 3);
  ASSERT_CONTAINS(r.err, "mode 0640");
  ASSERT_CONTAINS(r.err, path);
  cli_result_free(&r);

  r = cli_run(ARGS("keys", "make", path), NULL);
  ck_assert_int_eq(r.exit_code, 2);
  cli_result_free(&r);
  unlink(path);
}
END_TEST
#endif

static Suite *suite(void) {
  Suite *s = suite_create("cli_commands");
  TCase *tc = tcase_create("help");
  tcase_add_test(tc, test_help_lists_exactly_the_commands_that_exist);
  tcase_add_test(tc, test_help_for_a_command_matches_its_own_help_flag);
  tcase_add_test(tc, test_help_for_an_unknown_command_is_a_usage_error);
  tcase_add_test(tc, test_no_command_is_a_usage_error_with_help_on_stderr);
  tcase_add_test(tc, test_unknown_command_is_a_usage_error);
  tcase_add_test(tc, test_unknown_options_are_usage_errors_naming_the_option);
  tcase_add_test(tc, test_double_dash_ends_the_options);
  tcase_add_test(tc, test_option_without_its_value_is_a_usage_error);
  tcase_add_test(tc, test_malformed_flag_value_is_a_usage_error_naming_the_flag);
  tcase_add_test(tc, test_version_prints_the_project_version);
  tcase_add_test(tc, test_a_failed_write_of_the_output_is_a_failure);
#ifdef NIMBLE_CLI_TEST_HAS_KEYS
  tcase_add_test(tc, test_keys_generate_and_show_print_the_public_line_libsodium_derives);
#endif
  suite_add_tcase(s, tc);
  tc = tcase_create("config");
  tcase_add_test(tc, test_config_shows_defaults_when_nothing_is_set);
  tcase_add_test(tc, test_config_file_values_name_file_and_line);
  tcase_add_test(tc, test_environment_overrides_the_file);
  tcase_add_test(tc, test_flags_override_environment_and_file);
  tcase_add_test(tc, test_token_is_masked_from_every_source);
  tcase_add_test(tc, test_config_file_location_follows_nimble_config_then_xdg);
  tcase_add_test(tc, test_missing_named_config_file_is_a_config_error);
  tcase_add_test(tc, test_config_json_reports_value_source_and_origin);
  tcase_add_test(tc, test_malformed_config_files_are_errors_naming_file_and_line);
  tcase_add_test(tc, test_binary_and_oversized_config_files_are_rejected);
  tcase_add_test(tc, test_malformed_environment_value_is_a_config_error_naming_the_variable);
  tcase_add_test(tc, test_inspect_does_not_need_a_valid_config);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
