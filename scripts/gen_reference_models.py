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
import hashlib
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
STAMP = ".refmodels-stamp.json"


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _library_versions():
    """Versions of the libraries whose code decides the output bytes, read
    from package metadata so that a cache hit need not import torch."""
    from importlib import metadata

    versions = {}
    for dist in ("torch", "torchvision", "onnx", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "missing"
    return versions


def generator_digest():
    """sha256 over this script, every module of the refmodels package (names
    and contents) and the library versions."""
    h = hashlib.sha256()
    pkg = os.path.join(HERE, "refmodels")
    files = [os.path.abspath(__file__)] + sorted(
        os.path.join(pkg, n) for n in os.listdir(pkg) if n.endswith(".py"))
    for path in files:
        h.update(os.path.relpath(path, HERE).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    h.update(json.dumps(_library_versions(), sort_keys=True).encode())
    # The BLAS kernels chosen change the low bits of every float output.
    h.update(b"OPENBLAS_CORETYPE=" + os.environ.get("OPENBLAS_CORETYPE", "").encode())
    return h.hexdigest()


def _missing_libraries():
    missing = []
    for module, package in (("torch", "python3-torch"), ("torchvision", "python3-torchvision"),
                            ("onnx", "python3-onnx"), ("numpy", "python3-numpy")):
        try:
            __import__(module)
        except ImportError:
            missing.append((module, package))
    return missing


def _load_stamp(outdir, digest):
    try:
        with open(os.path.join(outdir, STAMP)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return {"generator": digest, "models": {}}
    if not isinstance(stamp, dict) or stamp.get("generator") != digest or not isinstance(stamp.get("models"), dict):
        return {"generator": digest, "models": {}}
    return stamp


def _save_stamp(outdir, stamp):
    tmp = os.path.join(outdir, STAMP + ".tmp")
    with open(tmp, "w") as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(outdir, STAMP))


def _still_valid(outdir, files):
    if not isinstance(files, dict) or not files:
        return False
    for rel, digest in files.items():
        path = os.path.join(outdir, rel)
        if not os.path.isfile(path) or _sha256_file(path) != digest:
            return False
    return True


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


def _pin_blas_kernels():
    """Float results depend on which OpenBLAS kernels run (AVX-512 and AVX2
    kernels round differently). Unless the caller chose, pin the AVX2
    ("Haswell") kernels on any x86-64 CPU that has them, so that every such
    machine writes the same bytes. Must run before numpy or torch is loaded."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if "avx2" in flags and "fma" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


def main(argv):
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    _pin_blas_kernels()
    sys.path.insert(0, HERE)
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
    digest = generator_digest()
    generator = "scripts/gen_reference_models.py sha256:%s" % digest
    stamp = _load_stamp(outdir, digest)
    warnings.filterwarnings("ignore")
    start = time.monotonic()
    made = 0
    todo = [n for n in wanted if args.force or not _still_valid(outdir, stamp["models"].get(n))]
    missing = _missing_libraries() if todo else []
    if missing:
        print("gen_reference_models: %s cannot import %s; install Debian's %s (scripts/setup.sh does)"
              % (sys.executable, ", ".join(m for m, _ in missing), " ".join(p for _, p in missing)),
              file=sys.stderr)
        return 1
    for name in todo:
        # Drop the model's stamp entry first: a run killed half-way leaves
        # files that the next run will not trust.
        stamp["models"].pop(name, None)
        _save_stamp(outdir, stamp)
        t0 = time.monotonic()
        try:
            written = _make(outdir, name, generator)
        except Exception as e:
            print("gen_reference_models: model '%s': %s: %s" % (name, type(e).__name__, e), file=sys.stderr)
            return 1
        stamp["models"][name] = {rel: _sha256_file(os.path.join(outdir, rel)) for rel in sorted(written)}
        _save_stamp(outdir, stamp)
        made += 1
        print("%-14s %3d files  %5.1f s" % (name, len(written), time.monotonic() - t0), flush=True)
    print("gen_reference_models: %d of %d model(s) made, %d up to date, %.1f s -> %s"
          % (made, len(wanted), len(wanted) - len(todo), time.monotonic() - start, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
