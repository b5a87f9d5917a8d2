/* A scripted HTTP/1.1 responder on loopback, the test peer for what a real
 * store cannot be made to do on demand: serve wrong bytes, close mid-body,
 * answer 503 a few times, send a Location to another host.
 *
 * It answers the requests it receives, in order, with the responses of its
 * script (the last one repeats once the script runs out), and records each
 * request. One connection at a time, keep-alive honoured. It is a test peer,
 * not a stand-in for nimble-store: the suites against the real servers live
 * beside it. */
#ifndef NIMBLE_TEST_HTTP_PEER_H
#define NIMBLE_TEST_HTTP_PEER_H

#include <stddef.h>

typedef struct http_peer http_peer;

typedef struct peer_response_t {
  int status;               /* 0: close the connection without answering */
  const char *headers;      /* extra header lines, each ending "\r\n", or NULL */
  const void *body;         /* borrowed until http_peer_stop() */
  size_t body_len;
  long long declared_length;/* Content-Length to announce; -1: body_len (or the range) */
  long long cut_after;      /* close after this many body bytes; -1: send everything */
  int honor_range;          /* a "Range: bytes=N-" request gets 206 and body[N..] */
} peer_response_t;

typedef struct peer_request_t {
  char method[16];
  char path[1024];
  char range[64];           /* the Range header, "" when absent */
  char authorization[256];
  char content_range[64];   /* the Content-Range header, "" when absent */
  size_t body_len;
} peer_request_t;

/* Starts the peer on 127.0.0.1 and a free port; the script is borrowed. */
http_peer *http_peer_start(const peer_response_t *script, size_t count);
int http_peer_port(const http_peer *peer);
/* Stops the peer and joins its thread. */
void http_peer_stop(http_peer *peer);
/* Requests seen so far (valid until stop). */
size_t http_peer_request_count(http_peer *peer);
const peer_request_t *http_peer_request(http_peer *peer, size_t i);

/* A port on which nothing listens (bound, then closed). */
int http_peer_unused_port(void);



/* A TCP forwarder to 127.0.0.1:upstream_port that cuts the network once: the
 * first time more than `cut_up_after` bytes have gone client→server (or
 * `cut_down_after` server→client) on one connection, both sides of that
 * connection are closed mid-stream. -1 disables a direction. Everything else
 * is forwarded untouched, so the real server on the other side answers. */
typedef struct tcp_cutter tcp_cutter;
tcp_cutter *tcp_cutter_start(int upstream_port, long long cut_up_after, long long cut_down_after);
int tcp_cutter_port(const tcp_cutter *cutter);
/* How many cuts happened (0 or 1). */
int tcp_cutter_cuts(tcp_cutter *cutter);
void tcp_cutter_stop(tcp_cutter *cutter);
#endif
