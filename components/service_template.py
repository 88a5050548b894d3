"""k0rdent ServiceTemplate and ClusterTemplate resources (helpers used by Estate and Tenant; not
components)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts
from components.manifests import K0RDENT_API, cluster_template_spec, common_labels, service_template_spec
from stack_config.models import ClusterTemplateConfig, ServiceTemplateConfig

#: What a k0rdent template object is made from: a service chart or a cluster chart.
TemplateConfig = ServiceTemplateConfig | ClusterTemplateConfig


def k0rdent_template(
    resource_name: str,
    template: TemplateConfig,
    *,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> k8s.apiextensions.CustomResource:
    """Register ``template.name`` in ``namespace``: a ServiceTemplate for a
    :class:`ServiceTemplateConfig` (a Helm chart from a Flux HelmRepository, label
    ``composable-gpu.io/service``), a ClusterTemplate for a :class:`ClusterTemplateConfig` (the
    pinned chart, the CAPI providers it needs, and label ``composable-gpu.io/control-plane`` naming
    the control-plane kind it renders).

    k0rdent resolves ``serviceSpec.services[].template`` and ``spec.template`` of a
    ClusterDeployment in the ClusterDeployment's own namespace, so each namespace with
    ClusterDeployments gets the templates it uses. The spec is immutable (CRD rule
    ``self == oldSelf``): a version change deletes and re-creates the object, visibly in
    ``pulumi preview``.
    """
    if isinstance(template, ClusterTemplateConfig):
        kind = "ClusterTemplate"
        labels = common_labels(control_plane=template.control_plane)
        spec = cluster_template_spec(template)
    else:
        kind = "ServiceTemplate"
        labels = common_labels(service=template.chart)
        spec = service_template_spec(template)
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=K0RDENT_API,
        kind=kind,
        metadata={"name": template.name, "namespace": namespace, "labels": labels},
        spec=spec,
        opts=child_opts(
            parent,
            provider=provider,
            depends_on=depends_on,
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ),
    )


def k0rdent_templates(
    templates: Sequence[tuple[str, TemplateConfig]],
    *,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> list[k8s.apiextensions.CustomResource]:
    """:func:`k0rdent_template` for each ``(resource_name, template)`` pair, in order, all in
    ``namespace`` with the same provider, parent and dependencies."""
    return [
        k0rdent_template(
            resource_name,
            template,
            namespace=namespace,
            provider=provider,
            parent=parent,
            depends_on=depends_on,
        )
        for resource_name, template in templates
    ]
