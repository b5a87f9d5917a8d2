/* nimble-store's HTTP server: the OCI routes on a libmicrohttpd daemon,
 * started and stopped as one object so tests and main() share it. */
#ifndef NIMBLE_STORE_SERVER_H
#define NIMBLE_STORE_SERVER_H

#include <stdint.h>

#include "nimble/status.h"
#include "nimble/store_fs.h"

typedef struct nimble_store_server_config {
  const char *listen;        /* "HOST:PORT"; port 0 picks a free one */
  const char *root;          /* store root directory */
  const char *token_file;    /* NULL: no tokens, writes open to anyone */
  int auth_reads;            /* reads need a token too */
  uint64_t max_blob_size;    /* 0: NIMBLE_STORE_DEFAULT_MAX_BLOB_SIZE */
  unsigned max_connections;  /* 0: 64 */
  unsigned upload_timeout_s; /* idle uploads removed after this; 0: 3600 */
  int quiet;                 /* no request log */
} nimble_store_server_config;

typedef struct nimble_store_server nimble_store_server;

/* Opens the store, binds the socket and starts serving. Caller owns
 * *out_server and ends it with nimble_store_server_stop(). */
nimble_status_t nimble_store_server_start(const nimble_store_server_config *config,
                                          nimble_store_server **out_server);

/* "HOST:PORT" actually bound, borrowed from the server. */
const char *nimble_store_server_address(const nimble_store_server *server);

/* Stops accepting, lets requests in flight finish for up to `grace_ms`,
 * drops the rest, and frees the server. Nothing visible is removed: an
 * upload cut short stays an invisible temporary. NULL is fine. */
void nimble_store_server_stop(nimble_store_server *server, unsigned grace_ms);

#endif /* NIMBLE_STORE_SERVER_H */
