/* Picks the frontend for a model file and loads it into IR. */
#include "model_load.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nimble/nir.h"

#ifdef NIMBLE_CLI_HAVE_ONNX_IMPORT
#include "nimble/onnx_import.h"
#include "nimble/onnx_model.h"
#endif

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* Checks up front that `path` is a readable regular file, so every
 * frontend's "cannot read" reads the same and names the file. */
static nimble_status_t check_readable(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  int rc = fstat(fd, &st);
  int err = errno;
  close(fd);
  if (rc != 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot stat %s: %s", path, strerror(err));
  if (S_ISDIR(st.st_mode))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is a directory, not a model file", path);
  if (!S_ISREG(st.st_mode))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s is not a regular file", path);
  return nimble_ok();
}

#ifdef NIMBLE_CLI_HAVE_ONNX_IMPORT
static nimble_status_t load_onnx(nimble_arena *arena, const char *path, nimble_cli_model *out) {
  nimble_onnx_model *model;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_model_load_file(path, &model));
  nimble_status_t s = nimble_onnx_import_model(arena, model, NULL, &out->module);
  if (s) {
    nimble_onnx_model_destroy(model);
    return nimble_status_annotate(s, "%s", path);
  }
  /* The IR keeps outputs as a tuple without names; the graph has them. */
  const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
  const char **names =
      g->n_outputs ? nimble_arena_calloc(arena, g->n_outputs, sizeof *names) : NULL;
  if (g->n_outputs && !names) {
    nimble_onnx_model_destroy(model);
    return NIMBLE_OOM();
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    names[i] = nimble_arena_strdup(arena, g->outputs[i]->name);
    if (!names[i]) {
      nimble_onnx_model_destroy(model);
      return NIMBLE_OOM();
    }
  }
  out->output_names = names;
  out->num_output_names = g->n_outputs;
  nimble_onnx_model_destroy(model);
  return nimble_ok();
}
#endif

nimble_status_t nimble_cli_model_load(nimble_arena *arena, const char *path,
                                      nimble_cli_model *out) {
  memset(out, 0, sizeof *out);
  NIMBLE_RETURN_IF_ERROR(check_readable(path));
  if (has_suffix(path, ".nir")) {
    out->format = "nir";
    return nimble_nir_parse_file(arena, path, &out->module);
  }
  if (has_suffix(path, ".onnx")) {
    out->format = "onnx";
#ifdef NIMBLE_CLI_HAVE_ONNX_IMPORT
    return load_onnx(arena, path, out);
#else
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "%s: this build of nimble has no ONNX importer "
                              "(the compiler was built without it); .nir programs work",
                              path);
#endif
  }
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                            "%s: unknown model format (expected a .onnx model or a .nir program)",
                            path);
}
