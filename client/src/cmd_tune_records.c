/* `nimble tune-records list|export|import`: the farm's tuning records
 * (docs/farm.md, "Tuning records"), read page by page with
 * TUNE_RECORDS_LIST and added with TUNE_RECORDS_IMPORT. Records travel as
 * their JSON text (docs/protocol.md); here they are parsed and checked with
 * nimble/tune_record.h like any records file. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "farm_client.h"
#include "nimble/target.h"
#include "nimble/tune_record.h"

#define TUNE_REQUEST_MS 10000L

static const nimble_cli_command *self(void);

/* Connects with the configured scheduler and token. */
static int connect_farm(nimble_cli_ctx *ctx, nimble_farm_conn *conn, nimble_status_t *st) {
  *st = nimble_ok();
  int rc = nimble_cli_load_config(ctx);
  if (rc) return rc;
  const char *scheduler = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_SCHEDULER);
  const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
  if (!scheduler) scheduler = NIMBLE_CLI_DEFAULT_SCHEDULER;
  *st = nimble_farm_connect(scheduler, token, conn);
  return 0;
}

/* Every record the farm has (of `kind` when not NULL), page by page.
 * *out (caller frees) holds *count. */
static nimble_status_t fetch_all(nimble_farm_conn *conn, const char *kind, nimble_tune_record_t **out,
                                 size_t *count) {
  *out = NULL;
  *count = 0;
  size_t n = 0, cap = 0;
  nimble_tune_record_t *r = NULL;
  long long offset = 0;
  nimble_status_t st = nimble_ok();
  for (;;) {
    json_t *body = json_object();
    if (body && kind) json_object_set_new(body, "target", json_string(kind));
    if (body) json_object_set_new(body, "offset", json_integer(offset));
    nimble_msg_type_t type;
    json_t *reply = NULL;
    st = body ? nimble_farm_request(conn, NIMBLE_MSG_TUNE_RECORDS_LIST, body, TUNE_REQUEST_MS, &type, &reply)
              : NIMBLE_OOM();
    if (!st && type != NIMBLE_MSG_TUNE_RECORDS)
      st = nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered TUNE_RECORDS_LIST with %s",
                              nimble_message_type_name(type));
    if (st) {
      json_decref(reply);
      break;
    }
    const json_t *texts = json_object_get(reply, "records");
    long long next = json_integer_value(json_object_get(reply, "next"));
    long long total = json_integer_value(json_object_get(reply, "total"));
    if (n + json_array_size(texts) > cap) {
      size_t ncap = cap ? cap : 256;
      while (ncap < n + json_array_size(texts)) ncap *= 2;
      nimble_tune_record_t *g = realloc(r, ncap * sizeof *r);
      if (!g) st = NIMBLE_OOM();
      else {
        r = g;
        cap = ncap;
      }
    }
    for (size_t i = 0; !st && i < json_array_size(texts); i++) {
      char where[64];
      snprintf(where, sizeof where, "the farm's record %lld", offset + (long long)i);
      st = nimble_tune_record_from_text(json_string_value(json_array_get(texts, i)), where, &r[n]);
      if (!st) n++;
    }
    json_decref(reply);
    /* Done at the end, or when a page covers nothing (records removed
     * meanwhile): never ask for the same page twice. */
    if (st || next >= total || next <= offset) break;
    offset = next;
  }
  if (st) {
    free(r);
    return st;
  }
  *out = r;
  *count = n;
  return nimble_ok();
}

static void print_table(const nimble_tune_record_t *r, size_t n) {
  printf("%-8s %-28s %-12s %-32s %-40s %12s %12s %8s\n", "TARGET", "CPU", "SIGNATURE", "KERNEL", "SCHEDULE",
         "DEFAULT_US", "TUNED_US", "SPEEDUP");
  for (size_t i = 0; i < n; i++) {
    char schedule[64], speedup[32];
    int32_t clone = r[i].schedule.avx512_clone;
    char vw[16] = "", il[16] = "";
    if (r[i].schedule.vector_width) snprintf(vw, sizeof vw, "/vw%d", (int)r[i].schedule.vector_width);
    if (r[i].schedule.interleave) snprintf(il, sizeof il, "/il%d", (int)r[i].schedule.interleave);
    char buckets[24] = "";
    if (r[i].num_buckets) snprintf(buckets, sizeof buckets, " +%d by size", (int)r[i].num_buckets);
    snprintf(schedule, sizeof schedule, "%s/%lld/%lld%s%s%s%s", r[i].schedule.parallel ? "parallel" : "serial",
             (long long)r[i].schedule.min_task_work, (long long)r[i].schedule.conv_block,
             clone == NIMBLE_TUNE_CLONE_YES ? "/avx512" : clone == NIMBLE_TUNE_CLONE_NO ? "/no-avx512" : "", vw, il,
             buckets);
    if (r[i].tuned_us > 0)
      snprintf(speedup, sizeof speedup, "%.2fx", r[i].default_us / r[i].tuned_us);
    else
      snprintf(speedup, sizeof speedup, "-");
    printf("%-8s %-28s %-12.12s %-32s %-40s %12.2f %12.2f %8s\n", r[i].target, r[i].cpu, r[i].signature,
           r[i].kernel[0] ? r[i].kernel : "-", schedule, r[i].default_us, r[i].tuned_us, speedup);
  }
}

/* list and export: the farm's records to stdout or to a file. */
static int run_read(nimble_cli_ctx *ctx, bool json, const char *file, const char *kind) {
  nimble_farm_conn conn;
  nimble_status_t st;
  int rc = connect_farm(ctx, &conn, &st);
  if (rc) return rc;
  nimble_tune_record_t *r = NULL;
  size_t n = 0;
  if (!st) {
    st = fetch_all(&conn, kind, &r, &n);
    nimble_farm_close(&conn);
  }
  if (st) {
    rc = nimble_farm_exit_code(st, NIMBLE_FARM_PEER_SCHEDULER);
    nimble_cli_report(st);
    return rc;
  }
  rc = NIMBLE_EXIT_OK;
  if (file) {
    if (n > NIMBLE_TUNE_MAX_RECORDS) {
      st = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "the farm has %zu records, more than a records file holds (%d): export one "
                              "target at a time (--target)",
                              n, NIMBLE_TUNE_MAX_RECORDS);
    } else {
      st = nimble_tune_records_write_file(file, r, n);
    }
    if (st) {
      rc = NIMBLE_EXIT_FAILURE;
      nimble_cli_report(st);
    } else {
      fprintf(stderr, "nimble: %zu tuning record%s exported to %s\n", n, n == 1 ? "" : "s", file);
    }
  } else if (json) {
    json_t *doc = nimble_tune_records_to_json(r, n);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(doc);
    if (!text) {
      nimble_cli_report(NIMBLE_OOM());
      rc = NIMBLE_EXIT_FAILURE;
    } else {
      printf("%s\n", text);
      free(text);
    }
  } else {
    print_table(r, n);
  }
  free(r);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    nimble_cli_report(nimble_status_make(NIMBLE_IO_ERROR, "writing the records to stdout failed"));
    rc = NIMBLE_EXIT_FAILURE;
  }
  return rc;
}

/* import: the file checked whole first (its errors name the record:
 * "FILE: record 3: ..."), then sent in parts of at most
 * NIMBLE_TUNE_MESSAGE_MAX records. */
static int run_import(nimble_cli_ctx *ctx, const char *file) {
  nimble_tune_record_t *r = NULL;
  size_t n = 0;
  nimble_status_t st = nimble_tune_records_read_file(file, &r, &n);
  if (st) {
    free(r);
    nimble_cli_report(nimble_status_annotate(st, "nothing imported"));
    return NIMBLE_EXIT_INPUT;
  }
  nimble_farm_conn conn;
  int rc = connect_farm(ctx, &conn, &st);
  if (rc) {
    free(r);
    return rc;
  }
  size_t imported = 0;
  for (size_t first = 0; !st && (first < n || n == 0); first += NIMBLE_TUNE_MESSAGE_MAX) {
    size_t part = n - first < NIMBLE_TUNE_MESSAGE_MAX ? n - first : NIMBLE_TUNE_MESSAGE_MAX;
    json_t *texts = nimble_tune_records_to_texts(r + first, part);
    json_t *body = texts ? json_pack("{s:o,s:I}", "records", texts, "first", (json_int_t)first) : NULL;
    nimble_msg_type_t type;
    json_t *reply = NULL;
    st = body ? nimble_farm_request(&conn, NIMBLE_MSG_TUNE_RECORDS_IMPORT, body, TUNE_REQUEST_MS, &type, &reply)
              : NIMBLE_OOM();
    if (!st && type != NIMBLE_MSG_TUNE_RECORDS_IMPORTED)
      st = nimble_status_make(NIMBLE_INTERNAL, "the scheduler answered TUNE_RECORDS_IMPORT with %s",
                              nimble_message_type_name(type));
    if (!st) imported += (size_t)json_integer_value(json_object_get(reply, "imported"));
    json_decref(reply);
    if (n == 0) break;
  }
  nimble_farm_close(&conn);
  free(r);
  if (st) {
    rc = nimble_farm_exit_code(st, NIMBLE_FARM_PEER_SCHEDULER);
    if (imported) st = nimble_status_annotate(st, "after %zu of %zu records were imported", imported, n);
    nimble_cli_report(st);
    return rc;
  }
  printf("imported %zu tuning record%s from %s\n", imported, imported == 1 ? "" : "s", file);
  return NIMBLE_EXIT_OK;
}

static int run_tune_records(nimble_cli_ctx *ctx, int argc, char **argv) {
  const char *verb = NULL, *file = NULL, *kind = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int r;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      nimble_cli_print_command_help(self(), stdout);
      return NIMBLE_EXIT_OK;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--target", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self(), "--target needs a target kind (x86, aarch64, cuda)");
      if (!nimble_target_kind_from_name(v, NULL))
        return nimble_cli_usage_error(self(), "--target '%s' is not a target kind (x86, aarch64, cuda)", v);
      kind = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      return nimble_cli_usage_error(self(), "unknown option '%s'", a);
    } else if (!verb) {
      verb = a;
    } else if (!file) {
      file = a;
    } else {
      return nimble_cli_usage_error(self(), "unexpected argument '%s'", a);
    }
  }
  if (!verb) return nimble_cli_usage_error(self(), "no action given (list, export or import)");
  if (!strcmp(verb, "list")) {
    if (file) return nimble_cli_usage_error(self(), "list takes no file (got '%s')", file);
    return run_read(ctx, json, NULL, kind);
  }
  if (!strcmp(verb, "export")) {
    if (!file) return nimble_cli_usage_error(self(), "export needs the FILE to write");
    if (json) return nimble_cli_usage_error(self(), "--json is for list (export writes JSON already)");
    return run_read(ctx, false, file, kind);
  }
  if (!strcmp(verb, "import")) {
    if (!file) return nimble_cli_usage_error(self(), "import needs the FILE to read");
    if (json || kind)
      return nimble_cli_usage_error(self(), "import takes no %s (the records name their targets)",
                                    json ? "--json" : "--target");
    return run_import(ctx, file);
  }
  return nimble_cli_usage_error(self(), "unknown action '%s' (list, export or import)", verb);
}

const nimble_cli_command nimble_cmd_tune_records = {
    "tune-records",
    "List, export or import the farm's tuning records.",
    "tune-records list [--target T] [--json] | export FILE [--target T] | import FILE",
    "Tuning records say which schedule ran a kernel fastest on one kind of\n"
    "CPU. Compiles with --option tune=true measure them; the farm keeps them\n"
    "per target kind and hands them to later tune=true compiles\n"
    "(docs/farm.md, \"Tuning records\").\n"
    "\n"
    "  list      print the farm's records, one per line: target, cpu, the\n"
    "            first 12 digits of the signature, kernel, schedule\n"
    "            (parallel|serial/MIN_TASK_WORK/CONV_BLOCK, then /avx512\n"
    "            or /no-avx512 where the record chose the kernel's AVX-512\n"
    "            clone or none, /vwN where it chose N vector lanes and\n"
    "            /ilN where it chose LLVM's interleave count N; then\n"
    "            \"+N by size\" where it holds schedules of its own for N\n"
    "            ranges of smaller outputs, which export shows),\n"
    "            default_us, tuned_us and speedup (default_us / tuned_us)\n"
    "  export    write the farm's records to FILE, a records file\n"
    "            ({\"format\": \"nimble.tune-records.v1\", \"records\": [...]})\n"
    "  import    add FILE's records to the farm; a record for a cpu and\n"
    "            signature the farm has replaces it. The whole file is\n"
    "            checked first: one bad record refuses it all, naming the\n"
    "            record (counted from 0), and nothing is imported\n"
    "\n"
    "Options:\n"
    "  --target T  only the records of target kind T (x86, aarch64, cuda)\n"
    "  --json      list: print the records as a records file would hold them\n"
    "\n"
    "Exit status: 0 done; 1 the request failed or FILE could not be written;\n"
    "2 usage error; 3 FILE could not be read or holds a bad record; 4 bad\n"
    "configuration; 5 the scheduler cannot be reached or does not answer;\n"
    "7 the token was refused.\n",
    run_tune_records,
};

static const nimble_cli_command *self(void) { return &nimble_cmd_tune_records; }
