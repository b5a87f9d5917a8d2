/* The artifact config blob: what an executable is, without its bytes.
 *
 * The config blob of a Nimble manifest (media type
 * application/vnd.nimble.executable.config.v1+json) tells a runtime, before
 * it downloads any layer, what it would get: the canonical target spec, the
 * compiler version (and build digest when known), the digest of the source
 * model, and the signature of every entry function: input and output names,
 * dtypes and shapes, where a dimension is a constant, a symbolic name bound
 * at run time ("n"), or "?" (Any: unknown until the value exists). A value
 * that is not a tensor (an ADT such as a tree) carries its IR type as text.
 *
 * Like the manifest it encodes canonically (compact JSON, sorted keys,
 * integers only, arrays in the order given) and decodes strictly with errors
 * that name the field ("entries[0].inputs[1].shape[2]: ..."). Unknown
 * members are ignored. Layout and an example: docs/artifacts.md.
 *
 * Ownership: the config owns every string and array in it; the add
 * functions copy their arguments. Pointers returned by add functions stay
 * valid until the next add on the same parent or deinit.
 */
#ifndef NIMBLE_ARTIFACT_CONFIG_H
#define NIMBLE_ARTIFACT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/status.h"
#include "nimble/target.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_ARTIFACT_CONFIG_SCHEMA_VERSION 1
#define NIMBLE_CONFIG_MAX_ENTRIES 256
#define NIMBLE_CONFIG_MAX_VALUES 1024 /* inputs, and outputs, per entry */
#define NIMBLE_CONFIG_MAX_RANK 32
#define NIMBLE_CONFIG_MAX_NAME 256      /* bytes in an entry or value name */
#define NIMBLE_CONFIG_MAX_SYMBOL 64     /* bytes in a symbolic dimension */
#define NIMBLE_CONFIG_MAX_TYPE_TEXT 4096 /* bytes in a non-tensor type */

/* Element types, as their JSON names: "bool", "int8" ... "float64". */
typedef enum nimble_config_dtype {
  NIMBLE_CONFIG_DTYPE_BOOL = 0,
  NIMBLE_CONFIG_DTYPE_INT8,
  NIMBLE_CONFIG_DTYPE_INT16,
  NIMBLE_CONFIG_DTYPE_INT32,
  NIMBLE_CONFIG_DTYPE_INT64,
  NIMBLE_CONFIG_DTYPE_UINT8,
  NIMBLE_CONFIG_DTYPE_UINT16,
  NIMBLE_CONFIG_DTYPE_UINT32,
  NIMBLE_CONFIG_DTYPE_UINT64,
  NIMBLE_CONFIG_DTYPE_FLOAT16,
  NIMBLE_CONFIG_DTYPE_BFLOAT16,
  NIMBLE_CONFIG_DTYPE_FLOAT32,
  NIMBLE_CONFIG_DTYPE_FLOAT64,
  NIMBLE_CONFIG_DTYPE_COUNT_
} nimble_config_dtype_t;

/* The JSON name of a dtype; "unknown" out of range. Static string. */
const char *nimble_config_dtype_name(nimble_config_dtype_t dtype);
/* Parses a JSON dtype name; INVALID_ARGUMENT naming it if unknown. */
nimble_status_t nimble_config_dtype_parse(const char *name, nimble_config_dtype_t *out);

/* One dimension: symbol NULL means the constant `value` (>= 0); otherwise
 * symbol is a name ([A-Za-z_][A-Za-z0-9_]*, at most 64 bytes) or "?" for
 * Any, and value is ignored (0). */
typedef struct nimble_config_dim_t {
  int64_t value;
  char *symbol; /* owned when inside a config; borrowed when passed to add */
} nimble_config_dim_t;

typedef struct nimble_value_sig_t {
  char *name;          /* owned, non-empty */
  char *type;          /* owned; non-NULL for a non-tensor value (IR type text) */
  nimble_config_dtype_t dtype; /* tensors only */
  nimble_config_dim_t *dims;  /* owned, rank items; tensors only */
  size_t rank;
} nimble_value_sig_t;

typedef struct nimble_entry_sig_t {
  char *name; /* owned */
  nimble_value_sig_t *inputs;
  size_t input_count;
  nimble_value_sig_t *outputs;
  size_t output_count;
} nimble_entry_sig_t;

typedef struct nimble_artifact_config_t {
  char target[NIMBLE_TARGET_SPEC_MAX + 1]; /* canonical spec; "" until set */
  char *compiler_version;                  /* owned */
  int has_compiler_build;
  nimble_digest_t compiler_build;
  nimble_digest_t model; /* digest of the source model */
  nimble_entry_sig_t *entries; /* owned, entry_count items, in order */
  size_t entry_count;
} nimble_artifact_config_t;

void nimble_artifact_config_init(nimble_artifact_config_t *c);
void nimble_artifact_config_deinit(nimble_artifact_config_t *c);

/* Sets target (canonicalised; an error if it does not parse), compiler
 * version (copied), model digest, and the build digest (NULL: none). */
nimble_status_t nimble_artifact_config_set_build(nimble_artifact_config_t *c, const char *target,
                                                 const char *compiler_version,
                                                 const nimble_digest_t *model,
                                                 const nimble_digest_t *compiler_build);

/* Appends an entry named `name` (unique). *out_entry is borrowed. */
nimble_status_t nimble_artifact_config_add_entry(nimble_artifact_config_t *c, const char *name,
                                                 nimble_entry_sig_t **out_entry);

/* Appends a tensor input (is_output 0) or output (1). dims[i].symbol are
 * borrowed and copied. Names are unique among the entry's inputs (outputs). */
nimble_status_t nimble_entry_sig_add_tensor(nimble_entry_sig_t *e, int is_output, const char *name,
                                            nimble_config_dtype_t dtype, const nimble_config_dim_t *dims,
                                            size_t rank);

/* Appends a non-tensor value whose type is given as IR text. */
nimble_status_t nimble_entry_sig_add_value(nimble_entry_sig_t *e, int is_output, const char *name,
                                           const char *type_text);

/* The entry with this name, or NULL. Borrowed. */
const nimble_entry_sig_t *nimble_artifact_config_find_entry(const nimble_artifact_config_t *c,
                                                            const char *name);

/* Checks every rule (set_build done, at least one entry, unique names,
 * valid dims and limits). Errors name the field. */
nimble_status_t nimble_artifact_config_validate(const nimble_artifact_config_t *c);

/* Validates, then writes canonical bytes. Caller frees *out with free(). */
nimble_status_t nimble_artifact_config_encode(const nimble_artifact_config_t *c, char **out,
                                              size_t *out_size);

/* Parses and validates into *out, which is initialised here (pass an
 * uninitialised or empty struct); the caller deinits it after success; on
 * error it is left empty.
 * Over NIMBLE_MANIFEST_MAX_SIZE bytes is RESOURCE_EXHAUSTED; a schema
 * version other than 1 is UNIMPLEMENTED; a target that is not canonical is
 * refused (keys and tags rely on one spelling). */
nimble_status_t nimble_artifact_config_decode(const void *data, size_t size,
                                              nimble_artifact_config_t *out);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_ARTIFACT_CONFIG_H */
