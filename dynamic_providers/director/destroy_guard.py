"""``ComposerGpuGuard``: ``pulumi destroy`` stops while the composer still holds GPUs.

The composer attaches GPUs from its pool to nodes and tags each with its owner tag (the device's
user description, :attr:`dynamic_providers.director.models.Gpu.owner_tag`); only a running composer
gives them back, on its idle reclaim. Destroying the composer while it holds some would leave them
composed to their machines with nobody to return them. The guard is a child of the composer
component that depends on the composer's chart, so Pulumi deletes it first: its ``delete`` reads the
Director's GPUs and refuses while any GPU of the composer's group carrying its owner tag is attached
to a machine. The composer is then still running; the message names the GPUs and machines and what
to do (remove the GPU workloads and let the composer reclaim, or decompose them by hand). Create and
update only record the inputs (``kit.RecordProvider``); nothing is written to the Director.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult

from dynamic_providers import kit, oneline
from dynamic_providers.director.account import SECRET_KEYS, ComposerGuardSpec
from dynamic_providers.director.client import DirectorClient
from dynamic_providers.director.errors import DirectorError
from dynamic_providers.director.models import Gpu

#: Per-request timeout of the guard's read, seconds.
READ_TIMEOUT_SECONDS = 10.0

#: The inputs; a change of any is an in-place update (nothing on the Director changes).
INPUTS = ("endpoint", "username", "password", "verify_tls", "owner_tag", "group")

oneline.install()


class ComposerHoldsGpusError(Exception):
    """The composer still holds GPUs, or the Director could not be read to tell (the delete stops)."""


def held_by_composer(gpus: Sequence[Gpu], *, owner_tag: str, group: str) -> list[Gpu]:
    """The GPUs of ``gpus`` that the composer holds: attached to a machine, tagged ``owner_tag``,
    and in ``group`` (a device whose group the Director leaves out counts too), sorted by name."""
    return sorted(
        (g for g in gpus if g.machine is not None and g.owner_tag == owner_tag and g.group in (None, group)),
        key=lambda g: g.name,
    )


def holding_message(held: Sequence[Gpu], *, owner_tag: str, group: str) -> str:
    """One line: which GPUs the composer holds on which machines, and what to do before destroying.

    ``held`` is not empty (:func:`held_by_composer`)."""
    where = ", ".join(f"{g.name} on {g.machine}" for g in held)
    return (
        f"the composer still holds {len(held)} GPU(s) of group {group!r} tagged {owner_tag!r} ({where}); "
        "destroying it now would leave them composed with nobody to return them: delete the GPU "
        "workloads, wait until no node carries the composer.liqid.io/devices annotation (the composer "
        "reclaims idle nodes after its idle timeout), then destroy again; or decompose them with the "
        "Director first"
    )


class ComposerGpuGuardProvider(kit.RecordProvider):
    """Dynamic provider of :class:`ComposerGpuGuard` (stateless; only ``delete`` reads the Director)."""

    inputs = INPUTS

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """The inputs' shapes (:class:`ComposerGuardSpec`; unknowns at preview not judged). The
        account itself is probed by the composer's ``DirectorEndpoint``."""
        return CheckResult(news, kit.check_known(ComposerGuardSpec, news).failures)

    def new_id(self, props: Mapping[str, Any], outs: Mapping[str, Any]) -> str:
        """``<endpoint>#<group>/<owner tag>``."""
        return f"{props['endpoint']}#{props['group']}/{props['owner_tag']}"

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Return when the composer holds no GPU; otherwise stop the delete (and the destroy).

        Raises:
            ComposerHoldsGpusError: a GPU of the group carrying the owner tag is attached to a
                machine (:func:`holding_message`), or the Director could not be read (the message
                says how to forget the guard when the Director is gone for good).
        """
        spec = ComposerGuardSpec.model_validate({k: kit.plain(props.get(k)) for k in INPUTS
                                                 if props.get(k) is not None})
        owner_tag, group = spec.owner_tag, spec.group
        try:
            with DirectorClient(spec.endpoint, username=spec.username, password=spec.password, retries=2,
                                timeout=READ_TIMEOUT_SECONDS, verify_tls=spec.verify_tls) as client:
                gpus = client.gpus()
        except DirectorError as exc:
            raise ComposerHoldsGpusError(
                f"cannot tell whether the composer still holds GPUs: {exc}; retry when the Director "
                "answers, or, if it is gone for good, forget this guard with "
                "pulumi state delete <its URN> and destroy again"
            ) from None
        held = held_by_composer(gpus, owner_tag=owner_tag, group=group)
        if held:
            raise ComposerHoldsGpusError(holding_message(held, owner_tag=owner_tag, group=group))


class ComposerGpuGuard(kit.DynamicResource, module="director", name="ComposerGpuGuard"):
    """Stops ``pulumi destroy`` while the composer holds GPUs (see the module docstring).

    Args:
        resource_name: Pulumi name.
        endpoint, username, password, verify_tls: the Director and its account, as for
            :class:`~dynamic_providers.director.endpoint.DirectorEndpoint` (the account is a secret).
        owner_tag: the composer's owner tag (``composer.owner_tag``).
        group: the Director group of the composer's pool.
        opts: make it depend on the composer's chart, so it is deleted before the composer.
    """

    owner_tag: pulumi.Output[str]
    group: pulumi.Output[str]

    secret_inputs = SECRET_KEYS

    def __init__(self, resource_name: str, *, endpoint: pulumi.Input[str], username: pulumi.Input[str],
                 password: pulumi.Input[str], owner_tag: pulumi.Input[str], group: pulumi.Input[str],
                 verify_tls: pulumi.Input[bool] = True, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(ComposerGpuGuardProvider(), resource_name,
                         {"endpoint": endpoint, "username": username, "password": password,
                          "verify_tls": verify_tls, "owner_tag": owner_tag, "group": group}, opts)
