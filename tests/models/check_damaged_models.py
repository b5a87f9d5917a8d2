#!/usr/bin/python3
"""test_reference_model_check_rejects_damaged_files: shows that
check_reference_models.py can fail, and fails for the right reason.

    /usr/bin/python3 tests/models/check_damaged_models.py MODELS_DIR

Copies a few generated models (mlp, loop_if, dyn_ops, treelstm) to a scratch
folder, checks that the intact copy passes, then applies one damage at a
time to a fresh copy and expects a problem naming it: a changed output value,
a changed weight inside the .onnx, a truncated .npy, a json shape that lies,
a missing case file, an integer output off by one, a lost If branch, a tree
whose word changed. Exits 1 listing every damage that went unnoticed.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_reference_models as crm  # noqa: E402

SUBSET = ("mlp", "loop_if", "dyn_ops", "treelstm")


def copy_subset(src, dst):
    for name in SUBSET:
        for suffix in (".json", ".onnx"):
            if os.path.exists(os.path.join(src, name + suffix)):
                shutil.copy(os.path.join(src, name + suffix), dst)
        for folder in (name + ".ref", name):
            if os.path.isdir(os.path.join(src, folder)):
                shutil.copytree(os.path.join(src, folder), os.path.join(dst, folder))


def edit_json(root, name, fn):
    path = os.path.join(root, name + ".json")
    with open(path) as f:
        meta = json.load(f)
    fn(meta)
    with open(path, "w") as f:
        json.dump(meta, f)


def rewrite_npy(root, rel, fn):
    path = os.path.join(root, rel)
    a = np.load(path)
    np.save(path, fn(a.copy()))


def scale_output(root):
    rewrite_npy(root, "mlp.ref/2/y.npy", lambda a: (a.__setitem__((5, 3), a[5, 3] * 1.001 + 1e-3), a)[1])


def change_weight(root):
    path = os.path.join(root, "mlp.onnx")
    model = onnx.load(path)
    init = model.graph.initializer[0]
    w = numpy_helper.to_array(init).copy()
    w.reshape(-1)[0] += 0.5
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    onnx.save(model, path)


def truncate_npy(root):
    path = os.path.join(root, "mlp.ref/1/x.npy")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 4)


def lie_about_shape(root):
    edit_json(root, "mlp", lambda m: m["cases"][0]["outputs"]["y"].__setitem__("shape", [2, 10]))


def remove_case_file(root):
    os.remove(os.path.join(root, "dyn_ops.ref/1/topi.npy"))


def bump_index(root):
    rewrite_npy(root, "dyn_ops.ref/0/topi.npy", lambda a: a + 1)


def drop_else_branch(root):
    def drop(meta):
        meta["cases"] = [c for c in meta["cases"] if "else" not in c.get("note", "")]
        for i, c in enumerate(meta["cases"]):
            c["id"] = i
    edit_json(root, "loop_if", drop)


def change_tree_word(root):
    def change(meta):
        t = meta["trees"][3]
        while not isinstance(t, int):
            parent, t = t, t[0]
        parent[0] = (t + 1) % 1000
    edit_json(root, "treelstm", change)


DAMAGES = (
    ("an output value changed by 0.1%", scale_output, "mlp case 2 output 'y'"),
    ("a weight inside mlp.onnx changed", change_weight, "recomputed"),
    ("a truncated .npy", truncate_npy, "data bytes"),
    ("a json shape that lies", lie_about_shape, "json says"),
    ("a missing case file", remove_case_file, "topi.npy"),
    ("an int64 output off by one", bump_index, "dyn_ops case 0 output 'topi'"),
    ("the else branch of loop_if dropped", drop_else_branch, "both If branches"),
    ("a tree's word changed", change_tree_word, "treelstm root_h"),
)


def main(argv):
    if len(argv) != 1:
        print("usage: check_damaged_models.py MODELS_DIR", file=sys.stderr)
        return 2
    failures = []
    with tempfile.TemporaryDirectory(prefix="nimble-refmodels-") as scratch:
        intact = os.path.join(scratch, "intact")
        os.makedirs(intact)
        copy_subset(argv[0], intact)
        problems = crm.Problems()
        crm.check_set(intact, SUBSET, problems)
        if problems.items:
            failures.append("the intact copy fails: %s" % problems.items)
        for i, (what, damage, fragment) in enumerate(DAMAGES):
            root = os.path.join(scratch, "damage%d" % i)
            shutil.copytree(intact, root)
            damage(root)
            problems = crm.Problems()
            crm.check_set(root, SUBSET, problems)
            hits = [p for p in problems.items if fragment in p]
            print("%-36s -> %s" % (what, hits[0] if hits else "NOT DETECTED %s" % problems.items))
            if not hits:
                failures.append("%s: no problem mentioning %r (got %s)" % (what, fragment, problems.items))
    for f in failures:
        print("FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
