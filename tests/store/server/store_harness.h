/* Test harness for nimble-store: starts the real server binary in a
 * temporary directory (fork/exec, ready file), and a small libcurl client
 * for the suites' HTTP calls. */
#ifndef NIMBLE_TEST_STORE_HARNESS_H
#define NIMBLE_TEST_STORE_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#define STORE_TEST_TOKEN "test-token"

typedef struct store_proc {
  pid_t pid;
  char dir[256]; /* temporary directory: root/, tokens, addr, log */
  char root[300];
  char addr[96];  /* HOST:PORT */
  char base[128]; /* http://HOST:PORT */
} store_proc;

/* Makes a fresh temporary directory (with a token file holding
 * STORE_TEST_TOKEN) in p->dir. Returns 0 on success. */
int store_dir_create(store_proc *p);

/* Starts nimble-store on 127.0.0.1:0 with --root DIR/root --token-file
 * DIR/tokens --ready-file DIR/addr, plus `extra` (NULL-terminated, may be
 * NULL), and waits (at most 10 s) for the ready file. 0 on success. */
int store_proc_start(store_proc *p, const char *const *extra);

/* Sends `sig` and waits for the process; returns its wait status. */
int store_proc_stop(store_proc *p, int sig);

/* Removes the temporary directory. */
void store_dir_remove(store_proc *p);

/* Path of the nimble-store binary (env NIMBLE_STORE_BIN, else
 * $NIMBLE_BUILD_DIR/artifact-store/server/nimble-store). Static storage. */
const char *store_bin_path(void);

typedef struct http_result {
  long status;
  char *body; /* owned, NUL-terminated */
  size_t body_len;
  char *headers; /* owned, raw response headers */
  int curl_code; /* CURLE_OK when the exchange completed */
} http_result;

/* One request. `token` NULL sends no Authorization; `headers` is a
 * NULL-terminated list of "Name: value" (may be NULL). HEAD is supported. */
int http_do(const char *method, const char *url, const char *token, const void *body,
            size_t body_len, const char *const *headers, http_result *out);
void http_result_free(http_result *r);

/* Value of response header `name` (case-insensitive), caller frees; NULL
 * when absent. */
char *http_header(const http_result *r, const char *name);

/* "sha256:<hex>" of data, computed with libsodium directly (not the code
 * under test). out must hold 72 bytes. */
void test_sha256(const void *data, size_t len, char out[72]);

/* Count of regular files under dir (recursively). */
int count_files(const char *dir);

/* A TCP connection to HOST:PORT, or -1. */
int raw_connect(const char *addr);

/* Polls (every 10 ms, at most `ms`) until count_files(dir) == want. */
int wait_file_count(const char *dir, int want, int ms);
#endif /* NIMBLE_TEST_STORE_HARNESS_H */
