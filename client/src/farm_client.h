/* The client's side of the compile farm: one request/reply with the
 * scheduler over a DEALER socket, the job events on its PUB socket, the
 * store client built from the configuration, the exit codes farm errors map
 * to, and the artifact reference format. Private to the `nimble` client;
 * used by submit, status and fetch. */
#ifndef NIMBLE_CLI_FARM_CLIENT_H
#define NIMBLE_CLI_FARM_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

#include "cli.h"
#include "nimble/message.h"
#include "nimble/status.h"
#include "nimble/store_client.h"

/* Exit codes of the farm commands, after those of cli.h (docs/cli.md). */
enum {
  NIMBLE_EXIT_SCHEDULER = 5, /* the scheduler could not be reached or did not answer */
  NIMBLE_EXIT_STORE = 6,     /* the store could not be reached */
  NIMBLE_EXIT_AUTH = 7,      /* the scheduler or the store refused the token */
};

/* The farm commands, for main.c's table. */
extern const nimble_cli_command nimble_cmd_submit;
extern const nimble_cli_command nimble_cmd_status;
extern const nimble_cli_command nimble_cmd_fetch;
extern const nimble_cli_command nimble_cmd_profile; /* cmd_profile.c */
extern const nimble_cli_command nimble_cmd_tune_records; /* cmd_tune_records.c */

/* The repository clients upload models to (docs/farm.md). */
#define NIMBLE_FARM_MODEL_REPO "models"

/* Which service a failed status came from, for the exit code. */
typedef enum nimble_farm_peer {
  NIMBLE_FARM_PEER_SCHEDULER = 0,
  NIMBLE_FARM_PEER_STORE,
} nimble_farm_peer_t;

/* The exit code for a failed status from `peer`: UNAUTHENTICATED and
 * PERMISSION_DENIED are AUTH; UNAVAILABLE and DEADLINE_EXCEEDED are
 * SCHEDULER or STORE; anything else FAILURE. */
int nimble_farm_exit_code(nimble_status_t s, nimble_farm_peer_t peer);

/* A connection to the scheduler's clients endpoint. */
typedef struct nimble_farm_conn {
  void *zctx;       /* owned */
  void *sock;       /* owned: DEALER */
  void *events;     /* owned: SUB, NULL until nimble_farm_subscribe */
  char *endpoint;   /* owned copy */
  char *token;      /* owned copy, NULL when none */
} nimble_farm_conn;

/* Opens a DEALER socket to `endpoint` (ZeroMQ connects lazily, so an absent
 * scheduler shows up as a request timeout). token may be NULL. */
nimble_status_t nimble_farm_connect(const char *endpoint, const char *token,
                                    nimble_farm_conn *conn);
void nimble_farm_close(nimble_farm_conn *conn);

/* Sends one request (takes `body`; the token is added) and waits at most
 * timeout_ms for the reply. An ERROR reply comes back as its status,
 * prefixed "the scheduler refused the request: "; no reply in time is
 * UNAVAILABLE naming the endpoint. On success *out_body (caller's) is the
 * reply body and *out_type its type. */
nimble_status_t nimble_farm_request(nimble_farm_conn *conn, nimble_msg_type_t type, json_t *body,
                                    long timeout_ms, nimble_msg_type_t *out_type,
                                    json_t **out_body);

/* The events endpoint: `flag` when given, else $NIMBLE_EVENTS, else the
 * scheduler's endpoint with its TCP port plus 2 (the fleet's 5555 → 5557).
 * Writes into out; INVALID_ARGUMENT when none can be formed. */
nimble_status_t nimble_farm_events_endpoint(const char *flag, const char *scheduler,
                                            char *out, size_t size);

/* Subscribes to the events of `job` on `endpoint`. */
nimble_status_t nimble_farm_subscribe(nimble_farm_conn *conn, const char *endpoint,
                                      const char *job);

/* Waits at most timeout_ms for one event of the subscribed job. Returns ok
 * with *out_body NULL when none came; otherwise *out_body (caller's) is the
 * message body and *out_type its type. */
nimble_status_t nimble_farm_next_event(nimble_farm_conn *conn, long timeout_ms,
                                       nimble_msg_type_t *out_type, json_t **out_body);

/* A store client for the configured store and token, with bounded retries
 * (a down store is reported in seconds, not minutes). */
nimble_status_t nimble_farm_store_client(const char *store_url, const char *token,
                                         nimble_store_client **out);

/* "http://STORE/NAME:TAG@sha256:..." written into out (malloc'ed, caller
 * frees). */
char *nimble_farm_reference(const char *store_url, const char *name, const char *tag,
                            const char *manifest);

/* Takes option `name` at argv[*i], as "--name=VALUE" or "--name VALUE".
 * Returns 1 with *value set (borrowed from argv), 0 when argv[*i] is not
 * that option, -1 when the value is missing. */
int nimble_farm_take_value(int argc, char **argv, int *i, const char *name, const char **value);

/* Milliseconds of a monotonic clock. */
long long nimble_farm_now_ms(void);

#endif
