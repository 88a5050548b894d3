"""GpuCompositionProvider CRUD against the simulator, check/diff with unknowns, and pickling."""

from __future__ import annotations

import base64
import socket
from typing import Any

import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.output import Unknown
from pulumi.runtime import rpc

from dynamic_providers import preflight
from dynamic_providers.director import errors
from dynamic_providers.director.planning import FREE_POOL_MARK
from dynamic_providers.director.provider import GpuCompositionProvider

from .conftest import PASSWORD, USER, Sim, make_client

pytestmark = pytest.mark.usefixtures("fast_provider")

OWNER = "pulumi:composable-gpu/test/gpus"
P = GpuCompositionProvider()


def props(sim: Sim | None = None, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "endpoint": sim.url if sim else "http://127.0.0.1:9",
        "username": USER,
        "password": PASSWORD,
        "machine": "blade-slot-1",
        "group": None,
        "count": 2,
        "requested_device_names": None,
        "model": "Tesla-T4",
        "owner": OWNER,
        "timeout_seconds": 2.0,
        "reprogram_timeout_seconds": 5.0,
        "use_digest": False,
    }
    base.update(kw)
    return base


@pytest.fixture(autouse=True)
def _local_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """check() tests here judge the inputs; the Director probe has its own tests below."""
    monkeypatch.setenv(preflight.PREFLIGHT_ENV, "off")


def failures(news: dict[str, Any]) -> dict[str, str]:
    return {f.property: f.reason for f in P.check({}, news).failures}


# ---------------------------------------------------------------------------- check
def test_check_accepts_and_normalises() -> None:
    r = P.check({}, props(model="Tesla T4", count=None, requested_device_names=["gpu10", "gpu2"]))
    assert r.failures == []
    assert r.inputs["model"] == "Tesla-T4"
    assert r.inputs["requested_device_names"] == ["gpu2", "gpu10"]


def test_check_probes_the_director_once_and_refuses_a_wrong_password(sim: Sim, monkeypatch) -> None:
    monkeypatch.delenv(preflight.PREFLIGHT_ENV)
    preflight.forget()
    try:
        before = sim.fabric_state()
        assert P.check({}, props(sim)).failures == []
        (failure,) = P.check({}, props(sim, password="definitely-wrong")).failures
        assert failure.property == "endpoint"
        assert failure.reason.startswith(f"Director {sim.url}: credentials refused")
        assert "definitely-wrong" not in failure.reason
        (unreachable,) = P.check({}, props()).failures
        assert unreachable.reason.startswith("Director http://127.0.0.1:9: no answer")
        assert P.check({}, props(sim, password=rpc.UNKNOWN)).failures == []  # preview: not yet known
        assert sim.fabric_state() == before
    finally:
        preflight.forget()


@pytest.mark.parametrize(
    ("kw", "prop", "text"),
    [
        ({"count": 0}, "count", "greater than or equal to 1"),
        ({"count": 65}, "count", "less than or equal to 64"),
        ({"count": None}, "count", "give count, device_names, or both"),
        ({"count": 3, "requested_device_names": ["gpu0"]}, "count", "count is 3 but 1 device_names"),
        (
            {"count": None, "requested_device_names": ["gpu0", "gpu0"]},
            "requested_device_names",
            "repeat: gpu0",
        ),
        ({"endpoint": "director:8080"}, "endpoint", "endpoint"),
        ({"machine": "Blade_Slot_1"}, "machine", "machine"),
        ({"model": "Tesla T4 (16GB)"}, "model", "not a GPU product name"),
        ({"timeout_seconds": 0}, "timeout_seconds", "greater than 0"),
        ({"password": ""}, "password", "at least 1 character"),
    ],
)
def test_check_reports_each_problem(kw: dict[str, Any], prop: str, text: str) -> None:
    got = failures(props(**kw))
    assert prop in got and text in got[prop], got


def test_check_skips_unknown_values_at_preview() -> None:
    assert failures(props(count=Unknown(), requested_device_names=None)) == {}
    assert failures(props(machine=Unknown(), endpoint=rpc.UNKNOWN)) == {}
    assert failures(props(count=None, requested_device_names=["gpu0", Unknown()])) == {}
    # Known problems are still reported next to unknown values.
    assert set(failures(props(machine=Unknown(), count=0))) == {"count"}


def test_check_leaves_secret_inputs_as_the_engine_sent_them() -> None:
    wrapped = rpc.wrap_rpc_secret(PASSWORD)
    r = P.check({}, props(password=wrapped))
    assert r.failures == [] and r.inputs["password"] is wrapped


# ---------------------------------------------------------------------------- diff
def olds_after_create(**kw: Any) -> dict[str, Any]:
    o = props(**kw)
    o.update(
        device_names=["gpu0", "gpu1"], models=["Tesla-T4", "Tesla-T4"], group_name="gpu-pool", machine_id=1
    )
    return o


def test_diff_no_change() -> None:
    d = P.diff("id", olds_after_create(), props())
    assert d.changes is False and d.replaces == []


@pytest.mark.parametrize(
    ("news", "replaces"),
    [
        ({"count": 3}, []),
        ({"model": "NVIDIA-A100-PCIE-40GB"}, []),
        ({"password": "rotated"}, []),
        ({"endpoint": "http://127.0.0.1:10"}, []),
        ({"machine": "blade-slot-2"}, ["machine"]),
        ({"group": "reserved"}, ["group"]),
        ({"count": Unknown()}, []),
        ({"machine": Unknown()}, ["machine"]),
    ],
)
def test_diff_update_or_replace(news: dict[str, Any], replaces: list[str]) -> None:
    d = P.diff("id", olds_after_create(), props(**news))
    assert d.changes is True and d.replaces == replaces and d.delete_before_replace is True


def test_diff_group_naming_the_current_group_is_not_a_change() -> None:
    assert P.diff("id", olds_after_create(), props(group="gpu-pool")).changes is False


def test_diff_sees_drift_found_by_refresh() -> None:
    old = olds_after_create()
    old["device_names"], old["models"] = ["gpu0"], ["Tesla-T4"]
    assert P.diff("id", old, props()).changes is True


# ---------------------------------------------------------------------------- create / read / update / delete
def test_create_attaches_tags_and_reports_outputs(sim: Sim) -> None:
    r = P.create(props(sim))
    assert r.id.startswith("blade-slot-1/")
    o = r.outs
    assert o["device_names"] == ["gpu0", "gpu2"]  # gpu2 from the group pool first, then gpu0
    assert o["models"] == ["Tesla-T4"] * 2
    assert o["fabric_ids"] == [sim.gpu("gpu0")["fabr_gid"], sim.gpu("gpu2")["fabr_gid"]]
    assert o["switch_ids"] == [sim.gpu("gpu0")["swit_gid"]] * 2
    assert (o["machine_id"], o["group_name"], o["pool_moved_devices"]) == (1, "gpu-pool", ["gpu0"])
    assert o["password"] == PASSWORD and o["owner"] == OWNER  # inputs kept for read/delete
    # gpu0 came from the system free pool: its tag says so, for whoever adopts it after a crash
    assert sim.gpu("gpu0")["udesc"] == OWNER + FREE_POOL_MARK and sim.gpu("gpu2")["udesc"] == OWNER
    assert sim.gpu("gpu0")["mach_id"] == 1


def test_create_after_a_crash_adopts_instead_of_attaching_more(sim: Sim) -> None:
    with make_client(sim.url) as c:  # a previous create got this far before dying
        c.set_owner_tag(["gpu3"], OWNER)
        c.compose("blade-slot-1", ["gpu3"])
    relates = sim.calls("POST relate/gpu")
    o = P.create(props(sim)).outs
    assert o["device_names"] == ["gpu2", "gpu3"]
    assert sim.calls("POST relate/gpu") == relates + 1


def test_destroying_an_adopted_composition_returns_free_pool_gpus_to_the_free_pool(sim: Sim) -> None:
    assert sim.gpu("gpu0")["grp_id"] is None  # in the system free pool
    with make_client(sim.url) as c:  # a killed create had tagged gpu0, moved it and attached it
        c.set_owner_tag(["gpu0"], OWNER + FREE_POOL_MARK)
        c.compose("blade-slot-1", ["gpu0"])
    assert sim.gpu("gpu0")["grp_id"] == 1
    o = P.create(props(sim)).outs  # the recovery's up adopts gpu0 and adds gpu2 (group pool)
    assert o["device_names"] == ["gpu0", "gpu2"] and o["pool_moved_devices"] == ["gpu0"]
    P.delete("id", o)
    assert sim.gpu("gpu0")["grp_id"] is None and sim.gpu("gpu0")["udesc"] == ""  # back where it was
    assert sim.gpu("gpu2")["grp_id"] == 1 and sim.gpu("gpu2")["mach_id"] is None


def test_delete_of_state_lost_mid_create_still_returns_marked_gpus(sim: Sim) -> None:
    """The state recorded no pool move (the create died before answering): the mark decides."""
    with make_client(sim.url) as c:
        c.set_owner_tag(["gpu0"], OWNER + FREE_POOL_MARK)
        c.compose("blade-slot-1", ["gpu0"])
    P.delete("id", {**props(sim), "device_names": [], "pool_moved_devices": []})
    assert sim.gpu("gpu0")["grp_id"] is None and sim.gpu("gpu0")["mach_id"] is None


def test_create_by_names_and_from_the_dev_inventory(dev_sim: Sim) -> None:
    o = P.create(props(dev_sim, count=None, requested_device_names=["gpu1"], model=None)).outs
    assert o["device_names"] == ["gpu1"] and o["models"] == ["Tesla-T4"]


def test_update_composes_or_decomposes_only_the_difference(sim: Sim) -> None:
    o = P.create(props(sim, count=1)).outs
    first = o["device_names"]
    assert first == ["gpu2"]
    o = P.update("id", o, props(sim, count=3)).outs
    assert (
        o["device_names"][:1] == ["gpu0"]
        and set(first) <= set(o["device_names"])
        and len(o["device_names"]) == 3
    )
    assert sim.calls("POST relate/gpu") == 3 and sim.calls("DELETE relate/gpu") == 0
    assert o["pool_moved_devices"] == ["gpu0", "gpu1"]
    o = P.update("id", o, props(sim, count=1)).outs
    assert o["device_names"] == ["gpu0"]
    assert sim.calls("DELETE relate/gpu") == 2
    # gpu1 came from the system pool and goes back there; gpu2 was in the group pool and stays.
    assert sim.gpu("gpu1")["grp_id"] is None and sim.gpu("gpu2")["grp_id"] == 1
    assert sim.gpu("gpu1")["udesc"] == "" and o["pool_moved_devices"] == ["gpu0"]


def test_update_to_another_model(sim: Sim) -> None:
    o = P.create(props(sim, count=1)).outs
    o = P.update("id", o, props(sim, count=1, model="NVIDIA-A100-PCIE-40GB")).outs
    assert o["models"] == ["NVIDIA-A100-PCIE-40GB"] and o["device_names"] == ["gpu4"]
    assert sim.gpu("gpu2")["mach_id"] is None


def test_read_reports_out_of_band_detach_and_attach(sim: Sim) -> None:
    r = P.create(props(sim))
    sim.detach("gpu0")
    got = P.read(r.id, r.outs)
    assert got.id == r.id and got.outs["device_names"] == ["gpu2"]
    assert P.diff(r.id, got.outs, props(sim)).changes is True
    o = P.update(r.id, got.outs, props(sim)).outs
    assert len(o["device_names"]) == 2
    # Someone attaches a GPU tagged for this composition: refresh shows it; untagged ones are not ours.
    with make_client(sim.url) as c:
        c.set_owner_tag(["gpu4"], OWNER)
    sim.attach("gpu4", "blade-slot-1")
    sim.attach("gpu5", "blade-slot-1")
    names = P.read(r.id, o).outs["device_names"]
    assert "gpu4" in names and "gpu5" not in names


def test_read_of_a_machine_gone_from_the_director_means_gone(sim: Sim) -> None:
    assert P.read("x", props(sim, machine="blade-slot-9")).id == ""


def test_delete_tolerates_detached_gpus_and_restores_the_pools(sim: Sim) -> None:
    before = sim.fabric_state()
    r = P.create(props(sim, count=3))
    sim.detach("gpu1")
    P.delete(r.id, r.outs)
    assert sim.fabric_state() == before
    P.delete(r.id, r.outs)  # twice: nothing left to do, no error


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"model": "Tesla-V100"}, errors.UnknownModelError, "no GPU of model 'Tesla-V100'"),
        ({"count": 5}, errors.InsufficientGpusError, "need 5 more free Tesla-T4"),
        ({"machine": "blade-slot-9"}, errors.DirectorNotFoundError, "no machine 'blade-slot-9'"),
        ({"group": "reserved"}, errors.DirectorConflictError, "is in group gpu-pool, not reserved"),
        ({"count": None, "requested_device_names": ["gpu7"]}, errors.DirectorConflictError, "blade-slot-4"),
    ],
)
def test_bad_input_fails_clearly_and_changes_nothing(
    sim: Sim, kw: dict[str, Any], exc: type[Exception], match: str
) -> None:
    before = sim.fabric_state()
    with pytest.raises(exc, match=match):
        P.create(props(sim, **kw))
    assert sim.fabric_state() == before


def test_director_down_fails_clearly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(errors.DirectorUnavailableError, match=f"127.0.0.1:{port}"):
        P.create(props(endpoint=f"http://127.0.0.1:{port}"))


def test_open_edit_fails_clearly_and_leaves_no_tags(sim: Sim) -> None:
    sim.fault(kind="open_edit", machine="blade-slot-1")
    before = sim.fabric_state()
    with pytest.raises(errors.DirectorConflictError, match="still open on machine blade-slot-1"):
        P.create(props(sim))
    assert sim.fabric_state() == before


def test_transient_faults_during_create_converge(sim: Sim) -> None:
    sim.fault(kind="error", method="POST", path="relate/gpu", status=502)
    sim.fault(kind="reprogram_half")
    o = P.create(props(sim)).outs
    assert o["device_names"] == ["gpu0", "gpu2"] and sim.state()["edits"] == {}


def test_digest_auth_through_the_provider(sim: Sim) -> None:
    o = P.create(props(sim, use_digest=True)).outs
    assert len(o["device_names"]) == 2
    assert sim.state()["digests"] == []  # deleted when the method's client closed
    assert any(k.startswith("POST digest/") for k in sim.state()["counters"])


def test_the_pickled_provider_holds_no_client_or_credentials() -> None:
    blob = base64.b64decode(serialize_provider(GpuCompositionProvider()))
    assert b"dynamic_providers.director.provider" in blob  # pickled by reference
    assert PASSWORD.encode() not in blob and len(blob) < 2000
