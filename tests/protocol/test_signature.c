/* Artifact signatures (protocol/src/signature.c): key files (mode, format),
 * trusted keys files, the statement's exact bytes, and verification, with
 * RFC 8032's first Ed25519 test vector and libsodium called directly as the
 * independent references. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nimble_test.h"

#include "nimble/signature.h"

/* RFC 8032 section 7.1, TEST 1. */
#define RFC_SEED "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
#define RFC_PUBLIC "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
#define DIGEST_A "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DIGEST_B "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static char g_dir[256];

static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "%s/nimble-sig-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  ck_assert_int_eq(system(cmd), 0);
}

static void write_text(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  ck_assert_int_eq(chmod(path, mode), 0);
}

/* A JSON string field of the one-line object nimble_signature_object writes. */
static void field(const char *json, const char *key, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(json, pat);
  ck_assert_msg(p != NULL, "no %s in %s", key, json);
  p += strlen(pat);
  const char *e = strchr(p, '"');
  ck_assert_uint_lt((size_t)(e - p), cap);
  memcpy(out, p, (size_t)(e - p));
  out[e - p] = '\0';
}

START_TEST(test_a_key_file_gives_the_rfc_8032_public_key) {
  char path[300];
  snprintf(path, sizeof path, "%s/farm.key", g_dir);
  write_text(path, "ed25519-secret " RFC_SEED "\n", 0600);
  nimble_sign_key_t k;
  NIMBLE_ASSERT_OK(nimble_sign_key_load(path, &k));
  char hex[65];
  nimble_sign_key_hex(k.public_key, hex);
  ck_assert_str_eq(hex, RFC_PUBLIC);
  char *line;
  NIMBLE_ASSERT_OK(nimble_sign_public_line(k.public_key, "farm 2026", &line));
  ck_assert_str_eq(line, "ed25519 " RFC_PUBLIC " farm 2026\n");
  free(line);
  nimble_sign_key_deinit(&k);
}
END_TEST

START_TEST(test_a_key_file_others_can_read_is_refused) {
  char path[300];
  snprintf(path, sizeof path, "%s/farm.key", g_dir);
  write_text(path, "ed25519-secret " RFC_SEED "\n", 0644);
  nimble_sign_key_t k;
  NIMBLE_ASSERT_ERROR(nimble_sign_key_load(path, &k), NIMBLE_PERMISSION_DENIED, "mode 0644");
  ck_assert_int_eq(chmod(path, 0640), 0);
  NIMBLE_ASSERT_ERROR(nimble_sign_key_load(path, &k), NIMBLE_PERMISSION_DENIED, "chmod 600");
  write_text(path, "ed25519-secret 9d61\n", 0600);
  NIMBLE_ASSERT_ERROR(nimble_sign_key_load(path, &k), NIMBLE_INVALID_ARGUMENT, "line 1");
}
END_TEST

START_TEST(test_keygen_writes_a_0600_key_and_never_overwrites_one) {
  char path[300];
  snprintf(path, sizeof path, "%s/new.key", g_dir);
  uint8_t pub[32];
  mode_t old = umask(0);
  NIMBLE_ASSERT_OK(nimble_sign_keygen(path, pub));
  umask(old);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  nimble_sign_key_t k;
  NIMBLE_ASSERT_OK(nimble_sign_key_load(path, &k));
  ck_assert(memcmp(k.public_key, pub, 32) == 0);
  /* libsodium derives the same public key from the seed on file. */
  uint8_t pk[32], sk[64];
  crypto_sign_seed_keypair(pk, sk, k.seed);
  ck_assert(memcmp(pk, pub, 32) == 0);
  nimble_sign_key_deinit(&k);
  NIMBLE_ASSERT_ERROR(nimble_sign_keygen(path, pub), NIMBLE_ALREADY_EXISTS, "never overwritten");
}
END_TEST

START_TEST(test_trusted_keys_files_hold_several_keys_and_say_where_they_are_wrong) {
  const char *text = "# farm keys\n\ned25519 " RFC_PUBLIC " old\n  ed25519\t" RFC_PUBLIC "\r\n";
  nimble_trusted_keys_t t;
  NIMBLE_ASSERT_OK(nimble_trusted_keys_parse(text, strlen(text), "keys.txt", &t));
  ck_assert_uint_eq(t.count, 2);
  char hex[65];
  nimble_sign_key_hex(t.keys[1], hex);
  ck_assert_str_eq(hex, RFC_PUBLIC);
  nimble_trusted_keys_deinit(&t);
  NIMBLE_ASSERT_ERROR(nimble_trusted_keys_parse("# none\n", 7, "keys.txt", &t), NIMBLE_INVALID_ARGUMENT,
                      "keys.txt: no 'ed25519 <hex>' line");
  const char *bad = "ed25519 " RFC_PUBLIC "\nrsa AAAA\n";
  NIMBLE_ASSERT_ERROR(nimble_trusted_keys_parse(bad, strlen(bad), "keys.txt", &t), NIMBLE_INVALID_ARGUMENT,
                      "keys.txt: line 2");
  const char *upper = "ed25519 D75A980182B10AB7D54BFED3C964073A0EE172F3DAA62325AF021A68F707511A\n";
  NIMBLE_ASSERT_ERROR(nimble_trusted_keys_parse(upper, strlen(upper), "keys.txt", &t),
                      NIMBLE_INVALID_ARGUMENT, "line 1: the key is not 64 lowercase hex");
  char path[300];
  snprintf(path, sizeof path, "%s/absent", g_dir);
  NIMBLE_ASSERT_ERROR(nimble_trusted_keys_load(path, &t), NIMBLE_NOT_FOUND, path);
}
END_TEST

START_TEST(test_the_statement_is_these_bytes_and_refuses_what_would_need_escaping) {
  char *st;
  NIMBLE_ASSERT_OK(nimble_signature_statement("team/bert", "x86", DIGEST_A, &st));
  ck_assert_str_eq(st, "nimble-artifact-signature-v1\nrepository team/bert\ntag x86\nmanifest " DIGEST_A "\n");
  free(st);
  NIMBLE_ASSERT_ERROR(nimble_signature_statement("team/bert", "x86\ntag y", DIGEST_A, &st),
                      NIMBLE_INVALID_ARGUMENT, "tag");
  NIMBLE_ASSERT_ERROR(nimble_signature_statement("Team", "x86", DIGEST_A, &st), NIMBLE_INVALID_ARGUMENT,
                      "repository 'Team'");
  NIMBLE_ASSERT_ERROR(nimble_signature_statement("team", "x86", "sha256:AA", &st), NIMBLE_INVALID_ARGUMENT,
                      "manifest digest");
}
END_TEST

/* Signs with the RFC key, checks the object's signature with libsodium
 * over the hand-written statement, then nimble_signature_verify's answers. */
START_TEST(test_a_signature_verifies_only_for_its_repository_tag_manifest_and_a_trusted_key) {
  char path[300];
  snprintf(path, sizeof path, "%s/farm.key", g_dir);
  write_text(path, "ed25519-secret " RFC_SEED "\n", 0600);
  nimble_sign_key_t k;
  NIMBLE_ASSERT_OK(nimble_sign_key_load(path, &k));
  char *obj;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_signature_object(&k, "team/bert", "x86", DIGEST_A, &obj, &n));
  ck_assert_uint_eq(strlen(obj), n);
  char repo[64], tag[64], man[80], key[80], sig[160];
  field(obj, "repository", repo, sizeof repo);
  field(obj, "tag", tag, sizeof tag);
  field(obj, "manifest", man, sizeof man);
  field(obj, "key", key, sizeof key);
  field(obj, "signature", sig, sizeof sig);
  ck_assert_str_eq(repo, "team/bert");
  ck_assert_str_eq(tag, "x86");
  ck_assert_str_eq(man, DIGEST_A);
  ck_assert_str_eq(key, RFC_PUBLIC);
  const char *statement = "nimble-artifact-signature-v1\nrepository team/bert\ntag x86\nmanifest " DIGEST_A "\n";
  uint8_t sb[64], pk[32];
  ck_assert_int_eq(sodium_hex2bin(sb, 64, sig, strlen(sig), NULL, NULL, NULL), 0);
  ck_assert_int_eq(sodium_hex2bin(pk, 32, RFC_PUBLIC, 64, NULL, NULL, NULL), 0);
  ck_assert_int_eq(crypto_sign_verify_detached(sb, (const uint8_t *)statement, strlen(statement), pk), 0);

  const char *one = "ed25519 " RFC_PUBLIC "\n";
  nimble_trusted_keys_t t;
  NIMBLE_ASSERT_OK(nimble_trusted_keys_parse(one, strlen(one), "trusted", &t));
  size_t idx = 9;
  NIMBLE_ASSERT_OK(nimble_signature_verify(&t, "team/bert", "x86", DIGEST_A, repo, tag, man, key, sig, &idx));
  ck_assert_uint_eq(idx, 0);
  /* Replayed under another tag: the object says x86. */
  NIMBLE_ASSERT_ERROR(nimble_signature_verify(&t, "team/bert", "prod", DIGEST_A, repo, tag, man, key, sig, NULL),
                      NIMBLE_PERMISSION_DENIED, "is for team/bert:x86, not team/bert:prod");
  /* Other manifest bytes under the tag. */
  NIMBLE_ASSERT_ERROR(nimble_signature_verify(&t, "team/bert", "x86", DIGEST_B, repo, tag, man, key, sig, NULL),
                      NIMBLE_PERMISSION_DENIED, "served manifest " DIGEST_B);
  /* An object whose fields were edited to match: the signature fails. */
  NIMBLE_ASSERT_ERROR(nimble_signature_verify(&t, "team/bert", "prod", DIGEST_A, repo, "prod", man, key, sig, NULL),
                      NIMBLE_PERMISSION_DENIED, "does not verify under key ed25519 " RFC_PUBLIC);
  nimble_trusted_keys_deinit(&t);

  /* A key not in the file is named. */
  uint8_t other[32], osk[64];
  crypto_sign_keypair(other, osk);
  char ohex[65], line[100];
  nimble_sign_key_hex(other, ohex);
  snprintf(line, sizeof line, "ed25519 %s\n", ohex);
  NIMBLE_ASSERT_OK(nimble_trusted_keys_parse(line, strlen(line), "trusted 'k.txt'", &t));
  NIMBLE_ASSERT_ERROR(nimble_signature_verify(&t, "team/bert", "x86", DIGEST_A, repo, tag, man, key, sig, NULL),
                      NIMBLE_PERMISSION_DENIED, "signed by key ed25519 " RFC_PUBLIC ", which is not in trusted 'k.txt'");
  nimble_trusted_keys_deinit(&t);
  free(obj);
  nimble_sign_key_deinit(&k);
}
END_TEST

START_TEST(test_the_signature_manifest_has_the_object_as_config_and_no_layers) {
  char *m;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_signature_manifest(DIGEST_B, 321, &m, &n));
  ck_assert_str_eq(m, "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                      "\"artifactType\":\"application/vnd.nimble.signature.v1\",\"config\":{\"mediaType\":"
                      "\"application/vnd.nimble.signature.v1+json\",\"digest\":\"" DIGEST_B "\",\"size\":321},"
                      "\"layers\":[]}");
  ck_assert_uint_eq(strlen(m), n);
  free(m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("signature");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_a_key_file_gives_the_rfc_8032_public_key);
  tcase_add_test(tc, test_a_key_file_others_can_read_is_refused);
  tcase_add_test(tc, test_keygen_writes_a_0600_key_and_never_overwrites_one);
  tcase_add_test(tc, test_trusted_keys_files_hold_several_keys_and_say_where_they_are_wrong);
  tcase_add_test(tc, test_the_statement_is_these_bytes_and_refuses_what_would_need_escaping);
  tcase_add_test(tc, test_a_signature_verifies_only_for_its_repository_tag_manifest_and_a_trusted_key);
  tcase_add_test(tc, test_the_signature_manifest_has_the_object_as_config_and_no_layers);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
