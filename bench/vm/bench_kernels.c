/* The kernel the VM micro-benchmark calls: it does nothing, so the time
 * measured is the VM's own cost of an InvokePacked. */
#include "nimble/kernel_abi.h"

__attribute__((visibility("default"))) int32_t noop(DLTensor *const *args, int32_t num_args,
                                                    const nimble_kernel_env_t *env) {
  return args[0]->data == NULL; /* reads an argument, as any kernel would */
}
