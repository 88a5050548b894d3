"""lab.kube.pod_ready: the one readiness predicate of a Pod object for the lab and the tests."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from lab.kube import pod_ready


def _pod(phase: str, ready: dict[str, bool], *, deleting: bool = False) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", deletion_timestamp=datetime.now(UTC) if deleting else None),
        status=client.V1PodStatus(phase=phase, container_statuses=[
            client.V1ContainerStatus(name=n, ready=r, image="i", image_id="", restart_count=0)
            for n, r in ready.items()
        ]),
    )


def test_a_running_pod_is_ready_when_its_containers_are() -> None:
    assert pod_ready(_pod("Running", {"composer": True, "sidecar": True}))
    assert not pod_ready(_pod("Running", {"composer": True, "sidecar": False}))
    assert pod_ready(_pod("Running", {"composer": True, "sidecar": False}), container="composer")
    assert not pod_ready(_pod("Running", {"composer": False, "sidecar": True}), container="composer")


def test_a_pod_not_running_terminating_or_without_statuses_is_not_ready() -> None:
    assert not pod_ready(_pod("Pending", {"composer": True}))
    assert not pod_ready(_pod("Running", {"composer": True}, deleting=True))
    assert not pod_ready(_pod("Running", {}))
    assert not pod_ready(_pod("Running", {"sidecar": True}), container="composer")
