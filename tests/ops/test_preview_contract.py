"""The preview report reads only properties the component contract declares (domain.contract)."""

from __future__ import annotations

from domain import contract
from ops.preview_markdown import COMPONENT_PREFIX, HARDWARE_COMPONENTS, SUMMARY_KEYS

#: Properties the report's own sections read (GPUs per host; tenants and networks).
SECTION_KEYS = {
    "GpuComposition": ("host", "count", "model"),
    "TenantNetwork": ("tenant", "name", "cidr", "vxlan_id"),
    "Tenant": ("name",),
}


def test_summary_and_section_keys_are_contract_properties() -> None:
    for kind, keys in [*SUMMARY_KEYS.items(), *SECTION_KEYS.items()]:
        token = COMPONENT_PREFIX + kind
        assert token in contract.CONTRACT, token
        declared = contract.required_keys(token) | contract.optional_keys(token)
        assert set(keys) <= declared, f"{token}: {sorted(set(keys) - declared)} not in the contract"


def test_hardware_components_are_contract_tokens() -> None:
    assert {COMPONENT_PREFIX + k for k in HARDWARE_COMPONENTS} <= set(contract.CONTRACT)
