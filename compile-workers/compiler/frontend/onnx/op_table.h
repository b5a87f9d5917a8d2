/* The operators ONNX defines (generated into op_table.c by gen_op_table.py):
 * for each (domain, op type) the first opset that has it and the attribute
 * names it accepts, each with a mask of allowed AttributeType bits. Sorted
 * by domain, then op type, for binary search. */
#ifndef NIMBLE_ONNX_OP_TABLE_H
#define NIMBLE_ONNX_OP_TABLE_H

typedef struct nimble_onnx_attr_spec_t {
  const char *name;
  unsigned type_mask; /* bit (1 << AttributeType) per allowed type */
} nimble_onnx_attr_spec_t;

typedef struct nimble_onnx_op_spec_t {
  const char *domain; /* "" for the default domain */
  const char *op_type;
  int since_version;                    /* first opset of `domain` that defines it */
  const nimble_onnx_attr_spec_t *attrs; /* sorted by name */
  unsigned n_attrs;
} nimble_onnx_op_spec_t;

extern const nimble_onnx_op_spec_t nimble_onnx_op_table[];
extern const unsigned nimble_onnx_op_table_size;
/* The newest opset the table knows; later opsets skip the table checks. */
extern const int nimble_onnx_op_table_max_opset;

#endif /* NIMBLE_ONNX_OP_TABLE_H */
