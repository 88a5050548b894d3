"""k0rdent ServiceTemplate and ClusterTemplate resources and the Flux HelmRepositories their charts
come from (helpers used by Estate and Tenant; not components)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components._base import child_opts, secret
from components.manifests import (
    FLUX_SOURCE_API,
    K0RDENT_API,
    cluster_template_spec,
    common_labels,
    helm_repository_spec,
    service_template_spec,
    template_repositories,
)
from stack_config.models import (
    CatalogConfig,
    ClusterTemplateConfig,
    HelmRepositoryConfig,
    ServiceTemplateConfig,
)

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
        labels = common_labels(control_plane=template.control_plane, object="cluster-template")
        spec = cluster_template_spec(template)
    else:
        kind = "ServiceTemplate"
        labels = common_labels(service=template.chart, object="service-template")
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


def helm_repository(
    resource_name: str,
    repository: HelmRepositoryConfig,
    *,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> k8s.apiextensions.CustomResource:
    """Register the Flux HelmRepository ``repository.name`` in ``namespace``
    (:func:`components.manifests.helm_repository_spec`) and, when the repository has credentials, the
    Secret ``<name>-credentials`` it names in ``secretRef`` (``username`` / ``password`` of
    ``repository.credentials``, Pulumi secrets; resource ``<resource_name>-credentials``)."""
    secret_name: str | None = None
    deps = list(depends_on)
    login = repository.credentials
    if login is not None:
        secret_name = f"{repository.name}-credentials"
        deps.append(
            k8s.core.v1.Secret(
                f"{resource_name}-credentials",
                metadata={
                    "name": secret_name,
                    "namespace": namespace,
                    "labels": common_labels(object="helm-repository-credentials"),
                },
                type="Opaque",
                string_data={"username": secret(login.username), "password": secret(login.password)},
                opts=child_opts(parent, provider=provider, depends_on=depends_on),
            )
        )
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=FLUX_SOURCE_API,
        kind="HelmRepository",
        metadata={
            "name": repository.name,
            "namespace": namespace,
            "labels": common_labels(object="helm-repository"),
        },
        spec=helm_repository_spec(repository, secret_name=secret_name),
        opts=child_opts(parent, provider=provider, depends_on=deps),
    )


def k0rdent_templates(
    templates: Sequence[tuple[str, TemplateConfig]],
    *,
    catalog: CatalogConfig,
    prefix: str,
    namespace: str,
    provider: k8s.Provider,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource | None] = (),
) -> list[k8s.apiextensions.CustomResource]:
    """:func:`k0rdent_template` for each ``(resource_name, template)`` pair, in order, all in
    ``namespace`` with the same provider, parent and dependencies, after the HelmRepositories their
    charts come from (:func:`helm_repository`, resources ``<prefix>-repo-<repository>``;
    :func:`components.manifests.template_repositories`: kcm's own ``kcm-templates`` is left to kcm).
    Returns the templates."""
    repositories = [
        helm_repository(
            f"{prefix}-repo-{r.name}", r, namespace=namespace, provider=provider, parent=parent,
            depends_on=depends_on,
        )
        for r in template_repositories(catalog, [t for _, t in templates])
    ]
    return [
        k0rdent_template(
            resource_name,
            template,
            namespace=namespace,
            provider=provider,
            parent=parent,
            depends_on=[*depends_on, *repositories],
        )
        for resource_name, template in templates
    ]
