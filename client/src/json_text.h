/* JSON strings from text the client did not make (file names, names in a
 * model, server messages). jansson refuses strings that are not valid
 * UTF-8; these helpers keep the output whole instead. Private to the
 * client. */
#ifndef NIMBLE_CLI_JSON_TEXT_H
#define NIMBLE_CLI_JSON_TEXT_H

#include <jansson.h>

/* A JSON string holding `s`, with every byte that is not part of a valid
 * UTF-8 sequence replaced by U+FFFD; json_null() for NULL. NULL only when
 * memory runs out. */
json_t *nimble_cli_json_text(const char *s);

#endif
