"""Move a monolithic stack's resources into the stacks of its estate's split, recreating nothing.

:func:`plan_moves` (pure) reads the monolith's state (the ``resources`` of ``pulumi stack export``)
and gives, per role of the split (:mod:`stack_config.fleet`), the URNs of the direct children of
the ``composable:infra:Estate`` component that the role's stack declares: a
``composable:infra:Host`` to its host group, a ``HypervisorCluster`` or the ``DpuCluster`` to the
stack holding it, a ``Tenant`` to its tenant's stack, a ``GpuComposition`` and a ``Composer`` to
the stack of their host or target cluster, and the estate's own Kubernetes objects (infrastructure
namespace, templates, repositories) to ``platform``. Left out: providers, which ``pulumi state
move`` copies into each destination that needs them, and reads (``.get``), which each stack reads
again.

:func:`migrate` moves them with ``pulumi state move --source S --dest D --yes URN...`` (pulumi/pulumi
``pkg/cmd/pulumi/state/state_move.go``, v3.260.0): the command moves each URN with all its
children, copies the providers they use, drops dependencies between resources that end in
different stacks (each split stack reads the others' outputs through a ``StackReference``), and
re-parents a moved resource whose parent stays to the destination's root stack; the split stacks'
``Estate`` answers to those URNs through the alias of :func:`components.moved.moved_from_root`, so
their preview shows the moved resources unchanged. The monolith keeps its ``Estate`` component,
providers and reads: nothing the engine would delete from a server; remove it with ``pulumi stack
rm --force --preserve-config`` (its file is the fleet's config).

A tenant's stack reads the ID of a ClusterDeployment it reaches from its host group's stack output
``cluster_deployments``, which only an ``up`` of that stack writes: a stack that got its resources by
a move has none, and a tenant's preview would see the ID unknown (:mod:`components.references`),
its cluster's provider with it. So :func:`seed_deployment_outputs` adds to the destination's root
stack the output its next ``up`` exports, from the moved ClusterDeployments' IDs (``pulumi stack
export``, ``pulumi stack import``): written to the state only, as the move itself.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.references import DEPLOYMENTS_OUTPUT
from stack_config.fleet import PLATFORM, Fleet, stack_name
from stack_config.models import EstateConfig

#: The type token of the estate component, and its name in the program (``__main__.py``).
ESTATE_TYPE = "composable:infra:Estate"
ESTATE_NAME = "estate"
_PROVIDER_PREFIX = "pulumi:providers:"
#: A hypervisor cluster's component and the ClusterDeployment under it, named as the cluster.
CLUSTER_TYPE = "composable:infra:HypervisorCluster"
DEPLOYMENT_TYPE = "kubernetes:k0rdent.mirantis.com/v1beta1:ClusterDeployment"
_ROOT_STACK = "pulumi:pulumi:Stack"


class MigrationError(Exception):
    """The monolith's state cannot be split as asked: a resource no stack of the split declares,
    no estate component, a destination that already holds resources, or ``pulumi state move``
    failed (the message carries its error)."""


@dataclass(frozen=True)
class Move:
    """One ``pulumi state move``: the URNs (with their children) going to stack ``stack`` of ``role``."""

    role: str
    stack: str
    urns: tuple[str, ...]


def urn_name(urn: str) -> str:
    """The resource name of a URN (``urn:pulumi:<stack>::<project>::<type>::<name>``)."""
    return "::".join(urn.split("::")[3:])


def _owners(
    fleet: Fleet, estate: EstateConfig, composition_names: Sequence[str]
) -> dict[tuple[str, str], str]:
    """(component type, name) -> the role whose stack declares it."""
    compositions = "composable:infra:GpuComposition"
    composers = {c.target_cluster: c.release_name for c in estate.all_composers()}
    out: dict[tuple[str, str], str] = {}
    for s in fleet.slices.values():
        out.update({("composable:infra:Host", h): s.role for h in s.hosts})
        out.update({("composable:infra:HypervisorCluster", c): s.role for c in s.hypervisor_clusters})
        out.update({("composable:infra:Tenant", t): s.role for t in s.tenants})
        out.update({(compositions, composition_names[i]): s.role for i in s.compositions})
        out.update({("composable:infra:Composer", composers[t]): s.role for t in s.composers})
        if s.dpu_cluster and estate.dpu_cluster is not None:
            out[("composable:infra:DpuCluster", estate.dpu_cluster.name)] = s.role
    return out


def plan_moves(
    resources: Sequence[Mapping[str, Any]],
    *,
    fleet: Fleet,
    estate: EstateConfig,
    composition_names: Sequence[str],
    fleet_name: str,
) -> list[Move]:
    """The moves that split the monolith whose state holds ``resources``, in the fleet's order.

    Args:
        resources: the ``deployment.resources`` of ``pulumi stack export`` (each with ``urn``,
            ``type``, ``parent``, ``custom``, ``external`` as Pulumi writes them).
        fleet: the split (:func:`stack_config.fleet.split_estate`) of ``estate``.
        estate: the estate the monolith deploys.
        composition_names: the static compositions' component names
            (:func:`components.estate.composition_names`).
        fleet_name: the fleet's name (its stacks are :func:`stack_config.fleet.stack_name`).

    Returns:
        One :class:`Move` per role that gets resources; roles with none are left out.

    Raises:
        MigrationError: no ``composable:infra:Estate`` named ``estate`` at the top of the state, or a
            direct child of it that no stack of the split declares (an ``composable:infra:*``
            component of another type or name); the message names its URN.
    """
    estates = [r for r in resources
               if r.get("type") == ESTATE_TYPE and urn_name(str(r["urn"])) == ESTATE_NAME]
    if len(estates) != 1:
        raise MigrationError(f"the stack holds {len(estates)} {ESTATE_TYPE} named {ESTATE_NAME!r}, not one: "
                             "it is not a monolithic stack of this program")
    estate_urn = estates[0]["urn"]
    owners = _owners(fleet, estate, composition_names)
    moves: dict[str, list[str]] = {}
    unknown: list[str] = []
    for r in resources:
        if r.get("parent") != estate_urn:
            continue
        typ, urn = str(r["type"]), str(r["urn"])
        if typ.startswith(_PROVIDER_PREFIX) or r.get("external"):
            continue
        role = owners.get((typ, urn_name(urn)))
        if role is None and typ.startswith("composable:"):
            unknown.append(urn)
            continue
        moves.setdefault(role or PLATFORM, []).append(urn)
    if unknown:
        raise MigrationError("no stack of the split declares " + ", ".join(unknown)
                             + ": is the fleet's estate the one this stack deployed?")
    return [Move(role, stack_name(fleet_name, role), tuple(moves[role]))
            for role in fleet.order(fleet.slices) if role in moves]


def deployment_outputs(resources: Sequence[Mapping[str, Any]], clusters: Sequence[str]) -> dict[str, str]:
    """Hypervisor cluster -> its ClusterDeployment's ID (``<namespace>/<name>``), for the clusters of
    ``clusters`` whose ClusterDeployment is among a stack's ``resources`` (``pulumi stack export``'s,
    each with ``urn``, ``type``, ``parent``, ``id``): the output ``cluster_deployments`` the
    program exports from a host group's stack (``__main__.py``), as its next ``up`` would export it."""
    by_urn = {str(r["urn"]): r for r in resources}
    out: dict[str, str] = {}
    for r in resources:
        if r.get("type") != DEPLOYMENT_TYPE or r.get("external") or not r.get("id"):
            continue
        parent = by_urn.get(str(r.get("parent", "")))
        if parent is None or parent.get("type") != CLUSTER_TYPE:
            continue
        cluster = urn_name(str(parent["urn"]))
        if cluster in clusters and urn_name(str(r["urn"])) == cluster:
            out[cluster] = str(r["id"])
    return out


def seed_outputs(deployment: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """``deployment`` (``pulumi stack export``'s ``deployment``) with ``outputs`` added to its root
    stack's outputs where it has none of that name; None when nothing is added (no root stack, or
    every output already there)."""
    resources = [dict(r) for r in deployment.get("resources") or []]
    roots = [r for r in resources if r.get("type") == _ROOT_STACK]
    if len(roots) != 1:
        return None
    current = dict(roots[0].get("outputs") or {})
    added = {k: v for k, v in outputs.items() if k not in current}
    if not added:
        return None
    roots[0]["outputs"] = {**current, **added}
    return {**deployment, "resources": resources}


def held_resources(resources: Sequence[Mapping[str, Any]]) -> list[str]:
    """The URNs of a stack's resources other than its root stack and providers (a stack that holds
    none is new: a migration may move resources into it)."""
    return [str(r["urn"]) for r in resources
            if r.get("type") != _ROOT_STACK and not str(r.get("type", "")).startswith(_PROVIDER_PREFIX)]


def _pulumi(project: Path, *args: str, what: str, stdin: str | None = None) -> str:
    """``pulumi <args> --non-interactive`` in ``project`` (``what`` it does, for the error); its stdout.

    Raises:
        MigrationError: the command failed (its last lines of stderr and stdout in the message).
    """
    done = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=project, input=stdin,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr.strip() + "\n" + done.stdout.strip()).strip().splitlines()[-8:])
        raise MigrationError(f"{what} failed ({done.returncode}):\n{tail}")
    return done.stdout


def seed_deployment_outputs(project: Path, stack: str, role: str, clusters: Sequence[str]) -> dict[str, str]:
    """Give stack ``stack`` (of ``role``, holding the hypervisor clusters ``clusters``) the outputs
    ``cluster_deployments`` and ``role`` from its moved ClusterDeployments when it has none
    (:func:`deployment_outputs`, :func:`seed_outputs`), through ``pulumi stack export`` and ``pulumi
    stack import`` (secrets stay encrypted); returns the IDs given, empty when none.

    Raises:
        MigrationError: the export or the import failed.
    """
    exported = json.loads(_pulumi(project, "stack", "export", "--stack", stack,
                                  what=f"pulumi stack export of {stack}"))
    deployment = exported.get("deployment") or {}
    ids = deployment_outputs(deployment.get("resources") or [], clusters)
    seeded = seed_outputs(deployment, {DEPLOYMENTS_OUTPUT: ids, "role": role}) if ids else None
    if seeded is None:
        return {}
    _pulumi(project, "stack", "import", "--stack", stack, what=f"pulumi stack import of {stack}",
            stdin=json.dumps({**exported, "deployment": seeded}))
    return ids


def state_move(project: Path, source: str, move: Move) -> str:
    """Run ``pulumi state move --source <source> --dest <move.stack> --yes <urns>`` in ``project``;
    returns its output.

    Raises:
        MigrationError: the command failed (its last lines of stderr and stdout in the message).
    """
    return _pulumi(project, "state", "move", "--source", source, "--dest", move.stack, "--yes", *move.urns,
                   what=f"pulumi state move to {move.stack}")
