/* Wire messages between clients, the scheduler and workers (ZeroMQ).
 *
 * Every message is ONE ZeroMQ frame holding canonical JSON:
 *
 *   {"body":{...},"type":"SUBMIT","v":1}
 *
 * (ROUTER/DEALER identity frames are the transport's business and come
 * before it.) `v` is the protocol version; a decoder refuses any other
 * version (UNIMPLEMENTED) rather than guess. `type` is one of the names
 * below, and `body` an object whose required members are checked by type;
 * members a type does not define are ignored, so a later minor addition does
 * not break older peers. Body members use snake_case. docs/protocol.md lists
 * every body with an example.
 *
 *   client → scheduler     SUBMIT, PROFILE, STATUS, CANCEL, TUNE_RECORDS_LIST,
 *                          TUNE_RECORDS_IMPORT
 *   scheduler → client     ACCEPTED, JOB_STATUS, TUNE_RECORDS, TUNE_RECORDS_IMPORTED,
 *                          ERROR (and PROGRESS events)
 *   worker → scheduler     READY, HEARTBEAT, PROGRESS, RESULT, PROFILE_RESULT, FAILURE
 *   scheduler → worker     TASK, PROFILE_TASK, CANCEL, ACK, ERROR
 *
 * Bodies are jansson objects (json_t); protocol links jansson publicly.
 */
#ifndef NIMBLE_MESSAGE_H
#define NIMBLE_MESSAGE_H

#include <jansson.h>
#include <stddef.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_PROTOCOL_VERSION 1
/* A message larger than this is refused before parsing. */
#define NIMBLE_MESSAGE_MAX_SIZE ((size_t)4 << 20)
/* Bounds of a profile job: timed runs, and inputs named. */
#define NIMBLE_PROFILE_MAX_RUNS 100000
/* The farm's kernel cache (docs/farm.md): at most this many index entries
 * ride on one TASK (the ones its worker lacks) and on one RESULT (the
 * kernels its compile built). */
#define NIMBLE_KCACHE_TASK_MAX 256
#define NIMBLE_KCACHE_RESULT_MAX 4096
#define NIMBLE_PROFILE_MAX_INPUTS 64
/* Tuning records (nimble/tune_record.h, docs/farm.md "Tuning records") ride
 * in messages as strings, each one record's compact JSON: a record holds
 * real numbers (microseconds), which a canonical message does not. The
 * protocol checks only their form (so that one bad record a worker reports
 * does not make its RESULT unreadable); the receiver parses each with
 * nimble_tune_record_from_json. At most NIMBLE_TUNE_MESSAGE_MAX strings per
 * message (a TASK's, a RESULT's, a page of a list, a part of an import),
 * each 1 to NIMBLE_TUNE_RECORD_TEXT_MAX bytes: 2048 of them stay well under
 * NIMBLE_MESSAGE_MAX_SIZE. */
#define NIMBLE_TUNE_MESSAGE_MAX 2048
#define NIMBLE_TUNE_RECORD_TEXT_MAX 1536 /* three size buckets' schedules fit */

typedef enum nimble_msg_type {
  NIMBLE_MSG_SUBMIT = 0, /* client: compile a model for targets */
  NIMBLE_MSG_STATUS,     /* client: how is job J doing? */
  NIMBLE_MSG_CANCEL,     /* client: cancel job J; scheduler: stop task T */
  NIMBLE_MSG_READY,      /* worker: I can compile for these targets */
  NIMBLE_MSG_HEARTBEAT,  /* worker: alive; with a task, renews its lease */
  NIMBLE_MSG_PROGRESS,   /* worker: task T is in phase P, N percent */
  NIMBLE_MSG_RESULT,     /* worker: task T produced manifest M */
  NIMBLE_MSG_FAILURE,    /* worker: task T failed, with the reason */
  NIMBLE_MSG_ACCEPTED,   /* scheduler: your job is J */
  NIMBLE_MSG_JOB_STATUS, /* scheduler: state of job J and each target */
  NIMBLE_MSG_TASK,       /* scheduler: worker, compile this */
  NIMBLE_MSG_ERROR,      /* scheduler: your request failed */
  NIMBLE_MSG_PROFILE,        /* client: run artifact NAME on target T, report latency */
  NIMBLE_MSG_PROFILE_TASK,   /* scheduler: worker, profile this artifact */
  NIMBLE_MSG_PROFILE_RESULT, /* worker: task T's profile report */
  NIMBLE_MSG_TUNE_RECORDS_LIST,     /* client: a page of the farm's tuning records */
  NIMBLE_MSG_TUNE_RECORDS_IMPORT,   /* client: keep these tuning records */
  NIMBLE_MSG_TUNE_RECORDS,          /* scheduler: a page of tuning records */
  NIMBLE_MSG_TUNE_RECORDS_IMPORTED, /* scheduler: the records imported */
  NIMBLE_MSG_ACK, /* scheduler: worker, I have task T's RESULT or PROFILE_RESULT: stop sending it */
  NIMBLE_MSG_TYPE_COUNT_
} nimble_msg_type_t;

/* "SUBMIT", "JOB_STATUS", ...; "UNKNOWN" out of range. Static string. */
const char *nimble_message_type_name(nimble_msg_type_t type);

/* Parses a type name (exact, uppercase); UNIMPLEMENTED naming it if unknown. */
nimble_status_t nimble_message_type_parse(const char *name, nimble_msg_type_t *out_type);

/* Checks a body against its type's schema (docs/protocol.md). Errors are
 * INVALID_ARGUMENT and name the member ("targets[1]: ..."). */
nimble_status_t nimble_message_validate_body(nimble_msg_type_t type, const json_t *body);

/* Validates body (borrowed), then writes the envelope's canonical bytes.
 * Caller frees *out with free(); *out is also NUL-terminated. */
nimble_status_t nimble_message_encode(nimble_msg_type_t type, const json_t *body, char **out,
                                      size_t *out_size);

/* Parses one frame. On success *out_body is a new reference the caller
 * releases with json_decref(). Errors: over NIMBLE_MESSAGE_MAX_SIZE is
 * RESOURCE_EXHAUSTED; another protocol version or an unknown type is
 * UNIMPLEMENTED; anything malformed is INVALID_ARGUMENT with the reason. */
nimble_status_t nimble_message_decode(const void *data, size_t size, nimble_msg_type_t *out_type,
                                      json_t **out_body);

/* Builds and encodes an ERROR message from a failed status (code name and
 * message); job may be NULL. Does not take ownership of `error`. */
nimble_status_t nimble_message_encode_error(nimble_status_t error, const char *job, char **out,
                                            size_t *out_size);

/* Turns the body of an ERROR or FAILURE message back into a status (code
 * from "code", INTERNAL when absent; message from "message" or "error").
 * Caller owns the result, which is never nimble_ok(). */
nimble_status_t nimble_message_body_to_status(const json_t *body);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_MESSAGE_H */
