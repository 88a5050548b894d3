"""The migration's plan against the program itself: the resources moved from the monolithic dev
stack into each stack of its split (with their children, as ``pulumi state move`` takes them) are
exactly what that stack's program declares, every resource of the monolith is moved once, and
only providers, reads and the Estate component stay behind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from components.estate import composition_names
from ops.estate_migrate import MigrationError, plan_moves, urn_name
from stack_config.fleet import split_estate
from stack_config.inventory import load_inventory, read_inventory
from tests.components.test_estate import DEV_CREDENTIALS
from tests.components.test_estate_slices import DEV, DEV_OUTPUTS, DEV_ROLES, _program

_KEPT = ("composable:infra:Estate", "pulumi:providers:", "pulumi:pulumi:StackReference",
         "pulumi:pulumi:Stack")


def _state(stack: str, role: str | None) -> list[dict[str, Any]]:
    """The resources of ``stack`` as ``pulumi stack export`` lists them (the fields the plan reads)."""
    rec = _program(DEV, DEV_CREDENTIALS, role=role, stack=stack, stack_outputs=DEV_OUTPUTS)
    return [{"urn": r.urn, "type": r.typ, "parent": r.parent, "custom": r.custom, "external": r.read}
            for r in rec.registrations]


def _with_children(urns: Iterable[str], resources: list[dict[str, Any]]) -> set[str]:
    found = set(urns)
    grew = True
    while grew:
        more = {r["urn"] for r in resources if r["parent"] in found} - found
        found |= more
        grew = bool(more)
    return found


def _key(urn: str, typ: str) -> tuple[str, str]:
    """A resource as the split stack declares it: its type and name (the stack part of the URN differs)."""
    return typ, urn_name(urn)


def _dev_plan(resources: list[dict[str, Any]]) -> Any:
    files = read_inventory(DEV, shown_as=str(DEV))
    estate = load_inventory(files, DEV_CREDENTIALS, folder=str(DEV))
    fleet = split_estate(files, estate, folder=str(DEV))
    return plan_moves(resources, fleet=fleet, estate=estate, composition_names=composition_names(estate),
                      fleet_name="dev")


def test_each_split_stack_gets_what_its_program_declares_and_the_monolith_keeps_only_plumbing() -> None:
    mono = _state("dev", None)
    types = {r["urn"]: r["type"] for r in mono}
    moves = _dev_plan(mono)
    assert [m.role for m in moves] == list(DEV_ROLES)
    assert [m.stack for m in moves] == [
        "dev-platform", "dev-hosts-lab-workers", "dev-tenant-alpha", "dev-tenant-beta"]
    moved_all: list[str] = []
    for move in moves:
        moved = _with_children(move.urns, mono)
        moved_all += moved
        split = _state(move.stack, move.role)
        declared = {_key(r["urn"], r["type"]) for r in split
                    if not r["type"].startswith(_KEPT) and not r["external"]}
        assert {_key(u, types[u]) for u in moved} == declared, move.role
    assert len(moved_all) == len(set(moved_all))  # no resource moved twice
    # reads (the kubeconfig Secret of lab-workers) stay: each stack reads again what it needs
    kept = {r["type"] for r in mono if r["urn"] not in set(moved_all) and not r["external"]}
    assert all(t.startswith(_KEPT) for t in kept), kept


def test_a_component_no_stack_declares_is_refused_naming_it() -> None:
    mono = _state("dev", None)
    estate_urn = next(r["urn"] for r in mono if r["type"] == "composable:infra:Estate")
    host = "composable:infra:Estate$composable:infra:Host::gone"
    stray = estate_urn.replace("composable:infra:Estate::estate", host)
    mono.append({"urn": stray, "type": "composable:infra:Host", "parent": estate_urn, "custom": False})
    with pytest.raises(MigrationError, match=r"no stack of the split declares .*composable:infra:Host::gone"):
        _dev_plan(mono)


def test_a_state_without_the_estate_component_is_not_a_monolith() -> None:
    mono = [r for r in _state("dev", None) if r["type"] != "composable:infra:Estate"]
    with pytest.raises(MigrationError, match="holds 0 composable:infra:Estate named 'estate'"):
        _dev_plan(mono)
