#!/usr/bin/env python3
"""The installed runtime, used as an application outside the tree would.

    test_install.py prefix    BUILD PREFIX   cmake --install BUILD --prefix PREFIX (fresh)
    test_install.py layout    BUILD PREFIX   programs, libraries, SONAME, headers, .pc, CMake files
    test_install.py symbols   BUILD PREFIX   exported symbols == functions the headers declare
    test_install.py run-model BUILD PREFIX   examples/run_model.c built with pkg-config and with
                                             find_package, run on the reference MLP compiled by
                                             the installed nimble; nimble-run on a reference case
    test_install.py deb       BUILD PREFIX   cpack -G DEB: what each of the three packages holds

Run by ctest (tests/install/CMakeLists.txt, label `install`) with Debian's
/usr/bin/python3 (numpy and onnx, for the independent reference). Every check
prints what it compared; the first failure raises with what differed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
VERSION = None  # from the build's CMakeCache


def run(cmd, **kw):
    kw.setdefault("check", True)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        return subprocess.run(cmd, **kw)
    except subprocess.CalledProcessError as e:
        raise SystemExit("FAIL: %s exited %d\nstdout:\n%s\nstderr:\n%s"
                         % (" ".join(map(str, cmd)), e.returncode, e.stdout, e.stderr))


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what.split("\n")[0])


def cache_value(build, name):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^%s:[A-Z]+=(.*)$" % re.escape(name), line)
            if m:
                return m.group(1)
    return None


def project_version(build):
    v = cache_value(build, "CMAKE_PROJECT_VERSION")
    if not v:
        with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
            v = re.search(r"project\(nimble VERSION ([0-9.]+)", f.read()).group(1)
    return v


def libdir(prefix):
    for d in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
        if os.path.exists(os.path.join(prefix, d, "libnimble_runtime.so")):
            return os.path.join(prefix, d)
    raise SystemExit("FAIL: no libnimble_runtime.so under %s/lib*" % prefix)


def pkg_env(prefix):
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = os.path.join(libdir(prefix), "pkgconfig")
    return env


# The public headers (libnimble_runtime holds the runtime and the executable
# format), and where the headers they include live (base/).
PUBLIC_HEADER_DIRS = ("runtime/include", "format/include")
INCLUDED_HEADER_DIRS = ("base/include",)


def expected_headers():
    """The public set, computed from the sources the way an application sees
    them: every runtime and executable-format header and the base headers
    they include."""
    names, queue = set(), []
    for d in PUBLIC_HEADER_DIRS:
        for f in sorted(os.listdir(os.path.join(SOURCE, d, "nimble"))):
            if f.endswith(".h"):
                names.add(f)
                queue.append(os.path.join(SOURCE, d, "nimble", f))
    while queue:
        with open(queue.pop()) as f:
            for inc in re.findall(r'^#include "nimble/([a-z_0-9]+\.h)"', f.read(), re.M):
                for d in INCLUDED_HEADER_DIRS:
                    p = os.path.join(SOURCE, d, "nimble", inc)
                    if inc not in names and os.path.exists(p):
                        names.add(inc)
                        queue.append(p)
    return names


# ---- prefix ------------------------------------------------------------------------


def cmd_prefix(build, prefix):
    shutil.rmtree(prefix, ignore_errors=True)
    r = run(["cmake", "--install", build, "--prefix", prefix])
    n = sum(1 for line in r.stdout.splitlines() if line.startswith("-- Installing"))
    check(n > 0, "cmake --install %s --prefix %s installed %d files" % (build, prefix, n))


# ---- layout ------------------------------------------------------------------------


def soname(path):
    out = run(["readelf", "-d", path]).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", path]).stdout)


def cmd_layout(build, prefix):
    major = VERSION.split(".")[0]
    for prog in ("nimble", "nimble-run", "nimble-store", "nimble-scheduler", "nimble-worker"):
        p = os.path.join(prefix, "bin", prog)
        check(os.path.isfile(p) and os.access(p, os.X_OK), "bin/%s is installed, executable" % prog)
    help_out = run([os.path.join(prefix, "bin", "nimble"), "--help"], check=False)
    check(help_out.returncode == 0 and "compile" in help_out.stdout + help_out.stderr,
          "the installed nimble runs (--help lists compile)")

    lib = libdir(prefix)
    for stem in ("libnimble_runtime", "libnimble_fetch"):
        real = os.path.join(lib, "%s.so.%s" % (stem, VERSION))
        check(os.path.isfile(real) and not os.path.islink(real), "%s is a file" % real)
        check(os.readlink(os.path.join(lib, "%s.so.%s" % (stem, major))) == "%s.so.%s" % (stem, VERSION),
              "%s.so.%s -> %s.so.%s" % (stem, major, stem, VERSION))
        check(os.readlink(os.path.join(lib, "%s.so" % stem)) == "%s.so.%s" % (stem, major),
              "%s.so -> %s.so.%s (the link-time name)" % (stem, stem, major))
        check(soname(real) == "%s.so.%s" % (stem, major), "SONAME of %s is %s.so.%s"
              % (os.path.basename(real), stem, major))
        check(os.path.isfile(os.path.join(lib, stem + ".a")), "%s.a is installed" % stem)
    rt_needed = needed(os.path.join(lib, "libnimble_runtime.so.%s" % VERSION))
    check(not any("curl" in n or "nimble" in n for n in rt_needed),
          "libnimble_runtime.so needs neither libcurl nor another Nimble library: %s" % rt_needed)
    fe_needed = needed(os.path.join(lib, "libnimble_fetch.so.%s" % VERSION))
    check("libnimble_runtime.so.%s" % major in fe_needed and any("curl" in n for n in fe_needed),
          "libnimble_fetch.so needs libnimble_runtime.so.%s and libcurl: %s" % (major, fe_needed))
    members = run(["ar", "t", os.path.join(lib, "libnimble_runtime.a")]).stdout.split()
    check("status.c.o" in members and "vm_lifecycle.c.o" in members and "npy_format.c.o" in members,
          "libnimble_runtime.a holds the runtime, tensor I/O and status.c (%d members)" % len(members))

    inc = os.path.join(prefix, "include", "nimble")
    installed = set(f for f in os.listdir(inc) if f.endswith(".h"))
    want = expected_headers()
    check(installed == want, "include/nimble holds exactly the public headers %s\n"
          "installed %s" % (sorted(want), sorted(installed)))
    check(os.path.isfile(os.path.join(inc, "third_party", "dlpack", "dlpack.h")),
          "dlpack.h is installed under include/nimble/third_party")

    env = pkg_env(prefix)
    check(run(["pkg-config", "--modversion", "nimble-runtime"], env=env).stdout.strip() == VERSION,
          "pkg-config --modversion nimble-runtime is %s" % VERSION)
    check(run(["pkg-config", "--modversion", "nimble-fetch"], env=env).stdout.strip() == VERSION,
          "pkg-config --modversion nimble-fetch is %s" % VERSION)
    pc_prefix = run(["pkg-config", "--variable=prefix", "nimble-runtime"], env=env).stdout.strip()
    check(os.path.realpath(pc_prefix) == os.path.realpath(prefix),
          "nimble-runtime.pc's prefix is the install prefix given at install time (%s)" % pc_prefix)
    cflags = run(["pkg-config", "--cflags", "nimble-runtime"], env=env).stdout.split()

    # Each header compiles on its own, as C11 (pedantic) and as C++.
    cxx = shutil.which("g++") or shutil.which("c++")
    with tempfile.TemporaryDirectory() as tmp:
        for h in sorted(installed):
            src = os.path.join(tmp, "t.c")
            with open(src, "w") as f:
                f.write('#include "nimble/%s"\ntypedef int nimble_header_alone;\n' % h)
            run(["cc", "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                 src] + cflags)
            if cxx:
                shutil.copy(src, src + "c")
                run([cxx, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", src + "c"] + cflags)
        check(True, "each of the %d installed headers compiles alone as C11%s"
              % (len(installed), " and C++" if cxx else ""))

    cmakedir = os.path.join(lib, "cmake", "NimbleRuntime")
    check(os.path.isfile(os.path.join(cmakedir, "NimbleRuntimeConfig.cmake")) and
          os.path.isfile(os.path.join(cmakedir, "NimbleRuntimeConfigVersion.cmake")),
          "the CMake package is installed in %s" % cmakedir)


# ---- symbols -----------------------------------------------------------------------


def declared_functions(prefix):
    """{header name: set of function names} for the installed headers, as
    GCC parses them (-aux-info lists every declaration with its file)."""
    inc = os.path.join(prefix, "include", "nimble")
    cflags = run(["pkg-config", "--cflags", "nimble-runtime"], env=pkg_env(prefix)).stdout.split()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src, aux = os.path.join(tmp, "all.c"), os.path.join(tmp, "aux.txt")
        with open(src, "w") as f:
            for h in sorted(os.listdir(inc)):
                if h.endswith(".h"):
                    f.write('#include "nimble/%s"\n' % h)
        run(["gcc", "-std=c11", "-fsyntax-only", "-aux-info", aux, src] + cflags)
        with open(aux) as f:
            for line in f:
                m = re.match(r"/\* (\S+):(\d+):(\w\w) \*/ (.*)$", line)
                if not m or os.path.dirname(os.path.realpath(m.group(1))) != os.path.realpath(inc):
                    continue
                # Definitions (F) in a header are static inline: not exported.
                if m.group(3)[1] != "C":
                    continue
                name = re.search(r"(\w+) \(", m.group(4)).group(1)
                out.setdefault(os.path.basename(m.group(1)), set()).add(name)
    return out


def exported(path):
    syms = set()
    for line in run(["nm", "-D", "--defined-only", path]).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms.add(parts[2].split("@")[0])
    return syms


def cmd_symbols(build, prefix):
    lib = libdir(prefix)
    decls = declared_functions(prefix)
    fetch_api = decls.pop("fetch.h", set())
    runtime_api = set().union(*decls.values())
    check(len(runtime_api) > 50 and len(fetch_api) > 3,
          "the installed headers declare %d runtime functions (%s) and %d fetch functions"
          % (len(runtime_api), ", ".join("%s: %d" % (h, len(s)) for h, s in sorted(decls.items())),
             len(fetch_api)))
    for stem, api in (("libnimble_runtime", runtime_api), ("libnimble_fetch", fetch_api)):
        syms = exported(os.path.join(lib, "%s.so.%s" % (stem, VERSION)))
        check(syms == api, "%s.so exports exactly the %d functions its headers declare\n"
              "exported but not declared: %s\ndeclared but not exported: %s"
              % (stem, len(api), sorted(syms - api), sorted(api - syms)))


# ---- run-model ---------------------------------------------------------------------


def mlp_reference(onnx_path, x):
    """y = the MLP on x, computed with NumPy from the ONNX graph's own
    initializers (Gemm and Relu, as the exporter wrote them), in float64."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(onnx_path)
    env = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    env[m.graph.input[0].name] = x.astype(np.float64)
    for node in m.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        if node.op_type == "Gemm":
            A, B = env[node.input[0]], env[node.input[1]]
            A = A.T if a.get("transA", 0) else A
            B = B.T if a.get("transB", 0) else B
            y = a.get("alpha", 1.0) * (A @ B)
            if len(node.input) > 2:
                y = y + a.get("beta", 1.0) * env[node.input[2]]
            env[node.output[0]] = y
        elif node.op_type == "Relu":
            env[node.output[0]] = np.maximum(env[node.input[0]], 0)
        else:
            raise SystemExit("FAIL: the MLP reference does not know op %s" % node.op_type)
    return env[m.graph.output[0].name]


def cmd_run_model(build, prefix):
    import numpy as np
    models = os.environ.get("NIMBLE_MODELS_DIR", os.path.join(build, "models"))
    onnx_path = os.path.join(models, "mlp.onnx")
    check(os.path.isfile(onnx_path), "the reference MLP is at %s" % onnx_path)
    lib = libdir(prefix)
    env = pkg_env(prefix)
    example = os.path.join(SOURCE, "examples", "run_model.c")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "mlp.nimble")
        target = "x86" if os.uname().machine == "x86_64" else "aarch64"
        run([os.path.join(prefix, "bin", "nimble"), "compile", onnx_path, "--target=" + target,
             "-o", model])
        check(os.path.getsize(model) > 0, "the installed nimble compiled mlp.onnx for %s" % target)

        # 1. pkg-config, as the README shows it.
        pc_bin = os.path.join(tmp, "run_model_pc")
        flags = run(["pkg-config", "--cflags", "--libs", "nimble-runtime"], env=env).stdout.split()
        run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", example, "-o", pc_bin] + flags)
        check("libnimble_runtime.so.%s" % VERSION.split(".")[0] in needed(pc_bin),
              "cc $(pkg-config --cflags --libs nimble-runtime) links libnimble_runtime.so dynamically")

        # 2. find_package(NimbleRuntime), shared and static.
        cm_build = os.path.join(tmp, "cmake-build")
        run(["cmake", "-S", os.path.join(SOURCE, "tests", "install", "consumer"), "-B", cm_build,
             "-DCMAKE_PREFIX_PATH=" + prefix, "-DRUN_MODEL_SOURCE=" + example,
             "-DCMAKE_BUILD_TYPE=Release"])
        run(["cmake", "--build", cm_build, "-j2"])
        cm_bin = os.path.join(cm_build, "run_model")
        cm_static = os.path.join(cm_build, "run_model_static")
        check(any(n.startswith("libnimble_runtime.so") for n in needed(cm_bin)),
              "find_package(NimbleRuntime) + Nimble::runtime links the shared library")
        check(not any("nimble" in n for n in needed(cm_static)),
              "Nimble::runtime_static links libnimble_runtime.a (no Nimble library needed at run time)")

        # run_model fills input x (shape [dim, 784]) with 0, 1, 2, ... and
        # prints the first `dim` numbers of y.
        dim = 10
        x = np.arange(dim * 784, dtype=np.float32).reshape(dim, 784)
        y = mlp_reference(onnx_path, x).reshape(-1)[:dim]
        tol = 1e-4 * np.abs(y).max() + 1e-5
        run_env = dict(os.environ, LD_LIBRARY_PATH=lib)
        for label, binary, e in (("pkg-config", pc_bin, run_env), ("CMake", cm_bin, os.environ),
                                 ("CMake, static", cm_static, os.environ)):
            out = run([binary, model, str(dim)], env=e).stdout.split()
            got = np.array([float(v) for v in out])
            check(got.shape == y.shape and np.allclose(got, y, rtol=1e-4, atol=tol),
                  "run_model built with %s prints the MLP's y[0,:%d] as NumPy computes it from "
                  "the ONNX weights (max diff %.3g)\ngot %s\nwant %s"
                  % (label, dim, np.abs(got - y).max() if got.shape == y.shape else -1, got, y))

        # The installed fetcher links through both routes too.
        fetch_bin = os.path.join(tmp, "parse_reference_pc")
        flags = run(["pkg-config", "--cflags", "--libs", "nimble-fetch"], env=env).stdout.split()
        run(["cc", "-std=c11", os.path.join(SOURCE, "tests/install/consumer/parse_reference.c"),
             "-o", fetch_bin] + flags)
        ref = "http://127.0.0.1:5000/team/mlp:x86"
        for label, binary, e in (("pkg-config", fetch_bin, run_env),
                                 ("CMake", os.path.join(cm_build, "parse_reference"), os.environ)):
            out = run([binary, ref], env=e).stdout.split()
            check(out == ["http://127.0.0.1:5000", "team/mlp", "x86", "-"],
                  "the fetcher linked with %s parses %s into %s" % (label, ref, out))
            bad = run([binary, "http://127.0.0.1:5000/team/mlp"], env=e, check=False)
            check(bad.returncode == 1 and "INVALID_ARGUMENT" in bad.stderr,
                  "and refuses a reference without tag or digest: %s" % bad.stderr.strip())

        # The installed nimble-run on a reference case, against PyTorch's output.
        with open(os.path.join(models, "mlp.json")) as f:
            case = json.load(f)["cases"][1]
        out_dir = os.path.join(tmp, "out")
        os.mkdir(out_dir)
        run([os.path.join(prefix, "bin", "nimble-run"), model, "--input",
             "x=" + os.path.join(models, case["inputs"]["x"]["file"]), "--output-dir", out_dir])
        got = np.load(os.path.join(out_dir, "y.npy"))
        want = np.load(os.path.join(models, case["outputs"]["y"]["file"]))
        check(got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5),
              "the installed nimble-run matches PyTorch on mlp case %d (%s)" % (case["id"], case["note"]))


# ---- deb ---------------------------------------------------------------------------


def deb_contents(path):
    files = set()
    for line in run(["dpkg-deb", "-c", path]).stdout.splitlines():
        name = line.split(None, 5)[5].split(" -> ")[0]
        if not name.endswith("/"):
            files.add(name[1:] if name.startswith(".") else name)
    return files


def cmd_deb(build, prefix):
    major = VERSION.split(".")[0]
    with tempfile.TemporaryDirectory() as tmp:
        run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"), "-B", tmp])
        debs = {run(["dpkg-deb", "-f", os.path.join(tmp, f), "Package"]).stdout.strip():
                os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".deb")}
        check(set(debs) == {"nimble-runtime", "nimble-client", "nimble-farm"},
              "cpack -G DEB makes nimble-runtime, nimble-client and nimble-farm: %s" % sorted(debs))
        contents = {p: deb_contents(f) for p, f in debs.items()}
        rt = contents["nimble-runtime"]
        libs = [f for f in rt if "/libnimble_runtime.so" in f]
        lib_prefix = os.path.dirname(libs[0]) if libs else "?"
        want_rt = {"/usr/bin/nimble-run",
                   lib_prefix + "/libnimble_runtime.so.%s" % VERSION,
                   lib_prefix + "/libnimble_runtime.so.%s" % major,
                   lib_prefix + "/libnimble_runtime.so",
                   lib_prefix + "/libnimble_runtime.a",
                   lib_prefix + "/libnimble_fetch.so.%s" % VERSION,
                   lib_prefix + "/pkgconfig/nimble-runtime.pc",
                   lib_prefix + "/pkgconfig/nimble-fetch.pc",
                   lib_prefix + "/cmake/NimbleRuntime/NimbleRuntimeConfig.cmake",
                   "/usr/include/nimble/runtime.h", "/usr/include/nimble/status.h",
                   "/usr/include/nimble/third_party/dlpack/dlpack.h"}
        check(want_rt <= rt and not any("/bin/nimble-" in f and not f.endswith("nimble-run")
                                         for f in rt) and "/usr/bin/nimble" not in rt,
              "nimble-runtime holds the libraries, headers, .pc and CMake files and nimble-run, "
              "no other program\nmissing: %s" % sorted(want_rt - rt))
        check(contents["nimble-client"] == {"/usr/bin/nimble", "/usr/bin/nimble-compile"},
              "nimble-client holds /usr/bin/nimble and nimble-compile (which `nimble compile` runs): %s"
              % sorted(contents["nimble-client"]))
        check(contents["nimble-farm"] == {"/usr/bin/nimble-store", "/usr/bin/nimble-scheduler",
                                          "/usr/bin/nimble-worker"},
              "nimble-farm holds the three daemons: %s" % sorted(contents["nimble-farm"]))
        depends = run(["dpkg-deb", "-f", debs["nimble-farm"], "Depends"]).stdout
        check("nimble-client" in depends, "nimble-farm depends on nimble-client (a worker runs "
              "nimble compile): %s" % depends.strip())
        depends = run(["dpkg-deb", "-f", debs["nimble-client"], "Depends"]).stdout
        check("binutils-x86-64-linux-gnu" in depends and "binutils-aarch64-linux-gnu" in depends,
              "nimble-client depends on the targets' GNU ld: %s" % depends.strip())
        x = os.path.join(tmp, "x")
        run(["dpkg-deb", "-x", debs["nimble-runtime"], x])
        with open(x + lib_prefix + "/pkgconfig/nimble-runtime.pc") as f:
            pc = f.read()
        check("prefix=/usr\n" in pc, "the packaged nimble-runtime.pc has prefix=/usr")
        # Programs and shared libraries ship stripped, as Debian's do
        # (CPACK_STRIP_FILES): no DWARF left in them.
        run(["dpkg-deb", "-x", debs["nimble-farm"], x])
        stripped = [x + lib_prefix + "/libnimble_runtime.so." + VERSION, x + "/usr/bin/nimble-run",
                    x + "/usr/bin/nimble-scheduler"]
        for path in stripped:
            sections = run(["readelf", "-S", "-W", path]).stdout
            check(".debug_info" not in sections, "the packaged %s is stripped (no .debug_info)"
                  % path[len(x):])


def main():
    global VERSION
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    cmd, build, prefix = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    VERSION = project_version(build)
    {"prefix": cmd_prefix, "layout": cmd_layout, "symbols": cmd_symbols,
     "run-model": cmd_run_model, "deb": cmd_deb}[cmd](build, prefix)


if __name__ == "__main__":
    main()
