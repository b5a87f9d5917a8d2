/* nimble-run's reader for ADT inputs: a value of an algebraic data type
 * (e.g. a Tree-LSTM's parse tree) written as JSON, built with the runtime's
 * value API (nimble/runtime.h, "ADT inputs"). The format (docs/cli.md):
 *
 *   {"Node": [{"Leaf": 3}, {"Node": [{"Leaf": 7}, {"Leaf": 1}]}]}
 *
 * A constructor is an object with one member named after it; its value is
 * the field itself when the constructor has one field, an array of the
 * fields otherwise ([] or null for none; a bare "Nil" string also works).
 * A tensor field is a number or nested arrays of numbers with the declared
 * rank; its dtype is the declared one. */
#ifndef NIMBLE_RUN_ADT_JSON_H
#define NIMBLE_RUN_ADT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/runtime.h"

/* JSON nesting deeper than this is refused (a tree this deep would take
 * about as many VM frames). */
#define NIMBLE_RUN_ADT_MAX_DEPTH 4096

/* Parses `size` bytes of JSON into a value for ADT input `input` of `entry`.
 * `what` names the document in errors ("tree.json"). Caller releases *out. */
nimble_status_t nimble_run_parse_adt(const char *text, size_t size, const char *what,
                                     const nimble_entry_info_t *entry, uint32_t input, nimble_value **out);

/* The same for the file at `path`. */
nimble_status_t nimble_run_read_adt_file(const char *path, const nimble_entry_info_t *entry, uint32_t input,
                                         nimble_value **out);

#endif
