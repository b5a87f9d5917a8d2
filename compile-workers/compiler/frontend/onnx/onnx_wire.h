/* A check of the protobuf wire format of a ModelProto before protobuf-c sees
 * it. protobuf-c returns NULL on malformed input without saying where; this
 * walk names the byte offset and the field path instead
 * ("byte 1234: truncated length-delimited field 1 (graph.node)"), and caps
 * nesting depth and element counts so that decoding stays bounded. */
#ifndef NIMBLE_ONNX_WIRE_H
#define NIMBLE_ONNX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

/* OK when `size` bytes at `bytes` are a well-formed ModelProto as far as the
 * wire format goes: every tag, varint and length is complete and in range,
 * known fields have their declared wire type, nested messages of the ONNX
 * schema are themselves well formed, and the caps of onnx_model.h hold.
 * Errors are INVALID_ARGUMENT (or RESOURCE_EXHAUSTED over a cap). */
nimble_status_t nimble_onnx_wire_check(const uint8_t *bytes, size_t size);

#endif /* NIMBLE_ONNX_WIRE_H */
