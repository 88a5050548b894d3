"""KubeApi's resource.k8s.io/v1 calls against a recording HTTP server on 127.0.0.1: paths, verbs,
content types, query parameters, and how errors come back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from composer.model.models import EventSpec
from composer.shell.kube import KubeApi, KubeError


class Recorder(BaseHTTPRequestHandler):
    """Records each request; answers ``answers[(method, path)]`` (status, body), else 200 with
    the request's body (a write) or an empty list (a read)."""

    requests: list[dict[str, Any]] = []
    answers: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self.requests.append({"method": self.command, "path": url.path, "query": parse_qs(url.query),
                              "type": self.headers.get("Content-Type"), "body": body})
        status, answer = self.answers.get((self.command, url.path), (200, body or {"items": []}))
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_DELETE = do_POST = _handle

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[KubeApi, type[Recorder]]]:
    Recorder.requests, Recorder.answers = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield KubeApi(client.ApiClient(cfg)), Recorder
    finally:
        server.shutdown()
        server.server_close()


def test_slices_are_listed_by_driver_and_applied_server_side(api):
    kube, rec = api
    kube.list_resource_slices("gpu.composer.liqid.io")
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s-0"},
            "spec": {"driver": "gpu.composer.liqid.io"}}
    kube.apply_resource_slice(body)
    kube.apply_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                             "metadata": {"name": "c"}})
    listed, applied, dc = rec.requests
    assert (listed["method"], listed["path"]) == ("GET", "/apis/resource.k8s.io/v1/resourceslices")
    assert listed["query"]["fieldSelector"] == ["spec.driver=gpu.composer.liqid.io"]
    assert (applied["method"], applied["path"], applied["type"]) == (
        "PATCH", "/apis/resource.k8s.io/v1/resourceslices/s-0", "application/apply-patch+yaml")
    # the client writes Python's "True"; the API server reads query booleans with Go's
    # strconv.ParseBool, which takes it
    assert applied["query"] == {"fieldManager": ["gpu-composer"], "force": ["True"]}
    assert applied["body"] == body
    assert dc["path"] == "/apis/resource.k8s.io/v1/deviceclasses/c"
    assert dc["type"] == "application/apply-patch+yaml"


def test_claim_status_is_merge_patched_and_a_conflict_says_so(api):
    kube, rec = api
    path = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c1/status"
    patch = {"metadata": {"resourceVersion": "41"}, "status": {"devices": []}}
    kube.patch_resource_claim_status("ml", "c1", patch)
    (req,) = rec.requests
    assert (req["method"], req["path"], req["type"], req["body"]) == (
        "PATCH", path, "application/merge-patch+json", patch)
    rec.answers[("PATCH", path)] = (409, {"kind": "Status", "message": "the object has been modified"})
    with pytest.raises(KubeError) as err:
        kube.patch_resource_claim_status("ml", "c1", patch)
    assert err.value.conflict and "has been modified" in str(err.value)


def test_deleting_a_slice_already_gone_is_no_error_other_failures_are(api):
    kube, rec = api
    rec.answers[("DELETE", "/apis/resource.k8s.io/v1/resourceslices/gone")] = (404, {"message": "not found"})
    kube.delete_resource_slice("gone")
    rec.answers[("DELETE", "/apis/resource.k8s.io/v1/resourceslices/s-1")] = (403, {"message": "forbidden"})
    with pytest.raises(KubeError, match="DELETE resourceslices/s-1 -> 403"):
        kube.delete_resource_slice("s-1")


def test_claims_are_listed_in_all_namespaces_and_an_event_names_a_claim_with_its_api_version(api):
    kube, rec = api
    kube.list_resource_claims()
    kube.create_event(EventSpec("ResourceClaim", "ml", "c1", "uid-c1", "Normal", "Composed", "m"))
    listed, event = rec.requests
    assert listed["path"] == "/apis/resource.k8s.io/v1/resourceclaims"
    assert event["path"] == "/api/v1/namespaces/ml/events"
    assert event["body"]["involvedObject"] == {
        "kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1", "name": "c1", "uid": "uid-c1",
        "namespace": "ml"}
