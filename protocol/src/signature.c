/* Ed25519 artifact signatures over libsodium (nimble/signature.h). No
 * cryptography is written here: keys, signing and verification are
 * libsodium's crypto_sign_*; this file only frames the statement and reads
 * and writes key files. */
#include "nimble/signature.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_KEY_FILE (1u << 20)
#define MAX_TRUSTED_KEYS 1024

static nimble_status_t sodium_ready(void) {
  if (sodium_init() < 0) return nimble_status_make(NIMBLE_INTERNAL, "signature: libsodium failed to initialise");
  return nimble_ok();
}

void nimble_sign_key_hex(const uint8_t key[NIMBLE_SIGN_KEY_BYTES], char out[65]) {
  sodium_bin2hex(out, 65, key, NIMBLE_SIGN_KEY_BYTES);
}

/* Exactly 2*n lowercase hex digits into n bytes. */
static int hex_exact(const char *hex, size_t len, uint8_t *out, size_t n) {
  if (len != 2 * n) return 0;
  for (size_t i = 0; i < len; i++)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'))) return 0;
  size_t got = 0;
  return sodium_hex2bin(out, n, hex, len, NULL, &got, NULL) == 0 && got == n;
}

/* ---- Key files ----------------------------------------------------------- */

static nimble_status_t read_small_file(const char *path, const char *what, char **out, size_t *out_size,
                                       struct stat *out_st) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nimble_status_make(NIMBLE_NOT_FOUND, "%s '%s': %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_KEY_FILE) {
    close(fd);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s '%s': not a regular file of at most %u bytes",
                              what, path, MAX_KEY_FILE);
  }
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    close(fd);
    return NIMBLE_OOM_IN("signature");
  }
  size_t have = 0;
  while (have < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + have, (size_t)st.st_size - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
  }
  close(fd);
  buf[have] = '\0';
  *out = buf;
  *out_size = have;
  if (out_st) *out_st = st;
  return nimble_ok();
}

nimble_status_t nimble_sign_keygen(const char *path, uint8_t out_public[NIMBLE_SIGN_KEY_BYTES]) {
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  nimble_sign_key_t k;
  randombytes_buf(k.seed, sizeof k.seed);
  crypto_sign_seed_keypair(k.public_key, k.secret, k.seed);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, k.seed, sizeof k.seed);
  char line[100];
  int n = snprintf(line, sizeof line, "ed25519-secret %s\n", hex);
  sodium_memzero(hex, sizeof hex);
  nimble_status_t s = nimble_ok();
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    s = nimble_status_make(errno == EEXIST ? NIMBLE_ALREADY_EXISTS : NIMBLE_FAILED_PRECONDITION,
                           "signing key '%s': %s%s", path, strerror(errno),
                           errno == EEXIST ? " (a key is never overwritten)" : "");
  } else {
    /* O_CREAT's mode is masked by the umask; 0600 is what we promise. */
    if (fchmod(fd, 0600) != 0 || write(fd, line, (size_t)n) != n || fsync(fd) != 0)
      s = nimble_status_make(NIMBLE_FAILED_PRECONDITION, "signing key '%s': %s", path, strerror(errno));
    close(fd);
    if (s) unlink(path);
  }
  sodium_memzero(line, sizeof line);
  if (!s) memcpy(out_public, k.public_key, NIMBLE_SIGN_KEY_BYTES);
  nimble_sign_key_deinit(&k);
  return s;
}

nimble_status_t nimble_sign_key_load(const char *path, nimble_sign_key_t *out) {
  memset(out, 0, sizeof *out);
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  char *text = NULL;
  size_t size = 0;
  struct stat st;
  NIMBLE_RETURN_IF_ERROR(read_small_file(path, "signing key", &text, &size, &st));
  nimble_status_t s = nimble_ok();
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    s = nimble_status_make(NIMBLE_PERMISSION_DENIED,
                           "signing key '%s': mode %04o lets group or others read it; "
                           "chmod 600 it (and make a new key if others may have read it)",
                           path, (unsigned)(st.st_mode & 07777));
  } else {
    const char *prefix = "ed25519-secret ";
    size_t pl = strlen(prefix);
    size_t len = strcspn(text, "\r\n");
    if (len < pl || memcmp(text, prefix, pl) != 0 ||
        !hex_exact(text + pl, len - pl, out->seed, sizeof out->seed)) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "signing key '%s': line 1: expected 'ed25519-secret <64 hex digits>' "
                             "(make one with nimble keys generate)", path);
    } else {
      crypto_sign_seed_keypair(out->public_key, out->secret, out->seed);
    }
  }
  sodium_memzero(text, size);
  free(text);
  if (s) nimble_sign_key_deinit(out);
  return s;
}

void nimble_sign_key_deinit(nimble_sign_key_t *key) { sodium_memzero(key, sizeof *key); }

nimble_status_t nimble_sign_public_line(const uint8_t key[NIMBLE_SIGN_KEY_BYTES], const char *comment,
                                        char **out) {
  char hex[65];
  nimble_sign_key_hex(key, hex);
  int r = comment && comment[0] ? asprintf(out, "ed25519 %s %s\n", hex, comment)
                                 : asprintf(out, "ed25519 %s\n", hex);
  if (r < 0) {
    *out = NULL;
    return NIMBLE_OOM_IN("signature");
  }
  return nimble_ok();
}

nimble_status_t nimble_trusted_keys_parse(const char *text, size_t size, const char *source,
                                          nimble_trusted_keys_t *out) {
  memset(out, 0, sizeof *out);
  if (!(out->source = strdup(source ? source : "trusted keys"))) return NIMBLE_OOM_IN("signature");
  size_t cap = 0, line_no = 0;
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < size && !s;) {
    size_t e = i;
    while (e < size && text[e] != '\n') e++;
    line_no++;
    size_t b = i, end = e;
    i = e + 1;
    while (b < end && (text[b] == ' ' || text[b] == '\t')) b++;
    while (end > b && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r')) end--;
    if (b == end || text[b] == '#') continue;
    const char *kw = "ed25519";
    size_t kl = strlen(kw);
    size_t hb = b + kl;
    if (end - b < kl || memcmp(text + b, kw, kl) != 0 || hb >= end ||
        (text[hb] != ' ' && text[hb] != '\t')) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "%s: line %zu: expected 'ed25519 <64 hex digits> [comment]'", out->source,
                             line_no);
      break;
    }
    while (hb < end && (text[hb] == ' ' || text[hb] == '\t')) hb++;
    size_t he = hb;
    while (he < end && text[he] != ' ' && text[he] != '\t') he++;
    if (out->count == MAX_TRUSTED_KEYS) {
      s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: more than %d keys", out->source,
                             MAX_TRUSTED_KEYS);
      break;
    }
    if (out->count == cap) {
      cap = cap ? 2 * cap : 4;
      void *n = realloc(out->keys, cap * sizeof *out->keys);
      if (!n) {
        s = NIMBLE_OOM_IN("signature");
        break;
      }
      out->keys = n;
    }
    if (!hex_exact(text + hb, he - hb, out->keys[out->count], NIMBLE_SIGN_KEY_BYTES)) {
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "%s: line %zu: the key is not 64 lowercase hex digits", out->source,
                             line_no);
      break;
    }
    out->count++;
  }
  if (!s && out->count == 0)
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "%s: no 'ed25519 <hex>' line: a trusted keys file must trust at least one key",
                           out->source);
  if (s) nimble_trusted_keys_deinit(out);
  return s;
}

nimble_status_t nimble_trusted_keys_load(const char *path, nimble_trusted_keys_t *out) {
  memset(out, 0, sizeof *out);
  char *text = NULL;
  size_t size = 0;
  NIMBLE_RETURN_IF_ERROR(read_small_file(path, "trusted keys", &text, &size, NULL));
  char *source = NULL;
  nimble_status_t s = asprintf(&source, "trusted keys '%s'", path) < 0 ? NIMBLE_OOM_IN("signature") : nimble_ok();
  if (!s) s = nimble_trusted_keys_parse(text, size, source, out);
  free(source);
  free(text);
  return s;
}

void nimble_trusted_keys_deinit(nimble_trusted_keys_t *keys) {
  free(keys->keys);
  free(keys->source);
  memset(keys, 0, sizeof *keys);
}

/* ---- Statements ---------------------------------------------------------- */

static int is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

static int repository_ok(const char *r) {
  size_t n = r ? strlen(r) : 0;
  if (n == 0 || n > 255 || !is_lower_alnum(r[0]) || !is_lower_alnum(r[n - 1])) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(is_lower_alnum(r[i]) || r[i] == '.' || r[i] == '_' || r[i] == '-' || r[i] == '/')) return 0;
  return 1;
}

static int tag_ok(const char *t) {
  size_t n = t ? strlen(t) : 0;
  if (n == 0 || n > 128 || t[0] == '.' || t[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    if (!(is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '-')) return 0;
  }
  return 1;
}

static int digest_ok(const char *d) {
  uint8_t bytes[32];
  return d && strncmp(d, "sha256:", 7) == 0 && hex_exact(d + 7, strlen(d + 7), bytes, sizeof bytes);
}

nimble_status_t nimble_signature_statement(const char *repository, const char *tag,
                                           const char *manifest_digest, char **out) {
  *out = NULL;
  if (!repository_ok(repository))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature: repository '%s' is not a valid name",
                              repository ? repository : "");
  if (!tag_ok(tag))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature: tag '%s' is not a valid tag",
                              tag ? tag : "");
  if (!digest_ok(manifest_digest))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "signature: manifest digest '%s' is not sha256:<64 lowercase hex>",
                              manifest_digest ? manifest_digest : "");
  if (asprintf(out, NIMBLE_SIGNATURE_FORMAT "\nrepository %s\ntag %s\nmanifest %s\n", repository, tag,
               manifest_digest) < 0) {
    *out = NULL;
    return NIMBLE_OOM_IN("signature");
  }
  return nimble_ok();
}

nimble_status_t nimble_sign_bytes(const nimble_sign_key_t *key, const void *msg, size_t size,
                                  uint8_t out_signature[NIMBLE_SIGN_SIGNATURE_BYTES]) {
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  crypto_sign_detached(out_signature, NULL, msg, size, key->secret);
  return nimble_ok();
}

nimble_status_t nimble_sign_verify_bytes(const uint8_t public_key[NIMBLE_SIGN_KEY_BYTES], const void *msg,
                                         size_t size, const uint8_t signature[NIMBLE_SIGN_SIGNATURE_BYTES]) {
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  if (crypto_sign_verify_detached(signature, msg, size, public_key) != 0)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED, "the Ed25519 signature does not verify");
  return nimble_ok();
}

nimble_status_t nimble_signature_object(const nimble_sign_key_t *key, const char *repository,
                                        const char *tag, const char *manifest_digest, char **out,
                                        size_t *out_size) {
  *out = NULL;
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  char *statement = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_signature_statement(repository, tag, manifest_digest, &statement));
  uint8_t sig[NIMBLE_SIGN_SIGNATURE_BYTES];
  crypto_sign_detached(sig, NULL, (const uint8_t *)statement, strlen(statement), key->secret);
  free(statement);
  char sig_hex[2 * NIMBLE_SIGN_SIGNATURE_BYTES + 1], key_hex[65];
  sodium_bin2hex(sig_hex, sizeof sig_hex, sig, sizeof sig);
  nimble_sign_key_hex(key->public_key, key_hex);
  int n = asprintf(out,
                   "{\"format\":\"" NIMBLE_SIGNATURE_FORMAT "\",\"repository\":\"%s\",\"tag\":\"%s\","
                   "\"manifest\":\"%s\",\"key\":\"%s\",\"signature\":\"%s\"}",
                   repository, tag, manifest_digest, key_hex, sig_hex);
  if (n < 0) {
    *out = NULL;
    return NIMBLE_OOM_IN("signature");
  }
  *out_size = (size_t)n;
  return nimble_ok();
}

nimble_status_t nimble_signature_manifest(const char *object_digest, size_t size, char **out,
                                          size_t *out_size) {
  *out = NULL;
  if (!digest_ok(object_digest))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature: '%s' is not a digest",
                              object_digest ? object_digest : "");
  int n = asprintf(out,
                   "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                   "\"artifactType\":\"" NIMBLE_SIGNATURE_ARTIFACT_TYPE "\","
                   "\"config\":{\"mediaType\":\"" NIMBLE_SIGNATURE_MEDIA_TYPE "\",\"digest\":\"%s\","
                   "\"size\":%zu},\"layers\":[]}",
                   object_digest, size);
  if (n < 0) {
    *out = NULL;
    return NIMBLE_OOM_IN("signature");
  }
  *out_size = (size_t)n;
  return nimble_ok();
}

nimble_status_t nimble_signature_verify(const nimble_trusted_keys_t *trusted, const char *repository,
                                        const char *tag, const char *manifest_digest,
                                        const char *object_repository, const char *object_tag,
                                        const char *object_manifest, const char *key_hex,
                                        const char *signature_hex, size_t *out_index) {
  NIMBLE_RETURN_IF_ERROR(sodium_ready());
  const char *src = trusted->source ? trusted->source : "trusted keys";
  uint8_t key[NIMBLE_SIGN_KEY_BYTES], sig[NIMBLE_SIGN_SIGNATURE_BYTES];
  if (!key_hex || !hex_exact(key_hex, strlen(key_hex), key, sizeof key))
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "signature names no valid key ('%.80s' is not 64 lowercase hex digits)",
                              key_hex ? key_hex : "");
  size_t idx = trusted->count;
  for (size_t i = 0; i < trusted->count; i++)
    if (sodium_memcmp(trusted->keys[i], key, sizeof key) == 0) idx = i;
  if (idx == trusted->count)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "signed by key ed25519 %s, which is not in %s (%zu key%s)", key_hex, src,
                              trusted->count, trusted->count == 1 ? "" : "s");
  if (!object_repository || strcmp(object_repository, repository) != 0 || !object_tag ||
      strcmp(object_tag, tag) != 0)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "the signature (key ed25519 %s) is for %s:%s, not %s:%s: a signed "
                              "artifact replayed under another name or tag",
                              key_hex, object_repository ? object_repository : "?",
                              object_tag ? object_tag : "?", repository, tag);
  if (!object_manifest || strcmp(object_manifest, manifest_digest) != 0)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "the signature (key ed25519 %s) is for manifest %s, but the store "
                              "served manifest %s under this tag",
                              key_hex, object_manifest ? object_manifest : "?", manifest_digest);
  if (!signature_hex || !hex_exact(signature_hex, strlen(signature_hex), sig, sizeof sig))
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "the signature (key ed25519 %s) is not 128 lowercase hex digits", key_hex);
  char *statement = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_signature_statement(repository, tag, manifest_digest, &statement));
  int bad = crypto_sign_verify_detached(sig, (const uint8_t *)statement, strlen(statement), key);
  free(statement);
  if (bad)
    return nimble_status_make(NIMBLE_PERMISSION_DENIED,
                              "the signature does not verify under key ed25519 %s (%s): forged or "
                              "damaged",
                              key_hex, src);
  if (out_index) *out_index = idx;
  return nimble_ok();
}
