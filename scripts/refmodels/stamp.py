"""What both model generators (scripts/gen_reference_models.py,
scripts/gen_real_models.py) do around making a model: pin the BLAS kernels,
digest the generator, keep the stamp that makes repeated runs cheap, check
the libraries, and the loop that makes each model that is not up to date.

Free of numpy, torch and onnx imports: a run that finds everything up to
date loads none of them."""
import hashlib
import json
import os
import sys
import time
import warnings

# The libraries whose code decides the output bytes, with the Debian
# package that provides each.
LIBRARIES = (("torch", "python3-torch"), ("torchvision", "python3-torchvision"),
             ("onnx", "python3-onnx"), ("numpy", "python3-numpy"))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def library_versions():
    """Versions of the libraries, read from package metadata so that a cache
    hit need not import torch."""
    from importlib import metadata

    versions = {}
    for dist, _ in LIBRARIES:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "missing"
    return versions


def generator_digest(files, base):
    """sha256 over `files` (the generator's script and modules: each path
    relative to `base` and its contents' sha256), the library versions and
    OPENBLAS_CORETYPE."""
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.relpath(path, base).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    h.update(json.dumps(library_versions(), sort_keys=True).encode())
    # The BLAS kernels chosen change the low bits of every float output.
    h.update(b"OPENBLAS_CORETYPE=" + os.environ.get("OPENBLAS_CORETYPE", "").encode())
    return h.hexdigest()


def missing_libraries():
    """(module, Debian package) for each library this python cannot import."""
    missing = []
    for module, package in LIBRARIES:
        try:
            __import__(module)
        except ImportError:
            missing.append((module, package))
    return missing


def pin_blas_kernels():
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


def load_stamp(outdir, stamp_name, digest):
    """The stamp in OUTDIR, or an empty one when it is missing, damaged or
    from another generator."""
    try:
        with open(os.path.join(outdir, stamp_name)) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return {"generator": digest, "models": {}}
    if not isinstance(stamp, dict) or stamp.get("generator") != digest or not isinstance(stamp.get("models"), dict):
        return {"generator": digest, "models": {}}
    return stamp


def save_stamp(outdir, stamp_name, stamp):
    tmp = os.path.join(outdir, stamp_name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(outdir, stamp_name))


def still_valid(outdir, files):
    """True when every file a stamp entry lists is there with its sha256."""
    if not isinstance(files, dict) or not files:
        return False
    for rel, digest in files.items():
        path = os.path.join(outdir, rel)
        if not os.path.isfile(path) or sha256_file(path) != digest:
            return False
    return True


def generate(prog, outdir, wanted, force, stamp_name, digest, make, name_width):
    """Makes each model of `wanted` whose files do not match the stamp (all
    under `force`) with make(outdir, name, generator), which returns the
    relative paths it wrote, and records them. Returns the exit status:
    0, or 1 (a missing library, a model that failed) with the reason on
    stderr. `prog` names the script in messages and in each json's
    "generator" ("scripts/PROG.py sha256:DIGEST")."""
    generator = "scripts/%s.py sha256:%s" % (prog, digest)
    stamp = load_stamp(outdir, stamp_name, digest)
    start = time.monotonic()
    todo = [n for n in wanted if force or not still_valid(outdir, stamp["models"].get(n))]
    missing = missing_libraries() if todo else []
    if missing:
        print("%s: %s cannot import %s; install Debian's %s (scripts/setup.sh does)"
              % (prog, sys.executable, ", ".join(m for m, _ in missing), " ".join(p for _, p in missing)),
              file=sys.stderr)
        return 1
    warnings.filterwarnings("ignore")
    for name in todo:
        # Drop the model's stamp entry first: a run killed half-way leaves
        # files that the next run will not trust.
        stamp["models"].pop(name, None)
        save_stamp(outdir, stamp_name, stamp)
        t0 = time.monotonic()
        try:
            written = make(outdir, name, generator)
        except Exception as e:
            print("%s: model '%s': %s: %s" % (prog, name, type(e).__name__, e), file=sys.stderr)
            return 1
        stamp["models"][name] = {rel: sha256_file(os.path.join(outdir, rel)) for rel in sorted(written)}
        save_stamp(outdir, stamp_name, stamp)
        print("%-*s %3d files  %5.1f s" % (name_width, name, len(written), time.monotonic() - t0), flush=True)
    print("%s: %d of %d model(s) made, %d up to date, %.1f s -> %s"
          % (prog, len(todo), len(wanted), len(wanted) - len(todo), time.monotonic() - start, outdir))
    return 0
