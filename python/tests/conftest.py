"""Fixtures for the Python package's tests.

The reference models (docs/reference-models.md) come from $NIMBLE_MODELS_DIR
(ctest's `reference_models` fixture writes them to BUILD/models); they are
compiled once per session with the build's `nimble compile` ($NIMBLE_CLI,
else BUILD/client/nimble). Small .nir programs of our own are in programs/.
Expected outputs are the models' own (PyTorch's), never Nimble's.
"""
import json
import os
import platform
import subprocess
import threading

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))
BUILD = os.path.abspath(os.environ.get("NIMBLE_BUILD_DIR", os.path.join(ROOT, "build")))
MODELS = os.path.abspath(os.environ.get("NIMBLE_MODELS_DIR", os.path.join(BUILD, "models")))
CLI = os.path.abspath(os.environ.get("NIMBLE_CLI", os.path.join(BUILD, "client", "nimble")))
TARGET = {"x86_64": "x86", "aarch64": "aarch64"}.get(platform.machine(), platform.machine())


def program(name):
    return os.path.join(HERE, "programs", name)


class Compiler:
    """Compiles a model or program once per session (thread-safe)."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.done = {}
        self.lock = threading.Lock()

    def __call__(self, source, parts=False):
        key = (source, parts)
        with self.lock:
            if key not in self.done:
                if not os.path.isfile(CLI):
                    pytest.skip("no nimble compiler at %s (set NIMBLE_CLI)" % CLI)
                stem = os.path.splitext(os.path.basename(source))[0]
                out = os.path.join(self.out_dir, stem + ".nimble")
                cmd = [CLI, "compile", source, "--target=" + TARGET, "-o", out]
                if parts:
                    out = os.path.join(self.out_dir, stem + ".parts")
                    cmd[-2:] = ["-o", os.path.join(self.out_dir, stem + ".p.nimble"),
                                "--emit-parts", out]
                r = subprocess.run(cmd, capture_output=True, text=True)
                assert r.returncode == 0, "nimble compile %s failed:\n%s" % (source, r.stderr)
                self.done[key] = out
            return self.done[key]


@pytest.fixture(scope="session")
def compile_model(tmp_path_factory):
    return Compiler(str(tmp_path_factory.mktemp("compiled")))


class ReferenceModel:
    def __init__(self, name):
        self.name = name
        self.meta_path = os.path.join(MODELS, name + ".json")
        with open(self.meta_path) as f:
            self.meta = json.load(f)
        self.onnx = os.path.join(MODELS, self.meta["file"]) if "file" in self.meta else None
        self.rtol = self.meta["tolerance"]["rtol"]
        self.atol = self.meta["tolerance"]["atol"]

    @property
    def cases(self):
        return self.meta["cases"]

    def inputs(self, case):
        return {n: np.load(os.path.join(MODELS, t["file"])) for n, t in case["inputs"].items()}

    def outputs(self, case):
        return {n: np.load(os.path.join(MODELS, t["file"])) for n, t in case["outputs"].items()}


@pytest.fixture(scope="session")
def reference():
    def get(name):
        if not os.path.isfile(os.path.join(MODELS, name + ".json")):
            pytest.skip("reference model %s not in %s (run ctest's reference_models fixture)"
                        % (name, MODELS))
        return ReferenceModel(name)
    return get


@pytest.fixture(scope="session")
def mlp(reference, compile_model):
    """(ReferenceModel, path of the compiled .nimble) for the MLP."""
    ref = reference("mlp")
    return ref, compile_model(ref.onnx)


def assert_matches(got, want, rtol, atol, what):
    assert got.dtype == want.dtype, "%s: dtype %s, expected %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, got.shape, want.shape)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)
