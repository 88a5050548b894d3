"""The lab's GPU-Operator stand-in: delay, labels and capacity, removal, device-plugin quirk,
device files for the DRA kubelet plugin."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from kubernetes.client.exceptions import ApiException

from domain.gfd import gfd_product_name as gfd_product
from lab.gpu_agent.agent import (
    Advert,
    AttachedGpu,
    DirectorReader,
    DirectorReadError,
    GpuAgent,
    advert_for,
)
from lab.gpu_agent.device_files import NULL_DEVICE, DeviceFiles


class FakeDirector:
    """``machines``: machine -> product names of its GPUs; ``names``: machine -> their Director
    names (default ``GPU_<i>``)."""

    def __init__(self) -> None:
        self.machines: dict[str, list[str]] = {}
        self.names: dict[str, list[str]] = {}

    def attached_gpus(self) -> dict[str, list[AttachedGpu]]:
        out = {}
        for machine, products in self.machines.items():
            names = self.names.get(machine) or [f"GPU_{i}" for i in range(len(products))]
            out[machine] = [AttachedGpu(n, p) for n, p in zip(names, products, strict=True)]
        return out


class FakeCore:
    def __init__(self, names: list[str]) -> None:
        self.nodes = {
            n: {
                "metadata": {"name": n, "labels": {}},
                "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}},
            }
            for n in names
        }
        self.pods: dict[str, dict[str, Any]] = {}
        self.namespaces: set[str] = set()

    def list_node(self, label_selector: Any = None, _preload_content: bool = True) -> Any:
        return SimpleNamespace(data=json.dumps({"items": list(self.nodes.values())}).encode())

    def patch_node_status(self, name: str, body: dict[str, Any], _content_type: str = "") -> None:
        for key in ("capacity", "allocatable"):
            tgt = self.nodes[name]["status"][key]
            for k, v in body["status"][key].items():
                if v is None:
                    tgt.pop(k, None)
                else:
                    tgt[k] = v

    def patch_node(self, name: str, body: dict[str, Any], _content_type: str = "") -> None:
        labels = self.nodes[name]["metadata"]["labels"]
        for k, v in body["metadata"]["labels"].items():
            if v is None:
                labels.pop(k, None)
            else:
                labels[k] = v

    def read_namespaced_pod(self, name: str, ns: str) -> Any:
        if name not in self.pods:
            raise ApiException(status=404)
        return self.pods[name]

    def read_namespace(self, ns: str) -> Any:
        if ns not in self.namespaces:
            raise ApiException(status=404)

    def create_namespace(self, body: dict[str, Any]) -> None:
        self.namespaces.add(body["metadata"]["name"])

    def create_namespaced_pod(self, ns: str, body: dict[str, Any]) -> None:
        self.pods[body["metadata"]["name"]] = body


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def test_gfd_names_and_adverts():
    assert gfd_product("NVIDIA A100-PCIE-40GB") == "NVIDIA-A100-PCIE-40GB"
    assert advert_for([]) == Advert()
    assert advert_for(["Tesla-T4", "Tesla-T4"]) == Advert(2, "Tesla-T4")


def test_advertises_after_the_delay_and_removes_on_detach():
    core, director, clock = FakeCore(["n1"]), FakeDirector(), Clock()
    agent = GpuAgent(core, director, advertise_delay_seconds=1.0, clock=clock)
    director.machines["n1"] = ["Tesla-T4", "Tesla-T4"]
    assert agent.step() == {}
    assert agent.next_due(0.1) == 0.1  # due in 1 s: poll as usual
    clock.t = 0.5
    assert agent.step() == {}
    clock.t = 0.95
    assert agent.next_due(0.1) == pytest.approx(0.05)  # due before the next poll: wait only that long
    clock.t = 1.1
    assert agent.step() == {"n1": Advert(2, "Tesla-T4")}
    n = core.nodes["n1"]
    assert n["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert n["metadata"]["labels"] == {
        "nvidia.com/gpu.product": "Tesla-T4",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.present": "true",
    }
    assert agent.step() == {}  # nothing changed
    director.machines.clear()
    clock.t = 5.0
    agent.step()
    clock.t = 6.1
    assert agent.step() == {"n1": Advert()}
    assert "nvidia.com/gpu" not in n["status"]["allocatable"] and n["metadata"]["labels"] == {}
    assert n["status"]["allocatable"]["cpu"] == "8"


def test_plugin_restart_quirk():
    core, director, clock = FakeCore(["n1"]), FakeDirector(), Clock()
    agent = GpuAgent(
        core,
        director,
        advertise_delay_seconds=0.0,
        plugin_restart_quirk=True,
        plugin_namespace="gpu-op",
        clock=clock,
    )
    agent.step()
    assert "nvidia-device-plugin-n1" in core.pods and core.namespaces == {"gpu-op"}
    clock.t = 1.0
    director.machines["n1"] = ["Tesla-T4"]
    for t in (1.0, 2.0, 30.0):
        clock.t = t
        assert agent.step() == {}  # hot-plugged: not advertised while the old plugin pod runs
        assert agent.next_due(0.1) == 0.1  # held back: poll at the usual pace, not in a busy loop
    del core.pods["nvidia-device-plugin-n1"]  # the composer restarts it; the "DaemonSet" recreates it
    clock.t = 31.0
    assert agent.step() == {"n1": Advert(1, "Tesla-T4")}
    assert core.nodes["n1"]["status"]["allocatable"]["nvidia.com/gpu"] == "1"


def test_director_reader_parses_the_envelope(monkeypatch):
    calls = []

    def fake_get(self, url, params=None, timeout=None):
        calls.append(url.rsplit("/", 1)[-1])
        data = {
            "device/info/gpu": [{"name": "gpu0", "model": "Tesla T4"}, {"name": "gpu1", "model": "Tesla T4"}],
            "predevice": [{"name": "gpu0", "mname": "n1"}, {"name": "gpu1", "mname": "n/a"}],
            "group": [{"grp_id": 1}],
        }
        key = url.split("/liqid/api/v2/", 1)[-1]
        assert key != "predevice" or params["grp_id"] == "1"  # the Director wants grp_id
        return SimpleNamespace(
            status_code=200, json=lambda: {"response": {"code": 0, "errors": None, "data": data[key]}}
        )

    monkeypatch.setattr(requests.Session, "get", fake_get)
    r = DirectorReader("http://d:8080", username="u", password="p")
    assert r.attached() == {"n1": ["Tesla-T4"]}
    assert r.attached_gpus() == {"n1": [AttachedGpu("gpu0", "Tesla-T4")]}

    def failing(self, url, params=None, timeout=None):
        return SimpleNamespace(
            status_code=200, json=lambda: {"response": {"code": 1, "errors": [{"message": "x"}]}}
        )

    monkeypatch.setattr(requests.Session, "get", failing)
    with pytest.raises(DirectorReadError):
        r.attached()


def test_director_reader_reads_models_only_for_gpus_it_has_not_seen(monkeypatch):
    calls: list[str] = []
    state = {
        "device/info/gpu": [{"name": "gpu0", "model": "Tesla T4"}],
        "predevice": [{"name": "gpu0", "mname": "n1"}],
        "group": [{"grp_id": 1}],
    }

    def fake_get(self, url, params=None, timeout=None):
        key = url.split("/liqid/api/v2/", 1)[-1]
        calls.append(key)
        return SimpleNamespace(
            status_code=200, json=lambda: {"response": {"code": 0, "errors": None, "data": state[key]}}
        )

    monkeypatch.setattr(requests.Session, "get", fake_get)
    r = DirectorReader("http://d:8080", username="u", password="p")
    assert r.attached() == {"n1": ["Tesla-T4"]}
    assert r.attached() == {"n1": ["Tesla-T4"]}
    assert calls.count("device/info/gpu") == 1 and calls.count("predevice") == 2
    state["device/info/gpu"].append({"name": "gpu9", "model": "NVIDIA A100-PCIE-40GB"})
    state["predevice"].append({"name": "gpu9", "mname": "n2"})  # a GPU installed since
    assert r.attached() == {"n1": ["Tesla-T4"], "n2": ["NVIDIA-A100-PCIE-40GB"]}
    assert calls.count("device/info/gpu") == 2


def test_agent_takes_current_adverts_from_a_watch_instead_of_listing():
    core, director, clock = FakeCore(["n1"]), FakeDirector(), Clock()
    core.list_node = None  # type: ignore[assignment]  # listing would fail: the watch is used
    watched = {"n1": Advert()}
    agent = GpuAgent(core, director, advertise_delay_seconds=0.0, clock=clock, adverts=lambda: watched)
    director.machines["n1"] = ["Tesla-T4"]
    assert agent.step() == {"n1": Advert(1, "Tesla-T4")}
    watched["n1"] = Advert(1, "Tesla-T4")  # the watch delivered the change
    assert agent.step() == {}


def test_dra_mode_writes_gfd_labels_only_and_reads_its_count_back_from_them():
    """A node served through DRA must keep ``nvidia.com/gpu`` capacity at 0 (else the scheduler
    serves the pod's request from the device plugin's capacity, not from DRA)."""
    core, director, clock = FakeCore(["n1"]), FakeDirector(), Clock()
    agent = GpuAgent(core, director, advertise_delay_seconds=0.0, dra=True, clock=clock)
    director.machines["n1"] = ["Tesla-T4", "Tesla-T4"]
    assert agent.step() == {"n1": Advert(2, "Tesla-T4")}
    n = core.nodes["n1"]
    assert "nvidia.com/gpu" not in n["status"]["capacity"]
    assert "nvidia.com/gpu" not in n["status"]["allocatable"]
    assert n["metadata"]["labels"]["nvidia.com/gpu.count"] == "2"
    assert agent.step() == {}  # the labels are read back as the current advert: nothing to redo
    director.machines["n1"] = ["Tesla-T4"]
    assert agent.step() == {"n1": Advert(1, "Tesla-T4")}
    assert n["metadata"]["labels"]["nvidia.com/gpu.count"] == "1"
    director.machines.clear()
    assert agent.step() == {"n1": Advert()}
    assert "nvidia.com/gpu.count" not in n["metadata"]["labels"]


def _device_files(root: Path) -> dict[str, list[str]]:
    """machine -> device file names under ``root``; each is checked to be a character device
    with ``/dev/null``'s numbers (a symbolic link to it when the test may not mknod)."""
    out = {}
    for d in sorted(root.iterdir()):
        out[d.name] = sorted(p.name for p in d.iterdir())
        for p in d.iterdir():
            st = os.stat(p)
            assert stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == NULL_DEVICE
    return out


def test_device_files_follow_the_attachments_by_dra_device_name(tmp_path):
    files = DeviceFiles(tmp_path / "gpus")
    assert files.sync({}) == {}  # nothing attached, no directory needed
    changes = files.sync({"mgmt-1": ["GPU_7", "gpu8"], "n2": ["GPU_1", "??"]})
    assert changes == {"mgmt-1": (["gpu-7", "gpu8"], []), "n2": (["gpu-1"], [])}  # "??" makes no name
    assert _device_files(tmp_path / "gpus") == {"mgmt-1": ["gpu-7", "gpu8"], "n2": ["gpu-1"]}
    assert files.sync({"mgmt-1": ["GPU_7", "gpu8"], "n2": ["GPU_1"]}) == {}  # nothing to do
    assert files.sync({"mgmt-1": ["GPU_7"]}) == {"mgmt-1": ([], ["gpu8"]), "n2": ([], ["gpu-1"])}
    assert _device_files(tmp_path / "gpus") == {"mgmt-1": ["gpu-7"], "n2": []}  # n2's directory stays


def test_agent_keeps_device_files_at_once_for_every_machine(tmp_path):
    core, director, clock = FakeCore(["n1"]), FakeDirector(), Clock()
    agent = GpuAgent(core, director, advertise_delay_seconds=5.0, clock=clock,
                     device_files=DeviceFiles(tmp_path))
    director.machines = {"n1": ["Tesla-T4"], "mgmt-1": ["Tesla-T4"]}
    director.names = {"n1": ["GPU_3"], "mgmt-1": ["GPU_7"]}
    assert agent.step() == {}  # the advert waits for its delay; the files do not
    assert _device_files(tmp_path) == {"mgmt-1": ["gpu-7"], "n1": ["gpu-3"]}  # mgmt-1 has no Node here
    director.machines = {}
    agent.step()
    assert _device_files(tmp_path) == {"mgmt-1": [], "n1": []}



def test_without_mknod_rights_the_device_file_is_a_link_to_dev_null(tmp_path, monkeypatch):
    def refused(*args: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "mknod", refused)
    DeviceFiles(tmp_path).sync({"mgmt-1": ["GPU_7"]})
    assert os.readlink(tmp_path / "mgmt-1" / "gpu-7") == "/dev/null"
    assert _device_files(tmp_path) == {"mgmt-1": ["gpu-7"]}
