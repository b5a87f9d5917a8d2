/* `nimble fetch NAME --target=T`: pulls an artifact's manifest, config and
 * layers from the store, each verified against its digest, into a
 * directory of parts (manifest.json, config.json and one file per layer,
 * named by its title), or, with `-o FILE.nimble`, into one executable file
 * joined from the parts (nimble_executable_join_parts) and checked by the
 * runtime's loader before it is renamed into place. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "farm_client.h"
#include "nimble/manifest.h"
#include "nimble/runtime.h"
#include "nimble/signature.h"
#include "nimble/target.h"

/* A layer title usable as a file name in the output directory: the
 * compile contract's rule ([A-Za-z0-9._-], no leading dot, at most 128). */
static bool safe_file_name(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 128 || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '.' || c == '_' || c == '-'))
      return false;
  }
  return strcmp(s, "manifest.json") != 0 && strcmp(s, "config.json") != 0;
}

static nimble_status_t write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return nimble_status_make(NIMBLE_IO_ERROR, "cannot write '%s': %s", path, strerror(errno));
  size_t w = fwrite(data, 1, n, f);
  int bad = fclose(f) != 0 || w != n;
  if (bad) return nimble_status_make(NIMBLE_IO_ERROR, "error writing '%s'", path);
  return nimble_ok();
}

static nimble_status_t join_path(char *out, size_t size, const char *dir, const char *name) {
  int n = snprintf(out, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "path '%s/%s' is too long", dir, name);
  return nimble_ok();
}

static nimble_status_t make_dir(const char *dir) {
  if (mkdir(dir, 0755) == 0) return nimble_ok();
  struct stat st;
  if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return nimble_ok();
  return nimble_status_make(NIMBLE_IO_ERROR, "cannot create directory '%s': %s", dir,
                            errno == EEXIST ? "a file has that name" : strerror(errno));
}

typedef struct fetch_args {
  const char *name, *target, *out, *digest;
  const char *trusted_keys; /* --trusted-keys, else $NIMBLE_TRUSTED_KEYS; NULL: unchecked */
  bool json;
  bool untrusted; /* set when the publisher check refused the artifact */
} fetch_args;

/* The publisher check (docs/fetch.md, "Trust"), the fetcher's rule: the
 * signature object tagged `<tag>.sig` must sign (name, tag, manifest)
 * under one of the trusted keys. Runs before anything is written. */
static nimble_status_t check_signature(nimble_store_client *sc, const char *name, const char *tag,
                                       const char *manifest, const char *keys_path) {
  nimble_trusted_keys_t keys;
  NIMBLE_RETURN_IF_ERROR(nimble_trusted_keys_load(keys_path, &keys));
  char sigtag[160];
  snprintf(sigtag, sizeof sigtag, "%s" NIMBLE_SIGNATURE_TAG_SUFFIX, tag);
  uint8_t *mb = NULL, *ob = NULL;
  size_t mn = 0, on = 0;
  json_t *sm = NULL, *obj = NULL;
  nimble_status_t s = nimble_store_pull_manifest(sc, name, sigtag, &mb, &mn, NULL, NULL);
  if (s) {
    s = nimble_status_annotate(s, "unsigned: no signature %s:%s, and %s requires one", name, sigtag,
                               keys.source);
  } else {
    sm = json_loadb((const char *)mb, mn, JSON_REJECT_DUPLICATES, NULL);
    json_t *cfg = json_object_get(sm, "config");
    const char *mt = json_string_value(json_object_get(cfg, "mediaType"));
    nimble_digest_t od;
    const char *odt = json_string_value(json_object_get(cfg, "digest"));
    if (!mt || strcmp(mt, NIMBLE_SIGNATURE_MEDIA_TYPE) || !odt || nimble_status_consume(nimble_digest_parse(odt, &od)) != NIMBLE_OK)
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s:%s is not a signature manifest", name, sigtag);
    if (!s) s = nimble_store_pull_blob(sc, name, &od, &ob, &on);
    if (!s) obj = json_loadb((const char *)ob, on, JSON_REJECT_DUPLICATES, NULL);
    const char *format = json_string_value(json_object_get(obj, "format"));
    if (!s && (!format || strcmp(format, NIMBLE_SIGNATURE_FORMAT)))
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "signature object %s: format is not '%s'", odt,
                             NIMBLE_SIGNATURE_FORMAT);
    if (!s)
      s = nimble_signature_verify(&keys, name, tag, manifest,
                                  json_string_value(json_object_get(obj, "repository")),
                                  json_string_value(json_object_get(obj, "tag")),
                                  json_string_value(json_object_get(obj, "manifest")),
                                  json_string_value(json_object_get(obj, "key")),
                                  json_string_value(json_object_get(obj, "signature")), NULL);
  }
  json_decref(sm);
  json_decref(obj);
  free(mb);
  free(ob);
  nimble_trusted_keys_deinit(&keys);
  return s;
}

/* Pulls everything; peer tells whose failure a returned status is. */
static nimble_status_t fetch(nimble_store_client *sc, fetch_args *a, const char *spec,
                             const char *tag, const char *dir, char *manifest_out,
                             size_t *layers_out, nimble_farm_peer_t *peer) {
  *peer = NIMBLE_FARM_PEER_STORE;
  uint8_t *bytes;
  size_t n;
  nimble_digest_t md;
  const char *ref = a->digest ? a->digest : tag;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_store_pull_manifest(sc, a->name, ref, &bytes, &n, NULL, &md),
                             "pulling the manifest %s:%s", a->name, ref);
  *peer = NIMBLE_FARM_PEER_SCHEDULER; /* from here on, not a store outage */
  nimble_digest_format(&md, manifest_out);
  if (a->trusted_keys) {
    nimble_status_t t = check_signature(sc, a->name, tag, manifest_out, a->trusted_keys);
    if (t) {
      free(bytes);
      a->untrusted = true;
      return nimble_status_annotate(t, "%s:%s@%s: not trusted", a->name, tag, manifest_out);
    }
  } else {
    fprintf(stderr, "nimble fetch: warning: %s:%s: the publisher of this artifact is not verified "
                    "(no trusted keys: --trusted-keys or NIMBLE_TRUSTED_KEYS; docs/fetch.md)\n",
            a->name, tag);
  }
  nimble_manifest_t m;
  nimble_manifest_init(&m);
  nimble_status_t s = nimble_manifest_decode(bytes, n, &m);
  if (s) {
    free(bytes);
    nimble_manifest_deinit(&m);
    return nimble_status_annotate(s, "manifest %s:%s", a->name, ref);
  }
  s = nimble_manifest_check_target(&m, spec);
  if (s) s = nimble_status_annotate(s, "manifest %s@%s is not for target '%s'", a->name,
                                    manifest_out, spec);
  /* Titles must be plain, distinct file names before anything is written. */
  for (size_t i = 0; !s && i < m.layer_count; i++) {
    const char *title = nimble_descriptor_annotation(&m.layers[i], NIMBLE_ANNOTATION_TITLE);
    if (!safe_file_name(title))
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "manifest %s: layer %zu has no usable file name (title '%s')",
                             manifest_out, i, title ? title : "");
    for (size_t k = 0; !s && k < i; k++)
      if (!strcmp(title, nimble_descriptor_annotation(&m.layers[k], NIMBLE_ANNOTATION_TITLE)))
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                               "manifest %s: layers %zu and %zu are both titled '%s'",
                               manifest_out, k, i, title);
  }
  if (!s) s = make_dir(dir);
  char path[4096];
  if (!s) {
    s = join_path(path, sizeof path, dir, "manifest.json");
    if (!s) s = write_file(path, bytes, n);
  }
  free(bytes);
  /* The config: its target must be the one asked for. */
  if (!s) {
    *peer = NIMBLE_FARM_PEER_STORE;
    uint8_t *cfg_bytes;
    size_t cfg_n;
    s = nimble_store_pull_blob(sc, a->name, &m.config.digest, &cfg_bytes, &cfg_n);
    if (s) {
      s = nimble_status_annotate(s, "pulling the config blob");
    } else {
      *peer = NIMBLE_FARM_PEER_SCHEDULER;
      /* Only the target is checked here, with jansson: the full decoder
       * (nimble_artifact_config_decode) cannot be linked beside the
       * compiler library, which defines nimble_dtype_name too. */
      json_error_t jerr;
      json_t *cfg = json_loadb((const char *)cfg_bytes, cfg_n, JSON_REJECT_DUPLICATES, &jerr);
      const char *target = json_string_value(json_object_get(cfg, "target"));
      if (!target)
        s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                               "config blob of %s has no \"target\" string (%s)", manifest_out,
                               cfg ? "member missing" : jerr.text);
      else if (strcmp(target, spec) != 0)
        s = nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                               "artifact %s was built for '%s', not '%s'", manifest_out, target,
                               spec);
      json_decref(cfg);
      if (!s) {
        s = join_path(path, sizeof path, dir, "config.json");
        if (!s) s = write_file(path, cfg_bytes, cfg_n);
      }
      free(cfg_bytes);
    }
  }
  for (size_t i = 0; !s && i < m.layer_count; i++) {
    const char *title = nimble_descriptor_annotation(&m.layers[i], NIMBLE_ANNOTATION_TITLE);
    s = join_path(path, sizeof path, dir, title);
    if (s) break;
    *peer = NIMBLE_FARM_PEER_STORE;
    s = nimble_store_pull_blob_to_file(sc, a->name, &m.layers[i].digest, path);
    if (s) s = nimble_status_annotate(s, "pulling layer '%s'", title);
  }
  *layers_out = m.layer_count;
  nimble_manifest_deinit(&m);
  return s;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Joins the part files of `dir` into one image, checks that the runtime
 * loads it, and writes it to `path` through a temporary file renamed into
 * place. */
static nimble_status_t join_into_file(const char *dir, const char *path) {
  nimble_executable_part_t *parts;
  size_t n;
  nimble_status_t s = nimble_executable_read_part_dir(dir, &parts, &n);
  if (s) return nimble_status_annotate(s, "the artifact's layers");
  void *image = NULL;
  size_t image_size = 0;
  s = nimble_executable_join_parts(parts, n, &image, &image_size);
  nimble_executable_parts_free(parts, n);
  if (!s) {
    /* The loader checks every byte (kernels are not loaded: a cuda
     * artifact must be fetchable where there is no GPU). */
    nimble_executable *exe = NULL;
    s = nimble_executable_load_memory(image, image_size, NIMBLE_LOAD_NO_KERNELS, &exe);
    if (s) s = nimble_status_annotate(s, "the joined executable does not load");
    nimble_executable_release(exe);
  }
  if (!s) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.partial", path) >= sizeof tmp)
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "path '%s' is too long", path);
    if (!s) s = write_file(tmp, image, image_size);
    if (!s && rename(tmp, path) != 0)
      s = nimble_status_make(NIMBLE_IO_ERROR, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (s) remove(tmp);
  }
  free(image);
  return s;
}

/* Removes the files of a temporary directory and the directory. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      char file[4096];
      if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
      if (!join_path(file, sizeof file, dir, e->d_name)) remove(file);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int run_fetch(nimble_cli_ctx *ctx, int argc, char **argv) {
  const nimble_cli_command *self = &nimble_cmd_fetch;
  fetch_args a = {0};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v = NULL;
    int r;
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      nimble_cli_print_command_help(self, stdout);
      return NIMBLE_EXIT_OK;
    } else if (!strcmp(arg, "--json")) {
      a.json = true;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--target", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self, "--target needs a value");
      a.target = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--trusted-keys", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self, "--trusted-keys needs a file");
      a.trusted_keys = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "--digest", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self, "--digest needs a value");
      a.digest = v;
    } else if ((r = nimble_farm_take_value(argc, argv, &i, "-o", &v)) != 0 ||
               (r = nimble_farm_take_value(argc, argv, &i, "--output", &v)) != 0) {
      if (r < 0) return nimble_cli_usage_error(self, "-o needs a file (.nimble) or a directory");
      a.out = v;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return nimble_cli_usage_error(self, "unknown option '%s'", arg);
    } else if (a.name) {
      return nimble_cli_usage_error(self, "expected one name, got '%s' and '%s'", a.name, arg);
    } else {
      a.name = arg;
    }
  }
  if (!a.name) return nimble_cli_usage_error(self, "no artifact name given");
  if (!a.trusted_keys && getenv("NIMBLE_TRUSTED_KEYS") && getenv("NIMBLE_TRUSTED_KEYS")[0])
    a.trusted_keys = getenv("NIMBLE_TRUSTED_KEYS");
  if (!a.target) return nimble_cli_usage_error(self, "no target given (--target=x86)");
  nimble_target_t t;
  nimble_status_t s = nimble_target_parse(a.target, &t);
  if (!s && a.digest) {
    nimble_digest_t d;
    s = nimble_digest_parse(a.digest, &d);
    if (s) s = nimble_status_annotate(s, "--digest");
  }
  if (!s) {
    /* The name must be a repository: checked the way SUBMIT checks it. */
    json_t *body = json_pack("{s:s,s:s,s:s,s:[s]}", "model",
                             "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                             "format", "onnx", "name", a.name, "targets", "x86");
    s = nimble_message_validate_body(NIMBLE_MSG_SUBMIT, body);
    json_decref(body);
  }
  if (s) {
    int rc = nimble_cli_usage_error(self, "%s", nimble_status_message(s));
    nimble_status_free(s);
    return rc;
  }
  char spec[NIMBLE_TARGET_SPEC_MAX + 1], tag[NIMBLE_TARGET_TAG_MAX + 1];
  nimble_target_format(&t, spec);
  nimble_target_tag(&t, tag);
  char dir[4096];
  if (a.out) {
    if ((size_t)snprintf(dir, sizeof dir, "%s", a.out) >= sizeof dir)
      return nimble_cli_usage_error(self, "-o '%s' is too long", a.out);
  } else {
    const char *base = strrchr(a.name, '/');
    if ((size_t)snprintf(dir, sizeof dir, "%s-%s", base ? base + 1 : a.name, tag) >= sizeof dir)
      return nimble_cli_usage_error(self, "name '%s' is too long", a.name);
  }

  int rc = nimble_cli_load_config(ctx);
  if (rc) return rc;
  const char *store = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_STORE);
  const char *token = nimble_cli_config_get(&ctx->config, NIMBLE_CLI_KEY_TOKEN);
  if (!store) store = NIMBLE_CLI_DEFAULT_STORE;
  nimble_store_client *sc;
  s = nimble_farm_store_client(store, token, &sc);
  if (s) {
    nimble_cli_report(s);
    return NIMBLE_EXIT_CONFIG;
  }
  char manifest[NIMBLE_DIGEST_STRING_LEN + 1] = "";
  size_t layers = 0;
  nimble_farm_peer_t peer;
  /* -o FILE.nimble: the parts go to a temporary directory beside FILE,
   * then are joined into it. */
  bool one_file = a.out && ends_with(a.out, ".nimble");
  char parts_dir[4096 + 16];
  if (one_file) {
    snprintf(parts_dir, sizeof parts_dir, "%s.parts-XXXXXX", dir);
    if (!mkdtemp(parts_dir)) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "cannot create a directory beside '%s': %s", dir, strerror(errno));
      nimble_store_client_destroy(sc);
      nimble_cli_report(s);
      return NIMBLE_EXIT_FAILURE;
    }
  }
  s = fetch(sc, &a, spec, tag, one_file ? parts_dir : dir, manifest, &layers, &peer);
  nimble_store_client_destroy(sc);
  if (one_file) {
    if (!s) {
      s = join_into_file(parts_dir, dir);
      if (s) peer = NIMBLE_FARM_PEER_SCHEDULER; /* not a store outage */
    }
    remove_dir(parts_dir);
  }
  if (s) {
    if (nimble_status_code(s) == NIMBLE_NOT_FOUND)
      s = nimble_status_annotate(s, "no artifact %s for target '%s' in the store at %s", a.name,
                                 spec, store);
    /* Untrusted is not a refused token: exit 1, the message says why. */
    rc = nimble_status_code(s) == NIMBLE_IO_ERROR || a.untrusted ? NIMBLE_EXIT_FAILURE
                                                                 : nimble_farm_exit_code(s, peer);
    nimble_cli_report(s);
    return rc;
  }
  char *ref = nimble_farm_reference(store, a.name, tag, manifest);
  if (a.json) {
    json_t *doc = json_pack("{s:s,s:s,s:s,s:s,s:i}", "reference", ref ? ref : manifest,
                            "manifest", manifest, "target", spec, one_file ? "file" : "directory", dir,
                            "layers", (json_int_t)layers);
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) printf("%s\n", text);
    free(text);
    json_decref(doc);
  } else {
    if (one_file)
      printf("%s -> %s (one executable from %zu layers)\n", ref ? ref : manifest, dir, layers);
    else
      printf("%s -> %s/ (%zu layers, manifest.json, config.json)\n", ref ? ref : manifest, dir,
             layers);
  }
  free(ref);
  return NIMBLE_EXIT_OK;
}

const nimble_cli_command nimble_cmd_fetch = {
    "fetch",
    "Download a compiled artifact's parts from the store.",
    "fetch NAME --target=T [-o FILE.nimble|DIR] [--digest D] [--json]",
    "Pulls the artifact of repository NAME for target T (by the target's tag,\n"
    "or by manifest digest D). With -o FILE.nimble it writes one executable\n"
    "file, joined from the layers and checked by the runtime's loader before\n"
    "it is renamed into place; otherwise it writes the parts to DIR (default\n"
    "NAME-TAG): manifest.json, config.json and one file per layer, named by\n"
    "the layer's title. Every byte is checked against its digest; the\n"
    "manifest must hold kernels for T and the config must name T. Both\n"
    "forms run with nimble run / nimble-run.\n"
    "\n"
    "Options:\n"
    "  --target=T      the target (x86, aarch64, cuda:arch=sm_90, ...)\n"
    "  -o, --output PATH  FILE.nimble (one file) or a directory of parts\n"
    "  --digest D      pull this manifest (sha256:...) instead of the tag\n"
    "  --trusted-keys FILE  fetch only an artifact the farm signed for NAME and\n"
    "                  T's tag with one of these keys (default $NIMBLE_TRUSTED_KEYS;\n"
    "                  neither: a warning that the publisher is not verified)\n"
    "  --json          print the result as JSON\n"
    "\n"
    "Exit status: 0 fetched; 1 not found, not for T, not trusted or not writable; 2 usage\n"
    "error; 4 bad configuration; 6 the store cannot be reached; 7 the token\n"
    "was refused.\n",
    run_fetch,
};
