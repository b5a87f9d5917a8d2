/* Who may talk to the scheduler. Clients present a bearer token (body
 * member "token"; the file format is the store's: one token a line, '#'
 * comment lines, blanks around a token ignored; only SHA-256 digests are
 * kept). Workers, when keys are configured, connect over CurveZMQ and the
 * ZAP handler admits only public keys on the allow-list. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "broker.h"

/* Calls fn(line, lineno) for each token-like line (trimmed, not a comment). */
static nimble_status_t read_lines(const char *path, const char *what,
                                  nimble_status_t (*fn)(void *, const char *, int), void *user) {
  FILE *f = fopen(path, "r");
  if (!f) return nimble_status_make(NIMBLE_NOT_FOUND, "%s '%s': %s", what, path, strerror(errno));
  char line[1024];
  int lineno = 0;
  nimble_status_t st = nimble_ok();
  while (!st && fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1])) p[--n] = '\0';
    if (!n || *p == '#') continue;
    st = fn(user, p, lineno);
  }
  fclose(f);
  return st ? nimble_status_annotate(st, "%s '%s'", what, path) : nimble_ok();
}

static nimble_status_t add_token(void *user, const char *tok, int lineno) {
  nimble_scheduler *s = user;
  nimble_digest_t *n = realloc(s->tokens, (s->ntokens + 1) * sizeof *n);
  if (!n) return NIMBLE_OOM();
  s->tokens = n;
  nimble_digest_compute(tok, strlen(tok), &s->tokens[s->ntokens++]);
  return nimble_ok();
}

nimble_status_t sched_load_tokens(nimble_scheduler *s, const char *path) {
  NIMBLE_RETURN_IF_ERROR(read_lines(path, "--token-file", add_token, s));
  if (!s->ntokens)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--token-file '%s' holds no token", path);
  return nimble_ok();
}

nimble_status_t sched_check_token(nimble_scheduler *s, const json_t *body) {
  if (!s->tokens) return nimble_ok();
  const char *tok = json_string_value(json_object_get(body, "token"));
  if (!tok)
    return nimble_status_make(NIMBLE_UNAUTHENTICATED,
                              "this scheduler needs a bearer token (body member 'token')");
  nimble_digest_t d;
  nimble_digest_compute(tok, strlen(tok), &d);
  int match = 0;
  for (size_t i = 0; i < s->ntokens; i++) {
    /* Compare every byte of every entry: no early exit to time. */
    uint8_t diff = 0;
    for (size_t k = 0; k < sizeof d.bytes; k++) diff |= d.bytes[k] ^ s->tokens[i].bytes[k];
    match |= diff == 0;
  }
  if (!match) return nimble_status_make(NIMBLE_UNAUTHENTICATED, "the bearer token is not valid");
  return nimble_ok();
}

static nimble_status_t decode_z85(const char *text, uint8_t out[32]) {
  if (strlen(text) != 40 || !zmq_z85_decode(out, text))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "'%.60s' is not a Z85 CURVE key (40 characters)", text);
  return nimble_ok();
}

static nimble_status_t first_key(void *user, const char *line, int lineno) {
  uint8_t *out = user;
  if (out[32]) return nimble_ok();
  NIMBLE_RETURN_IF_ERROR_CTX(decode_z85(line, out), "line %d", lineno);
  out[32] = 1;
  return nimble_ok();
}

nimble_status_t sched_read_z85_key(const char *path, uint8_t out[32]) {
  uint8_t buf[33] = {0};
  NIMBLE_RETURN_IF_ERROR(read_lines(path, "key file", first_key, buf));
  if (!buf[32]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "key file '%s' holds no key", path);
  memcpy(out, buf, 32);
  return nimble_ok();
}

static nimble_status_t add_worker_key(void *user, const char *line, int lineno) {
  nimble_scheduler *s = user;
  uint8_t key[32];
  NIMBLE_RETURN_IF_ERROR_CTX(decode_z85(line, key), "line %d", lineno);
  uint8_t(*n)[32] = realloc(s->worker_keys, (s->nworker_keys + 1) * sizeof *n);
  if (!n) return NIMBLE_OOM();
  s->worker_keys = n;
  memcpy(s->worker_keys[s->nworker_keys++], key, 32);
  return nimble_ok();
}

nimble_status_t sched_setup_curve(nimble_scheduler *s, const char *secret_file,
                                  const char *keys_file) {
  if (!zmq_has("curve"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "this libzmq was built without CURVE");
  uint8_t secret[32];
  NIMBLE_RETURN_IF_ERROR_CTX(sched_read_z85_key(secret_file, secret), "--curve-secret");
  NIMBLE_RETURN_IF_ERROR(read_lines(keys_file, "--worker-keys", add_worker_key, s));
  if (!s->nworker_keys)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "--worker-keys '%s' holds no key", keys_file);
  /* The ZAP handler must be bound before a CURVE socket accepts anyone. */
  s->zap = zmq_socket(s->zctx, ZMQ_REP);
  if (!s->zap || zmq_bind(s->zap, "inproc://zeromq.zap.01") != 0)
    return nimble_status_make(NIMBLE_INTERNAL, "ZAP handler: %s", zmq_strerror(errno));
  int one = 1;
  if (zmq_setsockopt(s->workers, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
      zmq_setsockopt(s->workers, ZMQ_CURVE_SECRETKEY, secret, 32) != 0 ||
      zmq_setsockopt(s->workers, ZMQ_ZAP_DOMAIN, "nimble-workers", 14) != 0)
    return nimble_status_make(NIMBLE_INTERNAL, "CURVE on the workers socket: %s",
                              zmq_strerror(errno));
  sched_log(s, "CURVE on for workers: %zu key(s) allowed", s->nworker_keys);
  return nimble_ok();
}

/* One ZAP request (RFC 27): version, request id, domain, address, identity,
 * mechanism, credentials... The reply admits a CURVE client whose public
 * key is listed; anything else on the workers domain is refused. */
void sched_handle_zap(nimble_scheduler *s) {
  zmq_msg_t f[8];
  int n = 0, more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s->zap, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      if (n == 0) return;
      break;
    }
    more = zmq_msg_more(&m);
    if (n < 8) f[n++] = m;
    else zmq_msg_close(&m);
  }
  const char *status = "400", *text = "refused";
  char addr[64] = "?", user[41] = "";
  if (n >= 6) {
    size_t al = zmq_msg_size(&f[3]) < sizeof addr - 1 ? zmq_msg_size(&f[3]) : sizeof addr - 1;
    memcpy(addr, zmq_msg_data(&f[3]), al);
    addr[al] = '\0';
    int curve = zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5);
    if (curve && n >= 7 && zmq_msg_size(&f[6]) == 32) {
      const uint8_t *key = zmq_msg_data(&f[6]);
      for (size_t i = 0; i < s->nworker_keys; i++)
        if (!memcmp(key, s->worker_keys[i], 32)) status = "200", text = "OK";
      /* The user id is the key (Z85): every message of the connection
       * carries it (ZMQ "User-Id"), and a worker id is bound to it. */
      if (*status == '2') zmq_z85_encode(user, key, 32);
      int64_t now = sched_now_mono_ms();
      if (*status != '2' && (memcmp(key, s->last_refused_key, 32) ||
                             now - s->last_refused_ms > 60000)) {
        /* A refused peer retries every few hundred ms: say it once a minute. */
        memcpy(s->last_refused_key, key, 32);
        s->last_refused_ms = now;
        char z85[41];
        zmq_z85_encode(z85, key, 32);
        sched_log(s, "ZAP: refused worker key %s from %s (not in --worker-keys)", z85, addr);
      }
    } else {
      sched_log(s, "ZAP: refused a connection from %s without CURVE", addr);
    }
  }
  /* Reply: version, request id, status code, status text, user id, metadata. */
  const char *ver = "1.0";
  zmq_send(s->zap, ver, 3, ZMQ_SNDMORE);
  if (n >= 2) zmq_send(s->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
  else zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
  zmq_send(s->zap, status, 3, ZMQ_SNDMORE);
  zmq_send(s->zap, text, strlen(text), ZMQ_SNDMORE);
  zmq_send(s->zap, user, strlen(user), ZMQ_SNDMORE);
  zmq_send(s->zap, "", 0, 0);
  for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}
