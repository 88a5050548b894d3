"""ComposerGpuGuard's delete against the Director simulator: it stops while the composer holds GPUs
(attached, tagged with its owner tag, in its group), passes otherwise, and only reads."""

from __future__ import annotations

import socket

import pytest

from dynamic_providers.director.destroy_guard import ComposerGpuGuardProvider, ComposerHoldsGpusError

from .conftest import PASSWORD, USER, Sim, make_client

TAG = "gpu-composer"


def _props(url: str, *, owner_tag: str = TAG, group: str = "gpu-pool") -> dict[str, object]:
    return {"endpoint": url, "username": USER, "password": PASSWORD, "verify_tls": True,
            "owner_tag": owner_tag, "group": group}


def test_delete_stops_while_the_composer_holds_gpus_and_names_them(dev_sim: Sim) -> None:
    with make_client(dev_sim.url) as client:
        client.compose("blade-slot-2", ["gpu1", "gpu0"], owner_tag=TAG)
    before = dev_sim.fabric_state()
    guard = ComposerGpuGuardProvider()
    with pytest.raises(ComposerHoldsGpusError) as stopped:
        guard.delete("id", _props(dev_sim.url))
    message = str(stopped.value)
    assert "holds 2 GPU(s) of group 'gpu-pool' tagged 'gpu-composer'" in message
    assert "(gpu0 on blade-slot-2, gpu1 on blade-slot-2)" in message
    assert "delete the GPU workloads" in message and "composer.liqid.io/devices" in message
    assert PASSWORD not in message
    assert dev_sim.fabric_state() == before  # the guard only reads

    # another composer's GPUs, or another group's, are not this composer's
    guard.delete("id", _props(dev_sim.url, owner_tag="other-composer"))
    guard.delete("id", _props(dev_sim.url, group="other-pool"))

    with make_client(dev_sim.url) as client:
        client.decompose("blade-slot-2", ["gpu0", "gpu1"])
    guard.delete("id", _props(dev_sim.url))  # back in the pool: the destroy goes on


def test_gpus_attached_without_the_tag_do_not_stop_it(dev_sim: Sim) -> None:
    with make_client(dev_sim.url) as client:
        client.compose("blade-slot-1", ["gpu0"])  # a static composition: no owner tag
    ComposerGpuGuardProvider().delete("id", _props(dev_sim.url))


def test_an_unreachable_director_stops_it_and_says_how_to_forget_the_guard() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ComposerHoldsGpusError, match="pulumi state delete"):
        ComposerGpuGuardProvider().delete("id", _props(url))


def test_create_and_update_record_the_inputs_and_any_change_is_an_update() -> None:
    guard = ComposerGpuGuardProvider()
    props = _props("http://director:8080")
    created = guard.create(props)
    assert created.id == "http://director:8080#gpu-pool/gpu-composer" and created.outs == props
    assert not guard.diff("id", props, dict(props)).changes
    assert guard.diff("id", props, {**props, "owner_tag": "other"}).changes
