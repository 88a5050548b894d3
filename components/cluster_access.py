"""How the program reaches each cluster of the estate: one pulumi-kubernetes provider per cluster.

The mothership's provider is built from ``mothership.kubeconfig``. A hypervisor cluster's is built
from the kubeconfig Cluster API publishes for it on the management cluster: Secret
``<cluster>-kubeconfig``, data key ``value``, in the namespace of the cluster's ClusterDeployment
(Cluster API ``util/secret/consts.go``: ``KubeconfigDataName = "value"``, purpose suffix
``kubeconfig``; ``util/secret/secret.go`` ``Name(cluster, purpose)`` = ``<cluster>-<purpose>``), read
with ``Secret.get`` through the mothership's provider; or, for an adopted cluster
(``hypervisor_clusters[].kubeconfig``), from that file. The kubeconfig read from the Secret stays a
Pulumi secret (Secret ``data`` is an additional secret output of pulumi-kubernetes, and it is wrapped
again here), so it reaches neither the state nor the logs in plain text.

Preview before the cluster exists: the Secret's ID is derived from the ClusterDeployment's ID, which
is unknown while the ClusterDeployment is still to be created, so the engine skips the read (pulumi
``pkg/resource/deploy/step.go`` ``ReadStep.Apply``: read steps run during previews unless the ID is
unknown) and the provider's ``kubeconfig`` is unknown. The engine then does not configure that
provider (pulumi ``pkg/resource/plugin/provider_plugin.go`` ``Configure``: "If any are unknown, do not
configure the underlying plugin"): ``Check`` returns the inputs as given, ``Create`` in preview gives
unknown outputs, so each object of the cluster shows as a create with its inputs; a Helm ``Chart``
(``Construct``) shows as its component alone, without the objects it would render. See
docs/architecture.md "Reaching a child cluster".
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi.runtime.rpc import UNKNOWN as UNKNOWN_ID

from components._base import Mothership
from domain.cluster_api import KUBECONFIG_DATA_KEY, kubeconfig_secret_name
from domain.placement import placement
from stack_config.loader import resolve_path
from stack_config.models import MOTHERSHIP, EstateConfig


def decode_kubeconfig(data: Mapping[str, str] | None, secret_id: str) -> str:
    """The kubeconfig text in the ``data`` of Secret ``secret_id`` (``<namespace>/<name>``): its
    ``value`` key, base64-decoded. Pure.

    Raises:
        ValueError: the Secret has no ``value`` key, or it is not base64 of UTF-8 text; the message
            names the Secret and the key, never the data.
    """
    raw = (data or {}).get(KUBECONFIG_DATA_KEY)
    if raw is None:
        raise ValueError(
            f"Secret {secret_id} has no data key {KUBECONFIG_DATA_KEY!r}: not a Cluster API kubeconfig Secret"
        )
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError(
            f"Secret {secret_id}: data key {KUBECONFIG_DATA_KEY!r} is not base64 of a kubeconfig"
        ) from None


def with_server(kubeconfig: str, *, server: str | None = None, context: str | None = None) -> str:
    """``kubeconfig`` (YAML text) reduced to one context: ``context`` (default: its current context)
    with its cluster and user, the cluster's ``server`` replaced by ``https://<server>`` when
    ``server`` (``host:port``) is given; certificates and credentials kept as they are. Pure.

    Raises:
        ValueError: not a kubeconfig, or it has no such context, cluster or user; the message names
            the context, never the credentials.
    """
    try:
        doc = yaml.safe_load(kubeconfig)
    except yaml.YAMLError:
        raise ValueError("the kubeconfig is not YAML") from None
    if not isinstance(doc, dict):
        raise ValueError("the kubeconfig is not a mapping")
    name = context or doc.get("current-context")

    def entry(kind: str, key: str | None) -> dict[str, Any]:
        for e in doc.get(kind) or []:
            if isinstance(e, dict) and e.get("name") == key:
                return dict(e)
        raise ValueError(f"kubeconfig has no {kind[:-1]} {key!r}")

    ctx = entry("contexts", name)
    cluster = entry("clusters", ctx.get("context", {}).get("cluster"))
    user = entry("users", ctx.get("context", {}).get("user"))
    if server is not None:
        cluster["cluster"] = {**cluster.get("cluster", {}), "server": f"https://{server}"}
    out = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "contexts": [ctx], "clusters": [cluster], "users": [user]}
    return str(yaml.safe_dump(out, sort_keys=False))


@dataclass(frozen=True)
class ClusterTarget:
    """One cluster the program creates objects in.

    Attributes:
        name: the cluster's name (a hypervisor cluster, or ``mothership``).
        provider: the pulumi-kubernetes provider for it.
        is_mothership: it is the mothership's API server (same provider): objects the mothership
            already holds (the tenant's namespace) are not created a second time.
        kubeconfig: the kubeconfig text the provider was built from, a Pulumi secret (the
            decoded Cluster API Secret), when it came from a Secret.
        kubeconfig_file: the kubeconfig file the provider was built from (an adopted cluster, a
            composer's own kubeconfig), and ``context`` its context (None: the file's current one).
    """

    name: str
    provider: k8s.Provider
    is_mothership: bool = False
    kubeconfig: pulumi.Output[str] | None = None
    kubeconfig_file: Path | None = None
    context: str | None = None

    def kubeconfig_text(self) -> pulumi.Output[str]:
        """The kubeconfig of this cluster as a Pulumi secret: the Secret's text, or the file read now
        with the files it names inline (:func:`inline_files`) and ``context`` made its current
        context (:func:`with_server`).

        Raises:
            ValueError: the cluster is reached through the mothership's provider (no kubeconfig of
                its own), or the file has no such context.
            OSError: the file cannot be read.
        """
        if self.kubeconfig is not None:
            return self.kubeconfig
        if self.kubeconfig_file is None:
            raise ValueError(f"cluster {self.name!r} is reached through the mothership's provider")
        text = with_server(inline_files(self.kubeconfig_file), context=self.context)
        return pulumi.Output.secret(text)


#: kubeconfig keys naming a file, and the key holding the same content inline (base64), as
#: client-go's ``clientcmd/api/v1`` types pair them (``certificate-authority`` /
#: ``certificate-authority-data``, ``client-certificate`` / ``client-certificate-data``,
#: ``client-key`` / ``client-key-data``).
FILE_KEYS: dict[str, str] = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def inline_files(path: Path) -> str:
    """The kubeconfig file ``path`` with every file it names (:data:`FILE_KEYS`; a relative path is
    relative to the file's folder, as client-go resolves it) read into the inline ``*-data`` key, so
    the text works where those files are not (a Pod).

    Raises:
        OSError: the kubeconfig or a file it names cannot be read.
        ValueError: the file is not a kubeconfig mapping.
    """
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a kubeconfig")
    for kind, inner in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(kind) or []:
            body = entry.get(inner) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key, data_key in FILE_KEYS.items():
                if key in body:
                    named = (path.parent / str(body.pop(key))).resolve()
                    body[data_key] = base64.b64encode(named.read_bytes()).decode()
    return str(yaml.safe_dump(doc, sort_keys=False))


@dataclass(frozen=True)
class TenantTarget:
    """A cluster where a tenant's objects go (namespace, quota, NADs, GPU sharing config).

    Attributes:
        target: the cluster (its provider; the first of the clusters sharing that provider).
        clusters: names of every cluster the objects serve there (one API server may be several).
        namespace_resource: the tenant's Namespace in that cluster (dependency), or None.
    """

    target: ClusterTarget
    clusters: Sequence[str]
    namespace_resource: pulumi.Resource | None = None


@dataclass(frozen=True)
class Clusters:
    """The providers of every cluster of the estate, by cluster name.

    Attributes:
        mothership: the mothership (provider, infrastructure namespace).
        targets: hypervisor cluster name -> its :class:`ClusterTarget`.
    """

    mothership: Mothership
    targets: Mapping[str, ClusterTarget]

    def target(self, cluster: str) -> ClusterTarget:
        """The target of ``cluster`` (``mothership`` is the mothership).

        Raises:
            KeyError: no such cluster (a programming error: the config rules check names).
        """
        if cluster == MOTHERSHIP:
            return ClusterTarget(MOTHERSHIP, self.mothership.provider, is_mothership=True)
        return self.targets[cluster]

    def provider_for(self, obj: str, cluster: str | None = None) -> k8s.Provider:
        """The provider for program object ``obj`` (:data:`domain.placement.PLACEMENTS`): the
        mothership's for a mothership object, else that of ``cluster``.

        Raises:
            ValueError: a hypervisor object without ``cluster`` (a programming error).
        """
        if placement(obj).cluster == "mothership":
            return self.mothership.provider
        if cluster is None:
            raise ValueError(f"object {obj!r} lives in a hypervisor cluster: name it")
        return self.target(cluster).provider


def child_provider(
    name: str,
    *,
    cluster: str,
    namespace: str,
    deployment: pulumi.CustomResource,
    mothership: k8s.Provider,
    parent: pulumi.Resource,
) -> tuple[k8s.Provider, pulumi.Output[str]]:
    """Provider ``name`` for child cluster ``cluster`` from its kubeconfig Secret on the mothership,
    and that kubeconfig (a Pulumi secret).

    Registers ``<name>-kubeconfig``, a read of Secret ``<namespace>/<cluster>-kubeconfig`` through
    ``mothership`` whose ID follows ``deployment``'s (so it is unknown, and the read skipped, while the
    ClusterDeployment is to be created or its ID comes from a stack not deployed yet), and the
    provider, whose ``kubeconfig`` is the decoded ``value`` as a Pulumi secret. The read depends on
    ``deployment``, whose create or update ends only once kcm reports it Ready (its
    ``pulumi.com/waitFor`` annotation, :mod:`components.hypervisor_cluster`), when Cluster API has
    written the Secret. A read that still finds no Secret fails naming it.
    """
    secret_id = f"{namespace}/{kubeconfig_secret_name(cluster)}"

    def follow(deployment_id: str) -> Any:
        # A read resource's ID is always reported known, so a ClusterDeployment read whose own ID was
        # unknown (another stack not deployed yet, components.references) reports the engine's unknown
        # sentinel as its ID (pulumi SDK runtime/resource.py read_resource): keep the Secret's unknown.
        return pulumi.UNKNOWN if deployment_id == UNKNOWN_ID else secret_id

    read = k8s.core.v1.Secret.get(
        f"{name}-kubeconfig",
        deployment.id.apply(follow),
        opts=pulumi.ResourceOptions(parent=parent, provider=mothership, depends_on=[deployment]),
    )
    kubeconfig = pulumi.Output.secret(read.data.apply(lambda data: decode_kubeconfig(data, secret_id)))
    return k8s.Provider(name, kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=parent)), kubeconfig


def cluster_targets(
    name: str,
    config: EstateConfig,
    *,
    root: Path,
    mothership: Mothership,
    deployments: Mapping[str, pulumi.CustomResource],
    parent: pulumi.Resource,
) -> dict[str, ClusterTarget]:
    """A :class:`ClusterTarget` per hypervisor cluster of ``config``, providers named
    ``<name>-cluster-<cluster>``.

    In order: a composer's own kubeconfig (``composer.kubeconfig``, or a ``composers`` entry's) for
    its target cluster (provider ``<name>-composer-target``, ``-<cluster>`` appended after the
    first); an adopted cluster's kubeconfig, the mothership's own provider when
    file and context are the mothership's; else the cluster's kubeconfig Secret
    (:func:`child_provider`, ``deployments`` giving each cluster's ClusterDeployment).
    """
    ms = config.mothership
    ms_kubeconfig = resolve_path(ms.kubeconfig, root)
    # One composer per target cluster (stack_config.rules.composers_apart); the first keeps the
    # provider name the one-composer form always had.
    own = [c for c in config.all_composers() if c.kubeconfig is not None]
    composers = {c.target_cluster: (c, "" if i == 0 else f"-{c.target_cluster}") for i, c in enumerate(own)}
    out: dict[str, ClusterTarget] = {}
    for c in config.hypervisor_clusters:
        opts = pulumi.ResourceOptions(parent=parent)
        if c.name in composers:
            composer, suffix = composers[c.name]
            own_file = resolve_path(str(composer.kubeconfig), root)
            provider = k8s.Provider(f"{name}-composer-target{suffix}", kubeconfig=str(own_file), opts=opts)
            out[c.name] = ClusterTarget(c.name, provider, kubeconfig_file=own_file)
        elif c.kubeconfig is not None:
            path = resolve_path(c.kubeconfig, root)
            if path == ms_kubeconfig and c.context == ms.context:
                out[c.name] = ClusterTarget(c.name, mothership.provider, is_mothership=True)
            else:
                provider = k8s.Provider(
                    f"{name}-cluster-{c.name}", kubeconfig=str(path), context=c.context, opts=opts
                )
                out[c.name] = ClusterTarget(c.name, provider, kubeconfig_file=path, context=c.context)
        else:
            provider, kubeconfig = child_provider(
                f"{name}-cluster-{c.name}",
                cluster=c.name,
                namespace=mothership.namespace,
                deployment=deployments[c.name],
                mothership=mothership.provider,
                parent=parent,
            )
            out[c.name] = ClusterTarget(c.name, provider, kubeconfig=kubeconfig)
    return out


def distinct_targets(targets: Sequence[ClusterTarget]) -> list[tuple[ClusterTarget, list[str]]]:
    """``targets`` grouped by provider, in order: ``(first target, names of every target of that
    provider)``. Two clusters reached through one provider are one API server (an adopted cluster
    that is the mothership, a composer targeting the mothership), so an object goes there once."""
    groups: dict[int, tuple[ClusterTarget, list[str]]] = {}
    for t in targets:
        key = id(t.provider)
        if key in groups:
            groups[key][1].append(t.name)
        else:
            groups[key] = (t, [t.name])
    return list(groups.values())
