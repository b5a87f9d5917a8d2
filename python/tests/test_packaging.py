"""`pip install` of the package, offline, into a virtual environment, and a
run of the installed package from outside the source tree, finding
libnimble_runtime.so through the dynamic linker's path."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import MODELS, ROOT, assert_matches

PACKAGE = os.path.join(ROOT, "python")

SCRIPT = r"""
import sys, numpy as np, nimble
print(nimble.__file__)
print(nimble.runtime_library())
exe = nimble.load(sys.argv[1])
np.save(sys.argv[3], exe.run(x=np.load(sys.argv[2]))["y"])
print("torch" in sys.modules)
"""


def test_pip_installs_the_package_offline_and_it_runs_a_model(mlp, tmp_path):
    ref, model = mlp
    runtime = os.environ.get("NIMBLE_RUNTIME_LIBRARY") or __import__("nimble").runtime_library()
    # A copy, so that setuptools' build files stay out of the source tree.
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                                "__pycache__", "CMakeLists.txt"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("this Python's venv has no pip (python3-venv): %s" % r.stderr.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Successfully installed nimble-runtime-0.1.0" in r.stdout

    case = ref.cases[2]
    out = tmp_path / "y.npy"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NIMBLE_RUNTIME_LIBRARY", "NIMBLE_FETCH_LIBRARY",
                        "NIMBLE_BUILD_DIR")}
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(runtime))
    r = subprocess.run([py, "-c", SCRIPT, model, os.path.join(MODELS, case["inputs"]["x"]["file"]),
                        str(out)], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    package_file, library, torch_loaded = r.stdout.split()
    assert package_file.startswith(str(venv)), package_file  # the installed copy, not the tree
    assert library == "libnimble_runtime.so.0"  # found by the dynamic linker
    assert torch_loaded == "False"  # NumPy and the standard library only
    assert_matches(np.load(out), ref.outputs(case)["y"], ref.rtol, ref.atol, "y from the installed package")
    installed = os.path.dirname(package_file)
    assert not [f for f in os.listdir(installed) if f.endswith(".so")]  # no compiled extension
