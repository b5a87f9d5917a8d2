/* Artifact manifests: canonical bytes, round trips, every validation error,
 * hostile sizes and a bounded fuzz loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#include "nimble/manifest.h"

#define SHA_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_448 "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"

/* Written by hand; Python's json.dumps(sort_keys=True, separators=(",",":"))
 * gives the same bytes, and `printf '%s' "$M" | sha256sum` the digest. */
static const char kManifest[] =
    "{\"artifactType\":\"application/vnd.nimble.executable.v1\","
    "\"config\":{\"digest\":\"" SHA_ABC "\","
    "\"mediaType\":\"application/vnd.nimble.executable.config.v1+json\",\"size\":3},"
    "\"layers\":["
    "{\"annotations\":{\"org.opencontainers.image.title\":\"bytecode\"},\"digest\":\"" SHA_448 "\","
    "\"mediaType\":\"application/vnd.nimble.bytecode.v1\",\"size\":56},"
    "{\"digest\":\"" SHA_EMPTY "\",\"mediaType\":\"application/vnd.nimble.constants.v1\",\"size\":0},"
    "{\"digest\":\"" SHA_ABC "\","
    "\"mediaType\":\"application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf\",\"size\":3},"
    "{\"digest\":\"" SHA_ABC "\","
    "\"mediaType\":\"application/vnd.nimble.executable.metadata.v1\",\"size\":3}],"
    "\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"schemaVersion\":2}";
static const char kManifestDigest[] =
    "sha256:b9fe54bb2e6957c781e678a1b518b28bd7f0c5833f4356a27f8879c209ad0e07";

static nimble_digest_t digest_of(const char *text) {
  nimble_digest_t d;
  ck_assert_ptr_null(nimble_digest_parse(text, &d));
  return d;
}

static void build_example(nimble_manifest_t *m) {
  nimble_digest_t abc = digest_of(SHA_ABC), d448 = digest_of(SHA_448), empty = digest_of(SHA_EMPTY);
  nimble_manifest_init(m);
  NIMBLE_ASSERT_OK(nimble_manifest_set_config(m, &abc, 3));
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(m, NIMBLE_MEDIA_TYPE_BYTECODE, &d448, 56, "bytecode"));
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(m, NIMBLE_MEDIA_TYPE_CONSTANTS, &empty, 0, NULL));
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(m, NIMBLE_MEDIA_TYPE_KERNELS_X86_64, &abc, 3, NULL));
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(m, NIMBLE_MEDIA_TYPE_METADATA, &abc, 3, NULL));
}

static void expect_bytes(const nimble_manifest_t *m, const char *want) {
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_manifest_encode(m, &out, &n));
  ck_assert_uint_eq(n, strlen(want));
  ck_assert_str_eq(out, want);
  free(out);
}

START_TEST(test_encoding_gives_the_hand_written_canonical_bytes) {
  nimble_manifest_t m;
  build_example(&m);
  expect_bytes(&m, kManifest);
  expect_bytes(&m, kManifest); /* twice: the same bytes */
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, &out, &n));
  nimble_digest_t d;
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_compute(out, n, &d);
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, kManifestDigest);
  free(out);
  nimble_manifest_deinit(&m);
}
END_TEST

START_TEST(test_decoding_canonical_bytes_and_encoding_again_is_identity) {
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(kManifest, strlen(kManifest), &m));
  ck_assert_uint_eq(m.layer_count, 4);
  ck_assert_str_eq(m.config.media_type, NIMBLE_MEDIA_TYPE_CONFIG);
  ck_assert_int_eq(m.config.size, 3);
  ck_assert_str_eq(m.layers[0].media_type, NIMBLE_MEDIA_TYPE_BYTECODE);
  ck_assert_int_eq(m.layers[0].size, 56);
  ck_assert_str_eq(nimble_descriptor_annotation(&m.layers[0], NIMBLE_ANNOTATION_TITLE), "bytecode");
  ck_assert_ptr_null(nimble_descriptor_annotation(&m.layers[1], NIMBLE_ANNOTATION_TITLE));
  nimble_digest_t want = digest_of(SHA_448);
  ck_assert(nimble_digest_equal(&m.layers[0].digest, &want));
  ck_assert_ptr_eq(nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_KERNELS_X86_64), &m.layers[2]);
  ck_assert_ptr_null(nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_KERNELS_NVPTX));
  ck_assert_ptr_eq(nimble_manifest_find_layer(&m, NIMBLE_MEDIA_TYPE_METADATA), &m.layers[3]);
  ck_assert_str_eq(m.layers[3].media_type, "application/vnd.nimble.executable.metadata.v1");
  expect_bytes(&m, kManifest);
  nimble_manifest_deinit(&m);
}
END_TEST

START_TEST(test_non_canonical_input_is_read_and_written_canonically) {
  /* Whitespace, another key order and members Nimble does not know (the
   * OCI spec says to ignore them). */
  const char *text =
      "{ \"schemaVersion\": 2, \"mediaType\": \"application/vnd.oci.image.manifest.v1+json\",\n"
      "  \"artifactType\": \"application/vnd.nimble.executable.v1\", \"subject\": null,\n"
      "  \"config\": {\"size\": 3, \"mediaType\": "
      "\"application/vnd.nimble.executable.config.v1+json\", \"digest\": \"" SHA_ABC "\"},\n"
      "  \"layers\": [ {\"mediaType\": \"application/vnd.nimble.bytecode.v1\", \"size\": 56,"
      "  \"digest\": \"" SHA_448 "\", \"urls\": [], "
      "\"annotations\": {\"org.opencontainers.image.title\": \"bytecode\"}},"
      "{\"mediaType\": \"application/vnd.nimble.constants.v1\", \"size\": 0, \"digest\": \"" SHA_EMPTY
      "\"}, {\"mediaType\": \"application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf\", \"size\": 3,"
      " \"digest\": \"" SHA_ABC "\"}, {\"size\": 3, \"digest\": \"" SHA_ABC "\", "
      "\"mediaType\": \"application/vnd.nimble.executable.metadata.v1\"} ] }";
  nimble_manifest_t m;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(text, strlen(text), &m));
  expect_bytes(&m, kManifest);
  nimble_manifest_deinit(&m);
}
END_TEST

START_TEST(test_annotations_are_sorted_replaced_and_kept) {
  nimble_manifest_t m;
  build_example(&m);
  NIMBLE_ASSERT_OK(nimble_manifest_set_annotation(&m, "org.opencontainers.image.source", "x"));
  NIMBLE_ASSERT_OK(nimble_manifest_set_annotation(&m, "com.example.b", "1"));
  NIMBLE_ASSERT_OK(nimble_manifest_set_annotation(&m, "com.example.b", "2"));
  NIMBLE_ASSERT_OK(nimble_descriptor_set_annotation(&m.layers[2], "z", "last"));
  NIMBLE_ASSERT_OK(nimble_descriptor_set_annotation(&m.layers[2], "a", "first"));
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, &out, &n));
  ck_assert_ptr_nonnull(strstr(out, "\"annotations\":{\"com.example.b\":\"2\","
                                    "\"org.opencontainers.image.source\":\"x\"}"));
  ck_assert_ptr_nonnull(strstr(out, "{\"annotations\":{\"a\":\"first\",\"z\":\"last\"},"));
  nimble_manifest_t back;
  NIMBLE_ASSERT_OK(nimble_manifest_decode(out, n, &back));
  ck_assert_str_eq(nimble_descriptor_annotation(&back.layers[2], "z"), "last");
  expect_bytes(&back, out);
  free(out);
  nimble_manifest_deinit(&back);
  NIMBLE_ASSERT_ERROR(nimble_manifest_set_annotation(&m, "", "v"), NIMBLE_INVALID_ARGUMENT,
                      "empty key");
  nimble_manifest_deinit(&m);
}
END_TEST

/* Decodes kManifest with the first `from` replaced by `to`. */
static nimble_status_t decode_with(const char *from, const char *to) {
  const char *at = strstr(kManifest, from);
  ck_assert_msg(at != NULL, "'%s' not in the example", from);
  size_t pre = (size_t)(at - kManifest), fl = strlen(from), tl = strlen(to);
  size_t n = strlen(kManifest) - fl + tl;
  char *buf = malloc(n + 1);
  memcpy(buf, kManifest, pre);
  memcpy(buf + pre, to, tl);
  strcpy(buf + pre + tl, at + fl);
  nimble_manifest_t m;
  nimble_status_t s = nimble_manifest_decode(buf, n, &m);
  /* On error the manifest is left empty: nothing to free, nothing leaked. */
  if (s) {
    ck_assert_uint_eq(m.layer_count, 0);
    ck_assert_ptr_null(m.layers);
    ck_assert_ptr_null(m.config.media_type);
  }
  nimble_manifest_deinit(&m);
  free(buf);
  return s;
}

#define LAYER0 "{\"annotations\":{\"org.opencontainers.image.title\":\"bytecode\"},\"digest\":\"" SHA_448 "\""

START_TEST(test_top_level_errors_name_the_member) {
  NIMBLE_ASSERT_ERROR(decode_with("\"schemaVersion\":2", "\"schemaVersion\":1"),
                      NIMBLE_UNIMPLEMENTED, "manifest: schemaVersion: 1 is not supported (only 2)");
  NIMBLE_ASSERT_ERROR(decode_with("\"schemaVersion\":2", "\"schemaVersion\":\"2\""),
                      NIMBLE_INVALID_ARGUMENT, "schemaVersion: expected an integer, got a string");
  NIMBLE_ASSERT_ERROR(decode_with(",\"schemaVersion\":2", ""), NIMBLE_INVALID_ARGUMENT,
                      "schemaVersion: missing");
  NIMBLE_ASSERT_ERROR(decode_with("\"schemaVersion\":2", "\"schemaVersion\":2.0"),
                      NIMBLE_INVALID_ARGUMENT, "schemaVersion: expected an integer, got a real");
  NIMBLE_ASSERT_ERROR(decode_with("image.manifest.v1+json", "image.index.v1+json"),
                      NIMBLE_UNIMPLEMENTED, "mediaType: expected 'application/vnd.oci.image.manifest");
  NIMBLE_ASSERT_ERROR(decode_with("\"artifactType\":\"application/vnd.nimble.executable.v1\",", ""),
                      NIMBLE_INVALID_ARGUMENT, "artifactType: missing");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.executable.v1\"", "nimble.executable.v2\""),
                      NIMBLE_UNIMPLEMENTED, "artifactType: expected");
  NIMBLE_ASSERT_ERROR(decode_with("\"layers\":[", "\"layers\":7,\"x\":["), NIMBLE_INVALID_ARGUMENT,
                      "manifest: layers: expected an array, got an integer");
  NIMBLE_ASSERT_ERROR(decode_with("\"annotations\":{\"org", "\"annotations\":{\"\":\"\",\"org"),
                      NIMBLE_INVALID_ARGUMENT, "layers[0].annotations: empty key");
  NIMBLE_ASSERT_ERROR(decode_with("\"mediaType\":\"application/vnd.oci",
                                  "\"annotations\":[],\"mediaType\":\"application/vnd.oci"),
                      NIMBLE_INVALID_ARGUMENT, "annotations: expected an object, got an array");
  NIMBLE_ASSERT_ERROR(decode_with("\"bytecode\"}", "7}"), NIMBLE_INVALID_ARGUMENT,
                      "layers[0].annotations.org.opencontainers.image.title: expected a string, "
                      "got an integer");
}
END_TEST

START_TEST(test_config_errors_name_the_member) {
  NIMBLE_ASSERT_ERROR(decode_with("executable.config.v1+json", "executable.config.v9+json"),
                      NIMBLE_UNIMPLEMENTED, "config.mediaType: expected");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":3},\"layers\"", "\"size\":4194305},\"layers\""),
                      NIMBLE_INVALID_ARGUMENT, "config.size: 4194305 is over the 4194304-byte limit");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":3},\"layers\"", "\"size\":-3},\"layers\""),
                      NIMBLE_INVALID_ARGUMENT, "config.size: -3 is negative");
  NIMBLE_ASSERT_ERROR(decode_with("\"config\":{\"digest\":\"sha256:ba", "\"config\":{\"digest\":\"sha512:ba"),
                      NIMBLE_INVALID_ARGUMENT, "config.digest: digest: unsupported algorithm");
  NIMBLE_ASSERT_ERROR(decode_with("\"config\":{", "\"config\":[{"), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON");
}
END_TEST

START_TEST(test_layer_errors_name_the_layer_and_member) {
  NIMBLE_ASSERT_ERROR(decode_with("\"digest\":\"" SHA_EMPTY, "\"digest\":\"sha256:E3b0"),
                      NIMBLE_INVALID_ARGUMENT, "layers[1].digest: digest: sha256 needs 64");
  NIMBLE_ASSERT_ERROR(decode_with("\"digest\":\"" SHA_EMPTY, "\"digest\":7,\"x\":\"" SHA_EMPTY),
                      NIMBLE_INVALID_ARGUMENT, "layers[1].digest: expected a digest string, got an integer");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":56", "\"size\":-1"), NIMBLE_INVALID_ARGUMENT,
                      "layers[0].size: -1 is negative");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":56", "\"size\":9007199254740992"),
                      NIMBLE_INVALID_ARGUMENT,
                      "layers[0].size: 9007199254740992 is larger than 9007199254740991");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":56", "\"size\":99999999999999999999"),
                      NIMBLE_INVALID_ARGUMENT, "too big");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":56", "\"size\":56.0"), NIMBLE_INVALID_ARGUMENT,
                      "layers[0].size: expected an integer, got a real number");
  NIMBLE_ASSERT_ERROR(decode_with("\"size\":56", "\"size\":\"56\""), NIMBLE_INVALID_ARGUMENT,
                      "layers[0].size: expected an integer, got a string");
  NIMBLE_ASSERT_ERROR(decode_with(",\"size\":56", ""), NIMBLE_INVALID_ARGUMENT,
                      "layers[0].size: missing");
}
END_TEST

START_TEST(test_layer_rules_are_enforced) {
  NIMBLE_ASSERT_ERROR(decode_with("constants.v1\",\"size\":0", "constants.v1\",\"size\":0,\"size\":1"),
                      NIMBLE_INVALID_ARGUMENT, "duplicate object key");
  NIMBLE_ASSERT_ERROR(decode_with("\"digest\":\"" SHA_EMPTY "\",\"mediaType\":\"application/vnd.nimble.constants.v1\",\"size\":0",
                                  "\"digest\":\"" SHA_ABC "\",\"mediaType\":\"application/vnd.nimble.constants.v1\",\"size\":0"),
                      NIMBLE_INVALID_ARGUMENT,
                      "layers[1].digest: size is 0 but " SHA_ABC " is not the digest of no bytes");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.constants.v1", "nimble.weights.v1"), NIMBLE_UNIMPLEMENTED,
                      "layers[1].mediaType: unknown layer media type "
                      "'application/vnd.nimble.weights.v1'");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.constants.v1", "nimble.bytecode.v1"),
                      NIMBLE_INVALID_ARGUMENT,
                      "layers[1].mediaType: a second application/vnd.nimble.bytecode.v1 layer "
                      "(the first is layers[0])");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.bytecode.v1", "nimble.kernels.nvptx64-nvidia-cuda.v1+ptx"),
                      NIMBLE_INVALID_ARGUMENT, "layers: no application/vnd.nimble.bytecode.v1 layer");
  /* The runtime's metadata part is required too, and only once. */
  NIMBLE_ASSERT_ERROR(decode_with("nimble.executable.metadata.v1", "nimble.kernels.nvptx64-nvidia-cuda.v1+ptx"),
                      NIMBLE_INVALID_ARGUMENT,
                      "layers: no application/vnd.nimble.executable.metadata.v1 layer");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.constants.v1", "nimble.executable.metadata.v1"),
                      NIMBLE_INVALID_ARGUMENT,
                      "layers[3].mediaType: a second application/vnd.nimble.executable.metadata.v1 "
                      "layer (the first is layers[1])");
  NIMBLE_ASSERT_ERROR(decode_with("nimble.executable.metadata.v1", "nimble.executable.metadata.v2"),
                      NIMBLE_UNIMPLEMENTED,
                      "layers[3].mediaType: unknown layer media type "
                      "'application/vnd.nimble.executable.metadata.v2'");
  NIMBLE_ASSERT_ERROR(decode_with("\"layers\":[", "\"layers\":[],\"x\":["), NIMBLE_INVALID_ARGUMENT,
                      "layers: needs at least 1 item, got 0");
  NIMBLE_ASSERT_ERROR(decode_with("\"layers\":[" LAYER0, "\"layers\":[7," LAYER0),
                      NIMBLE_INVALID_ARGUMENT, "layers[0]: expected an object, got an integer");
}
END_TEST

START_TEST(test_hostile_documents_get_clear_errors) {
  nimble_manifest_t m;
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode("", 0, &m), NIMBLE_INVALID_ARGUMENT, "empty document");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode(NULL, 5, &m), NIMBLE_INVALID_ARGUMENT, "no data");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode("[]", 2, &m), NIMBLE_INVALID_ARGUMENT,
                      "expected a JSON object, got an array");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode("{\"a\":1} x", 9, &m), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON at line 1");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode("{\"a\":\"\xff\"}", 8, &m), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode("{\"a\":\"\\u0000\"}", 13, &m),
                      NIMBLE_INVALID_ARGUMENT, "invalid JSON");
  /* Just over 4 MiB is refused before parsing. */
  size_t big = NIMBLE_MANIFEST_MAX_SIZE + 1;
  char *buf = malloc(big);
  memset(buf, ' ', big);
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode(buf, big, &m), NIMBLE_RESOURCE_EXHAUSTED,
                      "manifest: 4194305 bytes is over the limit of 4194304 bytes");
  /* Deep nesting is refused by the parser, not by the stack. */
  size_t depth = 100000;
  buf = realloc(buf, 2 * depth + 1);
  memset(buf, '[', depth);
  memset(buf + depth, ']', depth);
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode(buf, 2 * depth, &m), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON");
  free(buf);
  /* 65 layers: over the limit. */
  size_t cap = 65 * 160 + 512, n = 0;
  buf = malloc(cap);
  n += (size_t)snprintf(buf + n, cap - n,
                        "{\"artifactType\":\"application/vnd.nimble.executable.v1\","
                        "\"config\":{\"digest\":\"" SHA_ABC "\",\"mediaType\":"
                        "\"application/vnd.nimble.executable.config.v1+json\",\"size\":3},"
                        "\"layers\":[");
  for (int i = 0; i < 65; i++) {
    n += (size_t)snprintf(buf + n, cap - n,
                          "%s{\"digest\":\"" SHA_ABC "\",\"mediaType\":\"application/vnd.nimble."
                          "bytecode.v1\",\"size\":3}",
                          i ? "," : "");
  }
  n += (size_t)snprintf(buf + n, cap - n,
                        "],\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
                        "\"schemaVersion\":2}");
  NIMBLE_ASSERT_ERROR(nimble_manifest_decode(buf, n, &m), NIMBLE_INVALID_ARGUMENT,
                      "layers: 65 items is more than 64");
  free(buf);
}
END_TEST

START_TEST(test_builder_refuses_what_decode_would_refuse) {
  nimble_manifest_t m;
  nimble_digest_t abc = digest_of(SHA_ABC);
  nimble_manifest_init(&m);
  char *out;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_manifest_encode(&m, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "manifest: config: missing");
  NIMBLE_ASSERT_ERROR(nimble_manifest_set_config(&m, &abc, -1), NIMBLE_INVALID_ARGUMENT,
                      "config.size: -1 is negative");
  NIMBLE_ASSERT_ERROR(nimble_manifest_set_config(&m, &abc, 5 << 20), NIMBLE_INVALID_ARGUMENT,
                      "config.size: 5242880 is over");
  NIMBLE_ASSERT_OK(nimble_manifest_set_config(&m, &abc, 3));
  NIMBLE_ASSERT_ERROR(nimble_manifest_encode(&m, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "layers: needs at least 1 item, got 0");
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, "application/octet-stream", &abc, 3, NULL),
                      NIMBLE_UNIMPLEMENTED, "layers[0].mediaType: unknown layer media type");
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE, &abc, -7, NULL),
                      NIMBLE_INVALID_ARGUMENT, "layers[0].size: -7 is negative");
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE, &abc,
                                                NIMBLE_BLOB_MAX_SIZE + 1, NULL),
                      NIMBLE_INVALID_ARGUMENT, "is larger than 9007199254740991");
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE, &abc, 0, NULL),
                      NIMBLE_INVALID_ARGUMENT, "not the digest of no bytes");
  ck_assert_uint_eq(m.layer_count, 0);
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_KERNELS_NVPTX, &abc, 3, NULL));
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_KERNELS_NVPTX, &abc, 3, NULL),
                      NIMBLE_INVALID_ARGUMENT, "layers[1].mediaType: a second");
  NIMBLE_ASSERT_ERROR(nimble_manifest_encode(&m, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "no application/vnd.nimble.bytecode.v1 layer");
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_BYTECODE, &abc, 3, "\xc3\xa9t\xc3\xa9"));
  NIMBLE_ASSERT_ERROR(nimble_manifest_encode(&m, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "no application/vnd.nimble.executable.metadata.v1 layer");
  NIMBLE_ASSERT_OK(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_METADATA, &abc, 3, NULL));
  NIMBLE_ASSERT_ERROR(nimble_manifest_add_layer(&m, NIMBLE_MEDIA_TYPE_METADATA, &abc, 3, NULL),
                      NIMBLE_INVALID_ARGUMENT, "layers[3].mediaType: a second");
  NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, &out, &n));
  free(out);
  NIMBLE_ASSERT_OK(nimble_descriptor_set_annotation(&m.layers[1], "bad", "\xff"));
  NIMBLE_ASSERT_ERROR(nimble_manifest_encode(&m, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "not valid UTF-8");
  nimble_manifest_deinit(&m);
}
END_TEST

START_TEST(test_kernel_layers_must_belong_to_the_target) {
  nimble_manifest_t m;
  build_example(&m);
  NIMBLE_ASSERT_OK(nimble_manifest_check_target(&m, "x86"));
  NIMBLE_ASSERT_OK(nimble_manifest_check_target(&m, "cuda:arch=sm_90"));
  NIMBLE_ASSERT_ERROR(nimble_manifest_check_target(&m, "aarch64"), NIMBLE_INVALID_ARGUMENT,
                      "layers[2]: x86_64-linux-gnu kernels do not belong to target 'aarch64'");
  NIMBLE_ASSERT_ERROR(nimble_manifest_check_target(&m, "arm"), NIMBLE_INVALID_ARGUMENT,
                      "unknown target");
  ck_assert_str_eq(nimble_manifest_kernels_media_type("nvptx64-nvidia-cuda"),
                   NIMBLE_MEDIA_TYPE_KERNELS_NVPTX);
  ck_assert_str_eq(nimble_manifest_kernels_media_type("aarch64-linux-gnu"),
                   NIMBLE_MEDIA_TYPE_KERNELS_AARCH64);
  ck_assert_ptr_null(nimble_manifest_kernels_media_type("riscv64-linux-gnu"));
  nimble_manifest_deinit(&m);
}
END_TEST

/* Deterministic fuzz: byte flips, insertions and truncations of the example
 * decode to an error or to a manifest that re-encodes to a fixed point. */
START_TEST(test_mutated_manifests_never_crash_or_leak) {
  size_t len = strlen(kManifest);
  char *buf = malloc(len + 16);
  static const char bytes[] = "{}[]\":,0123456789-.eE \\ux\xff\x00";
  uint32_t rng = 777;
  int accepted = 0;
  for (int iter = 0; iter < 6000; iter++) {
    size_t n = len;
    memcpy(buf, kManifest, len);
    for (int k = 0; k < 1 + iter % 3 && n > 0; k++) {
      rng = rng * 1664525u + 1013904223u;
      size_t at = (rng >> 8) % n;
      rng = rng * 1664525u + 1013904223u;
      char c = bytes[(rng >> 8) % (sizeof(bytes) - 1)];
      switch ((rng >> 24) % 4) {
        case 0: buf[at] = c; break;
        case 1: n = at; break;
        case 2: if (n < len + 15) { memmove(buf + at + 1, buf + at, n - at); buf[at] = c; n++; } break;
        default: if ('0' <= buf[at] && buf[at] <= '9') buf[at] = (char)('0' + (rng >> 4) % 10);
      }
    }
    nimble_manifest_t m;
    nimble_status_t s = nimble_manifest_decode(buf, n, &m);
    if (s) {
      nimble_status_code_t code = nimble_status_code(s);
      ck_assert_msg(code == NIMBLE_INVALID_ARGUMENT || code == NIMBLE_UNIMPLEMENTED,
                    "unexpected %s: %s", nimble_status_code_name(code), nimble_status_message(s));
      nimble_status_free(s);
      continue;
    }
    accepted++;
    char *out, *out2;
    size_t on, on2;
    NIMBLE_ASSERT_OK(nimble_manifest_encode(&m, &out, &on));
    nimble_manifest_t again;
    NIMBLE_ASSERT_OK(nimble_manifest_decode(out, on, &again));
    NIMBLE_ASSERT_OK(nimble_manifest_encode(&again, &out2, &on2));
    ck_assert_str_eq(out, out2);
    free(out);
    free(out2);
    nimble_manifest_deinit(&again);
    nimble_manifest_deinit(&m);
  }
  ck_assert_int_gt(accepted, 0); /* some mutations (digits, spaces) stay valid */
  free(buf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("manifest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_encoding_gives_the_hand_written_canonical_bytes);
  tcase_add_test(tc, test_decoding_canonical_bytes_and_encoding_again_is_identity);
  tcase_add_test(tc, test_non_canonical_input_is_read_and_written_canonically);
  tcase_add_test(tc, test_annotations_are_sorted_replaced_and_kept);
  tcase_add_test(tc, test_top_level_errors_name_the_member);
  tcase_add_test(tc, test_config_errors_name_the_member);
  tcase_add_test(tc, test_layer_errors_name_the_layer_and_member);
  tcase_add_test(tc, test_layer_rules_are_enforced);
  tcase_add_test(tc, test_hostile_documents_get_clear_errors);
  tcase_add_test(tc, test_builder_refuses_what_decode_would_refuse);
  tcase_add_test(tc, test_kernel_layers_must_belong_to_the_target);
  tcase_add_test(tc, test_mutated_manifests_never_crash_or_leak);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
