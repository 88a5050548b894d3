"""The admission webhook over real HTTPS: AdmissionReview in, JSONPatch out, bad bodies refused,
a rotated certificate served without a restart."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
import requests

from composer.model import annotations as ann
from composer.shell.pod_steps import LOGGER, parse
from composer.shell.webhook import PATH, serve_webhook
from lab.pki import ensure_pki


def review(namespace: str = "ml", limits: dict | None = None) -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": namespace,
            "object": {
                "metadata": {"generateName": "train-"},
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": limits or {"nvidia.com/gpu": "2"}}}]
                },
            },
        },
    }


@pytest.fixture
def served(tmp_path: Path):
    pki = ensure_pki(tmp_path / "a")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki / "apiserver.crt", cert)
    shutil.copy(pki / "apiserver.key", key)
    gated: list[int] = []
    server = serve_webhook(
        "127.0.0.1",
        0,
        cert_file=cert,
        key_file=key,
        namespaces=frozenset({"ml"}),
        on_gated=lambda: gated.append(1),
    )
    url = f"https://127.0.0.1:{server.server_address[1]}{PATH}"
    try:
        yield url, pki / "ca.crt", gated, (cert, key), tmp_path
    finally:
        server.shutdown()


def test_gpu_pod_gets_the_gate_and_others_pass_unchanged(served):
    url, ca, gated, _, _ = served
    body = review()
    answer = requests.post(url, json=body, verify=str(ca), timeout=5).json()
    resp = answer["response"]
    assert answer["kind"] == "AdmissionReview" and resp["uid"] == body["request"]["uid"] and resp["allowed"]
    patch = json.loads(base64.b64decode(resp["patch"]))
    assert patch == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ann.GATE}]}]
    assert gated == [1]
    for other in (review(namespace="elsewhere"), review(limits={"cpu": "1"})):
        resp = requests.post(url, json=other, verify=str(ca), timeout=5).json()["response"]
        assert resp["allowed"] and "patch" not in resp
    assert gated == [1]


def test_bad_requests_are_refused_clearly(served):
    url, ca, _, _, _ = served
    r = requests.post(url, data=b"{not json", verify=str(ca), timeout=5)
    assert r.status_code == 400 and "bad AdmissionReview" in r.json()["message"]
    r = requests.post(url, json={"request": {}}, verify=str(ca), timeout=5)
    assert r.status_code == 400 and "request.uid" in r.json()["message"]
    assert (
        requests.post(url.replace(PATH, "/other"), json=review(), verify=str(ca), timeout=5).status_code
        == 404
    )


def test_rotated_certificate_is_served_without_restart(served):
    url, ca, _, (cert, key), tmp = served
    new = ensure_pki(tmp / "b")
    shutil.copy(new / "apiserver.key", key)
    shutil.copy(new / "apiserver.crt", cert)
    later = time.time() + 5
    os.utime(cert, (later, later))  # the mtime changes even within one clock tick
    os.utime(key, (later, later))
    r = requests.post(url, json=review(), verify=str(new / "ca.crt"), timeout=5)
    assert r.status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.post(url, json=review(), verify=str(ca), timeout=5)


def test_each_gated_pod_logs_its_admitted_step_with_the_answer_time(served, caplog):
    url, ca, _, _, _ = served
    caplog.set_level(logging.INFO, logger=LOGGER)
    named = review()
    named["request"]["name"] = "train-0"
    before = time.time()
    requests.post(url, json=named, verify=str(ca), timeout=5)
    after = time.time()
    requests.post(url, json=review(limits={"cpu": "1"}), verify=str(ca), timeout=5)  # not gated: no line
    deadline = time.monotonic() + 5  # the handler thread logs before it answers; the record is there
    while time.monotonic() < deadline and not caplog.records:
        time.sleep(0.01)
    lines = [parse(r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1
    assert lines[0]["step"] == "admitted" and lines[0]["pod"] == "ml/train-0"
    assert before <= lines[0]["t"] <= after
