/* OCI error bodies, built with jansson so messages are always valid JSON
 * whatever bytes a client put in the URL. */
#include "http_errors.h"

#include <jansson.h>
#include <stdlib.h>

char *nimble_oci_error_body(const char *code, const char *message, const char *detail) {
  json_t *err = json_pack("{s:s, s:s, s:o}", "code", code, "message", message ? message : "",
                          "detail", detail ? json_string(detail) : json_null());
  if (!err) {
    /* json_pack refuses invalid UTF-8; say so rather than send nothing. */
    err = json_pack("{s:s, s:s, s:n}", "code", code, "message", "(message was not valid UTF-8)",
                    "detail");
  }
  json_t *body = err ? json_pack("{s:[o]}", "errors", err) : NULL;
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  return text;
}
