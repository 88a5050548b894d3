"""``composable:infra:Host``: a bare-metal host registered with Metal3."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components._base import Mothership, child_opts, contract_props, publish_outputs, secret, token
from components.dpu import Dpu, DpuArgs, ssh_connection
from components.manifests import bare_metal_host_spec, bmc_address, common_labels, host_user_data
from domain.placement import OBJECT_LABEL
from dynamic_providers.ssh.provider import HostKernelPrep
from stack_config.models import HostConfig


@dataclass(frozen=True)
class HostArgs:
    """Inputs of :class:`Host`.

    Attributes:
        config: the host's config.
        mothership: where the Kubernetes objects go.
        cluster: hypervisor cluster the host belongs to, or None.
        gpu_mode: ``passthrough`` | ``vgpu`` | ``container`` | ``none`` (from the cluster's mode).
        node_labels: GPU Operator labels for the host's node (workload type, device-plugin and
            MIG config); put on the BareMetalHost for CAPM3 label sync.
        label_nodes: lab only: also patch these labels onto the Node named like the host
            (:meth:`Host.label_node`, through the provider of the host's cluster).
        dpu_ca_bundle: resolved CA bundle path for the DPU BMC, or None.
    """

    config: HostConfig
    mothership: Mothership
    cluster: str | None = None
    gpu_mode: str = "none"
    node_labels: Mapping[str, str] = field(default_factory=dict)
    label_nodes: bool = False
    dpu_ca_bundle: str | None = None


class Host(pulumi.ComponentResource):
    """A bare-metal host: Metal3 BareMetalHost, its BMC credentials and cloud-init user-data.

    Children (all Kubernetes objects in the mothership's infrastructure namespace):

    - ``<name>-bmc-credentials``: Secret with ``username``/``password`` (Pulumi secrets).
    - ``<name>-user-data`` (only for a host in no hypervisor cluster): Secret with ``userData``:
      cloud-init that appends the kernel args (``intel_iommu=on iommu=pt pci=realloc``) and
      blacklists modules (``nouveau``). A cluster's hosts get neither: Cluster API Provider Metal3
      replaces a BareMetalHost's ``userData`` with the Machine's bootstrap data when it provisions
      the host (CAPM3 ``baremetal/metal3machine_manager.go`` ``setHostSpec``), so their kernel
      args travel in the cluster template's bootstrap data (``HypervisorCluster``).
    - ``<name>``: BareMetalHost (``bmc.address`` ``redfish-virtualmedia://...``, ``bootMACAddress``,
      ``online``, ``userData`` outside a cluster), labelled with its role, cluster and GPU Operator
      node labels.
    - ``<name>-node-labels`` (lab only, registered by :meth:`label_node`): NodePatch putting the GPU
      Operator labels on the Node, in the host's hypervisor cluster (the Nodes are that cluster's).
    - the host's :class:`~components.dpu.Dpu`, when it has one.
    - ``<name>-kernel-prep`` (only with ``prep`` in the config, for hosts already installed):
      :class:`dynamic_providers.ssh.provider.HostKernelPrep`, the same kernel args and blacklist applied
      over SSH (query first, change only what differs; reboot only with ``prep.allow_reboot``). It runs
      after the DPU's SSH mlxconfig step, so a reboot never cuts that short. The SSH private key is a
      Pulumi secret.

    Contract properties: ``name``, ``role``, ``bmc_address``, ``bmc_verify_tls``, ``kernel_args``,
    ``blacklisted_modules``, ``cluster``, ``tenant_workloads``, ``dpu``, ``gpu_mode``; with ``prep``
    also ``allow_reboot``.

    Output ``reboot_pending``: True while the kernel args or blacklist applied over SSH are not active
    yet (None without ``prep``).
    """

    name: pulumi.Output[str]
    role: pulumi.Output[str]
    bmc_address: pulumi.Output[str]
    cluster: pulumi.Output[str | None]
    gpu_mode: pulumi.Output[str]
    bare_metal_host: pulumi.Output[str]
    credentials_secret: pulumi.Output[str]
    user_data_secret: pulumi.Output[str | None]
    dpu_name: pulumi.Output[str | None]
    reboot_pending: pulumi.Output[bool | None]
    dpu: Dpu | None
    kernel_prep: HostKernelPrep | None
    """The SSH kernel-preparation resource, when the config has ``prep``."""
    bmh_resource: k8s.apiextensions.CustomResource
    """The BareMetalHost (its cluster's ClusterDeployment waits for it)."""

    def __init__(self, name: str, args: HostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        c = args.config
        address = bmc_address(c.bmc.endpoint, driver=c.bmc.driver, system_id=c.bmc.system_id)
        own = {
            "name": name,
            "bmc_address": address,
            "bmc_verify_tls": c.bmc.verify_tls,
            "cluster": args.cluster,
            "tenant_workloads": c.runs_tenant_workloads,
            "dpu": c.dpu_name,
            "gpu_mode": args.gpu_mode,
        }
        if c.prep is not None:
            own["allow_reboot"] = c.prep.allow_reboot
        props = contract_props("Host", own, config=c)
        super().__init__(token("Host"), name, props, opts)

        ms = args.mothership
        k8s_opts = {"provider": ms.provider}
        labels = common_labels(host=name, role=c.role, cluster=args.cluster)
        creds_name = f"{name}-bmc-credentials"
        user_data_name = None if args.cluster is not None else f"{name}-user-data"
        self._name = name
        creds = k8s.core.v1.Secret(
            creds_name,
            metadata={
                "name": creds_name,
                "namespace": ms.namespace,
                "labels": {**labels, OBJECT_LABEL: "bmc-credentials"},
            },
            type="Opaque",
            string_data={"username": secret(c.bmc.username), "password": secret(c.bmc.password)},
            opts=child_opts(self, depends_on=[ms.namespace_resource], **k8s_opts),
        )
        secrets: list[pulumi.Resource] = [creds]
        if user_data_name is not None:
            secrets.append(
                k8s.core.v1.Secret(
                    user_data_name,
                    metadata={
                        "name": user_data_name,
                        "namespace": ms.namespace,
                        "labels": {**labels, OBJECT_LABEL: "host-user-data"},
                    },
                    type="Opaque",
                    string_data={
                        "userData": host_user_data(
                            kernel_args=c.kernel_args, blacklisted_modules=c.blacklisted_modules
                        )
                    },
                    opts=child_opts(self, depends_on=[ms.namespace_resource], **k8s_opts),
                )
            )
        self.bmh_resource = k8s.apiextensions.CustomResource(
            name,
            api_version="metal3.io/v1alpha1",
            kind="BareMetalHost",
            metadata={
                "name": name,
                "namespace": ms.namespace,
                "labels": {**labels, **args.node_labels, OBJECT_LABEL: "bare-metal-host"},
            },
            spec=bare_metal_host_spec(
                c, credentials_secret=creds_name, user_data_secret=user_data_name, namespace=ms.namespace
            ),
            opts=child_opts(self, depends_on=secrets, **k8s_opts),
        )
        self._node_labels = dict(args.node_labels) if args.label_nodes else {}
        self.dpu = None
        if c.dpu is not None and c.dpu_name is not None:
            self.dpu = Dpu(
                c.dpu_name,
                DpuArgs(config=c.dpu, host=name, mothership=ms, ca_bundle=args.dpu_ca_bundle),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.kernel_prep = None
        if c.prep is not None:
            self.kernel_prep = HostKernelPrep(
                f"{name}-kernel-prep",
                connection=ssh_connection(c.prep),
                kernel_args=list(c.kernel_args),
                blacklisted_modules=list(c.blacklisted_modules),
                allow_reboot=c.prep.allow_reboot,
                sysroot=c.prep.sysroot or "",
                use_sudo=c.prep.use_sudo,
                opts=child_opts(self, depends_on=[self.dpu.mlxconfig_prep if self.dpu else None]),
            )

        publish_outputs(
            self,
            {
                **props,
                "bare_metal_host": name,
                "credentials_secret": creds_name,
                "user_data_secret": user_data_name,
                "dpu_name": c.dpu_name,
                "reboot_pending": None if self.kernel_prep is None else self.kernel_prep.reboot_pending,
            },
        )

    @property
    def cluster_prerequisites(self) -> list[pulumi.Resource]:
        """What the host's cluster waits for: the BareMetalHost, the DPU and the SSH preparation (not
        the Node patch, which goes through the cluster's own provider)."""
        return [r for r in (self.bmh_resource, self.dpu, self.kernel_prep) if r is not None]

    def label_node(self, provider: k8s.Provider) -> k8s.core.v1.NodePatch | None:
        """Lab only (``label_nodes``): register ``<name>-node-labels``, a server-side patch of the Node
        named like the host with its GPU Operator labels, through ``provider`` (the host's cluster's:
        its Nodes are there). Called once the cluster's provider exists, which may come after the
        cluster's ClusterDeployment and so after this host. Returns the patch, or None (no labels,
        or not the lab)."""
        if not self._node_labels:
            return None
        return k8s.core.v1.NodePatch(
            f"{self._name}-node-labels",
            metadata={
                "name": self._name,
                "labels": self._node_labels,
                "annotations": {"pulumi.com/patchForce": "true"},
            },
            opts=child_opts(self, provider=provider),
        )
