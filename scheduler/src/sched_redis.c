/* Redis connection for the scheduler: one blocking hiredis context that is
 * re-created when Redis goes away (restart, network blip), so a restarted
 * Redis with AOF on is picked up again without restarting the scheduler. */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "nimble/sched_state.h"

struct nimble_sched_redis {
  char host[256];
  int port;
  redisContext *ctx;
};

static nimble_status_t redis_reconnect(nimble_sched_redis *r) {
  if (r->ctx) {
    redisFree(r->ctx);
    r->ctx = NULL;
  }
  struct timeval connect_timeout = {2, 0};
  redisContext *c = redisConnectWithTimeout(r->host, r->port, connect_timeout);
  if (!c) return NIMBLE_OOM_IN("redis");
  if (c->err) {
    nimble_status_t s = nimble_status_make(NIMBLE_UNAVAILABLE, "redis %s:%d: %s", r->host,
                                           r->port, c->errstr);
    redisFree(c);
    return s;
  }
  struct timeval command_timeout = {5, 0};
  redisSetTimeout(c, command_timeout);
  r->ctx = c;
  return nimble_ok();
}

nimble_status_t nimble_sched_redis_connect(const char *host, int port, nimble_sched_redis **out) {
  *out = NULL;
  if (!host || !*host || strlen(host) >= 256)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "redis: bad host '%s'", host ? host : "");
  if (port <= 0 || port > 65535)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "redis: bad port %d", port);
  nimble_sched_redis *r = calloc(1, sizeof *r);
  if (!r) return NIMBLE_OOM_IN("redis");
  snprintf(r->host, sizeof r->host, "%s", host);
  r->port = port;
  nimble_status_t s = redis_reconnect(r);
  if (s) {
    free(r);
    return s;
  }
  *out = r;
  return nimble_ok();
}

void nimble_sched_redis_destroy(nimble_sched_redis *r) {
  if (!r) return;
  if (r->ctx) redisFree(r->ctx);
  free(r);
}

/* One command, formatted (fmt, ap) or as an argument vector (argv). */
typedef struct redis_call {
  const char *fmt;
  va_list *ap;
  int argc;
  const char **argv;
  const size_t *argvlen;
} redis_call;

static redisReply *call_once(redisContext *c, const redis_call *k) {
  if (k->fmt) {
    va_list ap;
    va_copy(ap, *k->ap);
    redisReply *rep = redisvCommand(c, k->fmt, ap);
    va_end(ap);
    return rep;
  }
  return redisCommandArgv(c, k->argc, k->argv, k->argvlen);
}

static nimble_status_t run_call(nimble_sched_redis *r, struct redisReply **out_reply, const redis_call *k) {
  if (out_reply) *out_reply = NULL;
  redisReply *reply = NULL;
  /* Two tries: the first may find a connection Redis closed when it
   * restarted; the second runs on a fresh one. */
  for (int attempt = 0; attempt < 2 && !reply; attempt++) {
    if (!r->ctx || r->ctx->err) {
      nimble_status_t s = redis_reconnect(r);
      if (s) {
        if (attempt == 1) return s;
        nimble_status_free(s);
        continue;
      }
    }
    reply = call_once(r->ctx, k);
    if (!reply && attempt == 1)
      return nimble_status_make(NIMBLE_UNAVAILABLE, "redis %s:%d: %s", r->host, r->port,
                                r->ctx ? r->ctx->errstr : "no connection");
    if (!reply && r->ctx) {
      redisFree(r->ctx);
      r->ctx = NULL;
    }
  }
  if (!reply)
    return nimble_status_make(NIMBLE_UNAVAILABLE, "redis %s:%d: not reachable", r->host, r->port);
  if (reply->type == REDIS_REPLY_ERROR) {
    nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "redis command '%.40s': %s",
                                           k->fmt ? k->fmt : k->argv[0], reply->str ? reply->str : "error");
    freeReplyObject(reply);
    return s;
  }
  if (out_reply)
    *out_reply = reply;
  else
    freeReplyObject(reply);
  return nimble_ok();
}

nimble_status_t nimble_sched_redis_command(nimble_sched_redis *r, struct redisReply **out_reply,
                                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redis_call k = {.fmt = fmt, .ap = &ap};
  nimble_status_t s = run_call(r, out_reply, &k);
  va_end(ap);
  return s;
}

nimble_status_t nimble_sched_redis_command_argv(nimble_sched_redis *r, struct redisReply **out_reply, int argc,
                                                const char **argv, const size_t *argvlen) {
  if (argc < 1) return nimble_status_make(NIMBLE_INTERNAL, "redis: a command with no arguments");
  redis_call k = {.argc = argc, .argv = argv, .argvlen = argvlen};
  return run_call(r, out_reply, &k);
}
