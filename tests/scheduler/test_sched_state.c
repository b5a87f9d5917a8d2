/* The scheduler's Redis state against a real redis-server (started with
 * tests/support/redis_fixture.sh): each record is checked with raw Redis
 * commands, the documented key layout being the reference. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "farm_harness.h"
#include "nimble/sched_state.h"
#include "nimble_test.h"

static char g_dir[256];
static char g_host[64];
static int g_port;

static int fixture(const char *cmd, const char *extra) {
  char line[1024];
  snprintf(line, sizeof line, "bash '%s/tests/support/redis_fixture.sh' %s '%s' %s > /dev/null 2>&1",
           getenv("NIMBLE_SOURCE_DIR"), cmd, g_dir, extra ? extra : "");
  return system(line);
}

/* Stops this test's Redis even when a failed assertion ends the process. */
static farm_guard g_guard;

static void start_redis(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/nimble-sched-state.XXXXXX");
  ck_assert(mkdtemp(g_dir) != NULL);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "bash '%s/tests/support/redis_fixture.sh' stop '%s' >/dev/null 2>&1; rm -rf '%s'",
           getenv("NIMBLE_SOURCE_DIR"), g_dir, g_dir);
  farm_guard_start(&g_guard, cmd);
  ck_assert_int_eq(fixture("start", "--appendonly yes"), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/addr", g_dir);
  FILE *f = fopen(path, "r");
  ck_assert(f != NULL);
  ck_assert_int_eq(fscanf(f, "%63[^:]:%d", g_host, &g_port), 2);
  fclose(f);
}

static void stop_redis(void) {
  fixture("stop", NULL);
  char line[512];
  snprintf(line, sizeof line, "rm -rf '%s'", g_dir);
  ck_assert_int_eq(system(line), 0);
  farm_guard_end(&g_guard);
}

static char *raw_hget(const char *key, const char *field) {
  redisContext *c = redisConnect(g_host, g_port);
  ck_assert(c && !c->err);
  redisReply *r = redisCommand(c, "HGET %s %s", key, field);
  char *v = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

START_TEST(test_task_saved_is_one_hash_with_the_documented_fields_and_loads_back) {
  start_redis();
  nimble_sched_redis *r;
  NIMBLE_ASSERT_OK(nimble_sched_redis_connect(g_host, g_port, &r));
  nimble_sched_task_t t;
  nimble_sched_task_init(&t);
  strcpy(t.id, "j-7.x86");
  strcpy(t.job, "j-7");
  strcpy(t.key, "sha256:acf5ce4045d591bd4d5fcc9b29574c43063aafd1fa51b6445cfca6c16fef5b4c");
  strcpy(t.model, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  strcpy(t.format, "onnx");
  strcpy(t.name, "team/bert");
  strcpy(t.target, "x86:cpu=znver4");
  t.options = strdup("{\"opt_level\":3}");
  strcpy(t.state, "running");
  t.attempts = 2;
  strcpy(t.worker, "w 1"); /* a space must survive as one argument */
  t.lease_until = 1764680000123LL;
  strcpy(t.phase, "codegen");
  t.percent = 40;
  t.error = strdup("line 1\nline 2");
  NIMBLE_ASSERT_OK(nimble_sched_task_save(r, &t));
  char *v = raw_hget("nimble:task:j-7.x86", "lease_until");
  ck_assert_str_eq(v, "1764680000123");
  free(v);
  v = raw_hget("nimble:task:j-7.x86", "options");
  ck_assert_str_eq(v, "{\"opt_level\":3}");
  free(v);
  v = raw_hget("nimble:task:j-7.x86", "worker");
  ck_assert_str_eq(v, "w 1");
  free(v);
  v = raw_hget("nimble:task:j-7.x86", "manifest");
  ck_assert_str_eq(v, "");
  free(v);
  nimble_sched_task_t back;
  NIMBLE_ASSERT_OK(nimble_sched_task_load(r, "j-7.x86", &back));
  ck_assert_str_eq(back.target, "x86:cpu=znver4");
  ck_assert_str_eq(back.state, "running");
  ck_assert_int_eq(back.attempts, 2);
  ck_assert_int_eq(back.percent, 40);
  ck_assert(back.lease_until == 1764680000123LL);
  ck_assert_str_eq(back.error, "line 1\nline 2");
  ck_assert_str_eq(back.options, "{\"opt_level\":3}");
  ck_assert(!back.cached);
  nimble_sched_task_deinit(&back);
  nimble_sched_task_deinit(&t);
  NIMBLE_ASSERT_ERROR(nimble_sched_task_load(r, "j-8.x86", &back), NIMBLE_NOT_FOUND, "'j-8.x86'");
  nimble_sched_redis_destroy(r);
  stop_redis();
}
END_TEST

START_TEST(test_cache_inflight_and_tuning_records_follow_the_key_layout) {
  start_redis();
  nimble_sched_redis *r;
  NIMBLE_ASSERT_OK(nimble_sched_redis_connect(g_host, g_port, &r));
  const char *key = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
  int found = 1;
  char manifest[72], name[256];
  NIMBLE_ASSERT_OK(nimble_sched_cache_get(r, key, &found, manifest, name));
  ck_assert_int_eq(found, 0);
  NIMBLE_ASSERT_OK(nimble_sched_cache_put(r, key, "sha256:" "ab", "team/x"));
  char rawkey[128];
  snprintf(rawkey, sizeof rawkey, "nimble:cache:%s", key);
  char *v = raw_hget(rawkey, "name");
  ck_assert_str_eq(v, "team/x");
  free(v);
  NIMBLE_ASSERT_OK(nimble_sched_cache_get(r, key, &found, manifest, name));
  ck_assert_int_eq(found, 1);
  ck_assert_str_eq(manifest, "sha256:ab");
  NIMBLE_ASSERT_OK(nimble_sched_cache_drop(r, key));
  NIMBLE_ASSERT_OK(nimble_sched_cache_get(r, key, &found, manifest, name));
  ck_assert_int_eq(found, 0);

  int claimed;
  char holder[129];
  NIMBLE_ASSERT_OK(nimble_sched_inflight_claim(r, key, "j-1.x86", &claimed, holder));
  ck_assert_int_eq(claimed, 1);
  NIMBLE_ASSERT_OK(nimble_sched_inflight_claim(r, key, "j-2.x86", &claimed, holder));
  ck_assert_int_eq(claimed, 0);
  ck_assert_str_eq(holder, "j-1.x86");
  NIMBLE_ASSERT_OK(nimble_sched_inflight_release(r, key));
  NIMBLE_ASSERT_OK(nimble_sched_inflight_claim(r, key, "j-3.x86", &claimed, holder));
  ck_assert_int_eq(claimed, 1);

  nimble_sched_redis_destroy(r);
  stop_redis();
}
END_TEST

START_TEST(test_connection_survives_a_redis_restart_and_reports_unavailable_while_down) {
  start_redis();
  nimble_sched_redis *r;
  NIMBLE_ASSERT_OK(nimble_sched_redis_connect(g_host, g_port, &r));
  NIMBLE_ASSERT_OK(nimble_sched_cache_put(r, "k", "sha256:before", "team/before"));
  ck_assert_int_eq(fixture("stop", NULL), 0);
  int found = 0;
  char manifest[NIMBLE_SCHED_DIGEST_LEN + 1], name[256];
  NIMBLE_ASSERT_ERROR(nimble_sched_cache_get(r, "k", &found, manifest, name), NIMBLE_UNAVAILABLE, "redis 127.0.0.1:");
  char extra[64];
  snprintf(extra, sizeof extra, "--appendonly yes --port %d", g_port);
  ck_assert_int_eq(fixture("start", extra), 0);
  /* Same connection object, new server: reconnects, and AOF kept the data. */
  NIMBLE_ASSERT_OK(nimble_sched_cache_get(r, "k", &found, manifest, name));
  ck_assert_int_eq(found, 1);
  ck_assert_str_eq(manifest, "sha256:before");
  nimble_sched_redis_destroy(r);
  stop_redis();
}
END_TEST

START_TEST(test_connect_refuses_bad_addresses_with_a_clear_error) {
  nimble_sched_redis *r;
  NIMBLE_ASSERT_ERROR(nimble_sched_redis_connect("127.0.0.1", 0, &r), NIMBLE_INVALID_ARGUMENT, "bad port 0");
  NIMBLE_ASSERT_ERROR(nimble_sched_redis_connect("", 6379, &r), NIMBLE_INVALID_ARGUMENT, "bad host");
  /* Port 1 on loopback: nothing listens there. */
  NIMBLE_ASSERT_ERROR(nimble_sched_redis_connect("127.0.0.1", 1, &r), NIMBLE_UNAVAILABLE, "redis 127.0.0.1:1");
}
END_TEST

int main(void) {
  Suite *s = suite_create("sched_state");
  TCase *tc = tcase_create("state");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_task_saved_is_one_hash_with_the_documented_fields_and_loads_back);
  tcase_add_test(tc, test_cache_inflight_and_tuning_records_follow_the_key_layout);
  tcase_add_test(tc, test_connection_survives_a_redis_restart_and_reports_unavailable_while_down);
  tcase_add_test(tc, test_connect_refuses_bad_addresses_with_a_clear_error);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
