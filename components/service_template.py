"""k0rdent ServiceTemplate and ClusterTemplate resources (helpers used by Estate and Tenant; not
components)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts
from components.manifests import K0RDENT_API, cluster_template_spec, common_labels, service_template_spec
from stack_config.models import ClusterTemplateConfig, ServiceTemplateConfig


def service_template(
    resource_name: str,
    template: ServiceTemplateConfig,
    *,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> k8s.apiextensions.CustomResource:
    """Register ServiceTemplate ``template.name`` in ``namespace`` (a Helm chart from a Flux
    HelmRepository). k0rdent resolves ``serviceSpec.services[].template`` in the ClusterDeployment's
    own namespace, so each namespace with ClusterDeployments gets the templates it uses. The spec is
    immutable (CRD rule ``self == oldSelf``): a version change replaces the object.
    """
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=K0RDENT_API,
        kind="ServiceTemplate",
        metadata={
            "name": template.name,
            "namespace": namespace,
            "labels": common_labels(service=template.chart),
        },
        spec=service_template_spec(template),
        opts=child_opts(
            parent,
            provider=provider,
            depends_on=depends_on,
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ),
    )


def cluster_template(
    resource_name: str,
    template: ClusterTemplateConfig,
    *,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> k8s.apiextensions.CustomResource:
    """Register ClusterTemplate ``template.name`` in ``namespace``: the pinned chart, the CAPI providers
    it needs and (label ``composable-gpu.io/control-plane``) the control-plane kind it renders. k0rdent
    resolves a ClusterDeployment's ``spec.template`` in its own namespace. The spec is immutable (CRD
    rule ``self == oldSelf``): a version change replaces the object, visibly in ``pulumi preview``.
    """
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=K0RDENT_API,
        kind="ClusterTemplate",
        metadata={
            "name": template.name,
            "namespace": namespace,
            "labels": common_labels(control_plane=template.control_plane),
        },
        spec=cluster_template_spec(template),
        opts=child_opts(
            parent,
            provider=provider,
            depends_on=depends_on,
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ),
    )
