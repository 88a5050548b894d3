"""Pure composition planning: tiny input/expected cases and hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_providers.director import errors
from dynamic_providers.director.models import Gpu
from dynamic_providers.director.planning import CompositionPlan, natural_key, owned_gpus, plan_composition

T4, A100 = "Tesla-T4", "NVIDIA-A100-PCIE-40GB"
M1, M2, G1, G2 = 1, 2, 1, 2


def gpu(
    name: str,
    model: str = T4,
    *,
    group: int | None = None,
    machine: int | None = None,
    state: str = "active | online",
    tag: str | None = None,
) -> Gpu:
    return Gpu(
        name=name,
        dev_id="0x" + name,
        model=model,
        director_model=model.replace("-", " "),
        vendor="NVIDIA",
        group_id=group,
        machine_id=machine,
        device_state=state,
        owner_tag=tag,
        group=None if group is None else f"g{group}",
        machine=None if machine is None else f"m{machine}",
    )


INVENTORY = [
    gpu("gpu0"),
    gpu("gpu1"),
    gpu("gpu2", group=G1),
    gpu("gpu3", A100),
    gpu("gpu10", A100, group=G1),
    gpu("gpu4", group=G1, machine=M2),
    gpu("gpu5", group=G2),
    gpu("gpu6", state="ERROR"),
    gpu("gpu7", group=G1, machine=M1, tag="me"),
    gpu("gpu8", group=G1, machine=M1, tag="other"),
]


def plan(**kw: object) -> CompositionPlan:
    args = {"machine_id": M1, "group_id": G1, "count": None, "device_names": (), "model": None, "current": ()}
    args.update(kw)
    return plan_composition(INVENTORY, **args)  # type: ignore[arg-type]


def test_natural_order() -> None:
    assert sorted(["gpu10", "gpu2", "gpu1"], key=natural_key) == ["gpu1", "gpu2", "gpu10"]


def test_count_prefers_the_group_pool_then_the_system_pool() -> None:
    p = plan(count=3, model=T4)
    assert p == CompositionPlan(keep=(), attach=("gpu0", "gpu1", "gpu2"), detach=())
    assert plan(count=1, model=T4).attach == ("gpu2",)  # already in the machine's group
    assert plan(count=1, model=A100).attach == ("gpu10",)  # group pool before gpu3 in the system pool


def test_count_change_touches_only_the_difference() -> None:
    up = plan(count=3, model=T4, current=["gpu7"])
    assert up == CompositionPlan(keep=("gpu7",), attach=("gpu0", "gpu2"), detach=())
    down = plan(count=1, model=T4, current=["gpu7", "gpu8"])
    assert down == CompositionPlan(keep=("gpu7",), attach=(), detach=("gpu8",))
    same = plan(count=2, model=T4, current=["gpu7", "gpu8"])
    assert not same.changes and same.target == ("gpu7", "gpu8")


def test_model_change_swaps_devices() -> None:
    p = plan(count=1, model=A100, current=["gpu7"])
    assert p == CompositionPlan(keep=(), attach=("gpu10",), detach=("gpu7",))


def test_explicit_names_adopt_what_is_already_on_the_machine() -> None:
    p = plan(device_names=["gpu8", "gpu0"])
    assert p == CompositionPlan(keep=("gpu8",), attach=("gpu0",), detach=())
    assert p.target == ("gpu0", "gpu8")


def test_owned_gpus_by_tag_or_name() -> None:
    assert [g.name for g in owned_gpus(INVENTORY, machine_id=M1, owner_tag="me")] == ["gpu7"]
    assert [g.name for g in owned_gpus(INVENTORY, machine_id=M1, owner_tag="me", names=["gpu8", "gpu4"])] == [
        "gpu7",
        "gpu8",
    ]
    assert owned_gpus(INVENTORY, machine_id=M2, owner_tag="me") == []


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({}, ValueError, "count, device names"),
        ({"count": 2, "device_names": ["gpu0"]}, ValueError, "differs"),
        ({"device_names": ["gpu99"]}, errors.DirectorNotFoundError, "gpu99"),
        ({"count": 1, "model": "Tesla-V100"}, errors.UnknownModelError, "Tesla-V100.*models present"),
        ({"count": 4, "model": T4}, errors.InsufficientGpusError, "need 4 more free Tesla-T4.*only 3 free"),
        ({"device_names": ["gpu4"]}, errors.DirectorConflictError, "attached to machine m2"),
        ({"device_names": ["gpu5"]}, errors.DirectorConflictError, "pool of group g2"),
        ({"device_names": ["gpu6"]}, errors.CompositionError, "not healthy"),
        ({"device_names": ["gpu3"], "model": T4}, errors.CompositionError, "is a NVIDIA-A100"),
    ],
)
def test_refusals(kw: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        plan(**kw)


def test_excluded_gpus_are_never_picked() -> None:
    assert plan(count=1, model=T4, excluded=["gpu2"]).attach == ("gpu0",)


# ---------------------------------------------------------------------------- properties
names = st.integers(0, 11).map(lambda i: f"gpu{i}")


@st.composite
def inventories(draw: st.DrawFn) -> list[Gpu]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        machine = draw(st.sampled_from([None, None, M1, M2]))
        group = G1 if machine is not None else draw(st.sampled_from([None, G1, G2]))
        out.append(
            gpu(
                f"gpu{i}",
                draw(st.sampled_from([T4, A100])),
                group=group,
                machine=machine,
                state=draw(st.sampled_from(["active | online"] * 3 + ["ERROR"])),
            )
        )
    return out


@settings(max_examples=150, deadline=None)
@given(inv=inventories(), count=st.integers(0, 6), model=st.sampled_from([None, T4, A100]), data=st.data())
def test_count_plans_are_sound(inv: list[Gpu], count: int, model: str | None, data: st.DataObject) -> None:
    on_m1 = [g.name for g in inv if g.machine_id == M1]
    current = data.draw(st.lists(st.sampled_from(on_m1), unique=True) if on_m1 else st.just([]))
    by = {g.name: g for g in inv}
    try:
        p = plan_composition(inv, machine_id=M1, group_id=G1, count=count, model=model, current=current)
    except (errors.InsufficientGpusError, errors.UnknownModelError):
        return
    target = p.target
    assert len(target) == count
    assert set(p.keep) <= set(current) and not set(p.attach) & set(current)
    assert set(p.detach) == set(current) - set(p.keep)
    for n in p.attach:  # only free, healthy, reachable GPUs of the model are attached
        g = by[n]
        assert g.machine_id is None and g.healthy and g.group_id in (None, G1)
    assert all(model is None or by[n].model == model for n in target)
    # deterministic
    assert p == plan_composition(inv, machine_id=M1, group_id=G1, count=count, model=model, current=current)


@settings(max_examples=100, deadline=None)
@given(inv=inventories(), count=st.integers(1, 6), model=st.sampled_from([T4, A100]))
def test_applying_a_plan_then_replanning_is_a_no_op(inv: list[Gpu], count: int, model: str) -> None:
    try:
        p = plan_composition(inv, machine_id=M1, group_id=G1, count=count, model=model, current=[])
    except (errors.InsufficientGpusError, errors.UnknownModelError):
        return
    after = [
        g.model_copy(update={"machine_id": M1, "group_id": G1}) if g.name in p.attach else g for g in inv
    ]
    again = plan_composition(after, machine_id=M1, group_id=G1, count=count, model=model, current=p.target)
    assert not again.changes and again.keep == p.target


def test_a_refusal_on_a_large_fabric_lists_ten_names_and_a_count() -> None:
    """On 1,000 GPUs the message stays one readable line: ten names, then how many more."""
    inv = [gpu(f"gpu{i}") for i in range(1000)]
    with pytest.raises(errors.InsufficientGpusError) as caught:
        plan_composition(inv, machine_id=M1, group_id=G1, count=1001, device_names=(), model=None, current=())
    text = str(caught.value)
    listed = ", ".join(f"gpu{i}" for i in range(10))
    assert f"only 1000 free ({listed} … and 990 more)" in text
    assert len(text) < 300
    with pytest.raises(errors.DirectorNotFoundError, match="gpu2009 … and 5 more"):
        plan_composition(
            inv, machine_id=M1, group_id=G1, count=None,
            device_names=[f"gpu{2000 + i}" for i in range(15)], model=None, current=(),
        )
    assert errors.name_list([]) == "none"
