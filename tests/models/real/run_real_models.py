#!/usr/bin/python3
"""Runs every model and case of the real-models corpus the way a user does,
and compares the outputs with PyTorch's (docs/real-models.md).

    run_real_models.py --models-dir DIR --nimble NIMBLE --nimble-run NIMBLE_RUN \
        --known-failures FILE --work-dir DIR [--target x86|aarch64] [--only NAME,...]

For each DIR/NAME.json (scripts/gen_real_models.py writes them), two
separate processes, as on the user's path:

    nimble compile NAME.onnx --target=TARGET -o WORK/NAME.nimble
    nimble-run WORK/NAME.nimble --input IN=FILE ... --output-dir WORK/NAME.out/CASE

(for --target=aarch64 the aarch64 nimble-run runs under qemu-aarch64 -L
/usr/aarch64-linux-gnu, or what --emulator says). Each output file is read back with numpy.load and
must have exactly the expected dtype (a bool output must come back as
numpy bool) and shape, and values within the json's tolerance
(|got - want| <= atol + rtol * |want|; NaN where PyTorch has NaN; integers
and bools equal).

Prints one line per case and one per model: pass, or fail with the first
line of the compiler's or runtime's error. The known failures
(--known-failures: one line per model, "NAME reason...", '#' comments; a
line "NAME@aarch64 reason" applies to one target only) are allowed to fail.
Exit status 0 when every model did what the list says; 1 when a model that
is not listed fails, a listed one passes (tighten the list), or the list
names a model the corpus lacks; 2 on a usage error; 77 (aarch64 only) when
there is no aarch64 nimble-run or no qemu-aarch64: "skipped".

--write-known-failures FILE writes the current failures in the list's
format, to replace the list when fixes land.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

SKIP = 77
# -E: the cross ld.so loads the cross libc beside it, not libc6:arm64 from
# /lib/aarch64-linux-gnu (a different glibc build; the pair hangs in pthread_create).
EMULATOR = "qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib"


def first_line(text, limit=400):
    """The first non-empty line of `text`, cut to `limit` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[:limit] + "..."
    return ""


def run_process(argv, timeout):
    """Runs argv; returns (rc, stdout, stderr). rc is -SIGNAL when killed by a
    signal, None on timeout."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if e.stdout else ""
        err = e.stderr.decode("utf-8", "replace") if e.stderr else ""
        return None, out, err
    except OSError as e:
        return 127, "", "%s: %s" % (argv[0], e.strerror)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def describe_failure(what, rc, out, err, timeout):
    """One line: which step failed, how, and the first line it printed."""
    if rc is None:
        how = "timed out after %d s" % timeout
    elif rc < 0:
        try:
            how = "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            how = "killed by signal %d" % -rc
    else:
        how = "exit %d" % rc
    msg = first_line(err) or first_line(out) or "(no output)"
    return "%s: %s: %s" % (what, how, msg)


def output_file_name(name, index):
    """nimble-run's file name for output `index` (runtime/tools/nimble_run.c):
    the name with every character outside [A-Za-z0-9._-] made '_';
    output_<index> when the name is empty, '.' or '..'."""
    if not name or name in (".", ".."):
        return "output_%d" % index
    return "".join(c if (c.isascii() and c.isalnum()) or c in "._-" else "_" for c in name)


def find_output(outdir, names, index, stdout):
    """The file nimble-run wrote for output `index`: by its name, by the
    output_<index> fallback (collisions, unnamed outputs), or the path it
    printed on line "NAME: DTYPE SHAPE -> PATH". None when none exists."""
    mine = output_file_name(names[index], index)
    if mine in [output_file_name(n, i) for i, n in enumerate(names[:index])]:
        mine = "output_%d" % index
    candidates = [os.path.join(outdir, mine + ".npy"), os.path.join(outdir, "output_%d.npy" % index)]
    printed = [line.rsplit(" -> ", 1)[1].strip() for line in stdout.splitlines() if " -> " in line]
    if len(printed) == len(names):
        candidates.append(printed[index])
    for c in candidates:
        if os.path.isfile(c):
            return c
    return None


def compare(name, got, want, rtol, atol):
    """None when `got` matches `want`, else one line saying how not."""
    if got.dtype != want.dtype:
        return "output '%s': dtype %s, expected %s" % (name, got.dtype, want.dtype)
    if got.shape != want.shape:
        return "output '%s': shape %s, expected %s" % (name, list(got.shape), list(want.shape))
    if want.size == 0:
        return None
    if want.dtype.kind == "f":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        if not np.array_equal(nan_g, nan_w):
            return "output '%s': NaN at %d positions, expected %d" % (name, int(nan_g.sum()), int(nan_w.sum()))
        ok = nan_w | (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w))
        if not ok.all():
            bad = np.argwhere(~ok)
            at = tuple(int(i) for i in bad[0])
            err = np.where(nan_w, 0.0, np.abs(g - w))
            return ("output '%s': %d of %d values out of tolerance (rtol %g, atol %g); max |error| %.3g; "
                    "first at %s: %r, expected %r" % (name, len(bad), want.size, rtol, atol,
                                                       float(np.nanmax(err)), list(at), float(g[at]),
                                                       float(w[at])))
        return None
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        at = tuple(int(i) for i in bad[0])
        return "output '%s': %d of %d values differ; first at %s: %r, expected %r" % (
            name, len(bad), want.size, list(at), got[at].item(), want[at].item())
    return None


def load_known_failures(path, target):
    """{model: reason} for `target` from the list (see the module doc)."""
    known = {}
    with open(path) as f:
        for num, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            key, reason = parts[0], parts[1] if len(parts) > 1 else ""
            name, _, only = key.partition("@")
            if only and only not in ("x86", "aarch64"):
                raise ValueError("%s:%d: '%s': the target after '@' must be x86 or aarch64" % (path, num, key))
            if only and only != target:
                continue
            if name in known and not only:
                raise ValueError("%s:%d: '%s' is listed twice" % (path, num, name))
            known[name] = reason
    return known


class Runner:
    def __init__(self, args, run_prefix, models_dir, work):
        self.args = args
        self.models_dir, self.work = models_dir, work
        self.run_prefix = run_prefix  # argv before the model path: [nimble-run] or qemu + nimble-run

    def run_model(self, meta, models_dir, work):
        """Compiles and runs every case of one model. Returns (passed, the
        first failure's reason, one line per case, compile seconds)."""
        a = self.args
        name = meta["name"]
        exe = os.path.join(work, name + ".nimble")
        outroot = os.path.join(work, name + ".out")
        for p in (exe, outroot):
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)
        t0 = time.monotonic()
        argv = [a.nimble, "compile", os.path.join(models_dir, meta["file"]), "--target=" + a.target, "-o", exe]
        rc, out, err = run_process(argv, a.compile_timeout)
        t_compile = time.monotonic() - t0
        if rc != 0:
            return False, self.short(describe_failure("compile", rc, out, err, a.compile_timeout)), [], t_compile
        if not os.path.isfile(exe):
            return False, self.short("compile: exit 0 but %s was not written" % exe), [], t_compile
        tol = meta["tolerance"]
        in_names = [v["name"] for v in meta["inputs"]]
        out_names = [v["name"] for v in meta["outputs"]]
        lines = []
        first_reason = None
        for case in meta["cases"]:
            cid = case["id"]
            outdir = os.path.join(outroot, str(cid))
            os.makedirs(outdir)
            argv = list(self.run_prefix) + [exe]
            for n in in_names:
                argv += ["--input", "%s=%s" % (n, os.path.join(models_dir, case["inputs"][n]["file"]))]
            argv += ["--output-dir", outdir]
            rc, out, err = run_process(argv, a.run_timeout)
            reason = None
            if rc != 0:
                reason = describe_failure("run", rc, out, err, a.run_timeout)
            else:
                for i, n in enumerate(out_names):
                    path = find_output(outdir, out_names, i, out)
                    if path is None:
                        reason = "output '%s': nimble-run wrote no %s.npy (nor output_%d.npy) in %s" % (
                            n, output_file_name(n, i), i, outdir)
                        break
                    try:
                        got = np.load(path, allow_pickle=False)
                    except Exception as e:  # a damaged file is a failure, not a crash of the runner
                        reason = "output '%s': numpy cannot read %s: %s" % (n, path, first_line(str(e)))
                        break
                    want = np.load(os.path.join(models_dir, case["outputs"][n]["file"]), allow_pickle=False)
                    reason = compare(n, got, want, tol["rtol"], tol["atol"])
                    if reason:
                        break
            note = case.get("note", "")
            if reason is None:
                lines.append("  case %d (%s): pass" % (cid, note))
            else:
                lines.append("  case %d (%s): FAIL: %s" % (cid, note, reason))
                if first_reason is None:
                    first_reason = "case %d: %s" % (cid, reason)
        return first_reason is None, self.short(first_reason or ""), [self.short(l) for l in lines], t_compile

    def short(self, text):
        """`text` with the corpus and work folders left out of paths, so that
        reasons read the same on every machine."""
        for d in (self.models_dir, self.work):
            text = text.replace(d + os.sep, "")
        return text


def aarch64_prefix(run, emulator):
    """The argv prefix that runs the aarch64 nimble-run, or (None, why)."""
    if not run:
        return None, ("no aarch64 nimble-run (NIMBLE_AARCH64_NIMBLE_RUN is empty; scripts/test.sh sets it from "
                      "scripts/test-cross.sh's build)")
    if not os.access(run, os.X_OK):
        return None, "no aarch64 nimble-run (NIMBLE_AARCH64_NIMBLE_RUN=%s is not an executable file)" % run
    emu = shlex.split(emulator)
    if emu and shutil.which(emu[0]) is None:
        return None, "no aarch64 nimble-run can run: %s is not installed (Debian package qemu-user)" % emu[0]
    return emu + [run], None


def main(argv):
    sys.dont_write_bytecode = True
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models-dir", required=True)
    p.add_argument("--nimble", required=True, help="the nimble client (build/client/nimble)")
    p.add_argument("--nimble-run", default="", help="nimble-run for the target (for aarch64: an aarch64 build, "
                   "run under qemu-aarch64; empty: skipped)")
    p.add_argument("--target", default="x86", choices=("x86", "aarch64"))
    p.add_argument("--known-failures", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--emulator", default=EMULATOR, help="the command that runs an aarch64 nimble-run "
                   "(default: %(default)s; empty on an aarch64 host)")
    p.add_argument("--only", default="", help="comma-separated model names (default: all)")
    p.add_argument("--compile-timeout", type=int, default=600)
    p.add_argument("--run-timeout", type=int, default=None, help="seconds per nimble-run (default 120, "
                   "600 under qemu)")
    p.add_argument("--write-known-failures", default="", metavar="FILE",
                   help="also write the current failures to FILE in the known-failures format")
    args = p.parse_args(argv)
    if args.run_timeout is None:
        args.run_timeout = 600 if args.target == "aarch64" else 120

    if args.target == "aarch64":
        prefix, why = aarch64_prefix(args.nimble_run, args.emulator)
        if prefix is None:
            print("skipped: " + why)
            return SKIP
    else:
        if not os.access(args.nimble_run, os.X_OK):
            print("run_real_models: --nimble-run %r is not an executable file" % args.nimble_run, file=sys.stderr)
            return 2
        prefix = [args.nimble_run]
    if not os.access(args.nimble, os.X_OK):
        print("run_real_models: --nimble %r is not an executable file" % args.nimble, file=sys.stderr)
        return 2
    models_dir = os.path.abspath(args.models_dir)
    try:
        known = load_known_failures(args.known_failures, args.target)
    except (OSError, ValueError) as e:
        print("run_real_models: %s" % e, file=sys.stderr)
        return 2
    metas = []
    for fn in sorted(os.listdir(models_dir)):
        if fn.endswith(".json") and not fn.startswith("."):
            with open(os.path.join(models_dir, fn)) as f:
                metas.append(json.load(f))
    if not metas:
        print("run_real_models: no NAME.json in %s (run scripts/gen_real_models.py)" % models_dir, file=sys.stderr)
        return 2
    only = [n for n in args.only.split(",") if n]
    names = [m["name"] for m in metas]
    unknown = [n for n in only if n not in names]
    if unknown:
        print("run_real_models: no model(s) %s in %s" % (", ".join(unknown), models_dir), file=sys.stderr)
        return 2
    if only:
        metas = [m for m in metas if m["name"] in only]
    work = os.path.abspath(args.work_dir)
    os.makedirs(work, exist_ok=True)

    runner = Runner(args, prefix, models_dir, work)
    results = []  # (name, passed, reason, verdict_ok, verdict)
    print("real models on %s (%s)" % (args.target, " ".join(prefix)), flush=True)
    for meta in metas:
        name = meta["name"]
        t0 = time.monotonic()
        passed, reason, lines, t_compile = runner.run_model(meta, models_dir, work)
        secs = time.monotonic() - t0
        if passed and name in known:
            ok, verdict = False, "UNEXPECTED PASS: listed in %s (%s); remove it from the list" % (
                os.path.basename(args.known_failures), known[name])
        elif passed:
            ok, verdict = True, "pass"
        elif name in known:
            ok, verdict = True, "known failure: " + reason
        else:
            ok, verdict = False, "FAIL: " + reason
        print("%s: %s  [%d cases, compile %.1f s, total %.1f s]" % (name, verdict, len(meta["cases"]), t_compile,
                                                                     secs), flush=True)
        for line in lines:
            print(line)
        sys.stdout.flush()
        results.append((name, passed, reason, ok, verdict))

    stale = [] if only else sorted(n for n in known if n not in names)
    for n in stale:
        print("STALE: %s names '%s', which the corpus does not have" % (args.known_failures, n))
    n_pass = sum(1 for r in results if r[1])
    bad = [r for r in results if not r[3]]
    print("\nsummary (%s): %d of %d models pass, %d known failures, %d unexpected%s" % (
        args.target, n_pass, len(results), sum(1 for r in results if not r[1] and r[0] in known), len(bad),
        ", %d stale list entries" % len(stale) if stale else ""))
    for name, passed, reason, ok, verdict in results:
        print("  %-18s %s" % (name, "pass" if passed else "fail: " + reason))
    if args.write_known_failures:
        with open(args.write_known_failures, "w") as f:
            f.write("# Real models that fail today (target %s), with the reason; generated by\n"
                    "# run_real_models.py --write-known-failures. One line per model: NAME reason.\n" % args.target)
            for name, passed, reason, ok, verdict in results:
                if not passed:
                    f.write("%s %s\n" % (name, reason))
    if bad or stale:
        print("\nrun_real_models: %d model(s) did not do what %s says%s" % (
            len(bad), args.known_failures, " and %d stale entr%s" % (len(stale), "y" if len(stale) == 1 else "ies")
            if stale else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
