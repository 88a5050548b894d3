"""Pulumi mocks for the component tests.

``mocks`` installs a recording mock monitor (``pulumi.runtime.set_mocks``) and yields a
:class:`Recorder` listing every registered resource with its type, name, inputs, parent URN and
custom/component flag. The dynamic providers are mocked by returning plausible outputs; their
inputs are recorded as sent (secrets stay wrapped as RPC secrets, so tests can check them).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

from tests.config.factories import valid_estate


@dataclass
class Registration:
    """One registered resource as the mock monitor saw it."""

    typ: str
    name: str
    inputs: dict[str, Any]
    parent: str
    custom: bool
    urn: str
    provider: str
    read: bool = False


@dataclass
class Recorder:
    """Everything registered during a test."""

    registrations: list[Registration] = field(default_factory=list)

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.registrations if r.typ == typ]

    def named(self, name: str, typ: str | None = None) -> Registration:
        found = [r for r in self.registrations if r.name == name and (typ is None or r.typ == typ)]
        assert len(found) == 1, (
            f"expected one resource {name!r} ({typ}), found {[(r.typ, r.name) for r in found]}"
        )
        return found[0]

    def urn_of(self, name: str, typ: str) -> str:
        return self.named(name, typ).urn

    def children_of(self, name: str, typ: str) -> list[Registration]:
        urn = self.urn_of(name, typ)
        return [r for r in self.registrations if r.parent == urn]


def _dynamic_outputs(typ: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out = dict(inputs)
    if typ.endswith(":DpuPosture"):
        out.update(
            host_privilege_level=inputs.get("host_privilege"),
            reset_pending=False,
            drift=[],
            awaiting_reset=[],
            pending_attributes={},
        )
    elif typ.endswith(":GpuComposition"):
        names = inputs.get("requested_device_names") or [
            f"gpu{i}" for i in range(int(inputs.get("count") or 0))
        ]
        out.update(
            device_names=list(names),
            models=[inputs.get("model") or "Tesla-T4"] * len(names),
            fabric_ids=[f"0x{i:04x}" for i in range(len(names))],
            machine_id=1,
        )
    return out


#: Marker inside every kubeconfig the mocked mothership holds in a ``<cluster>-kubeconfig`` Secret.
KUBECONFIG_MARKER = "child-cluster-token-5d1e"


def child_kubeconfig(secret_id: str) -> str:
    """The kubeconfig text the mocked mothership holds in Secret ``secret_id`` (carries the marker);
    one context, current, as Cluster API writes it (``<cluster>-admin@<cluster>``)."""
    return (
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://10.9.9.9:6443}}]\n"
        f"users: [{{name: u, user: {{token: {KUBECONFIG_MARKER}-{secret_id}}}}}]\n"
        "contexts: [{name: u@c, context: {cluster: c, user: u}}]\ncurrent-context: u@c\n"
    )


class _Mocks(pulumi.runtime.Mocks):
    """Echo inputs as outputs; dynamic providers add plausible outputs, except during preview, where
    (like real dynamic providers on create) they report none, so the SDK resolves them unknown.

    During preview every resource is one to create (a first preview): its ID is unknown, as the
    engine gives none for a create. A read of a Secret ``<ns>/<cluster>-kubeconfig`` returns
    :func:`child_kubeconfig` (base64, as the API server gives ``data``) unless its name is in
    ``missing`` (then it fails like the engine's read of an absent object); a read whose ID is unknown
    returns nothing, as the engine skips it (pulumi ``pkg/resource/deploy/step.go`` ``ReadStep``).
    A StackReference to stack ``<org>/<project>/<stack>`` gives ``stack_outputs[<stack>]`` (none
    when absent)."""

    def __init__(
        self,
        *,
        preview: bool = False,
        missing: frozenset[str] = frozenset(),
        stack_outputs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.preview = preview
        self.missing = missing
        self.stack_outputs = stack_outputs or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        if args.typ == "pulumi:pulumi:StackReference":
            outputs = self.stack_outputs.get(str(args.resource_id).rsplit("/", 1)[-1], {})
            return args.resource_id, {"name": args.resource_id, "outputs": outputs, "secret_output_names": []}
        if args.resource_id and args.typ == "kubernetes:core/v1:Secret":
            return self._read_secret(args.resource_id)
        if args.typ.startswith("pulumi-python:dynamic") and self.preview:
            return None, {}
        if self.preview and not args.typ.startswith("pulumi:providers:"):
            return "", dict(args.inputs)
        if args.typ.startswith("pulumi-python:dynamic"):
            return f"{args.name}-id", _dynamic_outputs(args.typ, _unwrap(args.inputs))
        return f"{args.name}-id", dict(args.inputs)

    def _read_secret(self, secret_id: str) -> tuple[str, dict]:
        if secret_id == rpc.UNKNOWN:
            return secret_id, {}
        if secret_id in self.missing or not secret_id.endswith("-kubeconfig"):
            raise Exception(f"resource '{secret_id}' does not exist")
        value = base64.b64encode(child_kubeconfig(secret_id).encode()).decode()
        return secret_id, {"data": {"value": value}, "type": "cluster.x-k8s.io/secret"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        return {}, None


def unwrap(value: Any) -> Any:
    """``value`` with every RPC secret wrapper removed."""
    return _unwrap(value)


def _unwrap(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return _unwrap(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi.runtime.Mocks, recorder: Recorder) -> None:
        super().__init__(mocks)
        self.recorder = recorder

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().ReadResource(request)
        self.recorder.registrations.append(
            Registration(
                typ=request.type, name=request.name, inputs={"id": request.id}, parent=request.parent,
                custom=True, urn=response.urn, provider=request.provider, read=True,
            )
        )
        return response

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            self.recorder.registrations.append(
                Registration(
                    typ=request.type,
                    name=request.name,
                    inputs=copy.deepcopy(inputs),
                    parent=request.parent,
                    custom=bool(request.custom),
                    urn=response.urn,
                    provider=request.provider,
                )
            )
        return response


def install_mocks(
    *,
    preview: bool = False,
    missing: frozenset[str] = frozenset(),
    stack: str = "test",
    stack_outputs: dict[str, dict[str, Any]] | None = None,
) -> Recorder:
    """Install recording mocks (``preview``: a first preview; ``missing``: kubeconfig Secrets the
    mothership does not hold; ``stack``: the stack's name; ``stack_outputs``: the outputs of the
    stacks a StackReference names, by stack name) and return their recorder."""
    recorder = Recorder()
    m = _Mocks(preview=preview, missing=missing, stack_outputs=stack_outputs)
    pulumi.runtime.set_mocks(
        m, project="composable-gpu", stack=stack, preview=preview, monitor=_RecordingMonitor(m, recorder),
        organization="organization",
    )
    return recorder


@pytest.fixture
def mocks() -> Iterator[Recorder]:
    """Install recording Pulumi mocks for one test (project ``composable-gpu``, stack ``test``)."""
    recorder = Recorder()
    m = _Mocks()
    pulumi.runtime.set_mocks(
        m, project="composable-gpu", stack="test", preview=False, monitor=_RecordingMonitor(m, recorder)
    )
    yield recorder


def is_secret(value: Any) -> bool:
    """True when ``value`` arrived at the monitor as a Pulumi secret."""
    return rpc.is_rpc_secret(value)


def plain_occurrences(value: Any, needle: str, path: str = "") -> list[str]:
    """Paths where ``needle`` appears in ``value`` outside any secret wrapper."""
    if rpc.is_rpc_secret(value):
        return []
    if isinstance(value, str):
        return [path] if needle in value else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in plain_occurrences(v, needle, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in plain_occurrences(v, needle, f"{path}[{i}]")]
    return []


@pytest.fixture
def estate_dict() -> dict[str, Any]:
    """A valid estate config (raw dict) exercising every component."""
    return valid_estate()


def run(fn: Any) -> Any:
    """Call ``fn()`` (which registers resources) under the installed mocks, wait for every
    registration, and return what ``fn`` returned."""
    box: dict[str, Any] = {}

    @pulumi.runtime.test
    def _run() -> None:
        box["value"] = fn()

    _run()
    return box["value"]


def value(output: Any) -> Any:
    """The resolved value of an output (after :func:`run`)."""
    from pulumi.runtime.sync_await import _sync_await

    return _sync_await(pulumi.Output.from_input(output).future())


def uses_provider(reg: Registration, name: str) -> bool:
    """True when ``reg`` was registered with the explicit kubernetes provider called ``name``."""
    return f"pulumi:providers:kubernetes::{name}::" in reg.provider
