"""DRA mode as ``python -m composer`` runs it: the ``mode`` setting and its rules, the start check
of the API server (composer.dra.support, composer.run.dra_start), the wiring that picks the mode,
and DRA rounds in the one control loop (composer.run.loop.run_loop) over the in-memory fakes."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from composer.dra import support
from composer.dra.deviceclass import CLASS_NAME, EXTENDED_RESOURCE
from composer.dra.slices import ATTACHED, DRIVER, VISIBLE_ON_NODE
from composer.run.controller import Controller
from composer.run.dra_loop import DraController
from composer.run.dra_start import DraUnsupported, start_dra
from composer.run.loop import run_loop
from composer.run.wiring import build, wire_dra
from composer.shell.config import Settings
from composer.shell.kube import KubeError
from domain.composer_mode import DEFAULT_MODE, MODES
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeWorld, node, pod
from tests.composer.test_dra_driver import FakeDraKube, allocate

BASE: dict[str, Any] = {"director_url": "http://127.0.0.1:1", "director_password": "pw"}


# -- the setting -------------------------------------------------------------------------------
def test_mode_defaults_to_deviceplugin_and_takes_the_modes() -> None:
    assert Settings(**BASE).mode == DEFAULT_MODE == "deviceplugin"
    assert MODES == ("deviceplugin", "dra")
    for mode in MODES:
        assert Settings(**BASE, mode=mode).mode == mode


def test_an_unknown_mode_is_refused_naming_the_key_and_the_modes() -> None:
    with pytest.raises(ValidationError) as err:
        Settings(**BASE, mode="gpu-operator")
    text = str(err.value)
    assert "mode" in text and "'deviceplugin'" in text and "'dra'" in text


def test_mode_dra_never_restarts_a_device_plugin() -> None:
    assert Settings(**BASE).policy().restart_device_plugin is True
    assert Settings(**BASE, mode="dra", restart_device_plugin=True).policy().restart_device_plugin is False


def test_mode_dra_refuses_the_gating_webhook() -> None:
    settings = {**BASE, "webhook_cert_file": "c", "webhook_key_file": "k", "webhook_port": 9443}
    assert Settings(**settings).webhook_port == 9443  # device-plugin mode serves it
    with pytest.raises(ValidationError, match="webhook_port must be 0 with mode dra"):
        Settings(**settings, mode="dra")


def test_the_mode_flag_reaches_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from composer.shell.config import load

    monkeypatch.setenv("COMPOSER_DIRECTOR_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "pw")
    assert load(["--mode", "dra"]).mode == "dra"
    monkeypatch.setenv("COMPOSER_MODE", "dra")
    assert load([]).mode == "dra"


# -- the start check ---------------------------------------------------------------------------
@dataclass
class StartKube:
    """The API server of the start check: ``drops`` names the fields it strips (a gate off),
    ``status`` the error it answers with (None: it answers)."""

    drops: frozenset[str] = frozenset()
    status: int | None = None
    calls: list[tuple[str, str, bool]] = field(default_factory=list)

    def _answer(self, kind: str, body: Mapping[str, Any], dry_run: bool) -> dict[str, Any]:
        self.calls.append((kind, body["metadata"]["name"], dry_run))
        if self.status is not None:
            raise KubeError("APPLY", f"{kind}/{body['metadata']['name']}", self.status, "refused")
        out = copy.deepcopy(dict(body))
        if "extendedResourceName" in self.drops:
            out["spec"].pop("extendedResourceName", None)
        for d in out["spec"].get("devices", []):
            for f in self.drops & {"bindsToNode", "bindingConditions", "bindingFailureConditions"}:
                d.pop(f, None)
        return out

    def apply_device_class(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._answer("deviceclasses", body, dry_run)

    def apply_resource_slice(self, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._answer("resourceslices", body, dry_run)


def test_a_supporting_api_server_gets_the_device_class_after_two_dry_runs() -> None:
    kube = StartKube()
    stored = start_dra(kube)
    assert kube.calls == [
        ("deviceclasses", support.PROBE_NAME, True),
        ("resourceslices", support.PROBE_NAME, True),
        ("deviceclasses", CLASS_NAME, False),
    ]
    assert stored["spec"]["extendedResourceName"] == EXTENDED_RESOURCE
    assert stored["spec"]["selectors"] == [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]


@pytest.mark.parametrize(
    ("drops", "gate"),
    [
        ({"extendedResourceName"}, "DRAExtendedResource"),
        ({"bindsToNode", "bindingConditions", "bindingFailureConditions"}, "DRADeviceBindingConditions"),
        ({"bindingConditions"}, "DRADeviceBindingConditions"),
    ],
)
def test_a_gate_off_is_refused_by_name_before_the_device_class_is_applied(drops: set[str], gate: str) -> None:
    kube = StartKube(drops=frozenset(drops))
    with pytest.raises(DraUnsupported, match=gate):
        start_dra(kube)
    assert all(dry for _, _, dry in kube.calls)  # nothing stored


def test_an_api_server_without_resource_k8s_io_v1_is_refused() -> None:
    with pytest.raises(DraUnsupported, match="does not serve resource.k8s.io/v1"):
        start_dra(StartKube(status=404))
    with pytest.raises(DraUnsupported, match="dra.mode: dra"):
        start_dra(StartKube(status=403))
    with pytest.raises(KubeError):  # a server error: no verdict on the API server, raised as is
        start_dra(StartKube(status=503))


def test_missing_features_reads_both_answers() -> None:
    cls, probe = support.probe_device_class(), support.probe_slice()
    assert support.missing_features(cls, probe) == ()
    assert probe["spec"]["devices"][0]["bindsToNode"] is True
    bare = copy.deepcopy(probe)
    bare["spec"]["devices"][0] = {"name": "probe"}
    (why,) = support.missing_features(cls, bare)
    assert why.startswith("DRADeviceBindingConditions") and "bindsToNode" in why


# -- the wiring and the loop -------------------------------------------------------------------
def _kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    return str(path)


def test_the_wiring_builds_the_controller_of_the_mode(tmp_path: Path) -> None:
    kc = _kubeconfig(tmp_path)
    dra = build(Settings(**BASE, kubeconfig=kc, mode="dra"))
    assert isinstance(dra.controller, DraController)
    assert dra.cache is not None and {i.name for i in dra.cache._all} >= {"resourceclaims", "resourceslices"}
    assert dra.controller.driver.source is dra.cache
    assert dra.controller.driver.executor.on_node_written == dra.cache.assume
    plugin = build(Settings(**BASE, kubeconfig=kc))
    assert isinstance(plugin.controller, Controller)


@dataclass
class Script:
    """Stands in for the readiness probe, which the loop beats after every round: runs the test's
    next step there (on the loop's thread, so the fakes are never touched by two threads) and
    stops the loop when the steps are done."""

    stop: threading.Event
    steps: list[Any]
    rounds: int = 0

    def beat(self, *, ready: bool, detail: str) -> None:
        self.rounds += 1
        if self.steps:
            self.steps.pop(0)()
        if not self.steps:
            self.stop.set()


def test_a_dra_composer_composes_a_claims_gpu_and_sets_the_binding_conditions_in_the_loop() -> None:
    kube = FakeDraKube()
    for name in ("blade-1", "blade-2"):
        kube.add_node(node(name))
    kube.add_pod(pod("plugin-style", 1))  # a pending nvidia.com/gpu pod: device-plugin mode's work
    fabric = FakeFabric([FakeGpu("gpu0"), FakeGpu("gpu1")], ["blade-1", "blade-2"])
    world = FakeWorld(kube, fabric)
    clock = Clock()
    settings = Settings(**BASE, mode="dra", idle_timeout_seconds=60)
    ctrl = wire_dra(settings, kube, lambda: fabric, clock=clock)
    stop = threading.Event()
    seen: dict[str, Any] = {}

    def claim() -> None:
        seen["published"] = kube.published()
        seen["key"] = allocate(kube, "c1", "gpu0", "blade-1")

    def node_sees_it() -> None:
        seen["after compose"] = kube.conditions(seen["key"], "gpu0")
        world.agent_step()
        clock.tick(1)

    def composed() -> None:  # the compose runs on a worker: the next round reads what it did
        assert ctrl.driver.wait_idle(10)
        clock.tick(1)

    script = Script(stop, [claim, composed, node_sees_it, lambda: None])
    try:
        code = run_loop(ctrl, stop, resync_seconds=0.01, probes=script, clock=clock)  # type: ignore[arg-type]
    finally:
        ctrl.close()
    assert code == 0 and script.rounds == 4
    assert seen["published"] == {"gpu0": (["blade-1", "blade-2"], []), "gpu1": (["blade-1", "blade-2"], [])}
    assert fabric.calls == [("compose", "blade-1", ("gpu0",))]  # the claim's GPU, once; not the pod's
    assert seen["after compose"] == {
        ATTACHED: ("True", "Composed"),
        VISIBLE_ON_NODE: ("False", "WaitingForNode"),
    }
    assert kube.conditions(seen["key"], "gpu0") == {
        ATTACHED: ("True", "Composed"),
        VISIBLE_ON_NODE: ("True", "VisibleOnNode"),
    }
    assert not [w for w in kube.writes if w[0] == "pod"]  # no gate, release or nomination of pods
    assert ctrl.metrics.rounds._value.get() == 4


@dataclass
class UnsyncedSource:
    """A watch cache that has not listed every kind yet (reading it would be a bug)."""

    synced: bool = False

    def read(self) -> Any:
        raise AssertionError("read before synced")

    def assume(self, node: Mapping[str, Any]) -> None:
        pass

    def claims(self) -> Any:
        raise AssertionError("read before synced")

    def assume_claim(self, claim: Mapping[str, Any]) -> None:
        pass


def test_no_dra_round_runs_on_a_cache_that_has_not_listed_everything() -> None:
    kube = FakeDraKube()
    kube.add_node(node("blade-1"))
    fabric = FakeFabric([FakeGpu("gpu0")], ["blade-1"])
    source = UnsyncedSource()
    ctrl = wire_dra(Settings(**BASE, mode="dra"), kube, lambda: fabric, source=source)
    assert ctrl.round() is None and kube.slices == {} and ctrl.last_round_ok == 0.0
    source.synced = True
    source.read = lambda: ((), tuple(), {})  # type: ignore[method-assign]
    source.claims = lambda: []  # type: ignore[method-assign]
    assert ctrl.round() is not None and ctrl.last_round_ok > 0
    ctrl.close()


# -- python -m composer --mode dra against an API server without the features ------------------
@pytest.fixture
def recorder() -> Any:
    from http.server import ThreadingHTTPServer

    from tests.composer.test_kube_dra import Recorder

    Recorder.requests, Recorder.answers = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, Recorder
    finally:
        server.shutdown()
        server.server_close()


def test_python_m_composer_in_dra_mode_exits_2_naming_the_gate_the_api_server_lacks(
    recorder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from composer.__main__ import main

    server, rec = recorder
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{server.server_address[1]}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    probe = support.probe_slice()
    stripped = copy.deepcopy(probe)
    stripped["spec"]["devices"][0] = {"name": "probe"}  # a 1.35 API server: DRADeviceBindingConditions off
    rec.answers[("PATCH", f"/apis/resource.k8s.io/v1/resourceslices/{support.PROBE_NAME}")] = (200, stripped)
    monkeypatch.setenv("COMPOSER_DIRECTOR_PASSWORD", "pw")
    code = main(["--mode", "dra", "--kubeconfig", str(kubeconfig), "--director-url", "http://127.0.0.1:1",
                 "--probe-port", "0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "DRADeviceBindingConditions" in err and "bindsToNode" in err
    paths = [(r["method"], r["path"], r["query"].get("dryRun")) for r in rec.requests]
    assert paths == [
        ("PATCH", f"/apis/resource.k8s.io/v1/deviceclasses/{support.PROBE_NAME}", ["All"]),
        ("PATCH", f"/apis/resource.k8s.io/v1/resourceslices/{support.PROBE_NAME}", ["All"]),
    ]  # the DeviceClass itself was never applied


def _claim(rv: int, conditions: bool = False) -> dict[str, Any]:
    kube = FakeDraKube()
    allocate(kube, "c1", "gpu0", "blade-1")
    raw = kube.claims["ml/c1"]
    raw["metadata"]["resourceVersion"] = str(rv)
    if conditions:
        raw["status"]["devices"] = [{"driver": DRIVER, "pool": "fabric", "device": "gpu0", "conditions": [
            {"type": ATTACHED, "status": "True", "reason": "Composed", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}]
    return raw


def test_the_dra_cache_keeps_claims_with_the_composers_own_writes_laid_over() -> None:
    from kubernetes import client

    from composer.shell.cache import DraCache

    woken: list[int] = []
    cache = DraCache(client.ApiClient(), on_change=lambda: woken.append(1))
    assert not cache.synced  # five kinds, none listed
    cache.resource_claims._put(_claim(1))
    assert len(woken) == 1 and [c.resource_version for c in cache.claims()] == ["1"]
    cache.assume_claim(_claim(2, conditions=True))  # the answer to the status patch
    (seen,) = cache.claims()
    assert seen.resource_version == "2" and seen.conditions["gpu0"][0].type == ATTACHED
    assert len(woken) == 1  # the composer's own write wakes nobody
    cache.resource_claims._put(_claim(2, conditions=True))  # its echo on the watch
    assert len(woken) == 1
    cache.assume_claim(_claim(1))  # an answer older than the watch's view is dropped
    assert cache.claims()[0].resource_version == "2"
    cache.resource_slices._put({"metadata": {"name": "s"}, "spec": {"driver": DRIVER}})
    assert len(woken) == 2  # someone else's slice change wakes the loop


@dataclass
class ListedSource:
    """A synced source that lists the fakes, recording the claim writes laid over it."""

    kube: FakeDraKube
    synced: bool = True
    assumed: list[dict[str, Any]] = field(default_factory=list)

    def read(self) -> Any:
        from composer.run.controller import ListingSource

        return ListingSource(self.kube).read()

    def assume(self, node: Mapping[str, Any]) -> None:
        pass

    def claims(self) -> Any:
        from composer.dra.claims import claim_view

        return [claim_view(c) for c in self.kube.list_resource_claims()]

    def assume_claim(self, claim: Mapping[str, Any]) -> None:
        self.assumed.append(dict(claim))


def test_a_claim_status_write_is_laid_over_the_source() -> None:
    kube = FakeDraKube()
    kube.add_node(node("blade-1"))
    fabric = FakeFabric([FakeGpu("gpu0")], ["blade-1"])
    source = ListedSource(kube)
    ctrl = wire_dra(Settings(**BASE, mode="dra"), kube, lambda: fabric, source=source)
    key = allocate(kube, "c1", "gpu0", "blade-1")
    ctrl.round()  # compose submitted
    assert ctrl.driver.wait_idle(10)
    assert source.assumed == []
    done = ctrl.round()  # conditions written
    ctrl.close()
    assert done is not None and done.statuses == (key,)
    stored = kube.claims[key]["metadata"]["resourceVersion"]
    assert [c["metadata"]["resourceVersion"] for c in source.assumed] == [stored]
