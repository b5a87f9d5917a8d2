/* The client's side of the compile farm: scheduler requests, job events,
 * the store client and the exit codes of farm errors (farm_client.h). */
#include "farm_client.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

long long nimble_farm_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nimble_farm_exit_code(nimble_status_t s, nimble_farm_peer_t peer) {
  switch (nimble_status_code(s)) {
    case NIMBLE_UNAUTHENTICATED:
    case NIMBLE_PERMISSION_DENIED:
      return NIMBLE_EXIT_AUTH;
    case NIMBLE_UNAVAILABLE:
    case NIMBLE_DEADLINE_EXCEEDED:
      return peer == NIMBLE_FARM_PEER_STORE ? NIMBLE_EXIT_STORE : NIMBLE_EXIT_SCHEDULER;
    default:
      return NIMBLE_EXIT_FAILURE;
  }
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

nimble_status_t nimble_farm_connect(const char *endpoint, const char *token,
                                    nimble_farm_conn *conn) {
  memset(conn, 0, sizeof *conn);
  conn->endpoint = strdup(endpoint);
  conn->token = dup_or_null(token);
  conn->zctx = zmq_ctx_new();
  if (!conn->endpoint || (token && !conn->token) || !conn->zctx) {
    nimble_farm_close(conn);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory connecting to %s",
                              endpoint);
  }
  conn->sock = zmq_socket(conn->zctx, ZMQ_DEALER);
  int zero = 0;
  if (!conn->sock || zmq_setsockopt(conn->sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_connect(conn->sock, endpoint) != 0) {
    nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                           "cannot connect to the scheduler at '%s': %s",
                                           endpoint, zmq_strerror(zmq_errno()));
    nimble_farm_close(conn);
    return s;
  }
  return nimble_ok();
}

void nimble_farm_close(nimble_farm_conn *conn) {
  if (conn->sock) zmq_close(conn->sock);
  if (conn->events) zmq_close(conn->events);
  if (conn->zctx) zmq_ctx_term(conn->zctx);
  free(conn->endpoint);
  free(conn->token);
  memset(conn, 0, sizeof *conn);
}

/* Receives one whole message (all frames; the last is the payload) from
 * `sock` within timeout_ms. Returns 1 with *msg holding the last frame, 0 on
 * timeout, -1 on a socket error. */
static int recv_last_frame(void *sock, long timeout_ms, zmq_msg_t *msg, char *first,
                           size_t first_size, int *nframes) {
  zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
  long long deadline = nimble_farm_now_ms() + timeout_ms;
  for (;;) {
    long long left = deadline - nimble_farm_now_ms();
    if (left < 0) left = 0;
    int r = zmq_poll(&item, 1, (long)left);
    if (r < 0 && zmq_errno() == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return 0;
    break;
  }
  *nframes = 0;
  if (first && first_size) first[0] = '\0';
  for (;;) {
    zmq_msg_init(msg);
    if (zmq_msg_recv(msg, sock, 0) < 0) {
      zmq_msg_close(msg);
      return -1;
    }
    if (*nframes == 0 && first && first_size) {
      size_t n = zmq_msg_size(msg);
      if (n >= first_size) n = first_size - 1;
      memcpy(first, zmq_msg_data(msg), n);
      first[n] = '\0';
    }
    (*nframes)++;
    if (!zmq_msg_more(msg)) return 1;
    zmq_msg_close(msg);
  }
}

nimble_status_t nimble_farm_request(nimble_farm_conn *conn, nimble_msg_type_t type, json_t *body,
                                    long timeout_ms, nimble_msg_type_t *out_type,
                                    json_t **out_body) {
  *out_body = NULL;
  if (conn->token) json_object_set_new(body, "token", json_string(conn->token));
  char *bytes;
  size_t n;
  nimble_status_t s = nimble_message_encode(type, body, &bytes, &n);
  json_decref(body);
  if (s) return nimble_status_annotate(s, "encoding %s", nimble_message_type_name(type));
  int sent = zmq_send(conn->sock, bytes, n, 0);
  free(bytes);
  if (sent < 0)
    return nimble_status_make(NIMBLE_UNAVAILABLE, "sending to the scheduler at %s: %s",
                              conn->endpoint, zmq_strerror(zmq_errno()));
  zmq_msg_t msg;
  int frames;
  int r = recv_last_frame(conn->sock, timeout_ms, &msg, NULL, 0, &frames);
  if (r == 0)
    return nimble_status_make(NIMBLE_UNAVAILABLE,
                              "the scheduler at %s did not answer within %.1f s (is it running? "
                              "is --scheduler right?)",
                              conn->endpoint, (double)timeout_ms / 1000.0);
  if (r < 0)
    return nimble_status_make(NIMBLE_UNAVAILABLE, "receiving from the scheduler at %s: %s",
                              conn->endpoint, zmq_strerror(zmq_errno()));
  json_t *reply = NULL;
  nimble_msg_type_t rtype;
  s = nimble_message_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &rtype, &reply);
  zmq_msg_close(&msg);
  if (s) return nimble_status_annotate(s, "the scheduler's reply does not decode");
  if (rtype == NIMBLE_MSG_ERROR) {
    s = nimble_message_body_to_status(reply);
    json_decref(reply);
    return nimble_status_annotate(s, "the scheduler refused the request");
  }
  *out_type = rtype;
  *out_body = reply;
  return nimble_ok();
}

nimble_status_t nimble_farm_events_endpoint(const char *flag, const char *scheduler, char *out,
                                            size_t size) {
  const char *env = getenv("NIMBLE_EVENTS");
  const char *given = flag && flag[0] ? flag : (env && env[0] ? env : NULL);
  if (given) {
    if (strncmp(given, "tcp://", 6) != 0 && strncmp(given, "ipc://", 6) != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "events endpoint '%s' is not tcp://HOST:PORT or ipc://PATH", given);
    if ((size_t)snprintf(out, size, "%s", given) >= size)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "events endpoint '%s' is too long",
                                given);
    return nimble_ok();
  }
  const char *colon = strrchr(scheduler, ':');
  if (strncmp(scheduler, "tcp://", 6) != 0 || !colon || colon < scheduler + 6)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "cannot guess the events endpoint from scheduler '%s'; give "
                              "--events or NIMBLE_EVENTS",
                              scheduler);
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (errno || *end || end == colon + 1 || port < 1 || port > 65533)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "cannot guess the events endpoint from scheduler '%s' (port); give "
                              "--events or NIMBLE_EVENTS",
                              scheduler);
  int host_len = (int)(colon - scheduler);
  if ((size_t)snprintf(out, size, "%.*s:%ld", host_len, scheduler, port + 2) >= size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "scheduler endpoint '%s' is too long",
                              scheduler);
  return nimble_ok();
}

nimble_status_t nimble_farm_subscribe(nimble_farm_conn *conn, const char *endpoint,
                                      const char *job) {
  conn->events = zmq_socket(conn->zctx, ZMQ_SUB);
  int zero = 0;
  if (!conn->events || zmq_setsockopt(conn->events, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_setsockopt(conn->events, ZMQ_SUBSCRIBE, job, strlen(job)) != 0 ||
      zmq_connect(conn->events, endpoint) != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "cannot subscribe to the scheduler's events at '%s': %s", endpoint,
                              zmq_strerror(zmq_errno()));
  return nimble_ok();
}

nimble_status_t nimble_farm_next_event(nimble_farm_conn *conn, long timeout_ms,
                                       nimble_msg_type_t *out_type, json_t **out_body) {
  *out_body = NULL;
  long long deadline = nimble_farm_now_ms() + timeout_ms;
  for (;;) {
    long long left = deadline - nimble_farm_now_ms();
    if (left < 0) return nimble_ok();
    zmq_msg_t msg;
    char topic[160];
    int frames;
    int r = recv_last_frame(conn->events, (long)left, &msg, topic, sizeof topic, &frames);
    if (r == 0) return nimble_ok();
    if (r < 0)
      return nimble_status_make(NIMBLE_UNAVAILABLE, "receiving the scheduler's events: %s",
                                zmq_strerror(zmq_errno()));
    /* Two frames (topic, message). A prefix subscription ("j-1") also
     * matches "j-12": the body's job is checked by the caller. */
    json_t *body = NULL;
    nimble_msg_type_t type;
    nimble_status_t s =
        frames == 2 ? nimble_message_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &type, &body)
                    : nimble_status_make(NIMBLE_INVALID_ARGUMENT, "expected two frames");
    zmq_msg_close(&msg);
    if (s) {
      /* A malformed event is not worth failing a job over: STATUS polls
       * still give the truth. */
      nimble_status_free(s);
      continue;
    }
    *out_type = type;
    *out_body = body;
    return nimble_ok();
  }
}

nimble_status_t nimble_farm_store_client(const char *store_url, const char *token,
                                         nimble_store_client **out) {
  nimble_store_client_options_t o = {
      .base_url = store_url,
      .token = token,
      .connect_timeout_ms = 3000,
      .max_attempts = 3,
      .retry_budget_ms = 10000,
  };
  nimble_status_t s = nimble_store_client_create(&o, out);
  if (s) return nimble_status_annotate(s, "store '%s'", store_url);
  return nimble_ok();
}

char *nimble_farm_reference(const char *store_url, const char *name, const char *tag,
                            const char *manifest) {
  size_t n = strlen(store_url);
  while (n > 0 && store_url[n - 1] == '/') n--;
  if (n > INT_MAX) return NULL;
  char *out = NULL;
  if (asprintf(&out, "%.*s/%s:%s@%s", (int)n, store_url, name, tag, manifest) < 0) return NULL;
  return out;
}

int nimble_farm_take_value(int argc, char **argv, int *i, const char *name, const char **value) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *value = argv[++*i];
  return 1;
}
