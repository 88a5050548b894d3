"""Fixture policy pack for the preview-summary tests: one mandatory and one advisory rule
over the components' declared properties (the shape of the real pack in policies/)."""

from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy

MAX_GPUS_PER_HOST = 4


def gpu_count_within_host_cap(args, report_violation):
    if args.resource_type != "composable:infra:GpuComposition":
        return
    count = args.props.get("count")
    if isinstance(count, int | float) and count > MAX_GPUS_PER_HOST:
        report_violation(f"host {args.props.get('host')} asks for {int(count)} GPUs; "
                         f"its PCIe slots take at most {MAX_GPUS_PER_HOST}")


def tenant_vxlan_in_tenant_range(args, report_violation):
    if args.resource_type != "composable:infra:TenantNetwork":
        return
    vxlan = args.props.get("vxlan_id")
    if isinstance(vxlan, int | float) and vxlan < 1000:
        report_violation(f"tenant {args.props.get('tenant')} network {args.props.get('name')} uses VXLAN "
                         f"{int(vxlan)}; IDs below 1000 are kept for the platform")


PolicyPack(
    "estate-fixture-policies",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        ResourceValidationPolicy(
            name="gpu-count-within-host-cap",
            description="A host takes at most 4 composed GPUs.",
            validate=gpu_count_within_host_cap,
        ),
        ResourceValidationPolicy(
            name="tenant-vxlan-in-tenant-range",
            description="Tenant VXLAN IDs start at 1000.",
            enforcement_level=EnforcementLevel.ADVISORY,
            validate=tenant_vxlan_in_tenant_range,
        ),
    ],
)
