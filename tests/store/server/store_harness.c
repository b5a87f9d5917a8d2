/* Harness implementation: process control and a minimal libcurl client. */
#include "store_harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *store_bin_path(void) {
  static char path[1024];
  const char *bin = getenv("NIMBLE_STORE_BIN");
  if (bin && *bin) return bin;
  const char *build = getenv("NIMBLE_BUILD_DIR");
  snprintf(path, sizeof path, "%s/artifact-store/server/nimble-store", build ? build : ".");
  return path;
}

int store_dir_create(store_proc *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->dir, sizeof p->dir, "/tmp/nimble-store-test-XXXXXX");
  if (!mkdtemp(p->dir)) return -1;
  snprintf(p->root, sizeof p->root, "%s/root", p->dir);
  char path[400];
  snprintf(path, sizeof path, "%s/tokens", p->dir);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# tokens for the test\n%s\n", STORE_TEST_TOKEN);
  fclose(f);
  return 0;
}

int store_proc_start(store_proc *p, const char *const *extra) {
  char tokens[400], ready[400], log[400];
  snprintf(tokens, sizeof tokens, "%s/tokens", p->dir);
  snprintf(ready, sizeof ready, "%s/addr", p->dir);
  snprintf(log, sizeof log, "%s/log", p->dir);
  unlink(ready);
  const char *argv[32];
  int n = 0;
  argv[n++] = store_bin_path();
  argv[n++] = "--listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--root";
  argv[n++] = p->root;
  argv[n++] = "--token-file";
  argv[n++] = tokens;
  argv[n++] = "--ready-file";
  argv[n++] = ready;
  for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 2);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  p->pid = pid;
  for (int i = 0; i < 1000; i++) { /* 10 s */
    FILE *f = fopen(ready, "r");
    if (f) {
      int ok = fgets(p->addr, sizeof p->addr, f) != NULL;
      fclose(f);
      if (ok) {
        p->addr[strcspn(p->addr, "\n")] = '\0';
        snprintf(p->base, sizeof p->base, "http://%s", p->addr);
        return 0;
      }
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      p->pid = 0;
      return -1;
    }
    usleep(10000);
  }
  return -1;
}

int store_proc_stop(store_proc *p, int sig) {
  if (p->pid <= 0) return -1;
  kill(p->pid, sig);
  int status = -1;
  for (int i = 0; i < 1500; i++) { /* 15 s, then SIGKILL */
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
      p->pid = 0;
      return status;
    }
    usleep(10000);
  }
  kill(p->pid, SIGKILL);
  waitpid(p->pid, &status, 0);
  p->pid = 0;
  return -1;
}

static int remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return 0;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (d) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[1024];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        remove_tree(child);
      }
      closedir(d);
    }
    return rmdir(path);
  }
  return unlink(path);
}

void store_dir_remove(store_proc *p) {
  if (p->dir[0]) remove_tree(p->dir);
}

int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char child[1024];
    snprintf(child, sizeof child, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(child, &st) != 0) continue;
    if (S_ISDIR(st.st_mode))
      n += count_files(child);
    else if (S_ISREG(st.st_mode))
      n++;
  }
  closedir(d);
  return n;
}

void test_sha256(const void *data, size_t len, char out[72]) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, data, len);
  memcpy(out, "sha256:", 7);
  for (int i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

typedef struct buf {
  char *data;
  size_t len;
} buf;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata) {
  buf *b = userdata;
  size_t n = size * nmemb;
  char *d = realloc(b->data, b->len + n + 1);
  if (!d) return 0;
  memcpy(d + b->len, ptr, n);
  b->data = d;
  b->len += n;
  d[b->len] = '\0';
  return n;
}

int http_do(const char *method, const char *url, const char *token, const void *body,
            size_t body_len, const char *const *headers, http_result *out) {
  memset(out, 0, sizeof *out);
  CURL *c = curl_easy_init();
  if (!c) return -1;
  buf b = {0}, h = {0};
  struct curl_slist *list = NULL;
  char auth[256];
  if (token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    list = curl_slist_append(list, auth);
  }
  int expect = 0;
  for (int i = 0; headers && headers[i]; i++) {
    list = curl_slist_append(list, headers[i]);
    if (strncasecmp(headers[i], "Expect:", 7) == 0) expect = 1;
  }
  /* curl would add "Expect: 100-continue" for large bodies on its own; tests
   * that want it ask for it, the others send bodies straight away. */
  if (!expect) list = curl_slist_append(list, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  if (!strcmp(method, "HEAD")) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (!strcmp(method, "GET")) {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body || !strcmp(method, "PUT") || !strcmp(method, "POST") || !strcmp(method, "PATCH")) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
  }
  out->curl_code = (int)curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
  curl_slist_free_all(list);
  curl_easy_cleanup(c);
  out->body = b.data ? b.data : strdup("");
  out->body_len = b.len;
  out->headers = h.data ? h.data : strdup("");
  return out->curl_code == CURLE_OK ? 0 : -1;
}

void http_result_free(http_result *r) {
  free(r->body);
  free(r->headers);
  memset(r, 0, sizeof *r);
}

char *http_header(const http_result *r, const char *name) {
  size_t n = strlen(name);
  for (const char *line = r->headers; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
      const char *v = line + n + 1;
      while (*v == ' ') v++;
      size_t vlen = (size_t)(line + len - v);
      while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == ' ')) vlen--;
      return strndup(v, vlen);
    }
    line = end ? end + 1 : line + len;
  }
  return NULL;
}

int raw_connect(const char *addr) {
  char host[96];
  snprintf(host, sizeof host, "%s", addr);
  char *colon = strrchr(host, ':');
  if (!colon) return -1;
  *colon = '\0';
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)atoi(colon + 1));
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int wait_file_count(const char *dir, int want, int ms) {
  for (int waited = 0;; waited += 10) {
    if (count_files(dir) == want) return 1;
    if (waited >= ms) return 0;
    usleep(10000);
  }
}
