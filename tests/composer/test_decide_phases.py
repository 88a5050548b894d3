"""``decide`` runs its :data:`~composer.decide.decide.PHASES` in order on one
:class:`~composer.decide.decide.Round`. The Round's docstring names, for each field a phase
adds, the phase or phases adding it; each phase's docstring names what it reads. A phase reads
only what :meth:`Round.start` or an earlier phase adds (so a phase moved before one whose fields
it reads fails here), and over a random composer life (``life_step`` of the fast-path test) each
phase changes only the fields documented as its own, plus the ones every phase may append to
(Events, pod actions, timers, the controller's memory)."""

from __future__ import annotations

import copy
import random
import re
from dataclasses import fields
from typing import Any
from unittest import mock

from composer.decide import decide as decide_mod
from composer.decide.decide import PHASES, Round
from composer.run import controller as controller_mod
from tests.composer.fakes import Clock
from tests.composer.test_controller import make, run
from tests.composer.test_decide_fast_paths import _world, life_step

#: Fields any phase may append to (in phase order: the Decision's order).
SHARED = {"events", "actions", "wake", "memory"}


def _documented() -> dict[str, set[str]]:
    """Round field -> the phases its docstring entry names (``:func:`name```); the fields
    :meth:`Round.start` fills name none."""
    doc = Round.__doc__ or ""
    body = doc.split("Attributes:", 1)[1]
    out: dict[str, set[str]] = {}
    for entry in re.split(r"\n        (?=\w[\w, ]*:)", "\n" + body):
        if ":" not in entry:
            continue
        names, text = entry.split(":", 1)
        for name in names.split(","):
            out[name.strip()] = set(re.findall(r":func:`(\w+)`", text))
    return out


def test_the_round_docstring_names_every_field_and_only_phases() -> None:
    doc = _documented()
    assert set(doc) == {f.name for f in fields(Round)}
    phases = {p.__name__ for p in PHASES}
    assert set().union(*doc.values()) <= phases


def test_each_phase_reads_only_what_the_start_or_an_earlier_phase_adds() -> None:
    """A phase's docstring names what it reads (``Reads ...;``); each Round field among them is
    filled by :meth:`Round.start` or documented as added by an earlier phase."""
    doc = _documented()
    order = [p.__name__ for p in PHASES]
    for i, phase in enumerate(PHASES):
        reads = re.search(r"Reads (.*?);", " ".join((phase.__doc__ or "").split()))
        assert reads, f"{phase.__name__} does not say what it reads"
        names = {n.split(".")[0] for n in re.findall(r"``([\w.]+)``", reads.group(1))} & set(doc)
        assert names, phase.__name__
        for name in names:
            by = doc[name]
            assert not by or any(order.index(b) < i for b in by), f"{phase.__name__} reads {name} before {by}"


def test_decide_documents_its_phases_in_their_order() -> None:
    text = (decide_mod.decide.__doc__ or "").split("Args:")[0]
    assert re.findall(r":func:`(\w+)`", text) == [p.__name__ for p in PHASES]


def test_each_phase_adds_only_its_documented_fields_in_order() -> None:
    doc = _documented()
    order = [p.__name__ for p in PHASES]
    seen: list[list[str]] = []
    changed: dict[str, set[str]] = {name: set() for name in order}

    def watched(phase: Any) -> Any:
        def run_phase(r: Round) -> None:
            before = {f.name: copy.deepcopy(getattr(r, f.name)) for f in fields(Round)}
            phase(r)
            seen[-1].append(phase.__name__)
            for f in fields(Round):
                if getattr(r, f.name) != before[f.name]:
                    changed[phase.__name__].add(f.name)

        return run_phase

    real = decide_mod.decide

    def decide(snapshot: Any, memory: Any, policy: Any) -> Any:
        seen.append([])
        return real(snapshot, memory, policy)

    rnd = random.Random(7)
    clock = Clock()
    w = _world()
    ctrl = make(w, clock)
    made = 0
    with (
        mock.patch.object(decide_mod, "PHASES", tuple(watched(p) for p in PHASES)),
        mock.patch.object(controller_mod, "decide", decide),
    ):
        for _ in range(80):
            made = life_step(w, clock, rnd, made)
            run(ctrl)
    ctrl.close()
    assert seen and all(names == order for names in seen)
    for name, fs in changed.items():
        own = {f for f, by in doc.items() if name in by}
        assert fs - SHARED <= own, f"{name} changed {sorted(fs - SHARED - own)}, not documented as its own"
    # the life exercised every phase's own fields (so the check above could fail for each)
    assert all(changed[name] for name in order), changed
