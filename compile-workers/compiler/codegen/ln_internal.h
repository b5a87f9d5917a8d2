/* Private helpers shared by the loop-nest IR's source files. */
#ifndef NIMBLE_LN_INTERNAL_H
#define NIMBLE_LN_INTERNAL_H

#include "nimble/loopnest.h"

int nimble_ln_arena_next_var_id(nimble_ln_arena *arena);

#endif
