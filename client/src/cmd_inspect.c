/* `nimble inspect FILE`: the typed IR of a model or program, or with
 * --json a summary for scripts. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "inspect_ir.h"
#include "model_load.h"
#include "nimble/runtime.h"
#include "nimble/typed_module.h"
#include "nimble/typing.h"

/* Exit code for a status from loading or typing: what the input caused is
 * NIMBLE_EXIT_INPUT, running out of memory is a failure of the operation. */
static int input_error(nimble_status_t s) {
  int rc = nimble_status_code(s) == NIMBLE_RESOURCE_EXHAUSTED &&
                   strstr(nimble_status_message(s), "out of memory")
               ? NIMBLE_EXIT_FAILURE
               : NIMBLE_EXIT_INPUT;
  nimble_cli_report(s);
  return rc;
}

/* Constants up to this many elements are printed; larger ones (weights)
 * are elided unless --constants asks for them. */
#define ELIDE_CONSTANTS_ABOVE 16

static int inspect(const char *path, bool json, bool all_constants) {
  nimble_arena *arena;
  nimble_status_t s = nimble_arena_create(&arena);
  if (s) {
    nimble_cli_report(s);
    return NIMBLE_EXIT_FAILURE;
  }
  int rc = NIMBLE_EXIT_OK;
  nimble_cli_model model;
  nimble_typing *typing = NULL;
  s = nimble_cli_model_load(arena, path, &model);
  if (!s) s = nimble_typing_infer_module(model.module, &typing);
  if (s) {
    rc = input_error(s);
    goto done;
  }
  if (json) {
    json_t *summary;
    s = nimble_cli_summarize_module(model.module, typing, path, model.format, model.output_names,
                                    model.num_output_names, &summary);
    if (s) {
      nimble_cli_report(s);
      rc = NIMBLE_EXIT_FAILURE;
      goto done;
    }
    char *text = json_dumps(summary, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(summary);
    if (!text) {
      fprintf(stderr, "nimble: out of memory\n");
      rc = NIMBLE_EXIT_FAILURE;
      goto done;
    }
    printf("%s\n", text);
    free(text);
  } else {
    char *text = NULL;
    s = nimble_typed_module_annotate(model.module, typing,
                                     all_constants ? 0 : ELIDE_CONSTANTS_ABOVE);
    if (!s) s = nimble_ir_print_module(model.module, &text);
    if (s) {
      nimble_cli_report(s);
      rc = NIMBLE_EXIT_FAILURE;
      goto done;
    }
    fputs(text, stdout);
    free(text);
  }
done:
  nimble_arena_destroy(arena);
  return rc;
}

/* A compiled executable (.nimble) or a directory of its parts: the
 * disassembly. Kernels are not loaded, so an artifact for another target
 * (aarch64, cuda) is shown as well. */
static bool is_executable(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    /* a directory holding parts; any other is left to the model loader,
     * which says it is a directory */
    nimble_executable_part_t *parts;
    size_t n;
    nimble_status_t s = nimble_executable_read_part_dir(path, &parts, &n);
    if (s) {
      nimble_status_free(s);
      return false;
    }
    nimble_executable_parts_free(parts, n);
    return true;
  }
  size_t n = strlen(path);
  return n > 7 && strcmp(path + n - 7, ".nimble") == 0;
}

static int disassemble(const char *path) {
  nimble_executable *exe = NULL;
  struct stat st;
  nimble_status_t s;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    nimble_executable_part_t *parts;
    size_t n;
    s = nimble_executable_read_part_dir(path, &parts, &n);
    if (!s) {
      s = nimble_executable_load_parts(parts, n, NIMBLE_LOAD_NO_KERNELS, &exe);
      nimble_executable_parts_free(parts, n);
    }
  } else {
    s = nimble_executable_load_file_flags(path, NIMBLE_LOAD_NO_KERNELS, &exe);
  }
  char *text = NULL;
  if (!s) s = nimble_executable_disassemble(exe, &text);
  nimble_executable_release(exe);
  if (s) return input_error(nimble_status_annotate(s, "inspecting %s", path));
  fputs(text, stdout);
  free(text);
  return NIMBLE_EXIT_OK;
}

static int run_inspect(nimble_cli_ctx *ctx, int argc, char **argv) {
  bool json = false, all_constants = false, operands_only = false;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!operands_only && strcmp(a, "--") == 0) {
      operands_only = true;
    } else if (!operands_only && strcmp(a, "--json") == 0) {
      json = true;
    } else if (!operands_only && strcmp(a, "--constants") == 0) {
      all_constants = true;
    } else if (!operands_only && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
      nimble_cli_print_command_help(&nimble_cmd_inspect, stdout);
      return NIMBLE_EXIT_OK;
    } else if (!operands_only && a[0] == '-' && a[1] != '\0') {
      return nimble_cli_usage_error(&nimble_cmd_inspect, "unknown option '%s'", a);
    } else if (path) {
      return nimble_cli_usage_error(&nimble_cmd_inspect, "expected one file, got '%s' and '%s'",
                                    path, a);
    } else {
      path = a;
    }
  }
  if (!path) return nimble_cli_usage_error(&nimble_cmd_inspect, "no model file given");
  if (is_executable(path)) {
    if (json || all_constants)
      return nimble_cli_usage_error(&nimble_cmd_inspect, "--json and --constants are for models; '%s' is an "
                                    "executable", path);
    return disassemble(path);
  }
  return inspect(path, json, all_constants);
}

const nimble_cli_command nimble_cmd_inspect = {
    "inspect",
    "Show the typed IR of a model (.onnx) or program (.nir), or an executable's bytecode.",
    "inspect [--json] [--constants] FILE",
    "Imports FILE (an ONNX model or a .nir program), infers its types and\n"
    "prints the IR with every binding annotated: dims are numbers, symbolic\n"
    "names (n, seq) or ? (Any: known only at run time).\n"
    "\n"
    "For a compiled executable (FILE.nimble, or a directory of its parts as\n"
    "`nimble fetch -o DIR` writes it) it prints the disassembly instead: the\n"
    "target, entries and kernels, then every function's bytecode, one\n"
    "instruction a line with named operands (docs/vm.md). Kernels are not\n"
    "loaded, so artifacts for any target can be shown.\n"
    "\n"
    "Constants of more than 16 elements (weights) are shown without their\n"
    "elements, as %\"const[(512, 784), float32]{...}\".\n"
    "\n"
    "Options:\n"
    "  --json        print a summary instead: the entry function's inputs and\n"
    "                outputs (dtype, shape with symbolic dims as strings),\n"
    "                operator counts, control flow and the dynamic dims\n"
    "  --constants   print every constant in full\n"
    "\n"
    "Exit status 3 when FILE cannot be read, parsed, imported or typed.\n",
    run_inspect,
};
