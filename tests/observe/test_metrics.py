#!/usr/bin/python3
"""`curl /metrics` of the scheduler, the store and both workers of a farm on
loopback, parsed by the Prometheus client library's text parser
(Debian's python3-prometheus-client), with every value checked against
what the test did:

  1. nimble submit of a model for x86 and aarch64 (compiled: 2 misses),
  2. the same again (answered from the cache: 2 hits),
  3. a model the compiler fails on, for x86 (1 miss, 1 failed task),

and, for the store, requests the test makes itself between two scrapes
(a blob pushed, read back, a missing one asked for).

The compiler is farm_test_compiler, the scheduler suites' stand-in
(tests/scheduler/test_compiler.c), so the counts are exact and fast.

    test_metrics.py BUILD_DIR
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farm import Farm, http_get, wait_for  # noqa: E402
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("FAIL: the Prometheus client library is missing: install python3-prometheus-client "
             "(scripts/setup.sh does)")

FAILED = []


def check(cond, what):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        FAILED.append(what)


def scrape(url):
    """{(sample name, sorted label items): value} and {family: type} of url/metrics."""
    code, ctype, text = http_get(url + "/metrics")
    assert code == 200, f"{url}/metrics: HTTP {code}"
    assert ctype.startswith("text/plain; version=0.0.4"), f"{url}/metrics: content type {ctype}"
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def get(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def model_file(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_scheduler_and_workers(farm, tmp):
    x86 = farm.start_worker("w-x86", "x86")
    arm = farm.start_worker("w-aarch64", "aarch64")
    sched = farm.scheduler_http
    wait_for("both workers in the scheduler's metrics",
             lambda: get(scrape(sched)[0], "nimble_scheduler_workers_connected") == 2)

    good = model_file(tmp, "observe.onnx", "model: observed by the metrics test\n")
    bad = model_file(tmp, "broken.onnx", "fail the compiler gives up on purpose\n")
    t0 = time.monotonic()
    out = farm.nimble("submit", good, "--targets=x86,aarch64", "--name", "team/observe", "--timeout", "60")
    check("cached" not in out.stdout, "the first submit compiled both targets")
    out = farm.nimble("submit", good, "--targets=x86,aarch64", "--name", "team/observe", "--timeout", "60")
    check(out.stdout.count("(cached)") == 2, "the resubmit was answered from the cache for both targets")
    out = farm.nimble("submit", bad, "--targets=x86", "--name", "team/broken", "--timeout", "60", check=False)
    check(out.returncode == 1 and "gives up on purpose" in out.stderr + out.stdout,
          f"the broken model's job failed with the compiler's message (exit {out.returncode})")
    wall = time.monotonic() - t0

    s, types = scrape(sched)
    check(types.get("nimble_scheduler_jobs") == "counter", "nimble_scheduler_jobs_total is a counter")
    check(types.get("nimble_scheduler_task_run_seconds") == "histogram", "task_run_seconds is a histogram")
    check(types.get("nimble_scheduler_queue_length") == "gauge", "queue_length is a gauge")
    jobs = {st: get(s, "nimble_scheduler_jobs_total", kind="compile", state=st)
            for st in ("queued", "running", "done", "failed", "cancelled")}
    # job 1 queued -> running -> done; job 2 done at once (cached); job 3 queued -> running -> failed
    check(jobs == {"queued": 2, "running": 2, "done": 2, "failed": 1, "cancelled": 0},
          f"jobs by state entered: {jobs}")
    check(get(s, "nimble_scheduler_jobs_total", kind="profile", state="queued") == 0, "no profile job")
    check(get(s, "nimble_scheduler_requests_total", type="SUBMIT") == 3, "3 SUBMIT requests")
    check(get(s, "nimble_scheduler_cache_hits_total", target="x86") == 1 and
          get(s, "nimble_scheduler_cache_hits_total", target="aarch64") == 1, "cache hits: 1 per target")
    check(get(s, "nimble_scheduler_cache_misses_total", target="x86") == 2 and
          get(s, "nimble_scheduler_cache_misses_total", target="aarch64") == 1,
          "cache misses: x86 2 (good, broken), aarch64 1")
    fin = {(t, st): get(s, "nimble_scheduler_tasks_finished_total", kind="compile", target=t, state=st)
           for t in ("x86", "aarch64") for st in ("done", "failed", "cancelled")}
    check(fin == {("x86", "done"): 1, ("x86", "failed"): 1, ("x86", "cancelled"): 0,
                  ("aarch64", "done"): 1, ("aarch64", "failed"): 0, ("aarch64", "cancelled"): 0},
          f"tasks finished: {fin}")
    check(get(s, "nimble_scheduler_tasks_delivered_total", kind="compile", target="x86") == 2 and
          get(s, "nimble_scheduler_tasks_delivered_total", kind="compile", target="aarch64") == 1,
          "deliveries: x86 2, aarch64 1")
    run_n = get(s, "nimble_scheduler_task_run_seconds_count", kind="compile", target="x86")
    run_sum = get(s, "nimble_scheduler_task_run_seconds_sum", kind="compile", target="x86")
    check(run_n == 2 and 0 < run_sum <= wall, f"x86 run seconds: {run_n} runs, {run_sum:.3f} s <= {wall:.3f} s")
    inf = get(s, "nimble_scheduler_task_run_seconds_bucket", kind="compile", target="x86", le="+Inf")
    check(inf == run_n, "the +Inf bucket holds every observation")
    waits = sum(get(s, "nimble_scheduler_task_wait_seconds_count", kind="compile", target=t)
                for t in ("x86", "aarch64"))
    check(waits == 3, f"3 waits observed ({waits})")
    check(get(s, "nimble_scheduler_queue_length", kind="compile", target="x86") == 0 and
          ("nimble_scheduler_queue_length", (("kind", "compile"), ("target", "aarch64"))) in s,
          "queue lengths are there, and empty")
    check(get(s, "nimble_scheduler_workers", target="x86") == 1 and
          get(s, "nimble_scheduler_workers", target="aarch64") == 1, "one worker per target")
    check(get(s, "nimble_scheduler_workers_busy", target="x86") == 0, "no worker busy now")
    check(get(s, "nimble_scheduler_redis_up") == 1, "redis is up")

    w, types = scrape(x86)
    check(types.get("nimble_worker_compile_seconds") == "histogram", "compile_seconds is a histogram")
    check(get(w, "nimble_worker_compiles_total", target="x86") == 2, "the x86 worker finished 2 compiles")
    check(get(w, "nimble_worker_compile_failures_total", target="x86") == 1, "... one of which failed")
    n = get(w, "nimble_worker_compile_seconds_count", target="x86")
    total = get(w, "nimble_worker_compile_seconds_sum", target="x86")
    check(n == 2 and 0 < total <= run_sum, f"x86 compile seconds: {n}, {total:.3f} s <= the runs' {run_sum:.3f} s")
    check(get(w, "nimble_worker_tasks_received_total", kind="compile", target="x86") == 2, "2 tasks received")
    check(get(w, "nimble_worker_busy") == 0, "the x86 worker is idle")
    check(get(w, "nimble_worker_info", worker="w-x86", compiler_version=get_version(farm)) == 1,
          "nimble_worker_info names the worker and its compiler")
    w, _ = scrape(arm)
    check(get(w, "nimble_worker_compiles_total", target="aarch64") == 1 and
          get(w, "nimble_worker_compile_failures_total", target="aarch64") == 0,
          "the aarch64 worker finished 1 compile, no failure")

    st, _ = scrape(farm.store)
    # Manifests: 2 pushed by the workers (by digest), 2 tags the scheduler
    # put on them when it published the results, 2 tags the cache hits put
    # under the job's name (docs/farm.md section 1).
    check(get(st, "nimble_store_requests_total", method="PUT", route="manifest", status="201") == 6,
          "6 manifests PUT: 2 compiles, 2 published tags, 2 cache-hit tags")


def get_version(farm):
    out = subprocess.run([f"{farm.build}/client/nimble", "--version"], capture_output=True, text=True)
    return out.stdout.split()[-1]


def push_blob(farm, data):
    """POST then PUT a monolithic upload with curl; returns the digest."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    auth = ["-H", f"Authorization: Bearer {farm.token}"]
    hdr = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "-X", "POST", *auth,
                          f"{farm.store}/v2/team/probe/blobs/uploads/"], capture_output=True, text=True)
    loc = [line.split(":", 1)[1].strip() for line in hdr.stdout.splitlines()
           if line.lower().startswith("location:")][0]
    url = (loc if loc.startswith("http") else farm.store + loc) + ("&" if "?" in loc else "?") + "digest=" + digest
    code = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT", *auth,
                           "-H", "Content-Type: application/octet-stream", "--data-binary", "@-", url],
                          input=data, capture_output=True).stdout.decode()
    assert code == "201", f"blob PUT answered {code}"
    return digest


def test_store(farm):
    before, _ = scrape(farm.store)
    data = os.urandom(100_000)
    digest = push_blob(farm, data)
    code, _, body = http_get(f"{farm.store}/v2/team/probe/blobs/{digest}")
    missing = "sha256:" + "0" * 64
    head = subprocess.run(["curl", "-sS", "-I", "-o", "/dev/null", "-w", "%{http_code}",
                           f"{farm.store}/v2/team/probe/blobs/{missing}"], capture_output=True, text=True)
    check(code == 200 and head.stdout == "404", "the store served the blob and 404 for a missing one")
    after, _ = scrape(farm.store)

    def delta(name, **labels):
        return get(after, name, **labels) - get(before, name, **labels)
    check(delta("nimble_store_requests_total", method="POST", route="upload", status="202") == 1, "+1 POST upload 202")
    check(delta("nimble_store_requests_total", method="PUT", route="upload", status="201") == 1, "+1 PUT upload 201")
    check(delta("nimble_store_requests_total", method="GET", route="blob", status="200") == 1, "+1 GET blob 200")
    check(delta("nimble_store_requests_total", method="HEAD", route="blob", status="404") == 1, "+1 HEAD blob 404")
    check(delta("nimble_store_requests_total", method="GET", route="metrics", status="200") == 1,
          "+1 GET /metrics (the scrape before; a scrape counts when it completes)")
    check(delta("nimble_store_received_bytes_total", route="upload") == len(data),
          f"received bytes on upload grew by exactly {len(data)}")
    check(delta("nimble_store_sent_bytes_total", route="blob") == len(data),
          f"sent bytes on blob grew by exactly {len(data)} (HEAD sends none)")
    check(delta("nimble_store_errors_total", route="blob", kind="client") == 1, "+1 client error on blob")
    check(delta("nimble_store_errors_total", route="upload", kind="server") == 0, "no server error")
    check(delta("nimble_store_request_seconds_count", route="blob") == 2, "2 blob request durations")
    check(get(after, "nimble_store_connections") >= 1, "the scrape's own connection is open")
    code, _, _ = http_get(f"{farm.store}/metrics?x=1")
    check(code == 200, "a query string does not change the route")
    def post(*extra):
        return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                               *extra, f"{farm.store}/metrics"], capture_output=True, text=True).stdout
    code = post()
    check(code == "401", f"POST /metrics without a token is a write and needs one: 401 ({code})")
    code = post("-H", f"Authorization: Bearer {farm.token}")
    check(code == "405", f"POST /metrics with the token is refused with 405 ({code})")


def main():
    build = sys.argv[1]
    farm = Farm(build, name="metrics").start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            test_scheduler_and_workers(farm, tmp)
        test_store(farm)
        code, _, _ = http_get(farm.scheduler_http + "/nothing")
        check(code == 404, "an unknown path on the scheduler's port is 404")
    except BaseException:
        farm.kill()
        raise
    farm.stop()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
