#!/usr/bin/python3
"""Writes Nimble's reference models and their expected outputs.

    /usr/bin/python3 scripts/gen_reference_models.py OUTDIR [--only NAME,...] [--force]

For each model NAME (see docs/reference-models.md for the set): NAME.onnx
(opset 13, exported by PyTorch with fixed seeds), NAME.json (inputs and
outputs with symbolic dims, op counts, tolerance, cases) and
NAME.ref/<case>/<tensor>.npy with every input and output of every case, as
PyTorch computed them. treelstm has no ONNX file: treelstm.json holds the
trees and treelstm/*.npy the weights and the expected root h and c.

Repeated runs are cheap: OUTDIR/.refmodels-stamp.json records the digest of
this generator (this file, the refmodels package and the versions of torch,
torchvision, onnx and numpy) and the sha256 of every file written. A model
whose files still match a stamp of the same generator is not made again.

Needs Debian's /usr/bin/python3 with python3-torch, python3-torchvision,
python3-onnx and python3-numpy.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STAMP = ".refmodels-stamp.json"


def generator_digest():
    """sha256 over this script, every module of the refmodels package (names
    and contents), the library versions and OPENBLAS_CORETYPE."""
    from refmodels import stamp

    pkg = os.path.join(HERE, "refmodels")
    files = [os.path.abspath(__file__)] + sorted(
        os.path.join(pkg, n) for n in os.listdir(pkg) if n.endswith(".py"))
    return stamp.generator_digest(files, HERE)


def _make(outdir, name, generator):
    """Builds and writes one model; returns the relative paths written."""
    # Imported here: a run that finds everything up to date never loads torch.
    import torch

    from refmodels import catalog, export

    # One thread: float reductions then give the same bits whatever the
    # machine's core count, so the files are reproducible across machines.
    torch.set_num_threads(1)
    spec = catalog.MODELS[name]()
    if isinstance(spec, catalog.TreeModel):
        return export.export_treelstm(outdir, spec.net, spec.trees, spec.description, generator,
                                      spec.rtol, spec.atol)
    return export.export_onnx_model(outdir, spec, generator)


def main(argv):
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, HERE)
    from refmodels import stamp  # imports no numpy or torch

    stamp.pin_blas_kernels()  # before numpy or torch loads
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--force", action="store_true", help="regenerate even when up to date")
    args = parser.parse_args(argv)

    from refmodels import MODEL_NAMES as known  # the package root does not import torch

    wanted = [n for n in args.only.split(",") if n] or known
    unknown = [n for n in wanted if n not in known]
    if unknown:
        print("gen_reference_models: unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(known)),
              file=sys.stderr)
        return 2

    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    return stamp.generate("gen_reference_models", outdir, wanted, args.force, STAMP, generator_digest(), _make,
                          name_width=14)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
