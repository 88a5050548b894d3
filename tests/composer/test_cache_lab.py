"""The watch-fed cluster cache against the lab's real kube-apiserver.

Objects are created under a unique label / namespace so nothing else on the lab is touched.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config

from composer.model import annotations as ann
from composer.shell.cache import ClusterCache
from composer.shell.kube import KubeApi

pytestmark = pytest.mark.lab


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not seen within {timeout} s")


@pytest.fixture
def world(lab_api: Any) -> Iterator[dict[str, str]]:
    sid = uuid.uuid4().hex[:6]
    core = client.CoreV1Api(lab_api)
    names = {"label": f"composer-cache-{sid}", "node": f"cache-node-{sid}", "ns": f"cache-ns-{sid}"}
    yield names
    for call in (
        lambda: core.delete_node(names["node"]),
        lambda: core.delete_namespace(names["ns"]),
    ):
        try:
            call()
        except client.ApiException:
            pass


def _node(name: str, label: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {label: "yes"}}}


def _gpu_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
            "nodeSelector": {"composer-cache-test": "nowhere"},
        },
    }


def test_the_cache_follows_the_api_server_and_wakes_on_changes(lab_api, world):
    core = client.CoreV1Api(lab_api)
    woke = threading.Event()
    cache = ClusterCache(lab_api, node_selector=f"{world['label']}=yes", on_change=woke.set)
    cache.start()
    try:
        assert cache.wait_synced(30)
        assert cache.read()[1] == ()  # the selector matches nothing yet
        woke.clear()
        core.create_node(_node(world["node"], world["label"]))
        eventually(lambda: [n for n in cache.read()[1] if n.name == world["node"]])
        assert woke.is_set()

        core.create_namespace({"metadata": {"name": world["ns"], "labels": {ann.POOL_LABEL: "team-x"}}})
        eventually(lambda: cache.read()[2].get(world["ns"]) == "team-x")

        eventually(lambda: _has_default_sa(core, world["ns"]))
        core.create_namespaced_pod(world["ns"], _gpu_pod("wants-a-gpu"))
        eventually(lambda: [p for p in cache.read()[0] if p.key == f"{world['ns']}/wants-a-gpu"])
        core.delete_namespaced_pod("wants-a-gpu", world["ns"], grace_period_seconds=0)
        eventually(lambda: not [p for p in cache.read()[0] if p.key == f"{world['ns']}/wants-a-gpu"])

        # read-your-writes: the API server's answer is visible at once
        written = KubeApi(lab_api).patch_node_annotations(world["node"], {ann.DEVICES: "gpu7"})
        assert written is not None
        cache.assume(written)
        (mine,) = [n for n in cache.read()[1] if n.name == world["node"]]
        assert set(mine.record.devices) == {"gpu7"}
    finally:
        cache.stop()


def test_stop_is_prompt_and_silent_on_a_quiet_cluster(lab_api, world, caplog):
    """No event arrives after the list (nothing matches the selectors): the old stop blocked
    until the watch's next event. Stopping is our own doing, so nothing is logged as failed."""
    cache = ClusterCache(lab_api, node_selector=f"{world['label']}=yes")
    cache.start()
    assert cache.wait_synced(30)
    time.sleep(1.0)  # the watches are open and idle
    caplog.set_level("WARNING", logger="composer")
    t0 = time.monotonic()
    cache.stop(wait_seconds=0.5)
    assert time.monotonic() - t0 < 2.0  # bounded by wait_seconds, not by the next event
    time.sleep(1.0)  # a watch thread that ends late must not log either
    assert [r for r in caplog.records if "watch failed" in r.getMessage()] == []


def _has_default_sa(core: client.CoreV1Api, ns: str) -> bool:
    try:
        core.read_namespaced_service_account("default", ns)
        return True
    except client.ApiException:
        return False


def test_the_charts_rbac_lets_the_cache_list_and_watch(chart_identity, lab_api, world):
    """The chart's ClusterRole (nodes, namespaces and pods: list and watch) is enough: objects
    created after the first list reach the cache, so the watches work too."""
    core = client.CoreV1Api(lab_api)
    api = config.new_client_from_config(config_file=str(chart_identity.kubeconfig))
    cache = ClusterCache(api)
    cache.start()
    try:
        assert cache.wait_synced(30), "the composer's ServiceAccount could not list"
        core.create_node(_node(world["node"], world["label"]))
        core.create_namespace({"metadata": {"name": world["ns"], "labels": {ann.POOL_LABEL: "team-y"}}})
        eventually(lambda: [n for n in cache.read()[1] if n.name == world["node"]])
        eventually(lambda: cache.read()[2].get(world["ns"]) == "team-y")
        eventually(lambda: _has_default_sa(core, world["ns"]))
        core.create_namespaced_pod(world["ns"], _gpu_pod("seen-by-watch"))
        eventually(lambda: [p for p in cache.read()[0] if p.key == f"{world['ns']}/seen-by-watch"])
    finally:
        cache.stop()
