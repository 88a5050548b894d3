"""Composer configuration: environment variables ``COMPOSER_*`` and command-line flags.

Every field is also a flag in kebab case (``--idle-timeout-seconds 600``); flags win over the
environment. Lists and maps are JSON in the environment (``COMPOSER_EXCLUDED_DEVICES='["gpu0"]'``).
The Director password comes from ``COMPOSER_DIRECTOR_PASSWORD`` (the chart fills it from a
Secret) or from a mounted file named by ``--director-password-file``; it is never logged.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, CliApp, SettingsConfigDict

from composer.decide import reclaim_guard
from composer.decide.pools import PoolMap
from composer.decide.round_types import Policy
from composer.model.models import HostSharing
from domain import reclaim as reclaim_rules
from domain.composer_mode import DEFAULT_MODE, ComposerMode
from domain.gpu_sharing import Offer
from domain.settings import SETTINGS

#: A reclaim budget value as configured (``"2"``, ``2`` or ``"20%"``; None = no limit): the shape
#: of :data:`domain.reclaim.BUDGET_PATTERN`, checked again by ``reclaim_guard.parse_budget``.
BudgetText = Annotated[
    Annotated[str, StringConstraints(pattern=reclaim_rules.BUDGET_PATTERN)] | None,
    BeforeValidator(reclaim_rules.budget_as_text),
]


def _bounded(name: str) -> Any:
    """The pydantic field of a numeric setting: default, bounds and description from
    :data:`domain.settings.SETTINGS` (the one table the chart's values and schema are checked against)."""
    setting = SETTINGS[name]
    return Field(description=setting.description, **setting.field_args())


class PoolSpec(BaseModel):
    """A pool (tenant or cluster) and its limits.

    Attributes:
        name: pool name; namespaces and nodes join it with the label ``composer.liqid.io/pool``.
        quota_gpus: most composer-managed GPUs the pool's hosts may hold at once (None = no limit).
        devices: Director device names reserved to the pool (only its pods get them).
        hosts: Node names that serve the pool (win over the Nodes' pool label).
        namespaces: namespaces whose pods belong to the pool (win over the namespaces' pool label).
        reclaim_budget: most of the pool's nodes reclaiming at once, ``"2"`` or ``"20%"`` of
            its nodes (rounded up); None = the composer-wide ``reclaim_budget``.

    Accepts snake_case or camelCase keys (``quotaGpus``, as in the chart's values).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    name: str = Field(min_length=1, max_length=63)
    quota_gpus: int | None = Field(default=None, ge=0, le=100_000)
    devices: list[str] = Field(default_factory=list)
    hosts: list[str] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    reclaim_budget: BudgetText = None


class OfferSpec(BaseModel):
    """What one GPU of a model yields on a host with a sharing setting, for one resource
    (:class:`domain.gpu_sharing.Offer`).

    Attributes:
        resource: the resource the device plugin advertises (``nvidia.com/gpu``,
            ``nvidia.com/gpu.shared``, ``nvidia.com/mig-1g.10gb``).
        units: units of it one GPU adds to the node's allocatable.
        product: the node's ``nvidia.com/gpu.product`` label once GFD sees the GPU.
    """

    model_config = ConfigDict(extra="forbid")

    resource: str = Field(pattern=r"^nvidia\.com/[A-Za-z0-9._-]+$")
    units: int = Field(ge=1, le=1024)
    product: str = Field(min_length=1, max_length=63)

    def offer(self) -> Offer:
        """As the decision code reads it."""
        return Offer(self.resource, self.units, self.product)


class SharingSetting(BaseModel):
    """A GPU sharing setting of some hosts (chart value ``composer.sharing[]``; the Pulumi program
    writes it from the stack's ``gpu_sharing``, ``docs/gpu-sharing.md``).

    Attributes:
        name: the setting's name (its device-plugin config, ``nvidia.com/device-plugin.config``).
        strategy: ``time-slicing``, ``mps`` or ``mig``; ``vm-passthrough`` for hosts whose GPUs go to
            KubeVirt VMs whole (offers: the model's passthrough resource, one unit per GPU).
        hosts: Node names whose GPUs are shared this way.
        offers: GPU model (GFD product name) -> what one GPU of it yields there; a model missing
            is never composed onto these hosts.
        tenant: the tenant whose setting it is (named in Events).
        namespaces: the only namespaces whose pods may get these hosts' GPUs (time-slicing, MPS:
            one tenant's); empty: any.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=253)
    strategy: Literal["time-slicing", "mps", "mig", "vm-passthrough"]
    hosts: list[str] = Field(min_length=1)
    offers: dict[str, list[OfferSpec]] = Field(default_factory=dict)
    tenant: str | None = Field(default=None, min_length=1, max_length=63)
    namespaces: list[str] = Field(default_factory=list)

    def host_sharing(self) -> HostSharing:
        """As the decision code reads it."""
        return HostSharing(
            self.name,
            self.strategy,
            {m: tuple(o.offer() for o in offs) for m, offs in self.offers.items()},
            tenant=self.tenant,
            namespaces=frozenset(self.namespaces) if self.namespaces else None,
        )


def _check_one_source(
    sharing: list[SharingSetting], units_per_gpu: Mapping[str, int], resource_models: Mapping[str, list[str]]
) -> None:
    """``sharing`` is the one source of a shared resource's units and models: ``units_per_gpu`` and
    ``resource_models`` (set by hand, for hosts no sharing setting names) may not name a resource a
    sharing setting offers (the chart's ``templates/deployment.yaml`` refuses the same values).

    Raises:
        ValueError: naming the resources and the sharing settings that offer them.
    """
    by_hand = set(units_per_gpu) | set(resource_models)
    clash = {
        o.resource: e.name
        for e in sharing
        for offers in e.offers.values()
        for o in offers
        if o.resource in by_hand
    }
    if clash:
        named = ", ".join(f"{r} (offered by {n})" for r, n in sorted(clash.items()))
        raise ValueError(
            f"units_per_gpu / resource_models name {named}: sharing is the one source of a shared "
            "resource's units and models; remove them from units_per_gpu and resource_models "
            "(deprecated, for hosts no sharing setting names)"
        )


class Settings(BaseSettings):
    """All composer settings (see each field's description for meaning, unit and default)."""

    model_config = SettingsConfigDict(
        env_prefix="COMPOSER_",
        cli_kebab_case=True,
        cli_implicit_flags=True,
        cli_prog_name="python -m composer",
        extra="ignore",
    )

    mode: ComposerMode = Field(
        default=DEFAULT_MODE,
        description="how nvidia.com/gpu is served: deviceplugin (compose for pending pods, the device "
        "plugin advertises; the gating webhook) or dra (the DRA driver gpu.composer.liqid.io with binding "
        "conditions; needs resource.k8s.io/v1 with DRADeviceBindingConditions and DRAExtendedResource, "
        "Kubernetes 1.36+, checked at start); see domain/composer_mode.py",
    )
    director_url: str = Field(description="Director base URL, e.g. http://director:8080")
    director_username: str = Field(default="admin", description="Director user")
    director_password: SecretStr | None = Field(
        default=None, description="Director password (prefer a Secret)"
    )
    director_password_file: Path | None = Field(
        default=None, description="file holding the Director password"
    )
    director_timeout_seconds: float = Field(default=10.0, gt=0, le=600, description="per-request timeout")
    director_retries: int = Field(default=2, ge=0, le=10, description="client retries per call")
    director_job_timeout_seconds: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description="longest wait for a Director job (HTTP 202), and how long after a lost answer an "
        "edit it may have opened is left alone before it is cancelled (LIQID's SDK: 300 s)",
    )

    kubeconfig: str | None = Field(default=None, description="kubeconfig path; unset = in-cluster config")
    namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "gpu-composer"),
        description="namespace of the leader-election Lease",
    )
    lease_name: str = Field(default="gpu-composer", description="name of the leader-election Lease")
    identity: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        description="this replica's holder identity in the Lease",
    )
    leader_election: bool = Field(default=True, description="take part in leader election")
    lease_duration_seconds: float = Field(default=15.0, ge=1, le=300, description="Lease duration")
    lease_retry_seconds: float = Field(default=2.0, gt=0, le=60, description="pause between Lease renewals")

    pool: str = Field(default="default", min_length=1, description="pool of unlabelled namespaces and nodes")
    pools: list[PoolSpec] = Field(default_factory=list, description="pools with quotas / reserved devices")
    excluded_devices: list[str] = Field(
        default_factory=list, description="GPUs composed statically: never composed or decomposed"
    )
    node_selector: str = Field(default="", description="label selector of the nodes this composer manages")
    namespaces: list[str] = Field(default_factory=list, description="namespaces watched (empty = all)")
    max_gpus_per_node: int | None = Field(default=None, ge=1, le=64, description="GPU slots per host")
    units_per_gpu: dict[str, int] = Field(
        default_factory=dict,
        description="deprecated, by hand: resource -> units one GPU yields on hosts no sharing setting "
        "names (time-slicing replicas, MIG slices); a resource a sharing setting offers is refused",
    )
    resource_models: dict[str, list[str]] = Field(
        default_factory=dict,
        description="deprecated, by hand: resource -> GPU models able to provide it on hosts no sharing "
        "setting names; a resource a sharing setting offers is refused",
    )
    sharing: list[SharingSetting] = Field(
        default_factory=list,
        description="GPU sharing settings of hosts (time-slicing, MPS, MIG): per host, what one composed "
        "GPU of each model yields; written by the Pulumi program (docs/gpu-sharing.md)",
    )

    idle_timeout_seconds: float = _bounded("idle_timeout_seconds")
    advertise_timeout_seconds: float = _bounded("advertise_timeout_seconds")
    schedule_timeout_seconds: float = _bounded("schedule_timeout_seconds")
    compose_max_attempts: int = _bounded("compose_max_attempts")
    retry_base_seconds: float = _bounded("retry_base_seconds")
    retry_max_seconds: float = _bounded("retry_max_seconds")
    resync_seconds: float = _bounded("resync_seconds")
    compose_workers: int = _bounded("compose_workers")
    watch_cache: bool = Field(
        default=True,
        description="keep pods, nodes and namespaces in watch-fed caches (false: list them every round)",
    )
    cache_resync_seconds: float = _bounded("cache_resync_seconds")
    director_resync_seconds: float = _bounded("director_resync_seconds")
    restart_device_plugin: bool = Field(
        default=True, description="restart the device plugin if not advertised"
    )
    device_plugin_namespace: str = Field(default="gpu-operator", description="namespace of the device plugin")
    device_plugin_selector: str = Field(
        default="app=nvidia-device-plugin-daemonset", description="label selector of device-plugin pods"
    )
    mig_manager_selector: str = Field(
        default="app=nvidia-mig-manager",
        description="label selector of the GPU Operator's mig-manager pods (same namespace), restarted on a "
        "MIG host so that mig-parted partitions a hot-plugged GPU",
    )
    release_to_system_pool: bool = Field(
        default=True, description="after reclaim, move GPUs back to the system free pool"
    )

    batch_idle_seconds: float = _bounded("batch_idle_seconds")
    batch_max_seconds: float = _bounded("batch_max_seconds")
    reservation_timeout_seconds: float = _bounded("reservation_timeout_seconds")
    unserved_wait_seconds: float = _bounded("unserved_wait_seconds")
    nominate_node: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="set a gated pod's status.nominatedNodeName to the node its GPUs are reserved on "
        "(KEP-5278, so the scheduler counts the pod there and node autoscalers see where it will run); "
        "auto: on when the API server is 1.34 or newer, whose scheduler counts a nominated gated pod",
    )
    reclaim_budget: BudgetText = Field(
        default=None,
        description="most nodes of a pool reclaiming at once: a count (\"2\") or a percentage of the "
        "pool's nodes (\"20%\", rounded up) as in Karpenter's disruption budgets; unset = no limit; "
        "a pool's reclaimBudget overrides it",
    )
    reclaim_windows_utc: list[str] = Field(
        default_factory=list,
        description="reclaims start only inside one of these daily UTC windows, HH:MM-HH:MM "
        "(22:00-06:00 spans midnight); empty = any time",
    )
    owner_tag: str = Field(
        default=reclaim_rules.DEFAULT_OWNER_TAG,
        min_length=1,
        max_length=reclaim_rules.OWNER_TAG_MAX_LENGTH,
        pattern=reclaim_rules.OWNER_TAG_PATTERN,
        description="owner tag written on the GPUs this composer attaches (the Director's device "
        "description): unique per composer sharing a Director, distinct from the Pulumi program's",
    )
    orphan_grace_seconds: float = _bounded("orphan_grace_seconds")
    webhook_port: int = Field(
        default=0, ge=0, le=65535, description="HTTPS port of the pod-gating admission webhook (0 = off)"
    )
    webhook_address: str = Field(default="0.0.0.0", description="bind address of the admission webhook")
    webhook_cert_file: Path | None = Field(
        default=None, description="PEM serving certificate of the webhook (reloaded when it changes)"
    )
    webhook_key_file: Path | None = Field(default=None, description="PEM private key of the webhook")

    probe_address: str = Field(default="0.0.0.0", description="bind address of /healthz /readyz /metrics")
    probe_port: int = Field(default=8080, ge=0, le=65535, description="port of /healthz /readyz /metrics")
    log_level: str = Field(default="INFO", description="logging level")

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.director_password is None and self.director_password_file is None:
            raise ValueError("set COMPOSER_DIRECTOR_PASSWORD or --director-password-file")
        names = [p.name for p in self.pools]
        if len(names) != len(set(names)):
            raise ValueError("pool names must be unique")
        for what in ("hosts", "namespaces"):
            members = [m for p in self.pools for m in getattr(p, what)]
            twice = sorted({m for m in members if members.count(m) > 1})
            if twice:
                raise ValueError(f"pools: {', '.join(twice)} listed in the {what} of more than one pool")
        shared = [h for e in self.sharing for h in e.hosts]
        twice = sorted({h for h in shared if shared.count(h) > 1})
        if twice:
            raise ValueError(f"sharing: {', '.join(twice)} listed by more than one sharing setting")
        _check_one_source(self.sharing, self.units_per_gpu, self.resource_models)
        if self.retry_max_seconds < self.retry_base_seconds:
            raise ValueError("retry_max_seconds must be >= retry_base_seconds")
        if self.webhook_port and (self.webhook_cert_file is None or self.webhook_key_file is None):
            raise ValueError("webhook_port needs webhook_cert_file and webhook_key_file (HTTPS only)")
        if self.mode == "dra" and self.webhook_port:
            raise ValueError(
                "webhook_port must be 0 with mode dra: a node is served by the device plugin path "
                "(the gating webhook) or by DRA, never both"
            )
        if self.batch_max_seconds < self.batch_idle_seconds:
            raise ValueError("batch_max_seconds must be >= batch_idle_seconds")
        for w in self.reclaim_windows_utc:
            reclaim_guard.parse_window(w)  # ValueError names the window
        for b in [self.reclaim_budget, *(p.reclaim_budget for p in self.pools)]:
            if b is not None:
                reclaim_guard.parse_budget(b)  # ValueError names the budget (a percentage above 100)
        reclaim_rules.check_owner_tag(self.owner_tag)  # ValueError: n/a reads as no description
        if 0 < self.cache_resync_seconds < 30:
            raise ValueError(
                "cache_resync_seconds must be 0 (never relist) or at least 30: each relist reads "
                "every pod and node of the cluster"
            )
        return self

    def password(self) -> str:
        """The Director password (from the file if given, else from the variable)."""
        if self.director_password_file is not None:
            return self.director_password_file.read_text().strip()
        assert self.director_password is not None
        return self.director_password.get_secret_value()

    def policy(self) -> Policy:
        """The decision-relevant settings as a plain value."""
        return Policy(
            default_pool=self.pool,
            quotas={p.name: p.quota_gpus for p in self.pools if p.quota_gpus is not None},
            device_pools={d: p.name for p in self.pools for d in p.devices},
            excluded=frozenset(self.excluded_devices),
            max_gpus_per_node=self.max_gpus_per_node,
            units_per_gpu=dict(self.units_per_gpu),
            resource_models={k: frozenset(v) for k, v in self.resource_models.items()},
            idle_timeout_seconds=self.idle_timeout_seconds,
            advertise_timeout_seconds=self.advertise_timeout_seconds,
            schedule_timeout_seconds=self.schedule_timeout_seconds,
            compose_max_attempts=self.compose_max_attempts,
            retry_base_seconds=self.retry_base_seconds,
            retry_max_seconds=self.retry_max_seconds,
            restart_device_plugin=self.restart_device_plugin and self.mode != "dra",
            namespaces=frozenset(self.namespaces),
            batch_idle_seconds=self.batch_idle_seconds,
            batch_max_seconds=self.batch_max_seconds,
            reservation_timeout_seconds=self.reservation_timeout_seconds,
            unserved_wait_seconds=self.unserved_wait_seconds,
            pool_map=PoolMap(
                hosts={h: p.name for p in self.pools for h in p.hosts},
                namespaces={n: p.name for p in self.pools for n in p.namespaces},
            ),
            reclaim_budget=(
                None if self.reclaim_budget is None else reclaim_guard.parse_budget(self.reclaim_budget)
            ),
            reclaim_budgets={
                p.name: reclaim_guard.parse_budget(p.reclaim_budget) for p in self.pools if p.reclaim_budget
            },
            reclaim_windows=tuple(reclaim_guard.parse_window(w) for w in self.reclaim_windows_utc),
            owner_tag=self.owner_tag,
            orphan_grace_seconds=self.orphan_grace_seconds,
            lease=(self.namespace, self.lease_name),
            sharing={h: e.host_sharing() for e in self.sharing for h in e.hosts},
        )


def load(argv: list[str] | None = None) -> Settings:
    """Settings from the environment and ``argv`` (flags win).

    Raises:
        pydantic.ValidationError / SystemExit: bad values (the message names the field).
    """
    return CliApp.run(Settings, cli_args=argv or [])
