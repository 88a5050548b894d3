"""A generated estate split into stacks by failure domain, for the fleet benchmark (pure).

:func:`split_fleet` writes, as :class:`bench.preview.BenchStack` files, an inventory folder
``environments/<name>`` that :func:`stack_config.fleet.split_estate` splits into one platform stack,
one stack per rack and one per tenant:

- ``estate.yaml``: the dev estate's ``environment``, ``mothership`` and ``catalog`` (platform);
- ``fabric.yaml``: the dev Director, one GPU pool of 4 GPUs per host, no static composition
  (platform);
- ``hosts/rack-NNN.yaml``: :data:`bench.preview.RACK_SIZE` hosts (the last rack the rest), each a
  bare-metal worker with a BMC and a BlueField DPU on the credential set ``bmc`` (endpoints under
  :data:`DOMAIN`: previews run with the endpoint probes off, so no name is resolved), and the
  rack's own hypervisor cluster ``hv-rack-NNN`` (so each cluster is one stack's), adopted: reached
  through the kubeconfig file :data:`CLUSTER_KUBECONFIG`, as the estate command's tests stand in for
  the clusters an estate creates (a tenant's stack then reads no ClusterDeployment ID from a host
  group's stack, which a never deployed stack does not have); the first rack also holds the DPU
  cluster (its hosts' DPUs) and the composer, whose target is its cluster and which serves the
  namespaces of the tenants whose clusters run there;
- ``tenants/team-NNN.yaml``: one tenant per file, a /24 network (CIDR ``10.<t // 256>.<t % 256>.0``,
  VXLAN ``10000 + t``, VLAN ``100 + t``, all distinct), one child cluster on rack
  ``(t - 1) % racks + 1`` and a quota of 4 GPUs.

Changing one tenant's file is thus a change of that tenant's stack alone
(:meth:`stack_config.fleet.Fleet.file_roles`). :func:`change_tenant` is the change the benchmark
previews.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from bench.preview import CREDENTIALS_KEY, INVENTORY_KEY, RACK_SIZE, BenchStack, _dev_estate, _dev_stack

#: DNS domain of the generated BMC endpoints (never resolved: previews run with preflight off).
DOMAIN = "fleet.example.net"
#: The kubeconfig of every hypervisor cluster, relative to the project (the runner writes it).
CLUSTER_KUBECONFIG = ".lab/clusters/kubeconfig"
#: GPUs per host in the Director pool, and each tenant's ``gpu_quota``.
GPUS_PER_HOST = 4
TENANT_GPU_QUOTA = 4
#: Tenant networks: VXLAN and VLAN IDs are these plus the tenant's number (VLAN IDs end at 4094).
VXLAN_BASE = 10_000
VLAN_BASE = 100
MAX_TENANTS = 4094 - VLAN_BASE


def fleet_name(n_hosts: int, n_tenants: int) -> str:
    """The fleet's (and its monolithic stack's) name: ``fleet1000x100``."""
    return f"fleet{n_hosts}x{n_tenants}"


def host_name(i: int, n_hosts: int) -> str:
    """Host ``i`` (1-based) of ``n_hosts``: ``gpu-node-0007`` (at least 3 digits, all the same width)."""
    return f"gpu-node-{i:0{max(3, len(str(n_hosts)))}d}"


def rack_name(r: int) -> str:
    """Rack ``r`` (1-based): ``rack-001``; its file is ``hosts/rack-001.yaml``, its stack's role
    ``hosts:rack-001`` and its hypervisor cluster ``hv-rack-001``."""
    return f"rack-{r:03d}"


def tenant_name(t: int) -> str:
    """Tenant ``t`` (1-based): ``team-001``; its file is ``tenants/team-001.yaml``."""
    return f"team-{t:03d}"


def tenant_file(t: int) -> str:
    """The file of tenant ``t`` inside the inventory folder."""
    return f"tenants/{tenant_name(t)}.yaml"


def _host(i: int, n_hosts: int) -> dict[str, Any]:
    name = host_name(i, n_hosts)
    mac = f"52:54:00:{(i >> 16) & 0xFF:02x}:{(i >> 8) & 0xFF:02x}:{i & 0xFF:02x}"
    bmc = {"credential": "bmc", "ca_bundle": ".lab/sim-state/redfish/tls/ca.pem"}
    return {
        "name": name,
        "role": "baremetal-worker",
        "boot_mac": mac,
        "bmc": {"endpoint": f"https://bmc-{name}.{DOMAIN}", **bmc},
        "dpu": {"name": f"dpu-{name}", "bmc": {"endpoint": f"https://dpu-bmc-{name}.{DOMAIN}", **bmc}},
    }


def _tenant(t: int, racks: int) -> dict[str, Any]:
    name = tenant_name(t)
    net = f"10.{t // 256}.{t % 256}"
    return {
        "name": name,
        "networks": [{"name": f"{name}-net", "cidr": f"{net}.0/24", "vxlan_id": VXLAN_BASE + t,
                      "vlan_id": VLAN_BASE + t, "gateway": f"{net}.1"}],
        "clusters": [{"name": f"{name}-k8s", "hypervisor_cluster": f"hv-{rack_name((t - 1) % racks + 1)}",
                      "workers": 1}],
        "gpu_quota": TENANT_GPU_QUOTA,
        "allowed_models": ["Tesla-T4"],
    }


def split_fleet(
    n_hosts: int, n_tenants: int, *, rack_size: int = RACK_SIZE, dev: dict[str, Any] | None = None
) -> BenchStack:
    """The estate of ``n_hosts`` hosts and ``n_tenants`` tenants described in the module doc, with
    its stack file ``Pulumi.<fleet_name>.yaml`` (the folder's path, the dev stack's credential sets
    and encryption salt: ciphertexts only, decrypted with the dev passphrase). No role is set: the
    stack file is the fleet's, previewed as one stack it is the monolith.

    Raises:
        ValueError: fewer than one host or tenant, a rack size below 1, or more tenants than
            :data:`MAX_TENANTS` (their VLAN IDs would leave 1..4094).
    """
    if n_hosts < 1 or n_tenants < 1 or rack_size < 1:
        raise ValueError(f"need at least one host, tenant and host per rack, got {n_hosts}, {n_tenants}, "
                         f"{rack_size}")
    if n_tenants > MAX_TENANTS:
        raise ValueError(f"at most {MAX_TENANTS} tenants (VLAN IDs {VLAN_BASE + 1}..4094), got {n_tenants}")
    dev = dev or _dev_stack()
    est = _dev_estate(dev)
    hosts = [_host(i, n_hosts) for i in range(1, n_hosts + 1)]
    racks = -(-n_hosts // rack_size)
    tenants = [_tenant(t, racks) for t in range(1, n_tenants + 1)]
    first = f"hv-{rack_name(1)}"
    served = [t["name"] for t in tenants if t["clusters"][0]["hypervisor_cluster"] == first]
    composer = {**copy.deepcopy(est["composer"]), "target_cluster": first,
                "namespaces": [f"tenant-{n}" for n in served]}
    files: dict[str, Any] = {
        "estate.yaml": {k: copy.deepcopy(est[k]) for k in ("environment", "mothership", "catalog")
                        if k in est},
        "fabric.yaml": {
            "fabric": {**copy.deepcopy(est["fabric"]),
                       "pools": [{**est["fabric"]["pools"][0], "size": GPUS_PER_HOST * n_hosts}]},
            "gpu_compositions": [],
        },
    }
    for r in range(1, racks + 1):
        members = hosts[(r - 1) * rack_size:r * rack_size]
        names = [h["name"] for h in members]
        rack: dict[str, Any] = {
            "hosts": members,
            "hypervisor_clusters": [{"name": f"hv-{rack_name(r)}", "hosts": names,
                                     "gpu_workload_mode": "container", "kubevirt": True,
                                     "control_plane_replicas": 1, "kubeconfig": CLUSTER_KUBECONFIG}],
        }
        if r == 1:
            rack["dpu_cluster"] = {"name": "fleet-dpu", "hosts": names}
            rack["composer"] = composer
        files[f"hosts/{rack_name(r)}.yaml"] = rack
    for t, tenant in enumerate(tenants, start=1):
        files[tenant_file(t)] = {"tenants": [tenant]}
    name = fleet_name(n_hosts, n_tenants)
    folder = f"environments/{name}"
    doc = {
        "config": {INVENTORY_KEY: folder, CREDENTIALS_KEY: dev["config"][CREDENTIALS_KEY]},
        "encryptionsalt": dev["encryptionsalt"],
    }
    return BenchStack(name, n_hosts, doc, folder, files)


def change_tenant(project: Path, stack: BenchStack, t: int) -> str:
    """Raise tenant ``t``'s ``gpu_quota`` by one in its file under ``project`` (the change a pull
    request would make); returns the file's path relative to ``project``.

    Raises:
        FileNotFoundError: the stack's folder was not written to ``project`` or has no tenant ``t``.
    """
    rel = f"{stack.folder}/{tenant_file(t)}"
    path = project / rel
    data = yaml.safe_load(path.read_text())
    data["tenants"][0]["gpu_quota"] += 1
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None))
    return rel
