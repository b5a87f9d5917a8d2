/* Printing helpers shared by the printer, type formatting and the typing
 * error messages (private to the compiler). */
#ifndef NIMBLE_COMPILER_PRINT_INTERNAL_H
#define NIMBLE_COMPILER_PRINT_INTERNAL_H

#include "ir/strbuf.h"
#include "nimble/ir.h"
#include "nimble/type.h"

void nimble_print_type(nimble_strbuf *b, const nimble_type *t);
void nimble_print_dim(nimble_strbuf *b, nimble_dim_t d);
void nimble_print_pattern(nimble_strbuf *b, const nimble_pattern *p);
/* Copies a strbuf into a fixed buffer, truncating with "...". */
char *nimble_strbuf_copy_truncated(const nimble_strbuf *b, char *buf, size_t size);

#endif
