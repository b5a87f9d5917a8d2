/* The scripted HTTP responder of http_peer.h. */
#include "http_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_REQUESTS 256

struct http_peer {
  int listen_fd;
  int port;
  const peer_response_t *script;
  size_t count;
  pthread_t thread;
  _Atomic int stop;
  pthread_mutex_t mu;
  peer_request_t requests[MAX_REQUESTS];
  size_t nrequests;
  size_t next;  /* index into the script */
};

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Waits up to 5 s for data; returns bytes read, 0 on EOF/timeout/stop. */
static ssize_t recv_some(http_peer *p, int fd, char *buf, size_t cap) {
  for (int waited = 0; waited < 5000 && !p->stop; waited += 50) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r = poll(&pfd, 1, 50);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return 0;
    if (r == 0) continue;
    ssize_t n = recv(fd, buf, cap, 0);
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? 0 : n;
  }
  return 0;
}

static void header_value(const char *head, const char *name, char *out, size_t cap) {
  out[0] = '\0';
  size_t nl = strlen(name);
  for (const char *line = strstr(head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
    const char *h = line + 2;
    if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
      h += nl + 1;
      while (*h == ' ') h++;
      const char *e = strstr(h, "\r\n");
      size_t len = e ? (size_t)(e - h) : strlen(h);
      if (len >= cap) len = cap - 1;
      memcpy(out, h, len);
      out[len] = '\0';
      return;
    }
  }
}

/* Serves one connection; returns when it closes or a response cuts it. */
static void serve_connection(http_peer *p, int fd) {
  static char buf[65536];
  size_t have = 0;
  for (;;) {
    char *end;
    while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
      if (have == sizeof(buf) - 1) return;
      ssize_t n = recv_some(p, fd, buf + have, sizeof(buf) - 1 - have);
      if (n <= 0) return;
      have += (size_t)n;
    }
    size_t head_len = (size_t)(end - buf) + 4;
    char head[16384];
    size_t hl = head_len < sizeof(head) - 1 ? head_len : sizeof(head) - 1;
    memcpy(head, buf, hl);
    head[hl] = '\0';
    peer_request_t rq = {0};
    sscanf(head, "%15s %1023s", rq.method, rq.path);
    header_value(head, "Range", rq.range, sizeof(rq.range));
    header_value(head, "Authorization", rq.authorization, sizeof(rq.authorization));
    header_value(head, "Content-Range", rq.content_range, sizeof(rq.content_range));
    char cl[32];
    header_value(head, "Content-Length", cl, sizeof(cl));
    size_t body_len = cl[0] ? (size_t)strtoull(cl, NULL, 10) : 0;
    rq.body_len = body_len;
    /* Discard the request body. */
    memmove(buf, buf + head_len, have - head_len);
    have -= head_len;
    while (have < body_len) {
      size_t take = have;
      body_len -= take;
      have = 0;
      ssize_t n = recv_some(p, fd, buf, sizeof(buf) - 1);
      if (n <= 0) return;
      have = (size_t)n;
    }
    memmove(buf, buf + body_len, have - body_len);
    have -= body_len;

    pthread_mutex_lock(&p->mu);
    if (p->nrequests < MAX_REQUESTS) p->requests[p->nrequests++] = rq;
    const peer_response_t *r = &p->script[p->next < p->count ? p->next : p->count - 1];
    p->next++;
    pthread_mutex_unlock(&p->mu);

    if (r->status == 0) return;
    size_t off = 0;
    int status = r->status;
    unsigned long long start = 0;
    char extra[160] = "";
    if (r->honor_range && rq.range[0] && sscanf(rq.range, "bytes=%llu-", &start) == 1 &&
        start <= r->body_len) {
      status = 206;
      off = (size_t)start;
      snprintf(extra, sizeof(extra), "Content-Range: bytes %llu-%zu/%zu\r\n", start,
               r->body_len ? r->body_len - 1 : 0, r->body_len);
    }
    size_t send_len = r->body_len - off;
    long long declared = r->declared_length >= 0 ? r->declared_length : (long long)send_len;
    char resp_head[2048];
    int n = snprintf(resp_head, sizeof(resp_head),
                     "HTTP/1.1 %d Scripted\r\nContent-Length: %lld\r\n%s%s\r\n", status, declared,
                     extra, r->headers ? r->headers : "");
    if (send_all(fd, resp_head, (size_t)n) != 0) return;
    if (strcmp(rq.method, "HEAD") == 0) continue;
    size_t limit = send_len;
    if (r->cut_after >= 0 && (size_t)r->cut_after < limit) limit = (size_t)r->cut_after;
    if (limit && send_all(fd, (const char *)r->body + off, limit) != 0) return;
    if (limit < send_len || (long long)limit < declared) return;  /* cut: close */
  }
}

static void *peer_main(void *arg) {
  http_peer *p = arg;
  while (!p->stop) {
    struct pollfd pfd = {.fd = p->listen_fd, .events = POLLIN};
    int r = poll(&pfd, 1, 50);
    if (r <= 0) continue;
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0) continue;
    serve_connection(p, fd);
    /* Half-close first so the client reads what was sent before the reset. */
    shutdown(fd, SHUT_WR);
    close(fd);
  }
  return NULL;
}

static int bind_loopback(int *out_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    close(fd);
    return -1;
  }
  *out_port = ntohs(a.sin_port);
  return fd;
}

http_peer *http_peer_start(const peer_response_t *script, size_t count) {
  http_peer *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->script = script;
  p->count = count;
  pthread_mutex_init(&p->mu, NULL);
  p->listen_fd = bind_loopback(&p->port);
  if (p->listen_fd < 0 || count == 0 || pthread_create(&p->thread, NULL, peer_main, p) != 0) {
    if (p->listen_fd >= 0) close(p->listen_fd);
    free(p);
    return NULL;
  }
  return p;
}

int http_peer_port(const http_peer *p) { return p->port; }

void http_peer_stop(http_peer *p) {
  if (!p) return;
  p->stop = 1;
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

size_t http_peer_request_count(http_peer *p) {
  pthread_mutex_lock(&p->mu);
  size_t n = p->nrequests;
  pthread_mutex_unlock(&p->mu);
  return n;
}

const peer_request_t *http_peer_request(http_peer *p, size_t i) {
  return i < p->nrequests ? &p->requests[i] : NULL;
}

int http_peer_unused_port(void) {
  int port = 0;
  int fd = bind_loopback(&port);
  if (fd < 0) return -1;
  close(fd);
  return port;
}

/* ---- tcp_cutter ---------------------------------------------------------- */

#define CUTTER_MAX_CONNS 16

typedef struct cutter_conn_t {
  int client_fd, server_fd;   /* -1 when the slot is free */
  long long up, down;         /* bytes forwarded each way */
} cutter_conn_t;

struct tcp_cutter {
  int listen_fd;
  int port;
  int upstream_port;
  long long cut_up_after, cut_down_after;
  _Atomic int cuts;
  _Atomic int stop;
  pthread_t thread;
  cutter_conn_t conns[CUTTER_MAX_CONNS];
};

static void cutter_close(cutter_conn_t *c) {
  if (c->client_fd >= 0) close(c->client_fd);
  if (c->server_fd >= 0) close(c->server_fd);
  c->client_fd = c->server_fd = -1;
}

/* Forwards what is readable on `from` to `to`; returns -1 when the pair
 * should close. `budget` (>= 0) limits the bytes before a cut. */
static int cutter_pump(tcp_cutter *t, cutter_conn_t *c, int from, int to, long long *count,
                       long long cut_after) {
  char buf[65536];
  ssize_t n = recv(from, buf, sizeof(buf), 0);
  if (n < 0 && errno == EINTR) return 0;
  if (n <= 0) return -1;
  size_t fwd = (size_t)n;
  int cut = 0;
  if (cut_after >= 0 && t->cuts == 0 && *count + n > cut_after) {
    fwd = (size_t)(cut_after - *count);
    cut = 1;
  }
  if (fwd && send_all(to, buf, fwd) != 0) return -1;
  *count += (long long)fwd;
  if (cut) {
    t->cuts++;
    /* A reset, not a clean close: what a crashed peer or a dropped link
     * looks like to the other side. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->client_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    setsockopt(c->server_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    return -1;
  }
  return 0;
}

static void *cutter_main(void *arg) {
  tcp_cutter *t = arg;
  while (!t->stop) {
    struct pollfd pfds[1 + 2 * CUTTER_MAX_CONNS];
    int idx[1 + 2 * CUTTER_MAX_CONNS];
    int n = 0;
    pfds[n] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
    idx[n++] = -1;
    for (int i = 0; i < CUTTER_MAX_CONNS; i++) {
      if (t->conns[i].client_fd < 0) continue;
      pfds[n] = (struct pollfd){.fd = t->conns[i].client_fd, .events = POLLIN};
      idx[n++] = i;
      pfds[n] = (struct pollfd){.fd = t->conns[i].server_fd, .events = POLLIN};
      idx[n++] = i;
    }
    int r = poll(pfds, (nfds_t)n, 50);
    if (r <= 0) continue;
    if (pfds[0].revents & POLLIN) {
      int cfd = accept(t->listen_fd, NULL, NULL);
      int slot = -1;
      for (int i = 0; i < CUTTER_MAX_CONNS && cfd >= 0; i++)
        if (t->conns[i].client_fd < 0) { slot = i; break; }
      int sfd = -1;
      if (slot >= 0) {
        sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)t->upstream_port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (sfd >= 0 && connect(sfd, (struct sockaddr *)&a, sizeof(a)) != 0) {
          close(sfd);
          sfd = -1;
        }
      }
      if (slot >= 0 && sfd >= 0) {
        t->conns[slot] = (cutter_conn_t){.client_fd = cfd, .server_fd = sfd};
      } else if (cfd >= 0) {
        close(cfd);
      }
    }
    for (int k = 1; k < n; k++) {
      cutter_conn_t *c = &t->conns[idx[k]];
      if (c->client_fd < 0 || !(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int rc;
      if (pfds[k].fd == c->client_fd)
        rc = cutter_pump(t, c, c->client_fd, c->server_fd, &c->up, t->cut_up_after);
      else
        rc = cutter_pump(t, c, c->server_fd, c->client_fd, &c->down, t->cut_down_after);
      if (rc < 0) cutter_close(c);
    }
  }
  for (int i = 0; i < CUTTER_MAX_CONNS; i++) cutter_close(&t->conns[i]);
  return NULL;
}

tcp_cutter *tcp_cutter_start(int upstream_port, long long cut_up_after, long long cut_down_after) {
  tcp_cutter *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->upstream_port = upstream_port;
  t->cut_up_after = cut_up_after;
  t->cut_down_after = cut_down_after;
  for (int i = 0; i < CUTTER_MAX_CONNS; i++) t->conns[i].client_fd = t->conns[i].server_fd = -1;
  t->listen_fd = bind_loopback(&t->port);
  if (t->listen_fd < 0 || pthread_create(&t->thread, NULL, cutter_main, t) != 0) {
    if (t->listen_fd >= 0) close(t->listen_fd);
    free(t);
    return NULL;
  }
  return t;
}

int tcp_cutter_port(const tcp_cutter *t) { return t->port; }
int tcp_cutter_cuts(tcp_cutter *t) { return t->cuts; }

void tcp_cutter_stop(tcp_cutter *t) {
  if (!t) return;
  t->stop = 1;
  pthread_join(t->thread, NULL);
  close(t->listen_fd);
  free(t);
}
