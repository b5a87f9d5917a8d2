/* libFuzzer target for the importer: any bytes through the ONNX loader,
 * then nimble_onnx_import_model, type inference of the module and the
 * printer. Each stage must succeed or give an error with a message; none may
 * crash, hang or leak (the fuzz build has ASan and UBSan). A module that
 * type-checks must also print as text that parses back to an equal module
 * which type-checks too (issue 3: binders sharing a name broke this). Built by
 * scripts/fuzz-onnx-import.sh; the crash-regression corpus in
 * tests/compiler/onnx_import/corpus/ is replayed through this same function
 * by the test_onnx_import_corpus suite. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/arena.h"
#include "nimble/ir.h"
#include "nimble/nir.h"
#include "nimble/onnx_import.h"
#include "nimble/onnx_model.h"
#include "nimble/typing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An error must carry a message; aborting makes the fuzzer keep the input. */
static int failed(nimble_status_t s) {
  if (!s) return 0;
  if (!nimble_status_message(s)[0]) abort();
  nimble_status_free(s);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_onnx_model *model = NULL;
  nimble_status_t s = nimble_onnx_model_load_memory(data, size, "fuzz.onnx", &model);
  if (s) {
    if (model) abort();
    failed(s);
    return 0;
  }
  nimble_arena *arena = NULL;
  if (failed(nimble_arena_create(&arena))) {
    nimble_onnx_model_destroy(model);
    return 0;
  }
  nimble_module *m = NULL;
  s = nimble_onnx_import_model(arena, model, NULL, &m);
  /* The model is borrowed: the module must not need it any more. */
  nimble_onnx_model_destroy(model);
  if (s) {
    if (m) abort();
    failed(s);
  } else {
    nimble_typing *t = NULL;
    bool typed = !failed(nimble_typing_infer_module(m, &t));
    if (typed && !nimble_typing_global_type(t, "main")) abort();
    char *text = NULL;
    if (!failed(nimble_ir_print_module(m, &text))) {
      if (!text) abort();
      nimble_module *m2 = NULL;
      nimble_typing *t2 = NULL;
      /* The printed text is the module: it parses back equal, and what
       * type-checked still does. */
      nimble_status_t ps = nimble_nir_parse(arena, "fuzz.nir", text, strlen(text), &m2);
      if (ps || !nimble_ir_module_equal(m, m2)) abort();
      if (typed && nimble_typing_infer_module(m2, &t2)) abort();
    }
    free(text);
  }
  nimble_arena_destroy(arena);
  return 0;
}
