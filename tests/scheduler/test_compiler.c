/* test_compiler (built as farm_test_compiler): a TEST STAND-IN for the `nimble` compiler, used by the
 * scheduler and worker suites until the real `nimble compile` exists. It
 * honours the worker's compiler contract (docs/farm.md):
 *
 *   test_compiler compile MODEL --target=SPEC [--format=F] --emit-parts DIR
 *                 --progress-fd N [--jobs N] [--option K=V]...
 *                 [--kernel-cache DIR | --no-kernel-cache] (ignored)
 *
 * and writes deterministic parts derived from the model bytes and target:
 *
 *   config.json  canonical artifact config (target, compiler version,
 *                model digest, one entry "main": x float32 [n] -> y float32 [n])
 *   metadata     "NIMBLE-TEST-METADATA\ntarget=<spec>\nmodel=<hex>\n": where
 *                the real compiler writes the runtime's binary metadata part
 *                (docs/executable.md), which every artifact must carry as its
 *                application/vnd.nimble.executable.metadata.v1 layer
 *   bytecode     "NIMBLE-TEST-BYTECODE\ntarget=<spec>\nmodel=<hex>\n"
 *   constants    "NIMBLE-TEST-CONSTANTS\n" + the model bytes (the same for
 *                every target, so the store keeps it once)
 *   kernels-<triple>  "NIMBLE-TEST-KERNELS <triple>\nmodel=<hex>\n", one per
 *                triple of the target (cuda has a host and a device one)
 *   parts.json   the layer index (metadata, bytecode, constants, kernels),
 *                with docs/artifacts.md's media types
 *
 * Progress lines "import 10", "optimize 40", "codegen 70", "link 90" go to
 * fd N. Lines of the model text steer it, so that tests can provoke
 * failures through the model content:
 *
 *   sleep MS     sleep MS milliseconds in the optimize phase (with progress)
 *   crash        die of SIGSEGV
 *   oom          allocate and touch memory until allocation fails, then
 *                print "out of memory" and abort()
 *   fail TEXT    print TEXT on stderr and exit 1
 *   no-metadata  succeed but leave the metadata part out of parts.json,
 *                which the worker must refuse (docs/artifacts.md)
 *   tune-out TEXT  with --tune-records-out FILE: TEXT (the rest of the
 *                line; the lines' texts joined by newlines) is FILE's
 *                content, written as the records the compile measured
 *   tune-out-none  with --tune-records-out: write no FILE at all
 *
 * The tuning flags (docs/farm.md, "Tuning records"), as the real compiler
 * takes them: --tune-records IN and --tune-records-out OUT. Without a
 * "tune-out" line OUT gets a document with no records. IN is copied to
 * NIMBLE_TEST_COMPILER_LOG with ".tune-in" appended (when the log is set),
 * so tests see what the worker handed the compile.
 *
 * When NIMBLE_TEST_COMPILER_LOG names a file, one line "compile <model
 * hex> <target>[ jobs=N][ option=K=V]...[ tune]" is appended to it per run, so tests can
 * count compiles and see the options they got.
 * It is built without sanitizers: the worker runs it under RLIMIT_AS,
 * which AddressSanitizer's shadow memory cannot live with.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERSION NIMBLE_VERSION_STRING

static void die(const char *msg, const char *arg) {
  fprintf(stderr, "test_compiler: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
  exit(2);
}

static void write_path(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) die("cannot write", path);
}

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  write_path(path, data, n);
}

static void progress(int fd, const char *phase, int percent) {
  if (fd < 0) return;
  char line[64];
  int n = snprintf(line, sizeof line, "%s %d\n", phase, percent);
  if (write(fd, line, (size_t)n) < 0) { /* the worker went away; carry on */
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The triples of a target spec's kind (the part before ':'). */
static int triples(const char *spec, const char *out[2]) {
  size_t k = strcspn(spec, ":");
  if (k == 3 && !strncmp(spec, "x86", 3)) {
    out[0] = "x86_64-linux-gnu";
    return 1;
  }
  if (k == 7 && !strncmp(spec, "aarch64", 7)) {
    out[0] = "aarch64-linux-gnu";
    return 1;
  }
  if (k == 4 && !strncmp(spec, "cuda", 4)) {
    out[0] = "x86_64-linux-gnu";
    out[1] = "nvptx64-nvidia-cuda";
    return 2;
  }
  return 0;
}

static const char *media_of(const char *triple) {
  if (!strcmp(triple, "x86_64-linux-gnu")) return "application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf";
  if (!strcmp(triple, "aarch64-linux-gnu")) return "application/vnd.nimble.kernels.aarch64-linux-gnu.v1+elf";
  return "application/vnd.nimble.kernels.nvptx64-nvidia-cuda.v1+ptx";
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "compile")) die("usage: test_compiler compile MODEL ...", NULL);
  const char *model = NULL, *target = NULL, *dir = NULL, *tune_in = NULL, *tune_out = NULL;
  int pfd = -1, no_metadata = 0, tune_none = 0;
  static char tune_text[1 << 16];
  static char options[4096];
  for (int i = 2; i < argc; i++) {
    if (!strncmp(argv[i], "--target=", 9)) target = argv[i] + 9;
    else if (!strncmp(argv[i], "--format=", 9)) continue;
    else if (!strcmp(argv[i], "--emit-parts") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--progress-fd") && i + 1 < argc) pfd = atoi(argv[++i]);
    /* The kernel cache changes how fast a real compile is, never its
     * output: the stand-in has none. */
    else if (!strcmp(argv[i], "--kernel-cache") && i + 1 < argc) i++;
    else if (!strcmp(argv[i], "--no-kernel-cache")) continue;
    else if (!strcmp(argv[i], "--tune-records") && i + 1 < argc) tune_in = argv[++i];
    else if (!strcmp(argv[i], "--tune-records-out") && i + 1 < argc) tune_out = argv[++i];
    else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) {
      size_t used = strlen(options);
      snprintf(options + used, sizeof options - used, " jobs=%s", argv[++i]);
    }
    else if (!strcmp(argv[i], "--option") && i + 1 < argc) {
      size_t used = strlen(options);
      snprintf(options + used, sizeof options - used, " option=%s", argv[++i]);
    }
    else if (argv[i][0] != '-' && !model) model = argv[i];
    else die("unknown argument", argv[i]);
  }
  if (!model || !target || !dir) die("MODEL, --target and --emit-parts are required", NULL);
  if (tune_in) {
    size_t used = strlen(options);
    snprintf(options + used, sizeof options - used, " tune");
  }
  const char *trip[2];
  int ntrip = triples(target, trip);
  if (!ntrip) die("unknown target", target);

  FILE *f = fopen(model, "rb");
  if (!f) die("cannot open", model);
  static unsigned char bytes[1 << 20];
  size_t n = fread(bytes, 1, sizeof bytes - 1, f);
  fclose(f);
  bytes[n] = '\0';
  unsigned char h[32];
  crypto_hash_sha256(h, bytes, n);
  char hex[65];
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);

  const char *log = getenv("NIMBLE_TEST_COMPILER_LOG");
  if (log && *log) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      char line[5000];
      int k = snprintf(line, sizeof line, "compile %s %s%s\n", hex, target, options);
      if (write(fd, line, (size_t)k) < 0) { /* best effort */
      }
      close(fd);
    }
    if (tune_in) {
      char copy[4096];
      snprintf(copy, sizeof copy, "%s.tune-in", log);
      FILE *in = fopen(tune_in, "rb");
      if (!in) die("cannot open", tune_in);
      static char tbytes[1 << 20];
      size_t tn = fread(tbytes, 1, sizeof tbytes, in);
      fclose(in);
      write_path(copy, tbytes, tn);
    }
  }

  progress(pfd, "import", 10);
  /* Commands in the model text. */
  for (char *line = (char *)bytes; line && *line;) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    if (!strncmp(line, "sleep ", 6)) {
      long ms = atol(line + 6);
      for (long t = 0; t < ms; t += 100) {
        progress(pfd, "optimize", 20 + (int)(40 * t / (ms ? ms : 1)));
        sleep_ms(ms - t < 100 ? ms - t : 100);
      }
    } else if (!strcmp(line, "crash")) {
      fprintf(stderr, "test_compiler: crashing as the model asks\n");
      fflush(stderr);
      raise(SIGSEGV);
    } else if (!strcmp(line, "oom")) {
      size_t total = 0;
      for (;;) {
        char *p = malloc(64u << 20);
        if (!p) {
          fprintf(stderr, "test_compiler: out of memory after %zu MiB\n", total >> 20);
          fflush(stderr);
          abort();
        }
        memset(p, 1, 64u << 20);
        total += 64u << 20;
      }
    } else if (!strcmp(line, "no-metadata")) {
      no_metadata = 1;
    } else if (!strncmp(line, "tune-out ", 9)) {
      size_t used = strlen(tune_text);
      snprintf(tune_text + used, sizeof tune_text - used, "%s%s", used ? "\n" : "", line + 9);
    } else if (!strcmp(line, "tune-out-none")) {
      tune_none = 1;
    } else if (!strncmp(line, "fail ", 5)) {
      fprintf(stderr, "%s\n", line + 5);
      return 1;
    }
    line = next;
  }
  progress(pfd, "codegen", 70);

  char text[8192];
  int k = snprintf(text, sizeof text, "NIMBLE-TEST-METADATA\ntarget=%s\nmodel=%s\n", target, hex);
  write_file(dir, "metadata", text, (size_t)k);
  k = snprintf(text, sizeof text, "NIMBLE-TEST-BYTECODE\ntarget=%s\nmodel=%s\n", target, hex);
  write_file(dir, "bytecode", text, (size_t)k);
  /* Re-read: the command loop above cut the text at newlines. */
  f = fopen(model, "rb");
  n = f ? fread(bytes, 1, sizeof bytes - 1, f) : 0;
  if (f) fclose(f);
  static unsigned char constants[(1 << 20) + 64];
  memcpy(constants, "NIMBLE-TEST-CONSTANTS\n", 22);
  memcpy(constants + 22, bytes, n);
  write_file(dir, "constants", constants, n + 22);
  char parts[2048];
  int pn = snprintf(parts, sizeof parts, "{\"layers\":[%s",
                    no_metadata ? "" : "{\"file\":\"metadata\",\"mediaType\":"
                                       "\"application/vnd.nimble.executable.metadata.v1\"},");
  pn += snprintf(parts + pn, sizeof parts - (size_t)pn,
                    "{\"file\":\"bytecode\",\"mediaType\":\"application/vnd.nimble.bytecode.v1\"},"
                    "{\"file\":\"constants\",\"mediaType\":\"application/vnd.nimble.constants.v1\"}");
  for (int i = 0; i < ntrip; i++) {
    char name[128];
    snprintf(name, sizeof name, "kernels-%s", trip[i]);
    k = snprintf(text, sizeof text, "NIMBLE-TEST-KERNELS %s\nmodel=%s\n", trip[i], hex);
    write_file(dir, name, text, (size_t)k);
    pn += snprintf(parts + pn, sizeof parts - (size_t)pn, ",{\"file\":\"%s\",\"mediaType\":\"%s\"}",
                   name, media_of(trip[i]));
  }
  pn += snprintf(parts + pn, sizeof parts - (size_t)pn, "]}\n");
  write_file(dir, "parts.json", parts, (size_t)pn);
  k = snprintf(text, sizeof text,
               "{\"compilerVersion\":\"%s\",\"entries\":[{\"inputs\":[{\"dtype\":\"float32\","
               "\"name\":\"x\",\"shape\":[\"n\"]}],\"name\":\"main\",\"outputs\":[{\"dtype\":"
               "\"float32\",\"name\":\"y\",\"shape\":[\"n\"]}]}],\"model\":\"sha256:%s\","
               "\"schemaVersion\":1,\"target\":\"%s\"}",
               VERSION, hex, target);
  write_file(dir, "config.json", text, (size_t)k);
  if (tune_out && !tune_none) {
    const char *doc = tune_text[0] ? tune_text : "{\"format\":\"nimble.tune-records.v1\",\"records\":[]}";
    write_path(tune_out, doc, strlen(doc));
  }
  progress(pfd, "link", 90);
  return 0;
}
