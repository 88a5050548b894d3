"""Stand-in for this repository's program in the migration test (``tests/ops/test_estate_migrate.py``).

It reads the stack's estate and role as ``__main__.py`` does (:mod:`stack_config`) and declares the
same top of the resource tree: the ``composable:infra:Estate`` component ``estate`` (with the
split stacks' alias, :func:`components.moved.moved_from_root`) and under it a ``Host`` per host, a
``HypervisorCluster`` per cluster, the ``DpuCluster``, a ``Tenant`` per tenant, a
``GpuComposition`` per static composition, a ``Composer`` per composer, and the platform's
infrastructure namespace; a split stack declares only its slice (:mod:`stack_config.fleet`). In
place of Director or Redfish calls each component holds one dynamic resource whose provider
appends ``create|update|delete <name>`` to the file ``$ESTATE_WRITES_LOG``: a line there is a
provider write. Like the program's Kubernetes objects, each component also holds a ConfigMap
through the explicit Kubernetes provider ``estate-mothership``, a child of the Estate declared in
every stack; it renders manifests into the folder ``$ESTATE_RENDER_DIR`` (pulumi-kubernetes
``renderYamlToDirectory``) instead of calling an API server, so a file written there is a write.
Needs this repository on ``PYTHONPATH``.
"""

import os
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from components.estate import composition_names
from components.moved import moved_from_root
from stack_config.fleet import MONOLITH, parse_role, split_estate
from stack_config.hints import CREDENTIALS_KEY, INVENTORY_KEY
from stack_config.inventory import estate_from_config, read_inventory


def _write(what: str, name: str) -> None:
    with open(os.environ["ESTATE_WRITES_LOG"], "a") as log:
        log.write(f"{what} {name}\n")


class Recorded(ResourceProvider):
    def create(self, props):
        _write("create", props["name"])
        return CreateResult(id_=props["name"], outs=dict(props))

    def diff(self, _id, olds, news):
        keys = (set(olds) | set(news)) - {"__provider"}
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in keys))

    def update(self, _id, _olds, news):
        _write("update", news["name"])
        return UpdateResult(outs=dict(news))

    def delete(self, _id, props):
        _write("delete", props["name"])


class Thing(Resource):
    def __init__(self, name, opts):
        super().__init__(Recorded(), name, {"name": name}, opts)


def config_map(name, parent, provider):
    meta = {"name": name, "namespace": "infra"}
    return k8s.core.v1.ConfigMap(name, metadata=meta, data={"owner": name},
                                 opts=pulumi.ResourceOptions(parent=parent, provider=provider))


class Part(pulumi.ComponentResource):
    def __init__(self, kind, name, opts, provider, depends_on=()):
        super().__init__(f"composable:infra:{kind}", name, None, opts)
        opts = pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))
        self.thing = Thing(f"{name}-{kind.lower()}", opts)
        config_map(f"{name}-{kind.lower()}", self, provider)
        self.register_outputs({})


class Estate(pulumi.ComponentResource):
    def __init__(self, cfg, part):
        opts = pulumi.ResourceOptions(transformations=[moved_from_root(self)]) if part is not None else None
        super().__init__("composable:infra:Estate", "estate", None, opts)
        child = pulumi.ResourceOptions(parent=self)
        provider = k8s.Provider("estate-mothership", render_yaml_to_directory=os.environ["ESTATE_RENDER_DIR"],
                                opts=child)
        if part is None or part.role == "platform":
            Thing("estate-namespace", child)
            config_map("estate-namespace", self, provider)
        clusters = {}
        for h in cfg.hosts:
            if part is None or h.name in part.hosts:
                Part("Host", h.name, child, provider)
        for c in cfg.hypervisor_clusters:
            if part is None or c.name in part.hypervisor_clusters:
                clusters[c.name] = Part("HypervisorCluster", c.name, child, provider)
        if cfg.dpu_cluster is not None and (part is None or part.dpu_cluster):
            Part("DpuCluster", cfg.dpu_cluster.name, child, provider)
        for t in cfg.tenants:
            if part is None or t.name in part.tenants:
                runs_on = [clusters[c].thing for c in cfg.tenant_workload_clusters(t) if c in clusters]
                Part("Tenant", t.name, child, provider, depends_on=runs_on)  # a dependency the move breaks
        for i, name in enumerate(composition_names(cfg)):
            if part is None or i in part.compositions:
                Part("GpuComposition", name, child, provider)
        for c in cfg.all_composers():
            if part is None or c.target_cluster in part.composers:
                Part("Composer", c.release_name, child, provider)
        self.register_outputs({})


config = pulumi.Config()
root = Path(pulumi.get_root_directory())
values = {INVENTORY_KEY: config.get(INVENTORY_KEY), CREDENTIALS_KEY: config.get_object(CREDENTIALS_KEY)}
estate = estate_from_config(values, root=root)
role = parse_role(config.get("role"))
part = None
if role != MONOLITH:
    folder = values[INVENTORY_KEY]
    part = split_estate(read_inventory(root / folder, shown_as=folder), estate, folder=folder).slices[role]
Estate(estate, part)
