"""A k0rdent ServiceTemplate resource (helper used by Estate and Tenant; not a component)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts
from components.manifests import K0RDENT_API, common_labels, service_template_spec
from stack_config.models import ServiceTemplateConfig


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
