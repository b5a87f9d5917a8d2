/* The loader's wire-format check: malformed protobuf gets an error naming
 * the byte offset and the field path, computed here by hand from the bytes
 * each test writes; truncating a real model anywhere never crashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

#include "nimble/onnx_model.h"

static nimble_status_t load(const onnx_test_buf *b) {
  nimble_onnx_model *m = NULL;
  nimble_status_t s = nimble_onnx_model_load_memory(b->data, b->size, "t.onnx", &m);
  if (!s)
    ck_assert_ptr_nonnull(m);
  else
    ck_assert_ptr_null(m);
  nimble_onnx_model_destroy(m);
  return s;
}

static nimble_status_t load_bytes(const char *bytes, size_t n) {
  onnx_test_buf b = {0};
  pb_raw(&b, bytes, n);
  nimble_status_t s = load(&b);
  pb_free(&b);
  return s;
}

/* TypeProto{tensor_type{elem_type FLOAT, shape{dim{dim_value 2}}}} */
static void tensor_type(onnx_test_buf *out) {
  onnx_test_buf dim = {0}, shape = {0}, tt = {0};
  pb_int(&dim, 1, 2);
  pb_msg(&shape, 1, &dim);
  pb_int(&tt, 1, 1);
  pb_msg(&tt, 2, &shape);
  pb_msg(out, 1, &tt);
  pb_free(&dim);
  pb_free(&shape);
  pb_free(&tt);
}

static void value_info(onnx_test_buf *out, uint32_t field, const char *name) {
  onnx_test_buf vi = {0}, type = {0};
  pb_str(&vi, 1, name);
  tensor_type(&type);
  pb_msg(&vi, 2, &type);
  pb_msg(out, field, &vi);
  pb_free(&vi);
  pb_free(&type);
}

/* A one-node model y = Relu(x), written field by field. `domain` is the
 * opset domain imported (NULL: no opset_import at all). */
static void relu_model(onnx_test_buf *out, const char *domain) {
  onnx_test_buf node = {0}, graph = {0}, opset = {0};
  pb_str(&node, 1, "x");
  pb_str(&node, 2, "y");
  pb_str(&node, 3, "relu_0");
  pb_str(&node, 4, "Relu");
  pb_msg(&graph, 1, &node);
  pb_str(&graph, 2, "g");
  value_info(&graph, 11, "x");
  value_info(&graph, 12, "y");
  pb_int(out, 1, 7);
  pb_msg(out, 7, &graph);
  if (domain) {
    pb_str(&opset, 1, domain);
    pb_int(&opset, 2, 13);
    pb_msg(out, 8, &opset);
  }
  pb_free(&node);
  pb_free(&graph);
  pb_free(&opset);
}

START_TEST(test_hand_built_model_loads_with_its_types) {
  onnx_test_buf b = {0};
  relu_model(&b, "");
  nimble_onnx_model *m;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_memory(b.data, b.size, "t.onnx", &m));
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_uint_eq(g->n_nodes, 1);
  ck_assert_str_eq(g->nodes[0]->op_type, "Relu");
  ck_assert_str_eq(g->nodes[0]->name, "relu_0");
  ck_assert_int_eq(g->nodes[0]->opset, 13);
  ck_assert_int_eq(nimble_onnx_model_ir_version(m), 7);
  const nimble_onnx_value_t *x = nimble_onnx_graph_find_value(g, "x");
  ck_assert_ptr_nonnull(x);
  ck_assert_int_eq(x->kind, NIMBLE_ONNX_VALUE_GRAPH_INPUT);
  ck_assert_int_eq(x->type->elem_type, NIMBLE_ONNX_FLOAT);
  ck_assert_uint_eq(x->type->rank, 1);
  ck_assert_int_eq(x->type->dims[0].kind, NIMBLE_ONNX_DIM_VALUE);
  ck_assert_int_eq(x->type->dims[0].value, 2);
  ck_assert_ptr_eq(nimble_onnx_graph_producer(g, "y"), g->nodes[0]);
  nimble_onnx_model_destroy(m);
  pb_free(&b);
}
END_TEST

START_TEST(test_unknown_fields_are_skipped) {
  onnx_test_buf b = {0};
  relu_model(&b, "ai.onnx"); /* the alias of the default domain */
  pb_int(&b, 99, 12345);
  pb_str(&b, 100, "future field");
  NIMBLE_ASSERT_OK(load(&b));
  pb_free(&b);
}
END_TEST

START_TEST(test_truncated_length_names_offset_and_field_path) {
  /* 08 07       ir_version = 7                 bytes 0-1
   * 3a 04       graph, 4 bytes                 bytes 2-3
   * 0a 64 61 62 graph.node, claims 100 bytes   byte 4: only 2 remain */
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x3a\x04\x0a\x64\x61\x62", 8), NIMBLE_INVALID_ARGUMENT,
                      "t.onnx: byte 4: truncated length-delimited field 1 (graph.node): "
                      "length 100 but 2 bytes remain");
}
END_TEST

START_TEST(test_truncated_varint_names_its_field) {
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\xff", 2), NIMBLE_INVALID_ARGUMENT,
                      "byte 0: truncated varint field 1 (ir_version)");
  /* A tag cut in the middle: 0x80 promises another byte. */
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x80", 3), NIMBLE_INVALID_ARGUMENT,
                      "byte 2: truncated field tag");
}
END_TEST

START_TEST(test_wrong_wire_types_are_named) {
  NIMBLE_ASSERT_ERROR(load_bytes("\x0a\x01\x00", 3), NIMBLE_INVALID_ARGUMENT,
                      "byte 0: wrong wire type for field 1 (ir_version): wire type 2 "
                      "(length-delimited), expected varint");
  /* graph (field 7) as a varint */
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x38\x01", 4), NIMBLE_INVALID_ARGUMENT,
                      "byte 2: wrong wire type for field 7 (graph)");
  /* groups (wire types 3 and 4) are not protobuf 3 and protobuf-c refuses them */
  NIMBLE_ASSERT_ERROR(load_bytes("\x0b", 1), NIMBLE_INVALID_ARGUMENT,
                      "byte 0: bad wire type for field 1 (ir_version): wire type 3 (start-group)");
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x00", 3), NIMBLE_INVALID_ARGUMENT,
                      "byte 2: bad field tag in the model: field number 0 is out of range");
}
END_TEST

START_TEST(test_a_singular_message_given_twice_is_refused_with_its_offset) {
  /* 3a 00 | 3a 00: graph, then graph again at byte 2 */
  NIMBLE_ASSERT_ERROR(load_bytes("\x3a\x00\x3a\x00", 4), NIMBLE_INVALID_ARGUMENT,
                      "byte 2: repeated singular message field 7 (graph): it may appear only once");
  /* repeated fields (graph.node) may of course repeat */
  onnx_test_buf b = {0};
  relu_model(&b, "");
  NIMBLE_ASSERT_OK(load(&b));
  pb_free(&b);
}
END_TEST

START_TEST(test_varints_longer_than_ten_bytes_are_refused) {
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
                      NIMBLE_INVALID_ARGUMENT, "byte 0: varint longer than 10 bytes in field 1");
}
END_TEST

START_TEST(test_packed_floats_must_be_whole) {
  /* graph.initializer.float_data with 3 bytes:
   * 08 07 | 3a 07 | 2a 05 | 22 03 00 00 00
   * offsets: graph at 2, initializer at 4, float_data tag at 6. */
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x3a\x07\x2a\x05\x22\x03\x00\x00\x00", 11),
                      NIMBLE_INVALID_ARGUMENT,
                      "byte 6: packed field 4 (graph.initializer.float_data): 3 bytes is not "
                      "a multiple of 4");
}
END_TEST

START_TEST(test_deep_type_nesting_is_capped) {
  /* TypeProto{sequence_type{elem_type{sequence_type{...}}}} 300 levels deep. */
  onnx_test_buf type = {0};
  tensor_type(&type);
  for (int i = 0; i < 300; i++) {
    onnx_test_buf seq = {0}, outer = {0};
    pb_msg(&seq, 1, &type);
    pb_msg(&outer, 4, &seq);
    pb_free(&type);
    type = outer;
    pb_free(&seq);
  }
  onnx_test_buf vi = {0}, graph = {0}, model = {0};
  pb_str(&vi, 1, "x");
  pb_msg(&vi, 2, &type);
  pb_msg(&graph, 11, &vi);
  pb_msg(&model, 7, &graph);
  NIMBLE_ASSERT_ERROR(load(&model), NIMBLE_RESOURCE_EXHAUSTED, "messages nested deeper than 100");
  pb_free(&type);
  pb_free(&vi);
  pb_free(&graph);
  pb_free(&model);
}
END_TEST

START_TEST(test_missing_opsets_are_refused) {
  onnx_test_buf b = {0};
  relu_model(&b, NULL);
  NIMBLE_ASSERT_ERROR(load(&b), NIMBLE_INVALID_ARGUMENT, "t.onnx: the model has no opset_import");
  pb_free(&b);
  /* Importing only another domain: the Relu node names the missing one. */
  relu_model(&b, "com.example");
  NIMBLE_ASSERT_ERROR(load(&b), NIMBLE_INVALID_ARGUMENT,
                      "node 'relu_0' (Relu): the model imports no opset for domain 'ai.onnx'");
  pb_free(&b);
}
END_TEST

START_TEST(test_empty_missing_and_odd_files_get_errors) {
  NIMBLE_ASSERT_ERROR(load_bytes("", 0), NIMBLE_INVALID_ARGUMENT, "t.onnx: the file is empty");
  nimble_onnx_model *m;
  NIMBLE_ASSERT_ERROR(nimble_onnx_model_load_file("/nonexistent/model.onnx", &m), NIMBLE_NOT_FOUND,
                      "/nonexistent/model.onnx: cannot open");
  ck_assert_ptr_null(m);
  NIMBLE_ASSERT_ERROR(nimble_onnx_model_load_file("/tmp", &m), NIMBLE_IO_ERROR,
                      "not a regular file");
  /* A valid protobuf that is not a model at all: no graph. */
  NIMBLE_ASSERT_ERROR(load_bytes("\x08\x07\x42\x02\x10\x0d", 6), NIMBLE_INVALID_ARGUMENT,
                      "the model has no graph");
}
END_TEST

START_TEST(test_files_over_two_gib_are_refused_before_reading) {
  /* A sparse file: 3 GiB long, no disk used, never read. */
  char path[] = "/tmp/nimble-onnx-big-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)3 << 30), 0);
  close(fd);
  nimble_onnx_model *m;
  NIMBLE_ASSERT_ERROR(nimble_onnx_model_load_file(path, &m), NIMBLE_RESOURCE_EXHAUSTED,
                      "3221225472 bytes is over the 2147483648 byte limit for a model");
  unlink(path);
}
END_TEST

/* Offsets where a top-level field of the model ends: cutting there leaves
 * a well-formed protobuf, which is then refused for what it lacks. */
static int *top_level_boundaries(const uint8_t *p, size_t n) {
  int *at = calloc(n + 1, sizeof(int));
  size_t pos = 0;
  at[0] = 1;
  while (pos < n) {
    uint64_t tag = 0, v = 0;
    for (int s = 0;; s += 7) {
      tag |= (uint64_t)(p[pos] & 0x7f) << s;
      if (!(p[pos++] & 0x80)) break;
    }
    switch (tag & 7) {
      case 0:
        while (p[pos++] & 0x80) {
        }
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2:
        for (int s = 0;; s += 7) {
          v |= (uint64_t)(p[pos] & 0x7f) << s;
          if (!(p[pos++] & 0x80)) break;
        }
        pos += v;
        break;
      default:
        ck_abort_msg("unexpected wire type in a fixture");
    }
    ck_assert_uint_le(pos, n);
    at[pos] = 1;
  }
  return at;
}

static void truncate_everywhere(const char *fixture) {
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", fixture);
  size_t n;
  uint8_t *bytes = onnx_test_read_file(path, &n);
  ck_assert_msg(bytes != NULL, "cannot read %s", path);
  int *boundary = top_level_boundaries(bytes, n);
  size_t with_offset = 0;
  for (size_t cut = 0; cut < n; cut++) {
    nimble_onnx_model *m = NULL;
    /* A copy of exactly `cut` bytes, so ASan sees any read past the end. */
    uint8_t *prefix = malloc(cut ? cut : 1);
    memcpy(prefix, bytes, cut);
    nimble_status_t s = nimble_onnx_model_load_memory(prefix, cut, fixture, &m);
    free(prefix);
    ck_assert_msg(s != NULL, "%s cut at %zu loaded", fixture, cut);
    ck_assert_ptr_null(m);
    const char *msg = nimble_status_message(s);
    if (!boundary[cut]) {
      ck_assert_msg(strstr(msg, ": byte ") != NULL, "%s cut at %zu: '%s' names no byte", fixture,
                    cut, msg);
      with_offset++;
    } else {
      ck_assert_msg(strstr(msg, "no graph") || strstr(msg, "opset") || strstr(msg, "empty"),
                    "%s cut at %zu: '%s'", fixture, cut, msg);
    }
    nimble_status_free(s);
  }
  ck_assert_uint_gt(with_offset, n * 9 / 10);
  free(boundary);
  free(bytes);
  free(path);
}

START_TEST(test_truncating_mlp_anywhere_gives_an_error_with_an_offset) {
  truncate_everywhere("mlp.onnx");
}
END_TEST

START_TEST(test_truncating_control_flow_anywhere_gives_an_error_with_an_offset) {
  truncate_everywhere("control_flow.onnx");
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_wire");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_hand_built_model_loads_with_its_types);
  tcase_add_test(tc, test_unknown_fields_are_skipped);
  tcase_add_test(tc, test_truncated_length_names_offset_and_field_path);
  tcase_add_test(tc, test_truncated_varint_names_its_field);
  tcase_add_test(tc, test_wrong_wire_types_are_named);
  tcase_add_test(tc, test_a_singular_message_given_twice_is_refused_with_its_offset);
  tcase_add_test(tc, test_varints_longer_than_ten_bytes_are_refused);
  tcase_add_test(tc, test_packed_floats_must_be_whole);
  tcase_add_test(tc, test_deep_type_nesting_is_capped);
  tcase_add_test(tc, test_missing_opsets_are_refused);
  tcase_add_test(tc, test_empty_missing_and_odd_files_get_errors);
  tcase_add_test(tc, test_files_over_two_gib_are_refused_before_reading);
  tcase_add_test(tc, test_truncating_mlp_anywhere_gives_an_error_with_an_offset);
  tcase_add_test(tc, test_truncating_control_flow_anywhere_gives_an_error_with_an_offset);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
