/* run_model: load a compiled model, run its entry "main" on inputs filled
 * with 0, 1, 2, ... (float32; every symbolic dimension takes DIM), and print
 * the first output. Usage: run_model MODEL.nimble [DIM] */
#include <stdio.h>
#include <stdlib.h>

#include "nimble/runtime.h"

int main(int argc, char **argv) {
  if (argc < 2) return fprintf(stderr, "usage: %s MODEL.nimble [DIM]\n", argv[0]), 2;
  int64_t dim = argc > 2 ? atoll(argv[2]) : 4, shapes[8][8];
  float *data[8] = {0};
  nimble_executable *exe = NULL;
  nimble_vm *vm = NULL;
  const nimble_entry_info_t *e;
  DLManagedTensor *out = NULL;
  nimble_status_t s = nimble_executable_load_file(argv[1], &exe);
  if (!s) s = nimble_executable_find_entry(exe, "main", &e);
  if (!s) s = nimble_vm_create(exe, NULL, &vm);
  for (uint32_t i = 0; !s && i < e->num_inputs && i < 8; i++) {
    int64_t n = 1;
    for (int32_t d = 0; d < e->inputs[i].ndim && d < 8; d++)
      n *= shapes[i][d] = e->inputs[i].dims[d].symbol ? dim : e->inputs[i].dims[d].value;
    data[i] = malloc((size_t)n * sizeof(float) + 1);
    for (int64_t k = 0; k < n; k++) data[i][k] = (float)k;
    DLTensor t = {data[i], {kDLCPU, 0}, e->inputs[i].ndim, {kDLFloat, 32, 1}, shapes[i], NULL, 0};
    s = nimble_vm_set_input(vm, "main", i, &t); /* no copy: data stays ours */
  }
  if (!s) s = nimble_vm_invoke(vm, "main");
  if (!s) s = nimble_vm_take_output(vm, 0, &out);
  if (s) fprintf(stderr, "run_model: %s\n", nimble_status_message(s));
  for (int64_t k = 0, n = 1; out && k < (n = out->dl_tensor.ndim ? out->dl_tensor.shape[0] : 1); k++)
    printf("%g%s", ((const float *)out->dl_tensor.data)[k], k + 1 < n ? " " : "\n");
  if (out) out->deleter(out); /* the output may outlive the VM; here it does not need to */
  for (int i = 0; i < 8; i++) free(data[i]);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  return s ? (nimble_status_free(s), 1) : 0;
}
