"""DRA mode's node jobs on the workers (composer.run.node_jobs, composer.run.dra): a slow compose on
one node delays neither another node's claim nor the round; a running job's GPUs are neither
composed again nor published free, and its node's other GPUs stay published as they were; a job
that ends wakes the loop, whose next round writes the claim's conditions at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from composer.decide.dra_round import RECLAIMING
from composer.dra.slices import ATTACH_FAILED, ATTACHED, TAINT_KEY, VISIBLE_ON_NODE
from composer.run.dra import DraDriver
from composer.run.loop import run_loop
from composer.run.wiring import wire_dra
from composer.shell.config import Settings
from dynamic_providers.director.errors import DirectorError
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeWorld, node
from tests.composer.harness import wait_for
from tests.composer.test_dra_driver import FakeDraKube, allocate, deallocate, run, setup

BASE: dict[str, Any] = {"director_url": "http://127.0.0.1:1", "director_password": "pw"}
BOTH = ["blade-1", "blade-2"]


def hold(fabric: FakeFabric, op: str, machine: str) -> threading.Event:
    """Make ``fabric.<op>`` on ``machine`` wait (at most 5 s) until the returned event is set,
    after the Director's change for ``decompose`` (the job then goes on to untag and write the
    record) and before it for ``compose``."""
    release = threading.Event()
    real: Callable[..., None] = getattr(fabric, op)

    def slow(m: str, names: list[str], **kw: Any) -> None:
        if m == machine and op == "compose":
            release.wait(5)
        real(m, names, **kw)
        if m == machine and op == "decompose":
            release.wait(5)

    setattr(fabric, op, slow)
    return release


def idle_on_blade_1(gpu: str) -> tuple[FakeWorld, FakeDraKube, DraDriver, Clock]:
    """:func:`setup` with ``gpu`` composed onto blade-1 for a claim whose allocation was then
    cleared: an idle composer GPU of blade-1, every job ended."""
    w, kube, driver, clock = setup()
    old = allocate(kube, "c1", gpu, "blade-1")
    run(driver)
    w.agent_step()
    deallocate(kube, old)
    clock.tick(1)
    run(driver)
    return w, kube, driver, clock


def test_a_slow_compose_on_one_node_delays_neither_the_round_nor_another_nodes_claim():
    w, kube, driver, clock = setup()
    release = hold(w.fabric, "compose", "blade-1")
    slow = allocate(kube, "c1", "gpu0", "blade-1")
    fast = allocate(kube, "c2", "gpu1", "blade-2")
    t0 = time.monotonic()
    out = driver.round()
    try:
        assert time.monotonic() - t0 < 2  # the round submitted both jobs and returned
        assert {j.node for j in out.decision.decision.jobs} == set(BOTH)
        wait_for(lambda: w.fabric.attached().get("blade-2"), timeout=5, what="blade-2's compose")
        clock.tick(1)
        driver.round()
        assert kube.conditions(fast, "gpu1")[ATTACHED] == ("True", "Composed")  # blade-1 still composing
        assert kube.conditions(slow, "gpu0") == {}
        assert "blade-1" not in w.fabric.attached()  # its compose is still held
    finally:
        release.set()
    assert driver.wait_idle(10)
    driver.round()
    assert kube.conditions(slow, "gpu0")[ATTACHED] == ("True", "Composed")
    assert sorted(c for c in w.fabric.calls if c[0] == "compose") == [
        ("compose", "blade-1", ("gpu0",)),
        ("compose", "blade-2", ("gpu1",)),
    ]


def test_a_gpu_a_running_job_composes_is_neither_composed_for_another_claim_nor_published():
    w, kube, driver, clock = setup()
    release = hold(w.fabric, "compose", "blade-1")
    first = allocate(kube, "c1", "gpu0", "blade-1")
    try:
        driver.round()
        assert "gpu0" not in kube.published()  # a compose is planned on it: offered to nobody
        deallocate(kube, first)  # the scheduler gave up on c1, and another claim got the GPU
        second = allocate(kube, "c2", "gpu0", "blade-2")
        for _ in range(3):
            clock.tick(1)
            out = driver.round()
            assert out.decision.decision.jobs == ()  # not composed onto blade-2 meanwhile
            assert "gpu0" not in kube.published()
            assert kube.conditions(second, "gpu0") == {}  # its conditions wait for the running job
    finally:
        release.set()
    assert driver.wait_idle(10)
    clock.tick(1)
    driver.round()
    assert [c for c in w.fabric.calls if c[0] == "compose"] == [("compose", "blade-1", ("gpu0",))]
    assert kube.conditions(second, "gpu0") == {ATTACH_FAILED: ("True", "AttachedElsewhere")}


def test_a_busy_nodes_idle_gpu_stays_published_for_it_while_its_job_runs():
    w, kube, driver, clock = idle_on_blade_1("gpu1")
    assert kube.published()["gpu1"] == (["blade-1"], [])  # idle: offered to its own node
    release = hold(w.fabric, "compose", "blade-1")
    allocate(kube, "c2", "gpu0", "blade-1")
    try:
        clock.tick(1)
        out = driver.round()
        assert [j.node for j in out.decision.decision.jobs] == ["blade-1"]
        writes = len(kube.slice_writes)
        for _ in range(2):
            clock.tick(1)
            driver.round()  # blade-1 sits the round out
            assert kube.published()["gpu1"] == (["blade-1"], [])
        assert len(kube.slice_writes) == writes  # nothing rewritten while the job runs
    finally:
        release.set()
    assert driver.wait_idle(10)


def test_a_gpu_a_running_reclaim_gives_back_stays_tainted_and_is_composed_again_only_after_it():
    w, kube, driver, clock = idle_on_blade_1("gpu0")
    release = hold(w.fabric, "decompose", "blade-1")
    try:
        clock.tick(61)
        out = driver.round()  # the reclaim starts: gpu0 tainted in the slices before the decompose
        assert [j.reclaim is not None for j in out.decision.decision.jobs] == [True]
        wait_for(lambda: w.fabric.by("gpu0").machine is None, timeout=5, what="the decompose")
        new = allocate(kube, "c2", "gpu0", "blade-2")  # allocated before the taint reached the scheduler
        clock.tick(1)
        out = driver.round()  # decomposed, the job not ended yet
        assert out.decision.decision.jobs == ()
        hosts, taints = kube.published()["gpu0"]
        assert taints == [{"key": TAINT_KEY, "value": RECLAIMING, "effect": "NoSchedule"}]
    finally:
        release.set()
    assert driver.wait_idle(10)
    clock.tick(1)
    driver.round()  # the reclaim ended: now composed for c2
    assert driver.wait_idle(10)
    calls = [c for c in w.fabric.calls if c[0] in ("compose", "decompose")]
    assert calls == [
        ("compose", "blade-1", ("gpu0",)),
        ("decompose", "blade-1", ("gpu0",)),
        ("compose", "blade-2", ("gpu0",)),
    ]
    clock.tick(1)
    driver.round()
    assert kube.conditions(new, "gpu0")[ATTACHED] == ("True", "Composed")


@pytest.mark.parametrize("fails", [False, True], ids=["composed", "failed"])
def test_a_job_that_ends_wakes_the_loop_whose_next_round_writes_the_claims_conditions(fails: bool):
    kube = FakeDraKube()
    kube.add_node(node("blade-1"))
    fabric = FakeFabric([FakeGpu("gpu0")], ["blade-1"])
    world = FakeWorld(kube, fabric)
    real = fabric.compose

    def compose_and_relabel(machine: str, names: list[str], **kw: Any) -> None:
        real(machine, names, **kw)
        world.agent_step()  # GFD relabels the node before the job ends

    fabric.compose = compose_and_relabel  # type: ignore[method-assign]
    if fails:
        fabric.fail["compose"] = [DirectorError("fabric busy")]
    key = allocate(kube, "c1", "gpu0", "blade-1")
    wake, stop = threading.Event(), threading.Event()
    ctrl = wire_dra(Settings(**BASE, mode="dra"), kube, lambda: fabric, clock=Clock(), on_job_done=wake.set)
    loop = threading.Thread(target=run_loop, args=(ctrl, stop), kwargs={"resync_seconds": 60, "wake": wake})
    loop.start()
    want = (
        {ATTACH_FAILED: ("True", "ComposeFailed")}
        if fails
        else {ATTACHED: ("True", "Composed"), VISIBLE_ON_NODE: ("True", "VisibleOnNode")}
    )
    try:
        wait_for(lambda: kube.conditions(key, "gpu0") == want, timeout=5, what="the claim's conditions")
    finally:
        stop.set()
        wake.set()
        loop.join(10)
        ctrl.close()
    assert [c for c in fabric.calls if c[0] == "compose"] == [("compose", "blade-1", ("gpu0",))]
    if fails:
        failed = {"key": TAINT_KEY, "value": "ComposeFailed", "effect": "NoSchedule"}
        assert kube.published()["gpu0"][1] == [failed]
