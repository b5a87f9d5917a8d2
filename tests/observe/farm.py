"""A farm on loopback for the observability tests: redis-server, nimble-store,
nimble-scheduler and nimble-workers as real processes (the way
scripts/farm-lib.sh and tests/scheduler/farm_harness.c start them), each on a
free port, with a bearer token, logs in the farm's directory. The daemons
get --metrics 127.0.0.1:0 and report the port they bound. stop() ends every
process by its pid (SIGTERM), and fails when one did not exit 0 or left a
sanitizer report in its log.

Standard library only (plus what the tests import themselves)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, fn, timeout=20.0, interval=0.05):
    """Calls fn until it returns something truthy; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def http_get(url, timeout=10):
    """(status, content type, body text) of a GET, via curl as an operator would."""
    out = subprocess.run(
        ["curl", "-sS", "-m", str(timeout), "-o", "-", "-w", "\n%{http_code} %{content_type}", url],
        capture_output=True, text=True, errors="replace", check=False)
    if out.returncode != 0:
        raise AssertionError(f"curl {url}: {out.stderr.strip()}")
    body, _, tail = out.stdout.rpartition("\n")
    code, _, ctype = tail.partition(" ")
    return int(code), ctype, body


class Farm:
    def __init__(self, build, compiler=None, name="farm"):
        self.build = build
        self.compiler = compiler or os.path.join(build, "tests", "scheduler", "farm_test_compiler")
        self.dir = tempfile.mkdtemp(prefix=f"nimble-{name}-")
        self.procs = []  # (name, Popen, log path)
        self.token = os.urandom(12).hex()
        with open(os.path.join(self.dir, "tokens"), "w") as f:
            f.write(self.token + "\n")
        self.workers = {}

    # ---- start ----

    def _spawn(self, name, argv, **kw):
        log = os.path.join(self.dir, name + ".log")
        f = open(log, "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
        f.close()
        self.procs.append((name, p, log))
        return p, log

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
            return f.read()

    def _alive(self, name, p):
        if p.poll() is not None:
            raise AssertionError(f"{name} exited with {p.returncode} at start:\n{self.log(name)}")

    def start(self):
        b = self.build
        self.redis_port = free_port()
        p, _ = self._spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", self.dir])
        wait_for("redis", lambda: (self._alive("redis", p), subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True, text=True)
            .stdout.strip() == "PONG")[1])
        ready = os.path.join(self.dir, "store.addr")
        p, _ = self._spawn("store", [f"{b}/artifact-store/server/nimble-store", "--listen", "127.0.0.1:0",
                                     "--root", os.path.join(self.dir, "store"), "--token-file",
                                     os.path.join(self.dir, "tokens"), "--ready-file", ready, "--quiet"])
        wait_for("nimble-store", lambda: (self._alive("store", p), os.path.exists(ready) and
                                          os.path.getsize(ready) > 0)[1])
        with open(ready) as f:
            self.store = "http://" + f.read().strip()
        ready = os.path.join(self.dir, "scheduler.ready")
        p, _ = self._spawn("scheduler", [
            f"{b}/scheduler/nimble-scheduler", "--clients", "tcp://127.0.0.1:*", "--workers",
            "tcp://127.0.0.1:*", "--events", "tcp://127.0.0.1:*", "--redis", f"127.0.0.1:{self.redis_port}",
            "--store", self.store, "--store-token-file", os.path.join(self.dir, "tokens"),
            "--token-file", os.path.join(self.dir, "tokens"), "--metrics", "127.0.0.1:0",
            "--worker-timeout-ms", "3000", "--ready-file", ready])
        wait_for("nimble-scheduler", lambda: (self._alive("scheduler", p), os.path.exists(ready))[1])
        with open(ready) as f:
            fields = dict(line.split("=", 1) for line in f.read().split())
        self.clients, self.workers_ep, self.events = fields["clients"], fields["workers"], fields["events"]
        self.scheduler_http = fields["metrics"]
        return self

    def start_worker(self, wid, targets, extra=()):
        """A worker for `targets` (extra: more options); returns the URL of its /metrics."""
        wd = os.path.join(self.dir, "work-" + wid)
        os.makedirs(wd)
        p, log = self._spawn(wid, [
            f"{self.build}/compile-workers/worker/nimble-worker", "--scheduler", self.workers_ep,
            "--store", self.store, "--targets", targets, "--id", wid, "--compiler", self.compiler,
            "--store-token-file", os.path.join(self.dir, "tokens"), "--work-dir", wd,
            "--metrics", "127.0.0.1:0", *extra])

        def url():
            self._alive(wid, p)
            m = re.search(r"metrics at (http://\S+)/metrics", self.log(wid))
            return m and m.group(1)
        self.workers[wid] = wait_for(f"worker {wid}'s metrics port", url)
        return self.workers[wid]

    # ---- use ----

    def nimble(self, *args, check=True, timeout=300):
        """Runs the real `nimble` CLI against this farm; returns CompletedProcess."""
        env = dict(os.environ, NIMBLE_EVENTS=self.events, NIMBLE_CONFIG="/dev/null")
        argv = [f"{self.build}/client/nimble", "--scheduler", self.clients, "--store", self.store,
                "--token", self.token, *args]
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError(f"nimble {' '.join(args)} exited {out.returncode}:\n"
                                 f"{out.stdout}\n{out.stderr}")
        return out

    # ---- stop ----

    def stop(self):
        """Stops every process (workers first) and checks each exited cleanly."""
        problems = []
        for name, p, log in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    problems.append(f"{name} ignored SIGTERM for 10 s")
            if name != "redis" and p.returncode not in (0,):
                problems.append(f"{name} exited {p.returncode}")
            text = open(log, errors="replace").read()
            if re.search(r"ERROR: (Address|Leak)Sanitizer|runtime error:", text):
                problems.append(f"{name}: sanitizer report in {log}")
        self.procs = []
        if problems:
            raise AssertionError("farm stop: " + "; ".join(problems) + f" (logs kept in {self.dir})")
        if not os.environ.get("NIMBLE_FARM_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def kill(self):
        """For failures: stop everything without checks, keep the logs."""
        for _, p, _ in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs = []
        print(f"farm logs kept in {self.dir}")
