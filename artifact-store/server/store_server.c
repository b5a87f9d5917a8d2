/* The server object: listening socket, libmicrohttpd daemon, and the
 * thread that expires idle uploads.
 *
 * libmicrohttpd runs one thread per connection. Request handlers do blocking
 * disk work (appending chunks, hashing a blob at commit); with a thread per
 * connection that work never stalls other clients, and --max-connections
 * bounds the threads. */
#include "store_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "oci_routes.h"
#include "store_metrics.h"

struct nimble_store_server {
  nimble_oci_context ctx;
  struct MHD_Daemon *daemon;
  int listen_fd;
  char address[300];
  unsigned upload_timeout_s;
  pthread_t expiry;
  int expiry_started;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  int stopping;
};

/* Splits "HOST:PORT" (IPv6 as "[::1]:PORT") and binds a listening socket. */
static nimble_status_t bind_listen(const char *listen_spec, int *out_fd, char *out_address,
                                   size_t address_size) {
  if (!listen_spec)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--listen HOST:PORT is required");
  const char *colon = strrchr(listen_spec, ':');
  if (!colon || colon == listen_spec || !colon[1])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "--listen '%s': expected HOST:PORT, e.g. 127.0.0.1:5000",
                              listen_spec);
  char host[256];
  size_t host_len = (size_t)(colon - listen_spec);
  const char *h = listen_spec;
  if (h[0] == '[' && host_len >= 2 && h[host_len - 1] == ']') {
    h++;
    host_len -= 2;
  }
  if (host_len >= sizeof host)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--listen: host name is too long");
  memcpy(host, h, host_len);
  host[host_len] = '\0';
  const char *port = colon + 1;
  for (const char *p = port; *p; p++)
    if (*p < '0' || *p > '9' || p - port > 5)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--listen '%s': port '%s' is not a number",
                                listen_spec, port);
  if (atoi(port) > 65535)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--listen '%s': port %s is above 65535",
                              listen_spec, port);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--listen '%s': %s", listen_spec,
                              gai_strerror(rc));
  nimble_status_t s =
      nimble_status_make(NIMBLE_UNAVAILABLE, "--listen '%s': no address", listen_spec);
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      nimble_status_free(s);
      s = nimble_status_make(NIMBLE_UNAVAILABLE, "cannot listen on %s: %s", listen_spec,
                             strerror(errno));
      close(fd);
      continue;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char numeric_host[NI_MAXHOST], numeric_port[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, numeric_host, sizeof numeric_host, numeric_port,
                    sizeof numeric_port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
      close(fd);
      continue;
    }
    snprintf(out_address, address_size, strchr(numeric_host, ':') ? "[%s]:%s" : "%s:%s",
             numeric_host, numeric_port);
    nimble_status_free(s);
    s = nimble_ok();
    *out_fd = fd;
    break;
  }
  freeaddrinfo(res);
  return s;
}

static void *expiry_main(void *arg) {
  nimble_store_server *server = arg;
  /* Check a few times per timeout, at least once a minute. */
  unsigned period = server->upload_timeout_s / 4;
  if (period < 1) period = 1;
  if (period > 60) period = 60;
  pthread_mutex_lock(&server->lock);
  while (!server->stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += period;
    pthread_cond_timedwait(&server->wake, &server->lock, &until);
    if (server->stopping) break;
    pthread_mutex_unlock(&server->lock);
    size_t removed = 0;
    nimble_status_t s =
        nimble_store_fs_upload_expire(server->ctx.store, server->upload_timeout_s, &removed);
    if (s && !server->ctx.quiet)
      fprintf(stderr, "nimble-store: expiring uploads: %s\n", nimble_status_message(s));
    else if (removed && !server->ctx.quiet)
      fprintf(stderr, "nimble-store: removed %zu idle upload(s)\n", removed);
    nimble_status_free(s);
    pthread_mutex_lock(&server->lock);
  }
  pthread_mutex_unlock(&server->lock);
  return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  nimble_store_server *server = cls;
  if (server->ctx.quiet) return;
  fputs("nimble-store: libmicrohttpd: ", stderr);
  vfprintf(stderr, fmt, ap);
}

nimble_status_t nimble_store_server_start(const nimble_store_server_config *config,
                                          nimble_store_server **out_server) {
  nimble_store_server *server = calloc(1, sizeof *server);
  if (!server) return NIMBLE_OOM();
  server->listen_fd = -1;
  pthread_mutex_init(&server->lock, NULL);
  pthread_cond_init(&server->wake, NULL);
  server->ctx.auth_reads = config->auth_reads;
  server->ctx.quiet = config->quiet;
  server->ctx.max_connections = config->max_connections ? config->max_connections : 64;
  server->upload_timeout_s = config->upload_timeout_s ? config->upload_timeout_s : 3600;
  atomic_init(&server->ctx.connections, 0);
  atomic_init(&server->ctx.requests, 0);
  server->ctx.metrics = nimble_store_metrics_create();

  nimble_status_t s = nimble_ok();
  if (config->token_file)
    s = nimble_store_auth_load(config->token_file, &server->ctx.auth);
  else if (config->auth_reads)
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--auth-reads needs --token-file");
  nimble_store_fs_options fs_options = {.max_blob_size = config->max_blob_size};
  if (!s) s = nimble_store_fs_create(config->root, &fs_options, &server->ctx.store);
  if (!s)
    s = bind_listen(config->listen, &server->listen_fd, server->address, sizeof server->address);
  if (!s) {
    /* Above max_connections, requests get 429 from the handler; the hard
     * cap beyond that (where libmicrohttpd just closes) leaves room for
     * those answers. */
    unsigned hard_cap = server->ctx.max_connections + 16;
    server->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, nimble_oci_handle, &server->ctx, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, server,
        MHD_OPTION_LISTEN_SOCKET, server->listen_fd, MHD_OPTION_CONNECTION_LIMIT, hard_cap,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_NOTIFY_COMPLETED,
        nimble_oci_completed, &server->ctx, MHD_OPTION_NOTIFY_CONNECTION,
        nimble_oci_connection_event, &server->ctx, MHD_OPTION_END);
    if (!server->daemon)
      s = nimble_status_make(NIMBLE_INTERNAL, "libmicrohttpd did not start on %s", server->address);
    else
      server->listen_fd = -1; /* the daemon owns and closes it now */
  }
  if (!s) {
    if (pthread_create(&server->expiry, NULL, expiry_main, server) != 0)
      s = nimble_status_make(NIMBLE_INTERNAL, "cannot start the upload expiry thread");
    else
      server->expiry_started = 1;
  }
  if (s) {
    nimble_store_server_stop(server, 0);
    return s;
  }
  *out_server = server;
  return nimble_ok();
}

const char *nimble_store_server_address(const nimble_store_server *server) {
  return server->address;
}

void nimble_store_server_stop(nimble_store_server *server, unsigned grace_ms) {
  if (!server) return;
  if (server->daemon) {
    /* Stop accepting first, so the grace period only serves requests that
     * had already started. */
    MHD_socket fd = MHD_quiesce_daemon(server->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd); /* quiescing hands it back to us */
    for (unsigned waited = 0; waited < grace_ms && atomic_load(&server->ctx.requests) > 0;
         waited += 10)
      usleep(10 * 1000);
    MHD_stop_daemon(server->daemon);
  }
  if (server->listen_fd >= 0) close(server->listen_fd);
  if (server->expiry_started) {
    pthread_mutex_lock(&server->lock);
    server->stopping = 1;
    pthread_cond_signal(&server->wake);
    pthread_mutex_unlock(&server->lock);
    pthread_join(server->expiry, NULL);
  }
  pthread_mutex_destroy(&server->lock);
  pthread_cond_destroy(&server->wake);
  nimble_store_auth_destroy(server->ctx.auth);
  nimble_store_fs_destroy(server->ctx.store);
  nimble_store_metrics_destroy(server->ctx.metrics);
  free(server);
}
