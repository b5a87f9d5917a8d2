/* Fuzz target for the .nir parser (libFuzzer's entry point). Whatever the
 * input, parsing returns a status without crashing or leaking; when it
 * parses, the printed form parses back to an equal module, and type
 * inference and the exhaustiveness check return a status. tests/compiler/test_nir_fuzz.c drives it over
 * mutated test programs; with clang it links into a libFuzzer binary:
 *   clang -fsanitize=fuzzer,address ... fuzz_nir_parse.c libnimble_compiler.a */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/nir.h"
#include "nimble/typing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_arena *arena;
  nimble_module *m, *back;
  nimble_typing *types;
  char *text;
  if (nimble_arena_create(&arena)) abort();
  nimble_status_t st = nimble_nir_parse(arena, "fuzz.nir", (const char *)data, size, &m);
  if (st) {
    nimble_status_free(st);
    nimble_arena_destroy(arena);
    return 0;
  }
  if (nimble_ir_print_module(m, &text)) abort();
  st = nimble_nir_parse(arena, "printed.nir", text, strlen(text), &back);
  /* What the printer writes must read back as the same program. */
  if (st || !nimble_ir_module_equal(m, back)) abort();
  free(text);
  nimble_status_free(nimble_typing_infer_module(m, &types));
  nimble_status_free(nimble_typing_check_matches(m));
  nimble_arena_destroy(arena);
  return 0;
}
