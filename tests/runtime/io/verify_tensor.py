#!/usr/bin/python3
"""Checks a tensor file written by Nimble with the reference readers.

    verify_tensor.py FILE DTYPE SHAPE VALUES [NAME]

FILE ending in .npy is read by numpy.load; .pb by onnx.load_tensor and
onnx.numpy_helper.to_array, and then also compared byte for byte with what
onnx.numpy_helper.from_array(expected, NAME) serializes. DTYPE is a NumPy
dtype name ("float32"), SHAPE "2,3" ("" for a scalar), VALUES a comma list
(Python literals: 1.5, -inf, nan, True). Exit 0 when everything matches.
"""
import sys

import numpy as np


def main():
    path, dtype, shape, values = sys.argv[1:5]
    name = sys.argv[5] if len(sys.argv) > 5 else ""
    shape = tuple(int(d) for d in shape.split(",") if d)
    vals = [v for v in values.split(",") if v]
    conv = {"True": True, "False": False, "inf": np.inf, "-inf": -np.inf, "nan": np.nan}
    vals = [conv[v] if v in conv else (float(v) if "." in v or "e" in v else int(v)) for v in vals]
    expected = np.array(vals, dtype=dtype).reshape(shape)
    if path.endswith(".pb"):
        import onnx
        from onnx import numpy_helper
        t = onnx.load_tensor(path)
        got = numpy_helper.to_array(t)
        if t.name != name:
            sys.exit("name %r, expected %r" % (t.name, name))
        with open(path, "rb") as f:
            ours = f.read()
        ref = numpy_helper.from_array(expected, name=name).SerializeToString()
        if ours != ref:
            sys.exit("bytes differ from onnx.numpy_helper.from_array:\n%r\n%r" % (ours, ref))
    else:
        got = np.load(path, allow_pickle=False)
    if got.dtype != expected.dtype:
        sys.exit("dtype %s, expected %s" % (got.dtype, expected.dtype))
    if got.shape != expected.shape:
        sys.exit("shape %s, expected %s" % (got.shape, expected.shape))
    if got.tobytes() != expected.tobytes():
        sys.exit("values %r, expected %r" % (got, expected))


if __name__ == "__main__":
    main()
