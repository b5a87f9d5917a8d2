"""nimble.fetch against a real nimble-store on loopback: the artifact is
pushed over the OCI distribution API with the standard library (as any OCI
client would), fetched into a verified cache, run, and fetched again from
the cache with the store gone."""
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import nimble
from conftest import BUILD, TARGET, assert_matches

STORE_BIN = os.environ.get("NIMBLE_STORE_BIN",
                           os.path.join(BUILD, "artifact-store", "server", "nimble-store"))
TOKEN = "python-test-token"


@pytest.fixture
def store(tmp_path):
    if not os.path.isfile(STORE_BIN):
        pytest.skip("no nimble-store at %s (set NIMBLE_STORE_BIN)" % STORE_BIN)
    from nimble import _capi
    if _capi.fetch_library() is None:
        pytest.skip(_capi.fetch_error())
    (tmp_path / "tokens").write_text(TOKEN + "\n")
    ready = tmp_path / "ready"
    log = open(tmp_path / "store.log", "w")
    proc = subprocess.Popen([STORE_BIN, "--listen", "127.0.0.1:0", "--root", str(tmp_path / "root"),
                             "--token-file", str(tmp_path / "tokens"), "--ready-file", str(ready)],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), "nimble-store did not start: %s" % (tmp_path / "store.log").read_text()
        yield "http://" + ready.read_text().strip(), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def request(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.headers, r.read()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push(base, repo, tag, parts_dir):
    """Pushes `nimble compile --emit-parts` output as an artifact (docs/artifacts.md)."""
    def blob(data):
        d = digest(data)
        status, _, _ = request("POST", "%s/v2/%s/blobs/uploads/?digest=%s" % (base, repo, d), data,
                               {"Content-Type": "application/octet-stream"})
        assert status == 201
        return d

    with open(os.path.join(parts_dir, "parts.json")) as f:
        layers = json.load(f)["layers"]
    config = open(os.path.join(parts_dir, "config.json"), "rb").read()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.nimble.executable.v1",
        "config": {"mediaType": "application/vnd.nimble.executable.config.v1+json",
                   "digest": blob(config), "size": len(config)},
        "layers": [],
    }
    for layer in layers:
        data = open(os.path.join(parts_dir, layer["file"]), "rb").read()
        manifest["layers"].append({"mediaType": layer["mediaType"], "digest": blob(data),
                                   "size": len(data),
                                   "annotations": {"org.opencontainers.image.title": layer["file"]}})
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    status, _, _ = request("PUT", "%s/v2/%s/manifests/%s" % (base, repo, tag), body,
                           {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    assert status == 201
    return digest(body), len(layers) + 1


def test_fetch_runs_the_artifact_and_then_works_from_the_cache(store, mlp, compile_model, tmp_path,
                                                               monkeypatch):
    base, proc = store
    ref, _ = mlp
    manifest_digest, blobs = push(base, "team/mlp", TARGET, compile_model(ref.onnx, parts=True))
    cache = tmp_path / "cache"
    case = ref.cases[1]

    exe = nimble.fetch("%s/team/mlp:%s" % (base, TARGET), cache_dir=cache)
    assert exe.fetch_stats["manifest_digest"] == manifest_digest
    assert exe.fetch_stats["blobs_fetched"] >= blobs - 1  # the config blob may be skipped
    assert_matches(exe.run(**ref.inputs(case))["y"], ref.outputs(case)["y"], ref.rtol, ref.atol,
                   "y of the fetched mlp")

    # By digest, and as NAME:TAG in the store $NIMBLE_STORE names: from the cache.
    monkeypatch.setenv("NIMBLE_STORE", base)
    again = nimble.fetch("team/mlp:" + TARGET, cache_dir=cache)
    assert again.fetch_stats["blobs_fetched"] == 0
    assert again.fetch_stats["blobs_from_cache"] == exe.fetch_stats["blobs_fetched"]
    by_digest = nimble.fetch("%s/team/mlp@%s" % (base, manifest_digest), cache_dir=cache)
    assert by_digest.fetch_stats["manifest_digest"] == manifest_digest

    with pytest.raises(nimble.NotFoundError) as e:
        nimble.fetch("%s/team/mlp:no-such-tag" % base, cache_dir=cache)
    assert "no-such-tag" in e.value.message

    # The store goes away: the tag resolves through the cache's record.
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    offline = nimble.fetch("%s/team/mlp:%s" % (base, TARGET), cache_dir=cache, max_attempts=1)
    assert offline.fetch_stats["offline"] and offline.fetch_stats["manifest_digest"] == manifest_digest
    assert_matches(offline.run(**ref.inputs(case))["y"], ref.outputs(case)["y"], ref.rtol, ref.atol,
                   "y of the mlp loaded from the cache offline")


def test_a_damaged_blob_is_refused_as_data_loss(store, mlp, compile_model, tmp_path):
    base, _ = store
    ref, _ = mlp
    parts = compile_model(ref.onnx, parts=True)
    push(base, "team/mlp", TARGET, parts)
    cache = tmp_path / "cache"
    nimble.fetch("%s/team/mlp:%s" % (base, TARGET), cache_dir=cache)
    # Damage every cached blob; offline there is no good copy to fall back on.
    damaged = 0
    for root, _, files in os.walk(cache):
        for name in files:
            p = os.path.join(root, name)
            if len(name) == 64 and os.path.getsize(p) > 0:
                with open(p, "r+b") as f:
                    b = f.read(1)
                    f.seek(0)
                    f.write(bytes([b[0] ^ 0xFF]))
                damaged += 1
    assert damaged > 0
    with pytest.raises(nimble.DataLossError) as e:
        nimble.fetch("%s/team/mlp:%s" % (base, TARGET), cache_dir=cache, offline=True)
    assert isinstance(e.value, nimble.DataLossError), e.value
    assert "is damaged: its bytes hash to sha256:" in e.value.message


def test_trusted_keys_refuse_an_unsigned_artifact_and_no_keys_warn(store, mlp, compile_model, tmp_path,
                                                                   monkeypatch):
    """The publisher check (docs/fetch.md, "Trust"): a farm key made by
    `nimble keys generate`, an artifact pushed without a signature."""
    base, _ = store
    ref, _ = mlp
    push(base, "team/mlp", TARGET, compile_model(ref.onnx, parts=True))
    cli = os.environ.get("NIMBLE_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("the nimble CLI is not built")
    line = subprocess.run([cli, "keys", "generate", str(tmp_path / "farm.key"), "farm"], check=True,
                          capture_output=True, text=True).stdout
    assert line.startswith("ed25519 ") and line.endswith(" farm\n")
    keys = tmp_path / "trusted.keys"
    keys.write_text(line)
    reference = "%s/team/mlp:%s" % (base, TARGET)
    monkeypatch.delenv("NIMBLE_TRUSTED_KEYS", raising=False)
    with pytest.raises(nimble.PermissionDeniedError) as e:
        nimble.fetch(reference, cache_dir=tmp_path / "cache", trusted_keys=keys)
    assert reference in e.value.message and "unsigned" in e.value.message
    assert str(keys) in e.value.message
    monkeypatch.setenv("NIMBLE_TRUSTED_KEYS", str(keys))
    with pytest.raises(nimble.PermissionDeniedError):
        nimble.fetch(reference, cache_dir=tmp_path / "cache")
    monkeypatch.delenv("NIMBLE_TRUSTED_KEYS")
    with pytest.warns(UserWarning, match="the publisher of this artifact is not verified"):
        nimble.fetch(reference, cache_dir=tmp_path / "cache")
