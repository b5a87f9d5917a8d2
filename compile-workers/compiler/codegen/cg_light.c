/* Which kernels are light: those whose whole run is a few hundred scalar
 * statements at most, so that how well they are compiled cannot show in a
 * model's run time. Shape functions and storage-size kernels, about half
 * of a CNN's or a transformer's kernels, are light; each cost as much
 * instruction selection as a small loop nest (15 to 30 ms of the default
 * code generator's SelectionDAG, scheduler and greedy register allocator),
 * and their own run is a few nanoseconds. cg_build.c gives them a short
 * pipeline and LLVM's fast instruction selection (CodeGen level None).
 *
 * The estimate is static and conservative: the statements a run executes,
 * each loop counting its constant trip count; a loop whose bounds are not
 * constants (a dimension known only at run time), an sgemm or a conv3x3 makes the
 * kernel heavy whatever else it does, and so does being called in place. */
#include <stdint.h>

#include "cg_internal.h"

/* More statements than this and a kernel is compiled in full. */
#define LIGHT_STATEMENTS 1024

/* The statements `s` executes (each loop body times its trip count),
 * saturating at LIGHT_STATEMENTS + 1 ("heavy"). */
static int64_t statements_run(const nimble_ln_stmt *s) {
  const int64_t heavy = LIGHT_STATEMENTS + 1;
  if (!s) return 0;
  int64_t n = 0;
  switch (s->kind) {
    case NIMBLE_LN_S_SEQ:
      for (size_t i = 0; i < s->n_stmts && n < heavy; i++) n += statements_run(s->stmts[i]);
      break;
    case NIMBLE_LN_S_FOR: {
      if (!s->begin || !s->end || s->begin->kind != NIMBLE_LN_E_CONST_I || s->end->kind != NIMBLE_LN_E_CONST_I)
        return heavy;
      int64_t trips = s->end->i - s->begin->i;
      if (trips <= 0) return 1;
      if (trips > heavy) return heavy;
      int64_t body = statements_run(s->body);
      n = 1 + (body > heavy / trips ? heavy : trips * body);
      break;
    }
    case NIMBLE_LN_S_LET:
    case NIMBLE_LN_S_DECL:
      n = 1 + statements_run(s->body);
      break;
    case NIMBLE_LN_S_IF: {
      int64_t a = statements_run(s->body), b = statements_run(s->else_);
      n = 1 + (a > b ? a : b);
      break;
    }
    case NIMBLE_LN_S_SGEMM:
    case NIMBLE_LN_S_CONV3X3:
      return heavy;
    case NIMBLE_LN_S_ASSIGN:
    case NIMBLE_LN_S_STORE:
    case NIMBLE_LN_S_CHECK:
      n = 1;
      break;
  }
  return n < heavy ? n : heavy;
}

bool nimble_cg_kernel_is_light(const nimble_ln_kernel *k) {
  /* An in-place kernel (update_in_place's scatters) is the row write of a
   * loop: it runs once per iteration, so a few hundred statements compiled
   * without optimisation cost that many times over (an LSTM step's write
   * of its row of Y: 0.3-0.5 us a step, as much as the gates). */
  if (k->in_place) return false;
  for (int i = 0; i < k->n_params; i++)
    if (k->params[i] && k->params[i]->scratch) return false;
  return statements_run(k->body) <= LIGHT_STATEMENTS;
}
