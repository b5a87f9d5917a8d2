#!/usr/bin/python3
"""Writes the tensor-file fixtures the tensor I/O suites read back.

Run with Debian's /usr/bin/python3 (python3-numpy, python3-onnx):
    make_fixtures.py OUTDIR

For every fixture NAME.npy / NAME.pb it also writes NAME.raw, the array's
bytes in C order as NumPy itself lays them out (arr.tobytes()), so the C
tests compare what our reader decoded with what NumPy holds. The values
follow simple formulas that the C tests also check by hand for a few
elements.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def arrays():
    """name -> array; the C tests list the same names, dtypes and shapes."""
    a = {}
    a["f4_2x3"] = np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.5) - np.float32(1)
    a["f8_4"] = np.array([1.0 / 3.0, -2.5, 1e300, -0.0], dtype=np.float64)
    a["f2_3"] = np.array([1.0, -2.0, 0.5], dtype=np.float16)
    a["i1_5"] = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    a["i2_2x2"] = np.array([[-32768, -2], [3, 32767]], dtype=np.int16)
    a["i4_3"] = np.array([-2147483648, 7, 2147483647], dtype=np.int32)
    a["i8_2x1x2"] = np.array([[[-(2 ** 63), -5]], [[6, 2 ** 63 - 1]]], dtype=np.int64)
    a["u1_4"] = np.array([0, 1, 128, 255], dtype=np.uint8)
    a["u2_2"] = np.array([0, 65535], dtype=np.uint16)
    a["u4_2"] = np.array([1, 4294967295], dtype=np.uint32)
    a["u8_2"] = np.array([2, 18446744073709551615], dtype=np.uint64)
    a["b1_2x2"] = np.array([[True, False], [False, True]], dtype=np.bool_)
    a["f4_scalar"] = np.array(3.25, dtype=np.float32)
    a["f4_0x3"] = np.zeros((0, 3), dtype=np.float32)
    a["f4_special"] = np.array([np.inf, -np.inf, np.nan, 1e-45], dtype=np.float32)
    a["f4_1x2x3x4"] = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    return a


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, arr in arrays().items():
        with open(os.path.join(out, name + ".raw"), "wb") as f:
            f.write(arr.tobytes(order="C"))
        np.save(os.path.join(out, name + ".npy"), arr)
        t = numpy_helper.from_array(arr, name="t_" + name)
        with open(os.path.join(out, name + ".pb"), "wb") as f:
            f.write(t.SerializeToString())

    f4 = arrays()["f4_2x3"]
    # Other .npy format versions, written by NumPy's own writer.
    for version in ((2, 0), (3, 0)):
        path = os.path.join(out, "f4_2x3_v%d.npy" % version[0])
        with open(path, "wb") as f:
            np.lib.format.write_array(f, f4, version=version)
    # A Fortran-order 2-D array (rejected) and a 1-D one (same bytes: read).
    np.save(os.path.join(out, "f4_2x3_fortran.npy"), np.asfortranarray(f4))
    with open(os.path.join(out, "f4_3_fortran.npy"), "wb") as f:
        hdr = {"descr": "<f4", "fortran_order": True, "shape": (3,)}
        np.lib.format.write_array_header_1_0(f, hdr)
        f.write(np.array([1, 2, 3], dtype=np.float32).tobytes())
    # Big-endian and object arrays (rejected).
    np.save(os.path.join(out, "f4_big_endian.npy"), f4.astype(">f4"))
    np.save(os.path.join(out, "object.npy"), np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save(os.path.join(out, "complex.npy"), np.array([1 + 2j], dtype=np.complex64))

    # TensorProtos with typed fields instead of raw_data (helper.make_tensor
    # packs them), as some exporters write.
    typed = {
        "typed_float": helper.make_tensor("tf", TensorProto.FLOAT, [2, 3], f4.flatten().tolist()),
        "typed_double": helper.make_tensor("td", TensorProto.DOUBLE, [2], [0.125, -3.0]),
        "typed_int32": helper.make_tensor("ti", TensorProto.INT32, [3], [-7, 0, 2147483647]),
        "typed_int8": helper.make_tensor("ti8", TensorProto.INT8, [3], [-128, 5, 127]),
        "typed_uint16": helper.make_tensor("tu16", TensorProto.UINT16, [2], [0, 65535]),
        "typed_int64": helper.make_tensor("tl", TensorProto.INT64, [2], [-(2 ** 63), 42]),
        "typed_uint32": helper.make_tensor("tu32", TensorProto.UINT32, [2], [4294967295, 3]),
        "typed_uint64": helper.make_tensor("tu64", TensorProto.UINT64, [1], [2 ** 64 - 1]),
        "typed_bool": helper.make_tensor("tb", TensorProto.BOOL, [3], [True, False, True]),
        "typed_float16": helper.make_tensor("th", TensorProto.FLOAT16, [3],
                                            np.array([1.0, -2.0, 0.5], dtype=np.float16)),
        # exact in bfloat16, so truncating and rounding exporters agree
        "typed_bfloat16": helper.make_tensor("tbf", TensorProto.BFLOAT16, [3], [1.0, -2.5, 0.15625]),
    }
    for name, t in typed.items():
        with open(os.path.join(out, name + ".pb"), "wb") as f:
            f.write(t.SerializeToString())
    # String tensors (rejected).
    s = helper.make_tensor("ts", TensorProto.STRING, [1], [b"hi"])
    with open(os.path.join(out, "typed_string.pb"), "wb") as f:
        f.write(s.SerializeToString())
    # Inputs for the nimble-run suite's vector-add model.
    np.save(os.path.join(out, "vadd_a.npy"), np.array([1, 2, 3, 4.5], dtype=np.float32))
    t = numpy_helper.from_array(np.array([10, 20, 30, 40], dtype=np.float32), name="b")
    with open(os.path.join(out, "vadd_b.pb"), "wb") as f:
        f.write(t.SerializeToString())
    np.save(os.path.join(out, "vadd_b3.npy"), np.array([1, 2, 3], dtype=np.float32))
    np.save(os.path.join(out, "vadd_i64.npy"), np.array([1, 2, 3, 4], dtype=np.int64))

    # Stamp last, so a partial run is never taken for a complete one.
    with open(os.path.join(out, "complete"), "w") as f:
        f.write("numpy %s onnx %s\n" % (np.__version__, onnx.__version__))


if __name__ == "__main__":
    main()
