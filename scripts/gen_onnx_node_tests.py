#!/usr/bin/python3
"""Writes the ONNX backend node conformance suite from Debian's python3-onnx.

Debian ships the case generators (onnx.backend.test.case.node) but not the
data they produce, so we run the generators ourselves:

    /usr/bin/python3 scripts/gen_onnx_node_tests.py OUTDIR

gives OUTDIR/node/<case>/model.onnx and, per data set,
OUTDIR/node/<case>/test_data_set_<k>/{input,output}_<j>.pb (ONNX TensorProto,
or SequenceProto / MapProto / OptionalProto for non-tensor values).

Run it with /usr/bin/python3: the python3 first on PATH lacks onnx and numpy.
The output is deterministic (the generators seed numpy themselves).
"""
import os
import shutil
import sys
import warnings


def restore_numpy_aliases(np):
    # numpy 1.24 removed np.float, np.int, ... which onnx 1.12's generators
    # still call; the removed aliases were the Python builtins.
    for alias, builtin in (("float", float), ("int", int), ("bool", bool),
                           ("object", object), ("complex", complex),
                           ("str", str), ("long", int), ("unicode", str)):
        if alias not in np.__dict__:
            setattr(np, alias, builtin)


def serialize_value(value, value_info, numpy_helper):
    """TensorProto for tensors, the matching container proto otherwise."""
    t = value_info.type
    if t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, value_info.name)
    elif t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, value_info.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, value_info.name)
    else:
        proto = numpy_helper.from_array(value, value_info.name)
    return proto.SerializeToString()


def write_case(case, outdir, numpy_helper):
    case_dir = os.path.join(outdir, "node", case.name)
    if os.path.exists(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for k, (inputs, outputs) in enumerate(case.data_sets or []):
        data_dir = os.path.join(case_dir, "test_data_set_%d" % k)
        os.makedirs(data_dir)
        for kind, values, infos in (("input", inputs, graph.input),
                                    ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                path = os.path.join(data_dir, "%s_%d.pb" % (kind, j))
                with open(path, "wb") as f:
                    f.write(serialize_value(value, infos[j], numpy_helper))


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: /usr/bin/python3 %s OUTDIR\n" % argv[0])
        return 2
    warnings.filterwarnings("ignore")
    try:
        import numpy as np
        restore_numpy_aliases(np)
        from onnx import numpy_helper
        import onnx.backend.test.case.node as node_cases
    except ImportError as e:
        sys.stderr.write("%s: needs Debian's python3-onnx and python3-numpy "
                         "(run with /usr/bin/python3): %s\n" % (argv[0], e))
        return 1
    cases = node_cases.collect_testcases(None)
    for case in cases:
        write_case(case, argv[1], numpy_helper)
    print("wrote %d node cases under %s" % (len(cases), os.path.join(argv[1], "node")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
