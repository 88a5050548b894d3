"""Pure builders for the Kubernetes objects the components register (no Pulumi, no I/O).

Every function takes config values (plain data) and returns the plain ``spec``/``data``
dicts or strings that a component hands to pulumi-kubernetes, so they are tested with tiny
input/expected cases and validated offline against the upstream CRD schemas in
``lab/crds`` (``tests/components/test_manifests.py``). Sources per object:

- Metal3 BareMetalHost ``metal3.io/v1alpha1`` (baremetal-operator ``docs/api.md``):
  ``bmc.address`` schemes ``redfish://``, ``redfish-virtualmedia://`` (``+http`` for plain
  HTTP), ``bmc.credentialsName`` Secret with ``username``/``password``, ``userData`` Secret
  with key ``userData``.
- k0rdent ClusterDeployment / ServiceTemplate ``k0rdent.mirantis.com/v1beta1``; values of
  the ``kubevirt-hosted-cp`` template from k0rdent/kcm ``templates/cluster/kubevirt-hosted-cp/
  values.yaml`` (``controlPlaneNumber``, ``workersNumber``, ``worker.{cpus,memory,devices,
  networks}``, ``k0s.{version,network.provider}``).
- GPU Operator Helm values (``sandboxWorkloads``, ``vfioManager``, ``vgpuManager``,
  ``devicePlugin.config``, ``mig.strategy``) and device-plugin config file (``version: v1``,
  ``sharing.timeSlicing`` / ``sharing.mps``, ``flags.migStrategy``).
- DPF ``provisioning.dpu.nvidia.com/v1alpha1`` DPUFlavor (``nvconfig[].parameters``),
  DPUCluster, DPUSet, BFB; ``svc.dpu.nvidia.com/v1alpha1`` DPUService.
- KubeVirt GPU assignment: ``spec.domain.devices.gpus[].deviceName`` (KubeVirt user guide,
  "Host Devices Assignment"), ``permittedHostDevices.pciHostDevices`` with
  ``externalResourceProvider: true`` when the GPU Operator's sandbox device plugin advertises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from domain.labels import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_WORKLOAD_LABEL,
    HOSTNAME_LABEL,
    MIG_CONFIG_LABEL,
)
from stack_config.gpus import BUILTIN_GPU_PRODUCTS, GpuProduct, vgpu_resource_name
from stack_config.models import (
    KCM_TEMPLATES_REPOSITORY,
    CatalogConfig,
    ClusterTemplateConfig,
    DpuServiceConfig,
    GpuSharingConfig,
    HelmRepositoryConfig,
    HostConfig,
    HostImageConfig,
    HypervisorClusterConfig,
    ServiceTemplateConfig,
    TenantClusterConfig,
    TenantNetworkConfig,
    VgpuManagerConfig,
)

#: API versions of the custom resources the components create (schemas in lab/crds).
K0RDENT_API = "k0rdent.mirantis.com/v1beta1"
METAL3_API = "metal3.io/v1alpha1"
DPF_PROVISIONING_API = "provisioning.dpu.nvidia.com/v1alpha1"
DPF_SERVICE_API = "svc.dpu.nvidia.com/v1alpha1"

#: Label-key prefix of the program's own labels.
LABEL_PREFIX = "composable-gpu.io"

#: Host GPU mode (component contract) for each hypervisor-cluster workload mode.
HOST_GPU_MODE = {"vm-passthrough": "passthrough", "vm-vgpu": "vgpu", "container": "container"}


def common_labels(**extra: str | None) -> dict[str, str]:
    """Labels on every object: managed-by/part-of plus ``composable-gpu.io/<key>`` for each extra.

    ``common_labels(tenant="alpha")`` -> ``{..., "composable-gpu.io/tenant": "alpha"}``; None values
    are dropped.
    """
    labels = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "composable-gpu"}
    labels.update({f"{LABEL_PREFIX}/{k.replace('_', '-')}": v for k, v in extra.items() if v is not None})
    return labels


class _BlockDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings as literal blocks (``|``)."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _str_representer)


def to_yaml(value: Any) -> str:
    """Stable YAML text for Helm values and config files: sorted keys, block style, no line
    folding, multi-line strings as literal blocks (so files embedded in cloud-init stay readable)."""
    return yaml.dump(value, Dumper=_BlockDumper, sort_keys=True, default_flow_style=False, width=2**16)


# --------------------------------------------------------------------------- hosts


def bmc_address(endpoint: str, *, driver: str = "redfish-virtualmedia", system_id: str = "1") -> str:
    """Metal3 ``bmc.address`` for a Redfish BMC.

    ``bmc_address("https://10.0.0.5:8443")`` -> ``redfish-virtualmedia://10.0.0.5:8443/redfish/v1/Systems/1``;
    a plain ``http://`` endpoint selects the ``+http`` variant (``redfish-virtualmedia+http://``),
    as Metal3 documents. Any path on ``endpoint`` is ignored.
    """
    parts = urlsplit(endpoint)
    scheme = driver if parts.scheme == "https" else f"{driver}+http"
    return f"{scheme}://{parts.netloc}/redfish/v1/Systems/{system_id}"


def host_user_data(*, kernel_args: Sequence[str], blacklisted_modules: Sequence[str]) -> str:
    """cloud-init user-data that sets kernel arguments and blacklists kernel modules.

    Writes ``/etc/default/grub.d/90-composable-gpu.cfg`` appending ``kernel_args`` to
    ``GRUB_CMDLINE_LINUX_DEFAULT`` and ``/etc/modprobe.d/blacklist-<module>.conf`` (``blacklist
    <m>`` and ``options <m> modeset=0``, as the seed article does for nouveau), then rebuilds the
    initramfs and GRUB config and reboots once so both take effect.
    """
    args = " ".join(kernel_args)
    files: list[dict[str, Any]] = [
        {
            "path": "/etc/default/grub.d/90-composable-gpu.cfg",
            "permissions": "0644",
            "content": f'GRUB_CMDLINE_LINUX_DEFAULT="${{GRUB_CMDLINE_LINUX_DEFAULT}} {args}"\n',
        }
    ]
    for module in blacklisted_modules:
        files.append(
            {
                "path": f"/etc/modprobe.d/blacklist-{module}.conf",
                "permissions": "0644",
                "content": f"blacklist {module}\noptions {module} modeset=0\n",
            }
        )
    doc = {
        "write_files": files,
        "runcmd": [["update-initramfs", "-u"], ["update-grub"]],
        "power_state": {"mode": "reboot", "message": "apply kernel arguments", "condition": True},
    }
    return "#cloud-config\n" + to_yaml(doc)


def image_spec(image: HostImageConfig) -> dict[str, Any]:
    """The Metal3 ``image`` of a host, as BareMetalHost ``spec.image`` and the capm3-hosted-cp
    chart's ``worker.image`` take it: ``url``, ``checksum``, ``checksumType`` and, when set,
    ``format`` (metal3.io/v1alpha1 BareMetalHost ``Image``, ``lab/crds/metal3``)."""
    out: dict[str, Any] = {"url": image.url, "checksum": image.checksum, "checksumType": image.checksum_type}
    if image.format:
        out["format"] = image.format
    return out


def bare_metal_host_spec(
    host: HostConfig, *, credentials_secret: str, user_data_secret: str | None, namespace: str
) -> dict[str, Any]:
    """``spec`` of the host's BareMetalHost (required by the CRD: ``online``, ``bmc.address``,
    ``bmc.credentialsName``), with ``userData`` naming ``user_data_secret`` when one is given.

    A host of a hypervisor cluster gets none: Cluster API Provider Metal3 sets ``userData`` to the
    Machine's bootstrap data when it provisions the host and clears it when it releases the host
    (CAPM3 ``baremetal/metal3machine_manager.go`` ``setHostSpec``, ``Delete``), so the cluster
    template's bootstrap data carries the kernel arguments instead (:func:`hypervisor_cluster_spec`).
    """
    spec: dict[str, Any] = {
        "online": host.online,
        "bootMACAddress": host.boot_mac,
        "bootMode": host.boot_mode,
        "bmc": {
            "address": bmc_address(host.bmc.endpoint, driver=host.bmc.driver, system_id=host.bmc.system_id),
            "credentialsName": credentials_secret,
            "disableCertificateVerification": not host.bmc.verify_tls,
        },
        "description": f"{host.role} host {host.name}",
    }
    if user_data_secret is not None:
        spec["userData"] = {"name": user_data_secret, "namespace": namespace}
    if host.image is not None:
        spec["image"] = image_spec(host.image)
    return spec


def host_node_labels(
    *, gpu_workload_mode: str | None, sharing: Iterable[tuple[str, GpuSharingConfig]] = ()
) -> dict[str, str]:
    """Node labels a host needs for the GPU Operator.

    ``gpu_workload_mode`` (the host's cluster mode, or None) gives ``nvidia.com/gpu.workload.config``;
    each ``(config_name, sharing)`` that lists the host adds ``nvidia.com/device-plugin.config`` and,
    for MIG, ``nvidia.com/mig.config``. A host shared by two configs is a config error caught by
    the rules, so the last one wins here.
    """
    labels: dict[str, str] = {}
    if gpu_workload_mode:
        labels[GPU_WORKLOAD_LABEL] = gpu_workload_mode
    for config_name, s in sharing:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = config_name
        if s.strategy == "mig" and s.mig_config:
            labels[MIG_CONFIG_LABEL] = s.mig_config
    return labels


# --------------------------------------------------------------------------- DPUs


def mlxconfig_parameters(mlxconfig: Mapping[str, int | str]) -> list[str]:
    """``NAME=VALUE`` strings, sorted by name: ``{"A": 1}`` -> ``["A=1"]``."""
    return [f"{k}={v}" for k, v in sorted(mlxconfig.items())]


def dpu_flavor_spec(mlxconfig: Mapping[str, int | str]) -> dict[str, Any]:
    """DPUFlavor ``spec`` carrying the mlxconfig settings (applied on all DPU devices; a power
    cycle applies them)."""
    return {
        "nvconfig": [
            {"device": "*", "parameters": mlxconfig_parameters(mlxconfig), "hostPowerCycleRequired": True}
        ]
    }


def dpu_cluster_spec(*, version: str, kubeconfig_secret: str, max_nodes: int) -> dict[str, Any]:
    """DPUCluster ``spec`` for a cluster created elsewhere (type ``static``: DPF uses the kubeconfig
    Secret CAPI writes as ``<cluster>-kubeconfig``)."""
    return {
        "type": "static",
        "version": version,
        "kubeconfig": kubeconfig_secret,
        "maxNodes": max(1, max_nodes),
    }


def bfb_spec(url: str) -> dict[str, Any]:
    """BFB ``spec``: the BlueField bundle URL and its file name."""
    return {"url": url, "fileName": url.rsplit("/", 1)[-1]}


def dpu_set_spec(*, host: str, flavor: str, bfb: str, cluster: str) -> dict[str, Any]:
    """DPUSet ``spec`` provisioning the DPU of ``host`` with ``flavor`` and ``bfb`` into ``cluster``."""
    return {
        "nodeSelector": {"matchLabels": {HOSTNAME_LABEL: host}},
        "strategy": {"type": "RollingUpdate"},
        "dpuTemplate": {
            "spec": {
                "dpuFlavor": flavor,
                "bfb": {"name": bfb},
                "cluster": {
                    "nodeLabels": {f"{LABEL_PREFIX}/host": host, f"{LABEL_PREFIX}/dpu-cluster": cluster}
                },
                "nodeEffect": {"noEffect": True},
            }
        },
    }


def dpu_service_spec(service: DpuServiceConfig) -> dict[str, Any]:
    """DPUService ``spec``: a Helm chart installed into the DPU cluster."""
    return {
        "deployInCluster": False,
        "helmChart": {
            "source": {"repoURL": service.repo_url, "chart": service.chart, "version": service.version},
            "values": dict(service.values),
        },
    }


# --------------------------------------------------------------------------- k0rdent


def _helm_chart_spec(
    template: ServiceTemplateConfig | ClusterTemplateConfig, **chart_spec: str
) -> dict[str, Any]:
    """``{"helm": {"chartSpec": ...}}`` of a k0rdent template: ``template``'s chart and version
    from the Flux HelmRepository ``template.repository`` in the same namespace, checked every
    10 minutes, plus the ``chart_spec`` keys given."""
    return {
        "helm": {
            "chartSpec": {
                "chart": template.chart,
                "version": template.version,
                "interval": "10m",
                **chart_spec,
                "sourceRef": {"kind": "HelmRepository", "name": template.repository},
            }
        }
    }


#: API version of Flux source-controller's HelmRepository and HelmChart (CRDs
#: ``config/crd/bases/source.toolkit.fluxcd.io_helm{repositories,charts}.yaml`` of the
#: ``github.com/fluxcd/source-controller`` module).
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"


def helm_repository_spec(repository: HelmRepositoryConfig, *, secret_name: str | None) -> dict[str, Any]:
    """``spec`` of a Flux HelmRepository: the repository's URL, ``type: oci`` for an ``oci://``
    registry (``default`` otherwise, as kcm sets the type from the URL scheme), checked every 10
    minutes, and ``secretRef`` naming the credentials Secret (``username`` / ``password``) when
    ``secret_name`` is given.

    ``helm_repository_spec(HelmRepositoryConfig(name="nvidia", url="https://helm.ngc.nvidia.com/nvidia"),
    secret_name=None)`` -> ``{"url": ..., "type": "default", "interval": "10m"}``.
    """
    spec: dict[str, Any] = {
        "url": repository.url,
        "type": "oci" if repository.oci else "default",
        "interval": "10m",
    }
    if secret_name is not None:
        spec["secretRef"] = {"name": secret_name}
    return spec


def template_repositories(
    catalog: CatalogConfig, templates: Iterable[ServiceTemplateConfig | ClusterTemplateConfig]
) -> list[HelmRepositoryConfig]:
    """The repositories ``templates`` fetch from, each once, in the order first named, without
    kcm's own ``kcm-templates`` (kcm keeps that one, :data:`stack_config.models.KCM_TEMPLATES_REPOSITORY`).

    Raises:
        KeyError: a template names a repository ``catalog`` does not declare (the catalog's own
            validation refuses such a config first).
    """
    out: dict[str, HelmRepositoryConfig] = {}
    for t in templates:
        if t.repository == KCM_TEMPLATES_REPOSITORY or t.repository in out:
            continue
        repository = catalog.repository(t.repository)
        if repository is None:
            raise KeyError(f"template {t.name}: repository {t.repository} is not declared")
        out[t.repository] = repository
    return list(out.values())


def service_template_spec(template: ServiceTemplateConfig) -> dict[str, Any]:
    """ServiceTemplate ``spec``: the chart from a Flux HelmRepository in the same namespace."""
    return _helm_chart_spec(template)


def cluster_template_spec(template: ClusterTemplateConfig) -> dict[str, Any]:
    """ClusterTemplate ``spec``: the pinned chart from a Flux HelmRepository in the same namespace and
    the CAPI providers it needs (``spec.providers``; k0rdent CRD ``clustertemplates``, whose
    ``spec`` is immutable)."""
    return {
        **_helm_chart_spec(template, reconcileStrategy="ChartVersion"),
        "providers": list(template.providers),
    }


def device_plugin_config(sharing: GpuSharingConfig) -> dict[str, Any]:
    """GPU Operator device-plugin config file (``version: v1``) for one sharing setting:
    :meth:`domain.gpu_sharing.SharingSpec.device_plugin_config`, the source the composer's counts of
    the same setting come from (:func:`components.composer.composer_sharing`)."""
    return sharing.spec().device_plugin_config()


def vgpu_device_config_name(vgpu_type: str) -> str:
    """Name of the vGPU Device Manager config that creates ``vgpu_type`` on every GPU of a node: the
    type's last word (``GRID T4-4Q`` -> ``T4-4Q``, ``NVIDIA L40S-8Q`` -> ``L40S-8Q``,
    ``NVIDIA RTX Pro 6000 Blackwell DC-1-24C`` -> ``DC-1-24C``), as the vGPU Device Manager's configs
    are named (NVIDIA vgpu-device-manager ``examples/config-example.yaml``: ``T4-4Q``, ``L40S-8Q``)."""
    return vgpu_type.split()[-1]


def gpu_operator_values(
    *,
    workload_mode: str,
    device_plugin_configs: Mapping[str, str] | None = None,
    device_plugin_default: str | None = None,
    mig_strategy: str | None = None,
    vgpu_manager: VgpuManagerConfig | None = None,
    vgpu_types: Sequence[str] = (),
) -> dict[str, Any]:
    """GPU Operator Helm values for a cluster in ``workload_mode``.

    ``vm-passthrough``: sandbox workloads on, VFIO manager on; ``vm-vgpu``: sandbox workloads on,
    vGPU manager on (``vgpu_manager``: the privately built image's ``repository``, ``image``,
    ``version``, ``imagePullSecrets``) and vGPU device manager on, its default config creating the
    cluster's vGPU type (``vgpu_types``, at most one; :func:`vgpu_device_config_name`);
    ``container``: driver and device plugin for pods. ``device_plugin_configs`` (name -> config YAML)
    become ``devicePlugin.config`` with the data inline; nodes pick one with the
    ``nvidia.com/device-plugin.config`` label, and nodes without it use ``device_plugin_default``
    (``devicePlugin.config.default``; set when every host of the cluster uses one config). Every key
    except ``devicePlugin.config.create`` / ``.data`` (chart-only) is a ClusterPolicy ``spec`` field
    (:func:`cluster_policy_overrides`).
    """
    vm = workload_mode != "container"
    values: dict[str, Any] = {
        "sandboxWorkloads": {"enabled": vm, "defaultWorkload": workload_mode},
        "vfioManager": {"enabled": workload_mode == "vm-passthrough"},
        "vgpuManager": {"enabled": workload_mode == "vm-vgpu"},
        "vgpuDeviceManager": {"enabled": workload_mode == "vm-vgpu"},
        "sandboxDevicePlugin": {"enabled": vm},
        "driver": {"enabled": True},
    }
    if device_plugin_configs:
        values["devicePlugin"] = {
            "config": {
                "create": True,
                "name": "device-plugin-config",
                "default": device_plugin_default or "",
                "data": dict(sorted(device_plugin_configs.items())),
            }
        }
    if mig_strategy:
        values["mig"] = {"strategy": mig_strategy}
    if workload_mode == "vm-vgpu" and vgpu_manager is not None:
        manager: dict[str, Any] = {
            "enabled": True,
            "repository": vgpu_manager.repository,
            "image": vgpu_manager.image,
            "version": vgpu_manager.version,
        }
        if vgpu_manager.image_pull_secrets:
            manager["imagePullSecrets"] = list(vgpu_manager.image_pull_secrets)
        values["vgpuManager"] = manager
    if workload_mode == "vm-vgpu" and vgpu_types:
        values["vgpuDeviceManager"]["config"] = {"default": vgpu_device_config_name(vgpu_types[0])}
    return values


#: Helm-only keys of the GPU Operator values (the chart turns them into a ConfigMap); everything
#: else the program sets is a ClusterPolicy ``spec`` field of the same path.
_CHART_ONLY = {"devicePlugin": ("create", "data")}


def cluster_policy_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ClusterPolicy ``spec`` fragment our GPU Operator Helm values set (``nvidia.com/v1``; the
    chart renders its values into the ClusterPolicy), chart-only keys dropped, for validation
    against the CRD schema in ``lab/crds/gpu-operator``."""
    spec = {k: dict(v) if isinstance(v, Mapping) else v for k, v in values.items()}
    for section, keys in _CHART_ONLY.items():
        config = spec.get(section, {}).get("config")
        if isinstance(config, Mapping):
            spec[section]["config"] = {k: v for k, v in config.items() if k not in keys}
    return spec


def kubevirt_values(
    *,
    workload_mode: str,
    gpu_models: Iterable[str],
    catalogue: Mapping[str, GpuProduct] = BUILTIN_GPU_PRODUCTS,
    vgpu_types: Iterable[str] = (),
) -> dict[str, Any]:
    """KubeVirt Helm values: GPU/HostDevices feature gates; for ``vm-passthrough`` the GPUs permitted
    for passthrough (``pciHostDevices``; ``gpu_models`` looked up in ``catalogue``, models missing from
    it skipped); for ``vm-vgpu`` the mediated devices permitted (``mediatedDevices``:
    ``mdevNameSelector`` = the vGPU type's name, ``resourceName`` = :func:`vgpu_resource_name`).

    Both are ``externalResourceProvider: true``: the GPU Operator creates the devices (VFIO binding,
    vGPU Device Manager) and its sandbox device plugin advertises them (GPU Operator docs, "GPU
    Operator with KubeVirt"), so KubeVirt's own ``mediatedDevicesConfiguration`` (KubeVirt creating
    mdevs itself) stays unset: two managers would create devices on the same GPUs.
    """
    config: dict[str, Any] = {"developerConfiguration": {"featureGates": ["GPU", "HostDevices"]}}
    if workload_mode == "vm-passthrough":
        devices = [
            {
                "pciVendorSelector": catalogue[m].pci_id.upper(),
                "resourceName": catalogue[m].passthrough_resource,
                "externalResourceProvider": True,
            }
            for m in sorted(set(gpu_models))
            if m in catalogue
        ]
        if devices:
            config["permittedHostDevices"] = {"pciHostDevices": devices}
    if workload_mode == "vm-vgpu":
        mdevs = [
            {"mdevNameSelector": t, "resourceName": vgpu_resource_name(t), "externalResourceProvider": True}
            for t in sorted(set(vgpu_types))
        ]
        if mdevs:
            config["permittedHostDevices"] = {"mediatedDevices": mdevs}
    return {"kubevirt": {"configuration": config}}


def _service(template: ServiceTemplateConfig, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "template": template.name,
        "namespace": template.namespace,
        "values": to_yaml(dict(values)),
    }


@dataclass(frozen=True)
class HypervisorGpus:
    """What a hypervisor cluster's GPU Operator and KubeVirt values are built from besides its own
    config: the GPUs and GPU settings of its hosts and of the tenant clusters on it, gathered from
    the whole estate (``components.estate.hypervisor_gpus``). The defaults: no GPU products known,
    no sharing, no vGPU.

    Attributes:
        models: GPU products (GFD names) that may sit in its hosts (KubeVirt permitted host devices
            for passthrough).
        device_plugin_configs: named GPU Operator device-plugin configs (name -> YAML) for the
            sharing settings on its hosts.
        device_plugin_default: the device-plugin config every host uses
            (``devicePlugin.config.default``), or None.
        mig_strategy: GPU Operator MIG strategy when any of its hosts uses MIG, else None.
        catalogue: GPU products by GFD name (``EstateConfig.gpu_catalogue()``).
        vgpu_types: vGPU types its tenant clusters use (``vm-vgpu``: KubeVirt permitted mediated
            devices, vGPU Device Manager default config).
    """

    models: Sequence[str] = ()
    device_plugin_configs: Mapping[str, str] = field(default_factory=dict)
    device_plugin_default: str | None = None
    mig_strategy: str | None = None
    catalogue: Mapping[str, GpuProduct] = field(default_factory=lambda: dict(BUILTIN_GPU_PRODUCTS))
    vgpu_types: Sequence[str] = ()


def hypervisor_cluster_spec(
    cluster: HypervisorClusterConfig,
    *,
    catalog: CatalogConfig,
    gpus: HypervisorGpus | None = None,
    kernel_args: Sequence[str] = (),
    blacklisted_modules: Sequence[str] = (),
) -> dict[str, Any]:
    """ClusterDeployment ``spec`` of a hypervisor cluster on Metal3 hosts (values of the
    ``capm3-hosted-cp`` chart, ``charts/templates/capm3-hosted-cp/values.schema.json``).

    Workers are the BareMetalHosts labelled ``composable-gpu.io/cluster=<name>`` (CAPM3
    ``hostSelector``), written with the cluster's OS ``image`` when it has one; every worker gets
    ``nvidia.com/gpu.workload.config=<mode>`` through the k0s worker ``--labels`` flag, and
    ``kernel_args`` / ``blacklisted_modules`` (its hosts' settings,
    :func:`components.estate.cluster_kernel_settings`) in its bootstrap data
    (``worker.kernelArgs`` / ``worker.blacklistedModules``); services: the GPU Operator (and
    KubeVirt when enabled), their values from ``gpus`` (default: :class:`HypervisorGpus` ``()``).
    """
    gpus = gpus or HypervisorGpus()
    services = [
        _service(
            catalog.gpu_operator,
            "gpu-operator",
            gpu_operator_values(
                workload_mode=cluster.gpu_workload_mode,
                device_plugin_configs=gpus.device_plugin_configs,
                device_plugin_default=gpus.device_plugin_default,
                mig_strategy=gpus.mig_strategy,
                vgpu_manager=cluster.vgpu_manager,
                vgpu_types=gpus.vgpu_types,
            ),
        )
    ]
    if cluster.kubevirt:
        services.append(
            _service(
                catalog.kubevirt,
                "kubevirt",
                kubevirt_values(
                    workload_mode=cluster.gpu_workload_mode,
                    gpu_models=list(gpus.models),
                    catalogue=gpus.catalogue,
                    vgpu_types=gpus.vgpu_types,
                ),
            )
        )
    worker: dict[str, Any] = {
        "hostSelector": {"matchLabels": {f"{LABEL_PREFIX}/cluster": cluster.name}},
        "kernelArgs": list(kernel_args),
        "blacklistedModules": list(blacklisted_modules),
    }
    if cluster.image is not None:
        worker["image"] = image_spec(cluster.image)
    return {
        "template": cluster.template,
        "credential": cluster.credential,
        "config": {
            "controlPlaneNumber": cluster.control_plane_replicas,
            "workersNumber": len(cluster.hosts),
            "clusterLabels": common_labels(cluster=cluster.name, gpu_workload=cluster.gpu_workload_mode),
            "worker": worker,
            "k0s": {
                "version": cluster.k0s_version,
                "network": {"provider": "custom" if cluster.cni == "cilium" else cluster.cni},
                "workerArgs": [f"--labels={GPU_WORKLOAD_LABEL}={cluster.gpu_workload_mode}"],
            },
        },
        "serviceSpec": {"services": services, "continueOnError": False},
    }


def dpu_cluster_deployment_spec(
    *, name: str, template: str, credential: str, control_plane_replicas: int, k0s_version: str
) -> dict[str, Any]:
    """ClusterDeployment ``spec`` of the DPU cluster (values of the ``dpu-hosted-cp`` chart,
    ``charts/templates/dpu-hosted-cp/values.schema.json``): a hosted control plane on the
    mothership and no machines; the DPUs join as workers through DPF provisioning (the DPUCluster,
    :func:`dpu_cluster_spec`)."""
    return {
        "template": template,
        "credential": credential,
        "config": {
            "controlPlaneNumber": control_plane_replicas,
            "clusterLabels": common_labels(dpu_cluster=name),
            "k0s": {"version": k0s_version},
        },
    }


def tenant_cluster_spec(
    cluster: TenantClusterConfig,
    *,
    tenant: str,
    namespace: str,
    networks: Sequence[TenantNetworkConfig],
    catalog: CatalogConfig,
    catalogue: Mapping[str, GpuProduct] = BUILTIN_GPU_PRODUCTS,
) -> dict[str, Any]:
    """ClusterDeployment ``spec`` of a tenant child cluster (``kubevirt-hosted-cp`` values).

    Worker VMs run on the hypervisor cluster's nodes (``nodeSelector`` on its cluster label), get a
    bridge interface per tenant network (Multus network ``<namespace>/<network>``), and GPUs as
    KubeVirt ``devices.gpus`` (passthrough resource or vGPU type). Services: the tenant's CNI when
    it is Cilium, the GPU Operator (container mode, inside the VMs) when the cluster has GPUs.
    """
    interfaces: list[dict[str, Any]] = [{"name": "default", "bridge": {}}]
    vm_networks: list[dict[str, Any]] = [{"name": "default", "pod": {}}]
    for net in networks:
        interfaces.append({"name": net.name, "bridge": {}})
        nad = network_attachment_ref(namespace, net.name)
        vm_networks.append({"name": net.name, "multus": {"networkName": nad}})
    devices: dict[str, Any] = {"interfaces": interfaces}
    resource = gpu_device_name(cluster, catalogue)
    if resource:
        devices["gpus"] = [
            {"name": f"gpu{i}", "deviceName": resource} for i in range(cluster.gpu_count_per_worker)
        ]
    services: list[dict[str, Any]] = []
    if cluster.cni == "cilium":
        services.append(_service(catalog.cilium, "cilium", {"kubeProxyReplacement": False}))
    if cluster.gpu_mode != "none":
        services.append(
            _service(catalog.gpu_operator, "gpu-operator", gpu_operator_values(workload_mode="container"))
        )
    spec: dict[str, Any] = {
        "template": cluster.template,
        "credential": cluster.credential,
        "config": {
            "controlPlaneNumber": cluster.control_plane_replicas,
            "workersNumber": cluster.workers,
            "clusterLabels": common_labels(tenant=tenant, hypervisor_cluster=cluster.hypervisor_cluster),
            "worker": {
                "cpus": cluster.worker_cpus,
                "memory": f"{cluster.worker_memory_mib}Mi",
                "nodeSelector": {f"{LABEL_PREFIX}/cluster": cluster.hypervisor_cluster},
                "devices": devices,
                "networks": vm_networks,
            },
            "k0s": {
                "version": cluster.k0s_version,
                "network": {"provider": "custom" if cluster.cni == "cilium" else cluster.cni},
            },
        },
    }
    if services:
        spec["serviceSpec"] = {"services": services, "continueOnError": False}
    return spec


def gpu_device_name(
    cluster: TenantClusterConfig, catalogue: Mapping[str, GpuProduct] = BUILTIN_GPU_PRODUCTS
) -> str | None:
    """KubeVirt ``deviceName`` of the cluster's GPUs: the passthrough resource or the vGPU resource
    of its ``gpu_model`` in ``catalogue``; None without GPUs or for a model missing from it."""
    if cluster.gpu_mode == "none" or not cluster.gpu_model or cluster.gpu_model not in catalogue:
        return None
    product = catalogue[cluster.gpu_model]
    if cluster.gpu_mode == "passthrough":
        return product.passthrough_resource
    vgpu = cluster.effective_vgpu_type(catalogue)
    return vgpu_resource_name(vgpu) if vgpu else None


def tenant_network_data(tenant: str, net: TenantNetworkConfig) -> dict[str, str]:
    """ConfigMap ``data`` describing a tenant network (all values strings, as ConfigMaps require)."""
    data = {
        "tenant": tenant,
        "name": net.name,
        "cidr": net.cidr,
        "vxlanId": str(net.vxlan_id),
        "vlanId": str(net.vlan_id),
    }
    if net.gateway:
        data["gateway"] = net.gateway
    return data


#: API version of Multus NetworkAttachmentDefinitions (k8snetworkplumbingwg
#: network-attachment-definition-client ``artifacts/networks-crd.yaml``).
NAD_API = "k8s.cni.cncf.io/v1"
#: CNI spec version written into the NAD configs (bridge and whereabouts plugins accept it).
CNI_VERSION = "0.3.1"


def network_attachment_ref(namespace: str, network: str) -> str:
    """The Multus network name a VM interface uses for a tenant network: ``<namespace>/<network>``
    (KubeVirt ``spec.networks[].multus.networkName``; the NAD is ``metadata.name = <network>``)."""
    return f"{namespace}/{network}"


def tenant_network_cni_config(tenant: str, net: TenantNetworkConfig) -> dict[str, Any]:
    """CNI config of a tenant network's NetworkAttachmentDefinition (``spec.config`` as JSON).

    Shape: the CNI ``bridge`` plugin on the host bridge ``net.bridge`` tagging the VM's port with
    ``vlan`` (containernetworking/plugins ``plugins/main/bridge``: ``bridge``, ``vlan``), IPAM by
    ``whereabouts`` (cluster-wide allocation; ``range`` = the network's CIDR, ``gateway`` when set)
    so two hypervisors never hand out the same address. The host bridge's uplink is the DPU's host
    port; the DPU's OVS maps the VLAN to the network's VXLAN segment (see :func:`vxlan_segment_data`).
    """
    ipam: dict[str, Any] = {"type": "whereabouts", "range": net.cidr}
    if net.gateway:
        ipam["gateway"] = net.gateway
    return {
        "cniVersion": CNI_VERSION,
        "name": f"{tenant}-{net.name}",
        "type": "bridge",
        "bridge": net.bridge,
        "vlan": net.vlan_id,
        "ipam": ipam,
    }


def vxlan_segment_data(tenant: str, net: TenantNetworkConfig) -> dict[str, str]:
    """ConfigMap ``data`` of a tenant network's VXLAN segment record, which the DPUs' OVS side reads:
    ``{tenant, network, vlanId, vxlanId, cidr[, gateway]}`` (all strings, as ConfigMaps require).

    No published CRD describes a VLAN-to-VNI mapping for the DPUs' OVS (the DPF CRDs pinned in
    ``lab/crds/dpf`` describe DPUs, flavors and Helm services), so the segment is this record
    in the infrastructure namespace beside the DPF objects.
    """
    data = tenant_network_data(tenant, net)
    data["network"] = data.pop("name")
    return data
