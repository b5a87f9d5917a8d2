/* libFuzzer target for the executable loader, built by clang-16 when it is
 * installed (see runtime/CMakeLists.txt):
 *   cmake --build BUILD --target fuzz_executable_loader
 *   cp -r tests/runtime/corpus /tmp/corpus
 *   BUILD/runtime/fuzz_executable_loader -max_total_time=600 /tmp/corpus
 * Inputs that crash it go into tests/runtime/corpus, which ctest replays. */
#include "executable/fuzz_one.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_fuzz_one(data, size);
  return 0;
}
