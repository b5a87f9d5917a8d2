#include "compiler_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

char *test_source_path(const char *rel) {
  const char *root = getenv("NIMBLE_SOURCE_DIR");
  if (!root) root = ".";
  size_t n = strlen(root) + strlen(rel) + 2;
  char *p = malloc(n);
  ck_assert_ptr_nonnull(p);
  snprintf(p, n, "%s/%s", root, rel);
  return p;
}

nimble_module *test_parse(nimble_arena *a, const char *text) {
  nimble_module *m = NULL;
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "test.nir", text, strlen(text), &m));
  return m;
}

nimble_typing *test_check(nimble_arena *a, const char *text, nimble_module **m_out) {
  nimble_module *m = test_parse(a, text);
  nimble_typing *t = NULL;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  if (m_out) *m_out = m;
  return t;
}

nimble_status_t test_check_status(nimble_arena *a, const char *text) {
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_RETURN_IF_ERROR(nimble_nir_parse(a, "main.nir", text, strlen(text), &m));
  return nimble_typing_infer_module(m, &t);
}

const char *test_global_type(nimble_typing *t, const char *name, char *buf, size_t size) {
  const nimble_type *ty = nimble_typing_global_type(t, name);
  ck_assert_msg(ty != NULL, "no global %s", name);
  return nimble_type_format(ty, buf, size);
}
