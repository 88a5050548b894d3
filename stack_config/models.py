"""Typed stack configuration: the whole estate under the Pulumi config key ``composable-gpu:estate``.

Shape (YAML in ``Pulumi.<stack>.yaml``; every field is documented below and in the exported
JSON schema ``stack_config/stack-config.schema.json``)::

    composable-gpu:estate:
      environment: lab                      # lab | staging | production
      mothership: {kubeconfig: .lab/kubeconfig, namespace: composable-infra}
      fabric:
        director: {endpoint: http://127.0.0.1:18080, username: admin, password: <secret>}
        pools: [{name: lab-pool, models: [Tesla-T4]}]
      hosts:
        - name: blade-slot-1
          role: baremetal-worker            # hypervisor | baremetal-worker | dpu-cluster-host
          boot_mac: 52:54:00:00:01:01
          bmc: {endpoint: https://127.0.0.1:18451, username: root, password: <secret>}
          dpu: {bmc: {endpoint: https://127.0.0.1:18441, username: root, password: <secret>}}
          # optional, for hosts that are already installed: kernel args and blacklist over SSH
          prep: {host: 10.0.0.21, user: gpuprep, private_key: {secure: ...}, host_key: ssh-ed25519 AAAA...}
      hypervisor_clusters: [{name: lab-workers, hosts: [blade-slot-1], gpu_workload_mode: container}]
      dpu_cluster: {name: lab-dpu}
      tenants:
        - name: alpha
          networks: [{name: alpha-net, cidr: 10.10.0.0/24, vxlan_id: 10010, vlan_id: 110}]
          clusters: [{name: alpha-k8s, hypervisor_cluster: lab-workers}]
          gpu_quota: 2
          allowed_models: [Tesla-T4]
      gpu_compositions: []                  # static attachments
      composer:
        pool: lab-pool
        idle_timeout_seconds: 300
        target_cluster: lab-workers
        pools: [{name: alpha, hosts: [blade-slot-1]}]   # tenant alpha's pods: blade-slot-1 only
        reclaim_windows_utc: ["22:00-06:00"]    # idle GPUs go back only at night (UTC)
        reclaim_budget: "1"                     # one host of a pool at a time

Names are Kubernetes-style DNS labels because they become object names. Models are frozen
and reject unknown keys. Cross-field rules (unique names, references that must exist, ...)
live in :mod:`stack_config.rules`; :func:`stack_config.loader.load_estate` runs both.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from domain.composer_mode import DEFAULT_MODE, ComposerMode
from domain.gpu_sharing import Offer, SharingSpec, Strategy
from domain.reclaim import DEFAULT_OWNER_TAG
from domain.settings import SETTINGS as COMPOSER_SETTINGS
from stack_config.gpus import GfdProductName, GpuProduct, merge_catalogue
from stack_config.types import (
    ENCRYPTED_SECRET_JSON_SCHEMA,  # noqa: F401 (re-exported: models names every stack-config type)
    Cidr,
    DnsLabel,
    EncryptedSecret,
    HttpUrl,
    KernelArg,
    MacAddress,
    MlxconfigKey,
    NonEmptyStr,
    NonNegativeInt,
    OwnerTag,
    PositiveInt,
    ReclaimBudget,
    ReclaimWindow,
    Secret,
    VlanId,
    VxlanId,
    bounded_int,
)

Environment = Literal["lab", "staging", "production"]
HostRole = Literal["hypervisor", "baremetal-worker", "dpu-cluster-host"]
GpuWorkloadMode = Literal["vm-passthrough", "vm-vgpu", "container"]
TenantGpuMode = Literal["passthrough", "vgpu", "none"]
SharingStrategy = Strategy
Cni = Literal["calico", "kuberouter", "cilium"]

#: Name that ``composer.target_cluster`` may use for the management cluster itself.
MOTHERSHIP = "mothership"

#: Host kernel arguments for VFIO passthrough (seed article 2, "bare-metal hosts").
DEFAULT_KERNEL_ARGS: tuple[str, ...] = ("intel_iommu=on", "iommu=pt", "pci=realloc")
#: Kernel modules blacklisted on GPU hosts so the NVIDIA driver (or vfio-pci) can bind.
DEFAULT_BLACKLISTED_MODULES: tuple[str, ...] = ("nouveau",)
#: BlueField-3 zero-trust mlxconfig settings from the brief (virtio-net and PCI switch emulation).
DEFAULT_MLXCONFIG: dict[str, int | str] = {
    "VIRTIO_NET_EMULATION_ENABLE": 1,
    "VIRTIO_NET_EMULATION_NUM_PF": 10,
    "VIRTIO_NET_EMULATION_NUM_VF": 10,
    "PCI_SWITCH_EMULATION_ENABLE": 1,
    "PCI_SWITCH_EMULATION_NUM_PORT": 10,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------- mothership


class MothershipConfig(_Model):
    """The management cluster (k0rdent) that receives every Kubernetes object of the program."""

    kubeconfig: NonEmptyStr = ".lab/kubeconfig"
    """Path of its kubeconfig; a relative path is relative to the project root (beside Pulumi.yaml)."""
    context: str | None = None
    """kubeconfig context to use; default: the file's current context."""
    namespace: DnsLabel = "composable-infra"
    """Namespace (created by the program) for BareMetalHosts, DPF objects and infrastructure clusters."""
    label_nodes: bool = False
    """Lab only: the mothership also holds the worker Nodes (named like the hosts); apply the hosts'
    GPU labels to those Nodes directly instead of relying on CAPM3 label sync."""


# --------------------------------------------------------------------------- fabric


class DirectorConfig(_Model):
    """The LIQID Director (fabric manager) REST endpoint, base path ``/liqid/api/v2``."""

    endpoint: HttpUrl
    """Base URL, e.g. ``http://127.0.0.1:8080`` (HTTP 8080 / HTTPS 8443 on real Directors)."""
    username: NonEmptyStr
    """API user."""
    password: Secret
    """API password (secret)."""


class GpuPoolConfig(_Model):
    """A pool of GPUs on the fabric: a Director group whose free devices can be composed."""

    name: DnsLabel
    """Pool name used by compositions and the composer."""
    group: NonEmptyStr | None = None
    """Director group name; default: the pool name."""
    models: list[GfdProductName] = Field(min_length=1)
    """GPU products in the pool, as GFD product names (``NVIDIA-L40S``, ``NVIDIA-H100-NVL``): built-in
    (:data:`stack_config.gpus.BUILTIN_GPU_PRODUCTS`) or declared under ``gpu_products``."""
    size: NonNegativeInt | None = None
    """Number of GPUs the pool holds (for capacity checks); unknown when omitted."""

    @property
    def director_group(self) -> str:
        """The Director group name of this pool."""
        return self.group or self.name


class FabricConfig(_Model):
    """The composable PCIe fabric: Director endpoint and GPU pools."""

    director: DirectorConfig
    """How to reach the Director."""
    pools: list[GpuPoolConfig] = Field(min_length=1)
    """GPU pools."""


# --------------------------------------------------------------------------- hosts and DPUs


class BmcConfig(_Model):
    """A Redfish BMC endpoint and its credentials."""

    endpoint: HttpUrl
    """Base URL of the BMC, e.g. ``https://10.0.0.11`` (Redfish service root under ``/redfish/v1``)."""
    username: NonEmptyStr
    """BMC user."""
    password: Secret
    """BMC password (secret)."""
    verify_tls: bool = True
    """Verify the BMC's TLS certificate."""
    ca_bundle: str | None = None
    """PEM file with the CA that signed the BMC certificate; relative to the project root."""


class HostBmcConfig(BmcConfig):
    """A host BMC, as Metal3 addresses it."""

    system_id: NonEmptyStr = "1"
    """Redfish ComputerSystem id (``/redfish/v1/Systems/<id>``)."""
    driver: Literal["redfish-virtualmedia", "redfish"] = "redfish-virtualmedia"
    """Ironic driver scheme for ``bmc.address`` (virtual-media boot or PXE)."""


#: Host-key algorithms accepted for pinning (OpenSSH ``known_hosts`` type names).
SSH_HOST_KEY_TYPES: tuple[str, ...] = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)
#: The BlueField-3 mst device as ``mst status`` names it (NVIDIA MFT, ``/dev/mst/mt41692_pciconf0``).
DEFAULT_MLX_DEVICE = "/dev/mst/mt41692_pciconf0"


def _ssh_host_key(value: str) -> str:
    fields = value.split()
    if len(fields) >= 3 and fields[1] in SSH_HOST_KEY_TYPES:
        fields = fields[1:]  # a whole known_hosts line "<host> <type> <key>": drop the host
    if len(fields) < 2 or fields[0] not in SSH_HOST_KEY_TYPES:
        raise PydanticCustomError(
            "ssh_host_key",
            "is not an SSH public host key '<type> <base64>' (type one of {types})",
            {"types": ", ".join(SSH_HOST_KEY_TYPES)},
        )
    try:
        base64.b64decode(fields[1], validate=True)
    except binascii.Error:
        raise PydanticCustomError("ssh_host_key", "the host key is not valid base64", {}) from None
    return f"{fields[0]} {fields[1]}"


SshHostKey = Annotated[
    str,
    AfterValidator(_ssh_host_key),
    Field(json_schema_extra={"pattern": r"^(\S+ )?(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) \S+"}),
]
"""A pinned SSH host key, ``"<type> <base64>"`` (a whole ``known_hosts`` line is accepted and its host
field dropped), e.g. the content of ``/etc/ssh/ssh_host_ed25519_key.pub`` without the comment."""


class SshConnectionConfig(_Model):
    """How the program reaches an already-installed machine over SSH (key-only, pinned host key).

    Used by :class:`HostPrepConfig` and :class:`DpuPrepConfig`; the components hand these details to
    the ``dynamic_providers.ssh`` resources as Pulumi secrets.
    """

    host: NonEmptyStr
    """DNS name or IP address of the SSH server."""
    port: bounded_int(1, 65535) = 22  # type: ignore[valid-type]
    """TCP port."""
    user: str = Field(min_length=1, max_length=32, pattern=r"^[a-z_][a-z0-9_.\-]*$")
    """Login user (public-key authentication only)."""
    private_key: EncryptedSecret
    """OpenSSH or PEM private key (Ed25519, ECDSA or RSA, without passphrase) authorised for ``user``.
    Secret: the stack file may hold it only encrypted (``pulumi config set --secret --path ... < key``)."""
    host_key: SshHostKey
    """The server's public host key, pinned: a server presenting another key is refused before
    authentication (``ssh-keyscan -t ed25519 <host>`` minus the host name, checked out of band)."""
    use_sudo: bool = False
    """Run the privileged commands (``update-grub``, ``mlxconfig``, ``reboot``, ...) with ``sudo -n``:
    set when ``user`` is not root (password-less sudo required)."""


class HostPrepConfig(SshConnectionConfig):
    """Preparation of an already-installed host over SSH: the host's ``kernel_args`` in GRUB and its
    ``blacklisted_modules`` in modprobe.d, changed only where they differ (Debian/Ubuntu layout)."""

    allow_reboot: bool = False
    """Reboot the host when the new kernel arguments or blacklist are not active yet. Default false: the
    report says ``reboot_pending`` and the reboot is left to the operator."""
    sysroot: str | None = Field(default=None, pattern=r"^/")
    """Lab only: absolute path prefixed to every file the preparation reads or writes (the SSH lab's
    stand-in tree); omitted on real hosts."""


class DpuPrepConfig(SshConnectionConfig):
    """Firmware configuration of a DPU over SSH (on its Arm OS or on the host carrying it): the DPU's
    ``mlxconfig`` settings set with ``mlxconfig -d <device> set``, only those whose next-boot value
    differs. The names and ranges are validated from config (``stack_config.rules.dpu_mlxconfig_valid``)."""

    device: str = Field(default=DEFAULT_MLX_DEVICE, min_length=1, pattern=r"^[A-Za-z0-9_./:\-]+$")
    """mst device (``/dev/mst/mt41692_pciconf0``) or PCI address (``03:00.0``) of the DPU."""
    allow_firmware_reset: bool = False
    """Run ``mlxfwreset`` when set values wait for a firmware reset. Default false: the report says
    ``firmware_reset_pending`` and the reset (or a power cycle) is left to the operator."""


class DpuConfig(_Model):
    """The BlueField-3 DPU of a host: BMC, operating mode, zero-trust posture and mlxconfig."""

    name: DnsLabel | None = None
    """DPU name; default ``dpu-<host>``."""
    bmc: BmcConfig
    """The DPU's own BMC (Redfish, ``/redfish/v1/Systems/Bluefield``)."""
    mode: Literal["DpuMode", "NicMode"] = "DpuMode"
    """BlueField operating mode (``Oem/Nvidia`` ``Mode``)."""
    host_privilege: Literal["Restricted", "Privileged"] = "Restricted"
    """``HostPrivilegeLevel`` BIOS attribute; ``Restricted`` is zero-trust."""
    host_rshim: Literal["Disabled", "Enabled"] = "Disabled"
    """Host access to the DPU's rshim (``HostRshim.Set``)."""
    mlxconfig: dict[MlxconfigKey, int | str] = Field(default_factory=lambda: dict(DEFAULT_MLXCONFIG))
    """Firmware parameters set with mlxconfig (carried by the DPF DPUFlavor ``nvconfig``)."""
    apply_reset: bool = False
    """Reset the DPU so pending BIOS settings apply (interrupts traffic)."""
    prep: DpuPrepConfig | None = None
    """Set ``mlxconfig`` on the device over SSH (for DPUs already running); default: only the DPF
    DPUFlavor carries the settings."""


class HostImageConfig(_Model):
    """OS image Metal3 writes to the host (optional: CAPM3 machine templates usually set it)."""

    url: HttpUrl
    """Image URL."""
    checksum: NonEmptyStr
    """Checksum or checksum URL."""
    checksum_type: Literal["md5", "sha256", "sha512", "auto"] = "auto"
    """Checksum algorithm."""
    format: Literal["raw", "qcow2", "vdi", "vmdk", "live-iso"] | None = None
    """Disk format; Ironic detects it when omitted."""


class HostConfig(_Model):
    """A bare-metal host. Its name is also the Kubernetes node name and the Director machine name."""

    name: DnsLabel
    """Host name (``blade-slot-1``)."""
    role: Literal["hypervisor", "baremetal-worker", "dpu-cluster-host"]
    """``hypervisor``: KubeVirt host for tenant VMs; ``baremetal-worker``: runs GPU pods directly;
    ``dpu-cluster-host``: hosts a DPU of the DPU cluster and runs no tenant workloads."""
    boot_mac: MacAddress
    """MAC address of the NIC the host boots from (``bootMACAddress``)."""
    bmc: HostBmcConfig
    """The host BMC."""
    kernel_args: list[KernelArg] = Field(default_factory=lambda: list(DEFAULT_KERNEL_ARGS))
    """Kernel command-line arguments written through cloud-init user-data."""
    blacklisted_modules: list[NonEmptyStr] = Field(default_factory=lambda: list(DEFAULT_BLACKLISTED_MODULES))
    """Kernel modules blacklisted through user-data."""
    online: bool = True
    """Desired power state (``spec.online``)."""
    boot_mode: Literal["UEFI", "UEFISecureBoot", "legacy"] = "UEFI"
    """Firmware boot mode."""
    tenant_workloads: bool | None = None
    """Whether tenant workloads run on the host; default: true unless role is ``dpu-cluster-host``."""
    image: HostImageConfig | None = None
    """OS image; omitted when a cluster template provisions the host."""
    dpu: DpuConfig | None = None
    """The host's BlueField DPU, if any."""
    prep: HostPrepConfig | None = None
    """Apply ``kernel_args`` and ``blacklisted_modules`` over SSH (for hosts that are already installed);
    default: only the cloud-init user-data carries them."""

    @property
    def dpu_name(self) -> str | None:
        """Name of the host's DPU (``dpu-<host>`` by default), or None without a DPU."""
        if self.dpu is None:
            return None
        return self.dpu.name or f"dpu-{self.name}"

    @property
    def runs_tenant_workloads(self) -> bool:
        """Effective ``tenant_workloads``."""
        if self.tenant_workloads is not None:
            return self.tenant_workloads
        return self.role != "dpu-cluster-host"


# --------------------------------------------------------------------------- clusters


class VgpuManagerConfig(_Model):
    """The NVIDIA vGPU Manager image the GPU Operator installs on ``vm-vgpu`` hosts (GPU Operator
    ClusterPolicy ``vgpuManager``). NVIDIA does not publish it: build it from the vGPU software
    package and push it to a private registry (GPU Operator docs, "GPU Operator with KubeVirt")."""

    repository: NonEmptyStr
    """Registry and path of the image, e.g. ``registry.example.net/nvidia``."""
    image: NonEmptyStr = "vgpu-manager"
    """Image name."""
    version: NonEmptyStr
    """Image tag: the vGPU Manager driver version and OS, e.g. ``580.82.07-ubuntu22.04``."""
    image_pull_secrets: list[DnsLabel] = Field(default_factory=list)
    """Secrets (in the GPU Operator namespace of the cluster) for pulling the image."""


class HypervisorClusterConfig(_Model):
    """A k0rdent child cluster on bare-metal hosts (Metal3/CAPI), with the GPU Operator and KubeVirt."""

    name: DnsLabel
    """Cluster name (the ClusterDeployment name)."""
    hosts: list[DnsLabel] = Field(min_length=1)
    """Member hosts (names from ``hosts``)."""
    gpu_workload_mode: GpuWorkloadMode
    """GPU Operator workload: ``vm-passthrough`` (VFIO), ``vm-vgpu`` or ``container`` (pods)."""
    kubevirt: bool = True
    """Install KubeVirt (required for ``vm-*`` modes and for tenant clusters)."""
    template: NonEmptyStr = "capm3-hosted-cp"
    """k0rdent ClusterTemplate (bare metal through CAPM3, k0smotron hosted control plane)."""
    credential: NonEmptyStr = "metal3-credential"
    """k0rdent Credential name in the mothership namespace."""
    control_plane_replicas: PositiveInt = 3
    """Hosted control-plane replicas."""
    k0s_version: NonEmptyStr = "v1.33.1+k0s.0"
    """k0s release of the cluster."""
    cni: Cni = "calico"
    """Cluster CNI."""
    vgpu_manager: VgpuManagerConfig | None = None
    """vGPU Manager image; required for ``vm-vgpu``, not used otherwise."""
    image: HostImageConfig | None = None
    """OS image Cluster API Provider Metal3 writes to each host it claims for the cluster (the
    ``capm3-hosted-cp`` chart's Metal3MachineTemplate ``image``); CAPM3 provisions no host without
    one (``baremetal/metal3machine_manager.go`` ``setHostSpec``)."""
    kubeconfig: NonEmptyStr | None = None
    """Adopted cluster: path of its kubeconfig (relative to the project root), through which the
    program creates the objects that live in this cluster (docs/architecture.md "Where each object
    lives"). Default (unset): the kubeconfig Cluster API publishes on the mothership, Secret
    ``<name>-kubeconfig`` (data key ``value``) in the mothership namespace. The same file and
    context as ``mothership`` makes the cluster the mothership itself (the lab's single API server)."""
    context: NonEmptyStr | None = None
    """kubeconfig context of ``kubeconfig``; default: the file's current context. Needs ``kubeconfig``
    (:func:`stack_config.rules.adopted_cluster_kubeconfig`)."""


class DpuServiceConfig(_Model):
    """A DOCA Platform Framework service deployed into the DPU cluster (a DPUService)."""

    name: DnsLabel
    """Service name."""
    repo_url: str = Field(pattern=r"^(oci://|https://).+$")
    """Helm repository (``oci://`` or ``https://``)."""
    chart: NonEmptyStr
    """Chart name."""
    version: NonEmptyStr
    """Chart version."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Helm values."""


def _default_dpu_services() -> list[DpuServiceConfig]:
    return [
        DpuServiceConfig(
            name="doca-hbn",
            repo_url="https://helm.ngc.nvidia.com/nvidia/doca",
            chart="doca-hbn",
            version="1.0.1",
        )
    ]


class DpuClusterConfig(_Model):
    """The cluster whose workers run on the DPUs' ARM cores, control plane hosted on the mothership."""

    name: DnsLabel = "dpu-cluster"
    """Cluster name."""
    hosts: list[DnsLabel] | None = None
    """Hosts whose DPUs join; default: every host with a DPU."""
    template: NonEmptyStr = "dpu-hosted-cp"
    """k0rdent ClusterTemplate: k0smotron hosted control plane, arm64 k0s workers on the DPUs."""
    credential: NonEmptyStr = "metal3-credential"
    """k0rdent Credential name."""
    control_plane_replicas: PositiveInt = 1
    """Hosted control-plane replicas."""
    kubernetes_version: NonEmptyStr = "v1.33.1"
    """Kubernetes version of the DPU cluster (DPUCluster ``spec.version``)."""
    k0s_version: NonEmptyStr = "v1.33.1+k0s.0"
    """k0s release of the cluster."""
    bfb_url: str = Field(
        default="https://content.mellanox.com/BlueField/BFBs/Ubuntu22.04/"
        "bf-bundle-2.9.1-40_24.11_ubuntu-22.04_prod.bfb",
        pattern=r"^(http|https)://.+\.bfb$",
    )
    """BlueField bundle (BFB) image the DPUs are provisioned with."""
    services: list[DpuServiceConfig] = Field(default_factory=_default_dpu_services)
    """DPF services to run in the DPU cluster."""


# --------------------------------------------------------------------------- tenants


class TenantNetworkConfig(_Model):
    """An isolated tenant network: a VXLAN segment (OVS on the DPUs), tagged with a VLAN on host ports."""

    name: DnsLabel
    """Network name, unique within the tenant."""
    cidr: Cidr
    """IPAM range, e.g. ``10.10.0.0/24``."""
    vxlan_id: VxlanId
    """VXLAN network identifier, unique in the estate."""
    vlan_id: VlanId
    """VLAN ID on tenant ports, unique in the estate."""
    gateway: str | None = None
    """Gateway address inside ``cidr``; default: none."""
    bridge: str = Field(default="br-tenant", min_length=1, max_length=15, pattern=r"^[A-Za-z0-9_.-]+$")
    """Linux bridge on each hypervisor host that tenant VM ports join (tagged with ``vlan_id``); its
    uplink is the DPU's host port. A Linux interface name: at most 15 characters."""


class TenantClusterConfig(_Model):
    """A tenant child cluster: hosted control plane, KubeVirt VM workers on a hypervisor cluster."""

    name: DnsLabel
    """Cluster name, unique within the tenant."""
    hypervisor_cluster: DnsLabel
    """Hypervisor cluster whose KubeVirt runs the worker VMs."""
    template: NonEmptyStr = "kubevirt-hosted-cp"
    """k0rdent ClusterTemplate."""
    credential: NonEmptyStr = "kubevirt-credential"
    """k0rdent Credential (kubeconfig of the KubeVirt infrastructure cluster) in the tenant namespace."""
    networks: list[DnsLabel] | None = None
    """Tenant networks the workers attach to; default: all of the tenant's networks."""
    control_plane_replicas: PositiveInt = 1
    """Hosted control-plane replicas."""
    workers: PositiveInt = 1
    """Number of worker VMs."""
    worker_cpus: PositiveInt = 2
    """vCPUs per worker VM."""
    worker_memory_mib: PositiveInt = 4096
    """Memory per worker VM, MiB."""
    cni: Cni = "calico"
    """CNI chosen by the tenant."""
    k0s_version: NonEmptyStr = "v1.33.1+k0s.0"
    """k0s release."""
    gpu_mode: TenantGpuMode = "none"
    """How GPUs reach the worker VMs: ``passthrough`` (VFIO), ``vgpu`` or ``none``."""
    gpu_model: GfdProductName | None = None
    """GPU product (GFD name) for ``passthrough``/``vgpu``."""
    gpu_count_per_worker: NonNegativeInt = 0
    """GPUs (or vGPUs) per worker VM."""
    vgpu_type: NonEmptyStr | None = None
    """vGPU type for ``vgpu`` mode (e.g. ``GRID T4-2Q``); default: the product's smallest type."""

    @property
    def gpu_total(self) -> int:
        """GPUs (or vGPUs) the cluster uses in all: workers x per-worker count; 0 when mode is none."""
        return 0 if self.gpu_mode == "none" else self.workers * self.gpu_count_per_worker

    def effective_vgpu_type(self, catalogue: Mapping[str, GpuProduct]) -> str | None:
        """The vGPU type used in ``vgpu`` mode (``vgpu_type``, else the product's first type in
        ``catalogue``), or None in other modes or for a product without vGPU types."""
        if self.gpu_mode != "vgpu" or self.gpu_model is None:
            return None
        if self.vgpu_type:
            return self.vgpu_type
        product = catalogue.get(self.gpu_model)
        return product.vgpu_types[0] if product and product.vgpu_types else None


class GpuSharingConfig(_Model):
    """How GPUs on some hosts are shared (GPU Operator device-plugin config)."""

    strategy: SharingStrategy
    """``time-slicing`` / ``mps`` (oversubscription, ``replicas`` per GPU) or ``mig`` (partitions)."""
    hosts: list[DnsLabel] = Field(min_length=1)
    """Hosts whose GPUs are shared this way."""
    replicas: PositiveInt | None = None
    """Replicas advertised per GPU (time-slicing, MPS); at least 2."""
    mig_config: NonEmptyStr | None = None
    """mig-parted config for ``nvidia.com/mig.config`` (MIG), e.g. ``all-1g.5gb``."""
    mig_strategy: Literal["single", "mixed"] = "single"
    """GPU Operator MIG strategy (MIG)."""
    rename_by_default: bool = False
    """Advertise shared GPUs as ``nvidia.com/gpu.shared``."""
    fail_requests_greater_than_one: bool = True
    """Reject pods asking for more than one shared replica."""

    def spec(self) -> SharingSpec:
        """The setting as :mod:`domain.gpu_sharing` derives the device-plugin config and the
        composer's counts from it (``replicas`` 2 when unset: the rules require it anyway)."""
        return SharingSpec(
            strategy=self.strategy,
            replicas=self.replicas or 2,
            rename_by_default=self.rename_by_default,
            fail_requests_greater_than_one=self.fail_requests_greater_than_one,
            mig_config=self.mig_config,
            mig_strategy=self.mig_strategy,
        )

    def offers(self, product: str, catalogue: Mapping[str, GpuProduct]) -> tuple[Offer, ...]:
        """What one GPU of ``product`` yields on these hosts (:meth:`domain.gpu_sharing.SharingSpec.offers`),
        the MIG layout of ``mig_config`` taken from ``catalogue``.

        Raises:
            domain.gpu_sharing.SharingError: with MIG, ``catalogue`` knows no layout of
                ``mig_config`` for ``product`` (or ``product`` at all), or the ``single`` strategy
                meets a layout of several profiles.
        """
        known = catalogue.get(product)
        layout = known.mig_layout(self.mig_config) if known is not None and self.mig_config else None
        return self.spec().offers(product, layout)


class TenantConfig(_Model):
    """A tenant: its namespace on the mothership, networks, child clusters, GPU quota and sharing."""

    name: DnsLabel
    """Tenant name."""
    namespace: DnsLabel | None = None
    """Mothership namespace of the tenant; default ``tenant-<name>``."""
    networks: list[TenantNetworkConfig] = Field(default_factory=list)
    """Tenant networks."""
    clusters: list[TenantClusterConfig] = Field(default_factory=list)
    """Tenant child clusters."""
    gpu_quota: NonNegativeInt = 0
    """Maximum GPUs the tenant may hold (child-cluster GPUs plus static compositions; also the
    ``requests.nvidia.com/gpu`` ResourceQuota of its namespace)."""
    allowed_models: list[GfdProductName] = Field(default_factory=list)
    """GPU products (GFD names) the tenant may use."""
    gpu_sharing: GpuSharingConfig | None = None
    """GPU sharing for the tenant's workloads."""

    @property
    def namespace_name(self) -> str:
        """Effective namespace."""
        return self.namespace or f"tenant-{self.name}"


# --------------------------------------------------------------------------- compositions, composer


class GpuCompositionConfig(_Model):
    """A static GPU attachment: GPUs from a pool composed onto a host by the program."""

    host: DnsLabel
    """Target host (Director machine name)."""
    pool: DnsLabel
    """Pool the GPUs come from."""
    count: PositiveInt | None = None
    """Number of GPUs (any free ones of ``model``); alternative to ``device_names``."""
    device_names: list[NonEmptyStr] = Field(default_factory=list)
    """Exact Director device names (``gpu7``); alternative to ``count``."""
    model: GfdProductName | None = None
    """GPU product (GFD name); any model of the pool when omitted."""
    tenant: DnsLabel | None = None
    """Tenant the GPUs are dedicated to (counts against its quota)."""

    @property
    def planned_count(self) -> int:
        """Number of GPUs this composition attaches."""
        return len(self.device_names) or (self.count or 0)


#: A container image reference with a tag: registry[:port]/path:tag.
_IMAGE_REF = r"^[^\s:/@]+(:[0-9]+)?(/[^\s:/@]+)+:[\w][\w.-]{0,127}$"


class ComposerPoolConfig(_Model):
    """A composer pool: the hosts that serve it and the tenants whose pods it serves.

    A pod of a tenant's namespace only gets GPUs composed onto (or spare on) the hosts of its
    tenant's pool, within the pool's quota. A pool with one tenant is that tenant's own; a pool
    with several tenants is shared by them. Hosts in no pool serve the pods of namespaces in no
    pool (the composer's ``default`` pool). See ``docs/composer-pools.md``.
    """

    name: DnsLabel
    """Pool name (a Kubernetes label value: the Nodes and namespaces of the pool carry
    ``composer.liqid.io/pool=<name>``)."""
    tenants: list[DnsLabel] | None = None
    """Tenants whose namespaces join the pool; default: the tenant named like the pool."""
    hosts: list[DnsLabel] = Field(default_factory=list)
    """Hosts (names from ``hosts``, Kubernetes Node names) that serve the pool."""
    hypervisor_cluster: DnsLabel | None = None
    """A ``container``-mode hypervisor cluster whose every host serves the pool (added to ``hosts``)."""
    quota_gpus: NonNegativeInt | None = None
    """Most GPUs the composer may hold on the pool's hosts at once; default: the sum of the
    ``gpu_quota`` of the pool's tenants. At most the pool's size (see
    :func:`stack_config.rules.composer_pool_quota_fits`)."""
    reclaim_budget: ReclaimBudget | None = None
    """Most of the pool's hosts giving GPUs back at once: a count (``"1"``) or a percentage of the
    pool's hosts (``"50%"``, rounded up); ``"0"`` holds every reclaim in the pool. Default: the
    composer-wide ``composer.reclaim_budget``. Chart value ``composer.pools[].reclaimBudget``;
    ``docs/composer-reclaim.md``."""

    @property
    def tenant_names(self) -> list[str]:
        """Effective ``tenants``."""
        return list(self.tenants) if self.tenants is not None else [self.name]


def _composer_seconds(name: str) -> Any:
    """Whole seconds inside the bounds of the composer setting ``name`` (:data:`domain.settings.SETTINGS`)."""
    setting = COMPOSER_SETTINGS[name]
    low = int(setting.minimum) + 1 if setting.exclusive_minimum else int(setting.minimum)
    return bounded_int(low, int(setting.maximum))


def _composer_default(name: str) -> int:
    """The default of the composer setting ``name`` in whole seconds."""
    return int(COMPOSER_SETTINGS[name].default)


class ComposerConfig(_Model):
    """The composer controller (charts/composer): attaches pool GPUs to nodes on demand."""

    pool: DnsLabel
    """Pool it composes from."""
    mode: ComposerMode = DEFAULT_MODE
    """How it serves ``nvidia.com/gpu`` in the target cluster (:mod:`domain.composer_mode`, chart value
    ``dra.mode``): ``deviceplugin`` (default: compose for pending pods, the NVIDIA device plugin
    advertises the GPUs, the gating webhook holds new GPU pods) or ``dra`` (the composer is the DRA
    driver ``gpu.composer.liqid.io``, no webhook; ``docs/dra.md``). ``dra`` needs the target
    cluster's API server to serve ``resource.k8s.io/v1`` with ``DRADeviceBindingConditions`` and
    ``DRAExtendedResource`` on (Kubernetes 1.36+): refused for a hypervisor cluster the program
    creates with an older ``k0s_version`` (rule ``composer_mode_fits_cluster``); for the mothership
    and adopted clusters the config does not know the version, so the composer checks the API server
    at start and exits with an error naming the missing feature gate. One mode per node: the nodes a
    ``dra`` composer serves must run no NVIDIA device plugin. ``dra`` runs in its target cluster
    (not with ``runs_on: mothership``): the chart's DRA kubelet plugin runs on that cluster's nodes."""
    idle_timeout_seconds: _composer_seconds("idle_timeout_seconds") = _composer_default(  # type: ignore[valid-type]
        "idle_timeout_seconds"
    )
    """A node idle this long (seconds) gives its dynamically attached GPUs back (default and bounds:
    :data:`domain.settings.SETTINGS`, the chart's)."""
    advertise_timeout_seconds: _composer_seconds("advertise_timeout_seconds") = _composer_default(  # type: ignore[valid-type]
        "advertise_timeout_seconds"
    )
    """How long (seconds) a node may take to advertise hot-plugged GPUs before the composer restarts its
    device plugin."""
    restart_device_plugin: bool = True
    """Let the composer restart a node's device-plugin pod that does not advertise hot-plugged GPUs (needs
    the GPU Operator's namespace to exist in the target cluster). Ignored with ``mode: dra``."""
    device_plugin_namespace: DnsLabel = "gpu-operator"
    """Namespace of the GPU Operator's device plugin in the target cluster."""
    target_cluster: DnsLabel
    """Cluster whose pending GPU pods it serves: a ``container``-mode hypervisor cluster or ``mothership``."""
    kubeconfig: str | None = None
    """kubeconfig of the target cluster (relative to the project root); default: the mothership's
    (in the lab the mothership's API server stands in for the worker cluster)."""
    runs_on: Literal["target_cluster", "mothership"] = "target_cluster"
    """Where the composer runs. ``target_cluster``: the chart is installed in the target cluster,
    its Pods run on that cluster's nodes and its gating webhook admits that cluster's pods.
    ``mothership``: the chart is installed on the mothership and its Pods run on the mothership's
    nodes, watching the target cluster through that cluster's kubeconfig (the one the program
    reaches it with: its Cluster API Secret ``<cluster>-kubeconfig``, or the adopted file), copied
    into a Secret beside the Pods; the composer's Lease, orphan timers, Events and Node patches are
    in the target cluster, which gets no gating webhook (docs/composer-pools.md "Where a composer
    for a child cluster runs"). ``api_server`` then names where the Pods reach the target's API
    server."""
    namespace: DnsLabel = "composer-system"
    """Namespace of the controller (with ``runs_on: mothership``: on the mothership, and the
    namespace of its Lease in the target cluster)."""
    release_name: DnsLabel = "composer"
    """Helm release name (also the name of its cluster-scoped ClusterRole and ClusterRoleBinding)."""
    chart_path: NonEmptyStr = "charts/composer"
    """Helm chart directory, relative to the project root."""
    image: str | None = Field(default=None, pattern=_IMAGE_REF)
    """Composer container image, ``registry/path:tag`` (default: the chart's
    ``ghcr.io/composable-gpu/composer:<appVersion>``); build it from ``Containerfile``."""
    kubelet_plugin_image: str | None = Field(default=None, pattern=_IMAGE_REF)
    """With ``mode: dra``: the DRA kubelet plugin's image, ``registry/path:tag`` (the chart's
    ``kubeletPlugin.image``; default ``ghcr.io/composable-gpu/kubelet-plugin:<appVersion>``); build it
    from ``node/kubeletplugin/Containerfile``. Not used in ``deviceplugin`` mode."""
    director_endpoint: HttpUrl | None = None
    """Director base URL as the composer's Pods reach it (default: ``fabric.director.endpoint``)."""
    api_server: str | None = Field(default=None, pattern=r"^[A-Za-z0-9.-]+:[0-9]{1,5}$")
    """``host:port`` where the composer's Pods reach the API server when the target cluster's
    ``kubernetes`` Service is not routable (no kube-proxy, as in the lab); default: that Service.
    With ``runs_on: mothership``: where they reach the target cluster's API server (it replaces the
    ``server`` of the target's kubeconfig, whose certificate must name that host); default: the
    kubeconfig's own."""
    node_selector: dict[str, NonEmptyStr] = {}
    """Node labels the composer's Pods must match (e.g. the system nodes)."""
    tolerations: list[dict[str, str]] = []
    """Pod tolerations (``key``, ``operator``, ``value``, ``effect``), e.g. for tainted system nodes."""
    namespaces: list[DnsLabel] = []
    """Namespaces whose GPU pods the composer gates and serves (``[]``: all namespaces)."""
    pools: list[ComposerPoolConfig] = []
    """Composer pools: which hosts serve which tenants' pods (``[]``: one pool of every host and
    namespace). The composer labels each pool's Nodes itself, from this map in its own config."""
    reclaim_budget: ReclaimBudget | None = None
    """Most hosts of a composer pool giving GPUs back at once: a count (``"2"``) or a percentage of
    the pool's hosts (``"20%"``, rounded up, at most ``100%``), as Karpenter's disruption budgets;
    ``"0"`` holds every reclaim. Default (unset): no limit. A pool's own ``reclaim_budget`` wins.
    Chart value ``composer.reclaimBudget``; ``docs/composer-reclaim.md``."""
    reclaim_windows_utc: list[ReclaimWindow] = []
    """Daily UTC windows ``HH:MM-HH:MM`` in which reclaims may start (``22:00-06:00`` spans midnight;
    ``24:00`` allowed as an end); a reclaim under way finishes. ``[]`` (default): any time. Chart
    value ``composer.reclaimWindowsUtc``."""
    owner_tag: OwnerTag = DEFAULT_OWNER_TAG
    """Owner tag the composer writes into the Director user description (``udesc``) of every GPU it
    attaches, and the only tag whose GPUs it ever detaches: unique per composer sharing a Director,
    distinct from the program's own ``pulumi:...`` tags. Letters, digits and ``._:/+-``, at most 64
    characters, not ``n/a`` (the Director's "no description"). Chart value ``composer.ownerTag``."""
    orphan_grace_seconds: _composer_seconds("orphan_grace_seconds") = _composer_default(  # type: ignore[valid-type]
        "orphan_grace_seconds"
    )
    """GPUs the composer attached to a machine that has had no Node for this long (seconds) go back
    to the free pool (default and bounds: :data:`domain.settings.SETTINGS`, the chart's
    ``composer.orphanGraceSeconds``)."""


# --------------------------------------------------------------------------- catalog


#: An exact chart version (SemVer 2, optional leading ``v``): no ranges, so a template change is a
#: config change that ``pulumi preview`` shows.
PINNED_VERSION_PATTERN = r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
PinnedVersion = Annotated[str, Field(pattern=PINNED_VERSION_PATTERN)]
"""An exact chart version such as ``1.0.0`` or ``v25.3.0`` (Flux would accept a range; we do not)."""

#: Cluster API control-plane kinds that run the control plane outside the cluster's machines, as
#: pods in the management cluster: k0smotron's ``K0smotronControlPlane`` (k0smotron docs, "Cluster
#: API control plane provider"; CRD ``controlplane.cluster.x-k8s.io_k0smotroncontrolplanes.yaml`` in
#: lab/crds/k0smotron). ``K0sControlPlane`` and ``KubeadmControlPlane`` run on machines.
HOSTED_CONTROL_PLANE_KINDS: tuple[str, ...] = ("K0smotronControlPlane",)


class ClusterTemplateConfig(_Model):
    """A k0rdent ClusterTemplate the program declares (``k0rdent.mirantis.com/v1beta1``): a pinned Helm
    chart from a Flux HelmRepository, the CAPI providers it needs and the control-plane kind it renders."""

    name: DnsLabel
    """ClusterTemplate name, as ClusterDeployments reference it (``spec.template``)."""
    chart: NonEmptyStr
    """Chart name."""
    version: PinnedVersion
    """Exact chart version."""
    repository: DnsLabel
    """Flux HelmRepository name in the same namespace."""
    providers: list[NonEmptyStr] = Field(min_length=1)
    """CAPI providers the template needs (``spec.providers``), e.g. ``control-plane-k0sproject-k0smotron``."""
    control_plane: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    """Kind of the CAPI control-plane object the chart renders (``K0smotronControlPlane``: hosted,
    control plane as pods in the management cluster; ``K0sControlPlane``: on the cluster's machines)."""

    @property
    def hosted_control_plane(self) -> bool:
        """True when :attr:`control_plane` is a hosted kind (:data:`HOSTED_CONTROL_PLANE_KINDS`)."""
        return self.control_plane in HOSTED_CONTROL_PLANE_KINDS


#: CAPI providers of k0smotron's hosted control plane (k0rdent/kcm
#: ``templates/cluster/kubevirt-hosted-cp/Chart.yaml``, annotation ``cluster.x-k8s.io/provider``).
_K0SMOTRON_PROVIDERS = ["control-plane-k0sproject-k0smotron", "bootstrap-k0sproject-k0smotron"]


def _default_cluster_templates() -> list[ClusterTemplateConfig]:
    """``kubevirt-hosted-cp`` is k0rdent's chart (k0rdent/kcm ``templates/cluster/kubevirt-hosted-cp``:
    version 1.0.11, ``templates/k0smotroncontrolplane.yaml``), from kcm's own ``kcm-templates``
    repository; ``capm3-hosted-cp`` and ``dpu-hosted-cp`` are the platform's own charts
    (``charts/templates/``), from the platform's repository."""
    return [
        ClusterTemplateConfig(
            name=name,
            chart=name,
            version=version,
            repository=repository,
            providers=[*infra, *_K0SMOTRON_PROVIDERS],
            control_plane="K0smotronControlPlane",
        )
        for name, version, repository, infra in (
            ("capm3-hosted-cp", "1.0.0", PLATFORM_TEMPLATES_REPOSITORY, ["infrastructure-metal3"]),
            ("kubevirt-hosted-cp", "1.0.11", KCM_TEMPLATES_REPOSITORY, ["infrastructure-kubevirt"]),
            ("dpu-hosted-cp", "1.0.0", PLATFORM_TEMPLATES_REPOSITORY, []),
        )
    ]


#: The HelmRepository kcm itself keeps in every namespace holding a template it does not manage
#: (k0rdent/kcm ``internal/controller/template_controller.go`` ``ReconcileTemplate`` with
#: ``api/v1beta1/templates_common.go`` ``DefaultRepoName``), pointing at kcm's default registry
#: (k0rdent's published templates, ``oci://ghcr.io/k0rdent/kcm/charts`` unless kcm is started
#: with another ``--default-registry-url``). The program never declares it: kcm would overwrite it.
KCM_TEMPLATES_REPOSITORY = "kcm-templates"

#: Where the platform's own ClusterTemplate charts (``charts/templates/``) are published by default,
#: beside the composer image (``ghcr.io/composable-gpu/composer``).
PLATFORM_TEMPLATES_REPOSITORY = "composable-gpu-templates"


class RepositoryCredentialsConfig(_Model):
    """The login of a private Helm repository or OCI registry (HelmRepository ``secretRef``: a
    Secret ``<repository>-credentials`` with ``username`` and ``password``)."""

    username: NonEmptyStr
    """User name (a robot account)."""
    password: Secret
    """Password or token (secret)."""


class HelmRepositoryConfig(_Model):
    """A Helm chart repository the program's k0rdent templates fetch from: a Flux HelmRepository
    (``source.toolkit.fluxcd.io/v1``) of this name in every namespace holding a template that
    names it, as kcm's HelmChart for a template looks in the template's own namespace
    (``chartSpec.sourceRef`` is a local reference)."""

    name: DnsLabel
    """HelmRepository name (a template's ``repository``)."""
    url: str = Field(pattern=r"^(https?|oci)://[^\s]+$")
    """Repository URL: ``https://`` (or ``http://``) for an index-based repository, ``oci://`` for
    an OCI registry (HelmRepository ``type: oci``)."""
    credentials: RepositoryCredentialsConfig | None = None
    """Login of a private repository; default: anonymous."""

    @property
    def oci(self) -> bool:
        """True for an OCI registry (``oci://``)."""
        return self.url.startswith("oci://")


def _default_repositories() -> list[HelmRepositoryConfig]:
    """The public repositories of the built-in catalog (each vendor's published chart
    repository) and the platform's own chart registry."""
    return [
        HelmRepositoryConfig(name=PLATFORM_TEMPLATES_REPOSITORY, url="oci://ghcr.io/composable-gpu/charts"),
        HelmRepositoryConfig(name="nvidia", url="https://helm.ngc.nvidia.com/nvidia"),
        HelmRepositoryConfig(name="k0rdent-catalog", url="oci://ghcr.io/k0rdent/catalog/charts"),
        HelmRepositoryConfig(name="cilium", url="https://helm.cilium.io"),
    ]


class ServiceTemplateConfig(_Model):
    """A k0rdent ServiceTemplate the program publishes (a Helm chart from a Flux HelmRepository)."""

    name: DnsLabel
    """ServiceTemplate name."""
    chart: NonEmptyStr
    """Chart name."""
    version: PinnedVersion
    """Exact chart version."""
    repository: DnsLabel
    """Flux HelmRepository name in the same namespace."""
    namespace: DnsLabel
    """Namespace the service is installed into on the child cluster."""


def _service(chart: str, version: str, repository: str, namespace: str) -> ServiceTemplateConfig:
    """A built-in service template, named ``<chart>-<version with dots as dashes>``
    (``gpu-operator``, ``v25.3.0`` -> ``gpu-operator-v25-3-0``)."""
    return ServiceTemplateConfig(
        name=f"{chart}-{version.replace('.', '-')}",
        chart=chart,
        version=version,
        repository=repository,
        namespace=namespace,
    )


class CatalogConfig(_Model):
    """Templates the program declares: ClusterTemplates of its clusters and versions of the services it
    installs into child clusters."""

    gpu_operator: ServiceTemplateConfig = _service("gpu-operator", "v25.3.0", "nvidia", "gpu-operator")
    """NVIDIA GPU Operator."""
    kubevirt: ServiceTemplateConfig = _service("kubevirt", "1.5.0", "k0rdent-catalog", "kubevirt")
    """KubeVirt."""
    cilium: ServiceTemplateConfig = _service("cilium", "1.17.4", "cilium", "kube-system")
    """Cilium (for tenant clusters that choose it; k0s then runs with ``network.provider: custom``)."""
    cluster_templates: list[ClusterTemplateConfig] = Field(default_factory=_default_cluster_templates)
    """ClusterTemplates the clusters use (each referenced ``template`` must be declared here); the
    program creates them in each namespace with ClusterDeployments that use them."""
    repositories: list[HelmRepositoryConfig] = Field(default_factory=_default_repositories)
    """Helm repositories the templates fetch their charts from, by name, per environment (the lab
    serves its own; a stack that sets this list replaces the built-in one whole). Every template's
    ``repository`` must be one of them or kcm's ``kcm-templates``."""

    @model_validator(mode="after")
    def _templates_have_repositories(self) -> CatalogConfig:
        names = [r.name for r in self.repositories]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"repositories declared twice: {', '.join(dup)}")
        if KCM_TEMPLATES_REPOSITORY in names:
            raise ValueError(f"repository {KCM_TEMPLATES_REPOSITORY} is kcm's own (kcm keeps it in every "
                             "template namespace, pointing at its default registry): use another name")
        templates: list[ServiceTemplateConfig | ClusterTemplateConfig] = [
            self.gpu_operator, self.kubevirt, self.cilium, *self.cluster_templates]
        missing = sorted({f"{t.name} ({t.repository})" for t in templates
                          if t.repository not in names and t.repository != KCM_TEMPLATES_REPOSITORY})
        if missing:
            raise ValueError(f"templates name repositories not in catalog.repositories: {', '.join(missing)}")
        return self

    def repository(self, name: str) -> HelmRepositoryConfig | None:
        """The repository called ``name``, or None (``kcm-templates``, kcm's own, is never declared)."""
        return next((r for r in self.repositories if r.name == name), None)

    def cluster_template(self, name: str) -> ClusterTemplateConfig | None:
        """The declared ClusterTemplate called ``name``, or None."""
        return next((t for t in self.cluster_templates if t.name == name), None)


# --------------------------------------------------------------------------- estate


class EstateConfig(_Model):
    """The whole estate of one stack (Pulumi config key ``composable-gpu:estate``)."""

    environment: Environment
    """``lab``, ``staging`` or ``production``."""
    mothership: MothershipConfig = MothershipConfig()
    """The management cluster."""
    fabric: FabricConfig
    """LIQID fabric."""
    hosts: list[HostConfig] = Field(min_length=1)
    """Bare-metal hosts."""
    hypervisor_clusters: list[HypervisorClusterConfig] = Field(default_factory=list)
    """Clusters on the hosts."""
    dpu_cluster: DpuClusterConfig | None = None
    """The DPU cluster."""
    tenants: list[TenantConfig] = Field(default_factory=list)
    """Tenants."""
    gpu_compositions: list[GpuCompositionConfig] = Field(default_factory=list)
    """Static GPU attachments."""
    composer: ComposerConfig | None = None
    """Dynamic GPU composer, when the estate has one: the one-composer form of ``composers``."""
    composers: list[ComposerConfig] = Field(default_factory=list)
    """One composer per GPU cluster (``docs/composer-pools.md`` "A composer per cluster"): each
    entry has ``composer``'s fields and its own target cluster, fabric pool (Director group),
    owner tag, release name and hosts (:func:`stack_config.rules.composers_apart`). Use either
    ``composer`` or ``composers``, not both."""
    catalog: CatalogConfig = CatalogConfig()
    """Service versions."""
    gpu_products: list[GpuProduct] = Field(default_factory=list)
    """GPU products beyond the built-in catalogue (same fields as :class:`stack_config.gpus.GpuProduct`),
    so a new GPU needs no code change."""

    def gpu_catalogue(self) -> dict[str, GpuProduct]:
        """Every known GPU product by GFD name: built-in entries plus ``gpu_products``."""
        return merge_catalogue(self.gpu_products)

    # Lookups used by rules and components (pure).

    def host(self, name: str) -> HostConfig | None:
        """The host called ``name``, or None."""
        return next((h for h in self.hosts if h.name == name), None)

    def pool(self, name: str) -> GpuPoolConfig | None:
        """The pool called ``name``, or None."""
        return next((p for p in self.fabric.pools if p.name == name), None)

    def tenant(self, name: str) -> TenantConfig | None:
        """The tenant called ``name``, or None."""
        return next((t for t in self.tenants if t.name == name), None)

    def hypervisor_cluster(self, name: str) -> HypervisorClusterConfig | None:
        """The hypervisor cluster called ``name``, or None."""
        return next((c for c in self.hypervisor_clusters if c.name == name), None)

    def composer_entries(self) -> list[tuple[str, ComposerConfig]]:
        """Every composer with the key path of its config: ``("composer", c)`` for the one-composer
        form, ``("composers[<i>]", c)`` for each list entry (both when both are set, so rules can
        report each)."""
        one = [("composer", self.composer)] if self.composer is not None else []
        return [*one, *((f"composers[{i}]", c) for i, c in enumerate(self.composers))]

    def all_composers(self) -> list[ComposerConfig]:
        """Every composer of the estate (:meth:`composer_entries` without the key paths)."""
        return [c for _, c in self.composer_entries()]

    def composer_pool_hosts(self, pool: ComposerPoolConfig) -> list[str]:
        """The hosts serving composer pool ``pool``: its ``hosts``, then its hypervisor cluster's
        (each once, in that order; undefined names kept so rules can report them)."""
        hv = self.hypervisor_cluster(pool.hypervisor_cluster) if pool.hypervisor_cluster else None
        return list(dict.fromkeys([*pool.hosts, *(hv.hosts if hv else [])]))

    def composer_host_pools(self) -> dict[str, str]:
        """Host name -> the composer pool it serves, over every composer (first pool wins; empty
        without a composer)."""
        out: dict[str, str] = {}
        for p in (p for c in self.all_composers() for p in c.pools):
            for h in self.composer_pool_hosts(p):
                out.setdefault(h, p.name)
        return out

    def composer_tenant_pool(self, tenant: str) -> str | None:
        """The (first) composer pool, of any composer, whose pods include tenant ``tenant``'s, or None."""
        pools = (p for c in self.all_composers() for p in c.pools)
        return next((p.name for p in pools if tenant in p.tenant_names), None)

    def cluster_of_host(self, host: str) -> HypervisorClusterConfig | None:
        """The (first) hypervisor cluster that lists ``host``, or None."""
        return next((c for c in self.hypervisor_clusters if host in c.hosts), None)

    # Where a tenant's work runs (docs/architecture.md "Where each object lives"). Cluster names are
    # hypervisor cluster names, or ``mothership`` for a composer that targets the mothership.

    def tenant_vm_clusters(self, tenant: TenantConfig) -> list[str]:
        """The hypervisor clusters running ``tenant``'s VMs (its tenant clusters' workers), each once,
        in the order of its clusters."""
        return list(dict.fromkeys(c.hypervisor_cluster for c in tenant.clusters))

    def network_clusters(self, tenant: TenantConfig, network: str) -> list[str]:
        """The hypervisor clusters running VMs of ``tenant`` attached to its network ``network`` (a
        cluster with ``networks`` unset attaches every network of its tenant): where the network's
        NetworkAttachmentDefinition must be for Multus to find it."""
        return list(
            dict.fromkeys(
                c.hypervisor_cluster
                for c in tenant.clusters
                if c.networks is None or network in c.networks
            )
        )

    def sharing_clusters(self, tenant: TenantConfig) -> list[str]:
        """The hypervisor clusters of the hosts of ``tenant``'s GPU sharing (none without sharing)."""
        if tenant.gpu_sharing is None:
            return []
        clusters = (self.cluster_of_host(h) for h in tenant.gpu_sharing.hosts)
        return list(dict.fromkeys(c.name for c in clusters if c is not None))

    def composer_serves(self, tenant: TenantConfig) -> bool:
        """Some composer serves ``tenant``'s GPU pods (:meth:`composers_serving`)."""
        return bool(self.composers_serving(tenant))

    def composers_serving(self, tenant: TenantConfig) -> list[ComposerConfig]:
        """The composers that serve ``tenant``'s GPU pods: the tenant is in one of the composer's
        pools, its namespace is in the composer's ``namespaces``, or the composer serves every
        namespace (no pools, no namespaces)."""
        return [
            c
            for c in self.all_composers()
            if (not c.pools and not c.namespaces)
            or any(tenant.name in p.tenant_names for p in c.pools)
            or tenant.namespace_name in c.namespaces
        ]

    def tenant_workload_clusters(self, tenant: TenantConfig) -> list[str]:
        """Every cluster where ``tenant``'s work runs, each once: its VMs' hypervisor clusters
        (:meth:`tenant_vm_clusters`), its shared GPUs' (:meth:`sharing_clusters`) and the target
        cluster of each composer that serves its pods (:meth:`composers_serving`). Its namespace and
        its ``gpu_quota`` ResourceQuota are created in each."""
        pods = [c.target_cluster for c in self.composers_serving(tenant)]
        return list(
            dict.fromkeys([*self.tenant_vm_clusters(tenant), *self.sharing_clusters(tenant), *pods])
        )

    def vgpu_types_on(self, cluster: str) -> list[str]:
        """The vGPU types (sorted) the tenant clusters on hypervisor cluster ``cluster`` use."""
        catalogue = self.gpu_catalogue()
        return sorted(
            {
                vt
                for t in self.tenants
                for c in t.clusters
                if c.hypervisor_cluster == cluster and (vt := c.effective_vgpu_type(catalogue)) is not None
            }
        )

    def dpu_cluster_hosts(self) -> list[str]:
        """Hosts whose DPUs form the DPU cluster (empty without a DPU cluster)."""
        if self.dpu_cluster is None:
            return []
        if self.dpu_cluster.hosts is not None:
            return list(self.dpu_cluster.hosts)
        return [h.name for h in self.hosts if h.dpu is not None]
