"""``decide`` skips most nodes on fast paths (``settled``: nothing to reconcile; ``_untouched``:
nothing for the reclaim pass; ``bare``: a host with no GPU described without the GPU arithmetic;
``without_twins``: a batch plans on a few of each kind of empty host). Each round of a random
composer life (pods of several sizes, pinned or not, gated or not, GPUs advertised, pods bound,
finished and deleted, hours passing, GPUs detached behind the composer's back or left attached by
a crash or by hand, a reclaim taint or the composer's record left or removed by hand) is decided
twice, with the fast paths and without them: the decisions and the memory they leave must be the
same."""

from __future__ import annotations

import copy
import random
from typing import Any
from unittest import mock

import pytest

from composer.decide import decide as decide_mod
from composer.model import annotations as ann
from composer.model import nodestate as nodestate_mod
from composer.run import controller as controller_mod
from tests.composer.fakes import Clock, FakeFabric, FakeGpu, FakeKube, FakeWorld, node, pod
from tests.composer.test_controller import make, run

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
HOSTS = [f"h{i}" for i in range(5)]


def _world() -> FakeWorld:
    kube = FakeKube()
    for h in HOSTS:
        kube.add_node(node(h))
    gpus = [FakeGpu(f"gpu{i}", model=T4 if i < 7 else A100) for i in range(10)]
    return FakeWorld(kube, FakeFabric(gpus, list(HOSTS)))


def _both_ways(checked: list[int]) -> Any:
    real = decide_mod.decide

    def decide(snapshot: Any, memory: Any, policy: Any) -> Any:
        slow_memory = copy.deepcopy(memory)
        with (
            mock.patch.object(decide_mod, "settled", lambda *a: False),
            mock.patch.object(decide_mod, "_untouched", lambda *a: False),
            mock.patch.object(decide_mod, "without_twins", lambda requests, hosts, **kw: list(hosts)),
            mock.patch.object(nodestate_mod, "bare", lambda *a: False),
        ):
            slow = real(snapshot, slow_memory, policy)
        fast = real(snapshot, memory, policy)
        assert fast == slow
        assert memory == slow_memory
        checked.append(len(fast.jobs))
        return fast

    return decide


def life_step(w: FakeWorld, clock: Clock, rnd: random.Random, made: int) -> int:
    """One random step of a composer life on :func:`_world` (a pod added, the agent, the
    scheduler, a pod finished or deleted, a GPU detached behind the composer's back, a reclaim
    taint or the composer's record left or removed by hand, a GPU left attached, time passing).
    Returns how many pods were made so far (``made``, one more when a pod was added)."""
    step = rnd.random()
    if step < 0.35:
        made += 1
        w.kube.add_pod(
            pod(
                f"p{made}",
                rnd.choice([1, 1, 2, 3]),
                product=rnd.choice([None, T4, A100]),
                host=rnd.choice([None, None, *HOSTS]),
                gated=rnd.random() < 0.5,
            )
        )
    elif step < 0.55:
        w.agent_step()
    elif step < 0.7:
        w.schedule()
    elif step < 0.8:
        running = [k for k, p in w.kube.pods.items() if p["status"].get("phase") == "Running"]
        if running:
            w.finish(rnd.choice(running))
    elif step < 0.85 and w.kube.pods:
        del w.kube.pods[rnd.choice(sorted(w.kube.pods))]
    elif step < 0.9:
        attached = [g for g in w.fabric.gpu_list if g.machine is not None]
        if attached:  # lost: detached behind the composer's back
            rnd.choice(attached).machine = None
    elif step < 0.92:  # a reclaim taint left on a node (by a crash, or by hand)
        n = w.kube.nodes[rnd.choice(HOSTS)]
        if not n["spec"]["taints"]:
            n["spec"]["taints"] = [
                {"key": ann.RECLAIM_TAINT_KEY, "value": ann.RECLAIM_TAINT_VALUE,
                 "effect": ann.RECLAIM_TAINT_EFFECT}
            ]
    elif step < 0.93:  # the composer's record removed from a node by hand
        a = w.kube.nodes[rnd.choice(HOSTS)]["metadata"]["annotations"]
        for k in (ann.DEVICES, ann.INTENTS, ann.RECLAIM, ann.IDLE_SINCE, *ann.hold_changes(False)):
            a.pop(k, None)
    elif step < 0.95:
        free = [g for g in w.fabric.gpu_list if g.machine is None]
        if free:  # left by a crash between attach and record (the composer's tag), or by hand
            g = rnd.choice(free)
            g.machine = rnd.choice(HOSTS)
            g.owner_tag = rnd.choice(["gpu-composer", None])
    else:
        clock.tick(rnd.choice([5, 30, 61, 400]))
    return made


@pytest.mark.parametrize("seed", range(20))
def test_decide_decides_the_same_without_its_fast_paths(seed: int) -> None:
    rnd = random.Random(seed)
    clock = Clock()
    w = _world()
    ctrl = make(w, clock)
    checked: list[int] = []
    made = 0
    with mock.patch.object(controller_mod, "decide", _both_ways(checked)):
        for _ in range(60):
            made = life_step(w, clock, rnd, made)
            run(ctrl)
    ctrl.close()
    assert len(checked) == 60 and sum(checked) > 0  # every round compared; some had jobs


def test_a_node_whose_record_and_idle_timer_were_removed_by_hand_adopts_its_gpus_as_without_skips() -> None:
    """A node idle with composer GPUs has an idle timer (its ``idle-since`` annotation); when
    its record and the timer are then removed by hand, the round still visits it: it adopts
    the GPUs (they carry the composer's owner tag) and starts the timer again, exactly as the
    round without its fast paths does."""
    clock = Clock()
    w = _world()
    ctrl = make(w, clock)
    checked: list[int] = []
    with mock.patch.object(controller_mod, "decide", _both_ways(checked)):
        w.kube.add_pod(pod("a", 1, host="h0"))
        run(ctrl)
        w.agent_step()
        run(ctrl)
        w.schedule()
        run(ctrl)
        w.finish("ml/a")
        run(ctrl)
        assert w.kube.record("h0").idle_since == clock()
        clock.tick(30)
        a = w.kube.nodes["h0"]["metadata"]["annotations"]
        for k in (ann.DEVICES, ann.INTENTS, ann.RECLAIM, ann.IDLE_SINCE, *ann.hold_changes(False)):
            a.pop(k, None)
        run(ctrl)
        run(ctrl)
    assert w.kube.record("h0").devices == {"gpu0"}
    assert w.kube.record("h0").idle_since == clock()
    ctrl.close()
