#!/usr/bin/env bash
# Validates docker/compose.yaml without a Docker engine: docker-compose (v1)
# must accept it (`config` exits 1 on an unknown key, as a broken copy
# shows), and the resolved file must hold the fleet docs/farm.md
# describes. Then docker/bundle.sh is run on the built scheduler and the
# bundle must start with only its own lib directory.
#
#   test_compose_file.sh COMPOSE_FILE [BUILD_DIR]
set -euo pipefail
compose=$1
build=${2:-${NIMBLE_BUILD_DIR:-}}
dockerdir=$(cd "$(dirname "$compose")" && pwd)
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose is not installed (scripts/setup.sh)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

docker-compose -f "$compose" config > "$tmp/resolved.yaml" 2> "$tmp/err" \
  || { echo "FAIL: docker-compose config refused $compose:"; cat "$tmp/err"; exit 1; }

# A key the compose schema does not have must be refused: the check is real.
sed 's/^  redis:$/  redis:\n    no_such_key: 1/' "$compose" > "$dockerdir/.broken-compose.yaml"
if docker-compose -f "$dockerdir/.broken-compose.yaml" config > /dev/null 2>&1; then
  rm -f "$dockerdir/.broken-compose.yaml"
  echo "FAIL: docker-compose accepted an unknown key"; exit 1
fi
rm -f "$dockerdir/.broken-compose.yaml"

/usr/bin/python3 - "$tmp/resolved.yaml" "$dockerdir" <<'PY'
import os, re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
dockerdir = sys.argv[2]
s = doc["services"]
want = {"redis", "store", "scheduler", "worker-x86", "worker-aarch64", "worker-cuda"}
assert set(s) == want, f"services {sorted(s)} != {sorted(want)}"
cmd = s["redis"]["command"]
assert cmd[cmd.index("--appendonly") + 1] == "yes", "redis must run with AOF on"
assert "ports" not in s["redis"], "redis must not be published"
assert any(v.startswith("redis-data:") for v in s["redis"]["volumes"]), "redis needs a volume"
assert any(v.startswith("store-data:") for v in s["store"]["volumes"]), "the store needs a volume"
assert "store-data" in doc["volumes"] and "redis-data" in doc["volumes"]
# The aarch64 worker is the x86 worker's image (the compiler cross-compiles).
assert s["worker-aarch64"]["image"] == s["worker-x86"]["image"], "one worker image for CPU targets"
assert s["worker-cuda"].get("profiles") == ["gpu"], "the cuda worker runs with --profile gpu only"
dev = s["worker-cuda"]["deploy"]["resources"]["reservations"]["devices"][0]
assert "gpu" in dev["capabilities"] and dev["driver"] == "nvidia", dev
build_stages = set()
for name, svc in s.items():
    if "build" not in svc:
        continue
    df = os.path.join(svc["build"]["context"], svc["build"]["dockerfile"])
    assert os.path.isfile(df), f"{name}: {df} is missing"
    text = open(df).read()
    # Buildable from a local base: the base is a build argument whose
    # default is the public Debian image.
    assert "ARG BASE=debian:bookworm\n" in text and "FROM ${BASE}" in text, f"{df}: no BASE argument"
    assert svc["build"]["args"]["BASE"] == "debian:bookworm", f"{name}: BASE defaults to {svc['build']['args']}"
    if name != "redis":
        assert "scripts/setup.sh --build" in text, f"{df} does not build with scripts/setup.sh --build"
        build_stages.add(re.search(r"FROM \$\{BASE\} AS build\n.*?\n\n", text, re.S).group(0))
for role in ("store", "scheduler", "worker-x86"):
    assert s[role]["build"]["dockerfile"] == "docker/nimble.Dockerfile"
    assert s[role]["build"]["target"] == role.split("-")[0], f"{role}: target {s[role]['build']['target']}"
assert len(build_stages) == 1, "the build stages of nimble.Dockerfile and worker-cuda.Dockerfile differ (no shared cache)"
assert "nvidia/cuda" in open(os.path.join(dockerdir, "worker-cuda.Dockerfile")).read()
sched = s["scheduler"]["command"]
for opt in ("--clients", "--workers", "--events", "--redis", "--store", "--token-file", "--metrics"):
    assert opt in sched, f"scheduler command lacks {opt}"
for w in ("worker-x86", "worker-aarch64", "worker-cuda"):
    c = s[w]["command"]
    assert c[c.index("--targets") + 1] == w.split("-", 1)[1], f"{w}: wrong --targets"
    assert c[c.index("--scheduler") + 1] == "tcp://scheduler:5556"
# CurveZMQ by default: the scheduler makes the keys in the curve-keys
# volume at its first start and admits the three workers' keys only; each
# worker mounts the volume read-only and uses its own pair.
keys = "/var/lib/nimble-keys"
assert "curve-keys" in doc["volumes"], "no curve-keys volume"
assert f"curve-keys:{keys}" in s["scheduler"]["volumes"] or f"curve-keys:{keys}:rw" in s["scheduler"]["volumes"], s["scheduler"]["volumes"]
assert sched[sched.index("--curve-secret") + 1] == f"{keys}/scheduler.secret", "scheduler without --curve-secret"
assert sched[sched.index("--worker-keys") + 1] == f"{keys}/worker-keys", "scheduler without --worker-keys"
script = s["scheduler"]["entrypoint"][2]
for w in ("worker-x86", "worker-aarch64", "worker-cuda"):
    assert f"{w}.public" in script, f"the scheduler's entrypoint does not allow {w}"
    c = s[w]["command"]
    assert c[c.index("--curve-secret") + 1] == f"{keys}/{w}.secret", f"{w}: --curve-secret"
    assert c[c.index("--scheduler-key") + 1] == f"{keys}/scheduler.public", f"{w}: --scheduler-key"
    assert f"curve-keys:{keys}:ro" in s[w]["volumes"], f"{w}: the keys volume is not read-only"
    assert c[c.index("--id") + 1] == w, f"{w}: a stable --id (an id is bound to its key)"
    assert "worker-keys" in s[w]["entrypoint"][2] and "exec nimble-worker" in s[w]["entrypoint"][2], w
assert "--keygen" in script and "exec nimble-scheduler" in script
for df in ("nimble.Dockerfile", "worker-cuda.Dockerfile"):
    assert keys in open(os.path.join(dockerdir, df)).read(), f"{df}: no {keys} owned by the nimble user"
print("compose: 6 services, AOF, volumes, one worker image for CPU targets, GPU profile, local-base builds, CurveZMQ")
PY

if [ -n "$build" ] && [ -x "$build/scheduler/nimble-scheduler" ]; then
  bash "$dockerdir/bundle.sh" "$tmp/bundle" "$build/scheduler/nimble-scheduler" > /dev/null
  env -i LD_LIBRARY_PATH="$tmp/bundle/lib" "$tmp/bundle/bin/nimble-scheduler" --help | grep -q -- "--workers EP" \
    || { echo "FAIL: the bundled scheduler does not start"; exit 1; }
  ls "$tmp/bundle/lib" | grep -q '^libzmq' || { echo "FAIL: libzmq was not bundled"; exit 1; }
  echo "bundle: the bundled nimble-scheduler starts"
fi
echo "PASS"
