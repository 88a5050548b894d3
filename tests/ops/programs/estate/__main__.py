"""Fixture program for the preview-summary tests.

It declares the component shapes of the real program (the ``composable:infra:*`` contract in
docs/architecture.md) from one config object, ``estate``, with in-memory dynamic resources
standing in for the Director, Redfish and Kubernetes objects: nothing here talks to anything.
Each stand-in replaces itself when a property in its ``replace_on`` list changes (as the real
providers do for e.g. a GPU model or a DPU mode) and updates in place otherwise.
"""

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult


class Recorded(ResourceProvider):
    """Keeps its inputs as outputs; replaces on a change of any key in ``replace_on``."""

    def __init__(self, replace_on):
        self.replace_on = tuple(replace_on)

    def create(self, props):
        return CreateResult(id_=props["name"], outs=dict(props))

    def diff(self, _id, olds, news):
        changed = sorted(k for k in set(olds) | set(news) if k != "__provider" and olds.get(k) != news.get(k))
        replaces = [k for k in changed if k in self.replace_on]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id, _olds, news):
        return UpdateResult(outs=dict(news))


class BareMetalHost(Resource, module="metal3", name="BareMetalHost"):
    def __init__(self, name, props, opts):
        super().__init__(Recorded(["boot_mac"]), name, {"name": name, **props}, opts)


class DpuPosture(Resource, module="redfish", name="DpuPosture"):
    def __init__(self, name, props, opts):
        super().__init__(Recorded(["mode"]), name, {"name": name, **props}, opts)


class GpuAttachment(Resource, module="director", name="GpuAttachment"):
    def __init__(self, name, props, opts):
        super().__init__(Recorded(["model"]), name, {"name": name, **props}, opts)


class TenantVxlan(Resource, module="network", name="TenantVxlan"):
    def __init__(self, name, props, opts):
        super().__init__(Recorded(["vxlan_id"]), name, {"name": name, **props}, opts)


def child(parent):
    return pulumi.ResourceOptions(parent=parent)


class Estate(pulumi.ComponentResource):
    def __init__(self, name, environment):
        super().__init__("composable:infra:Estate", name, {"stack": name, "environment": environment})
        self.register_outputs({"environment": environment})


class Host(pulumi.ComponentResource):
    def __init__(self, spec, opts):
        name = spec["name"]
        props = {"name": name, "role": "baremetal-worker", "bmc_address": f"redfish://{name}-bmc/redfish/v1",
                 "bmc_verify_tls": True, "gpu_mode": "container",
                 "dpu": f"{name}-dpu" if spec.get("dpu") else None}
        super().__init__("composable:infra:Host", name, props, opts)
        BareMetalHost(f"{name}-bmh", {"boot_mac": spec["boot_mac"], "online": True}, child(self))
        if spec.get("dpu"):
            Dpu(f"{name}-dpu", name, spec["dpu"], child(self))
        if spec.get("gpus"):
            GpuComposition(f"{name}-gpus", name, spec["gpus"], spec["model"], child(self))
        self.register_outputs({"name": name})


class Dpu(pulumi.ComponentResource):
    def __init__(self, name, host, spec, opts):
        props = {"name": name, "host": host, "mode": spec["mode"], "host_privilege": "Restricted",
                 "host_rshim": spec["host_rshim"]}
        super().__init__("composable:infra:Dpu", name, props, opts)
        posture = {k: props[k] for k in ("mode", "host_privilege", "host_rshim")}
        DpuPosture(f"{name}-posture", posture, child(self))
        self.register_outputs({"name": name})


class GpuComposition(pulumi.ComponentResource):
    def __init__(self, name, host, count, model, opts):
        props = {"host": host, "tenant": None, "count": count, "model": model, "device_names": [],
                 "pool": "default"}
        super().__init__("composable:infra:GpuComposition", name, props, opts)
        GpuAttachment(f"{name}-attach", {"machine": host, "count": count, "model": model}, child(self))
        self.register_outputs({"count": count})


class Tenant(pulumi.ComponentResource):
    def __init__(self, spec, opts):
        name = spec["name"]
        props = {"name": name, "gpu_quota": spec["gpu_quota"], "allowed_models": spec["allowed_models"]}
        super().__init__("composable:infra:Tenant", name, props, opts)
        for net in spec.get("networks", []):
            TenantNetwork(name, net, child(self))
        self.register_outputs({"name": name})


class TenantNetwork(pulumi.ComponentResource):
    def __init__(self, tenant, spec, opts):
        props = {"tenant": tenant, "name": spec["name"], "cidr": spec["cidr"], "vxlan_id": spec["vxlan_id"],
                 "vlan_id": spec["vlan_id"]}
        name = f"{tenant}-{spec['name']}"
        super().__init__("composable:infra:TenantNetwork", name, props, opts)
        TenantVxlan(f"{name}-vxlan", {k: props[k] for k in ("cidr", "vxlan_id", "vlan_id")}, child(self))
        self.register_outputs({"name": name})


estate_cfg = pulumi.Config().require_object("estate")
estate = Estate(pulumi.get_stack(), estate_cfg["environment"])
for host in estate_cfg["hosts"]:
    Host(host, child(estate))
for tenant in estate_cfg["tenants"]:
    Tenant(tenant, child(estate))
