/* `nimble status JOB`: asks the scheduler for a job's state and prints one
 * line per target (or the JOB_STATUS body as JSON). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "farm_client.h"

#define STATUS_REQUEST_MS 10000L

static void print_text(const json_t *body) {
  printf("job %s: %s\n", json_string_value(json_object_get(body, "job")),
         json_string_value(json_object_get(body, "state")));
  size_t i;
  json_t *task;
  json_array_foreach(json_object_get(body, "tasks"), i, task) {
    const char *state = json_string_value(json_object_get(task, "state"));
    const char *phase = json_string_value(json_object_get(task, "phase"));
    json_t *pct = json_object_get(task, "percent");
    const char *manifest = json_string_value(json_object_get(task, "manifest"));
    const char *error = json_string_value(json_object_get(task, "error"));
    printf("  %-24s %-9s", json_string_value(json_object_get(task, "target")), state);
    if (!strcmp(state, "running") && phase)
      printf(" %s%s", phase, "");
    if (!strcmp(state, "running") && json_is_integer(pct))
      printf(" %d%%", (int)json_integer_value(pct));
    if (manifest) printf(" %s", manifest);
    if (json_is_true(json_object_get(task, "cached"))) printf(" (cached)");
    /* Code generation's kernels (docs/farm.md, "The farm's kernel cache"),
     * while it runs and once compiled. */
    const json_t *k = json_object_get(task, "kernels");
    if (json_is_object(k) && json_integer_value(json_object_get(k, "total")) > 0 &&
        !json_is_true(json_object_get(task, "cached")))
      printf(" (%lld/%lld kernels, %lld cached, %lld farm entries fetched)",
             (long long)json_integer_value(json_object_get(k, "done")),
             (long long)json_integer_value(json_object_get(k, "total")),
             (long long)json_integer_value(json_object_get(k, "cached")),
             (long long)json_integer_value(json_object_get(k, "fetched")));
    if (error) printf(" %.*s", (int)strcspn(error, "\n"), error);
    json_t *workers = json_object_get(task, "workers");
    if (!strcmp(state, "queued") && json_is_integer(workers) && json_integer_value(workers) == 0)
      printf(" (no worker for this target is connected)");
    printf("\n");
  }
}

static int run_status(nimble_cli_ctx *ctx, int argc, char **argv) {
  bool json = false;
  const char *job = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      nimble_cli_print_command_help(&nimble_cmd_status, stdout);
      return NIMBLE_EXIT_OK;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (a[0] == '-' && a[1] != '\0') {
      return nimble_cli_usage_error(&nimble_cmd_status, "unknown option '%s'", a);
    } else if (job) {
      return nimble_cli_usage_error(&nimble_cmd_status, "expected one job id, got '%s' and '%s'",
                                    job, a);
    } else {
      job = a;
    }
  }
  if (!job) return nimble_cli_usage_error(&nimble_cmd_status, "no job id given");
  json_t *body = json_pack("{s:s}", "job", job);
  nimble_status_t s = nimble_message_validate_body(NIMBLE_MSG_STATUS, body);
  if (s) {
    json_decref(body);
    int rc = nimble_cli_usage_error(&nimble_cmd_status, "job id '%s': %s", job,
                                    nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  int rc = nimble_cli_load_config(ctx);
  if (rc) {
    json_decref(body);
    return rc;
  }
  const char *scheduler = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_SCHEDULER);
  const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
  if (!scheduler) scheduler = NIMBLE_CLI_DEFAULT_SCHEDULER;
  nimble_farm_conn conn;
  s = nimble_farm_connect(scheduler, token, &conn);
  if (s) {
    json_decref(body);
  } else {
    nimble_msg_type_t type;
    json_t *reply;
    s = nimble_farm_request(&conn, NIMBLE_MSG_STATUS, body, STATUS_REQUEST_MS, &type, &reply);
    nimble_farm_close(&conn);
    if (!s && type != NIMBLE_MSG_JOB_STATUS) {
      s = nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered STATUS with %s",
                             nimble_message_type_name(type));
      json_decref(reply);
    }
    if (!s) {
      if (json) {
        char *text = json_dumps(reply, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (text) printf("%s\n", text);
        free(text);
      } else {
        print_text(reply);
      }
      json_decref(reply);
      return NIMBLE_EXIT_OK;
    }
  }
  rc = nimble_farm_exit_code(s, NIMBLE_FARM_PEER_SCHEDULER);
  nimble_cli_report(s);
  return rc;
}

const nimble_cli_command nimble_cmd_status = {
    "status",
    "Show a farm job's state, target by target.",
    "status [--json] JOB",
    "Asks the scheduler for job JOB (the id 'nimble submit --no-wait'\n"
    "printed) and prints its state and one line per target: state, phase and\n"
    "percent while compiling, the manifest digest when done, the first line\n"
    "of the error when failed.\n"
    "\n"
    "Options:\n"
    "  --json   print the scheduler's JOB_STATUS body as JSON\n"
    "\n"
    "Exit status: 0 the state was printed (whatever it is); 1 the job is not\n"
    "known or the request failed; 2 usage error; 4 bad configuration; 5 the\n"
    "scheduler cannot be reached or does not answer; 7 the token was refused.\n",
    run_status,
};
