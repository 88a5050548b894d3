"""Every property a rule reads from a component is one the component contract declares.

The rules are run over every layout of the rule tests (the compliant estate, each violating and
each unknown-value variant) with each component's props wrapped so that every key a rule reads
by name is logged. A read of a name that ``domain.contract`` does not declare for that type
token would be a check against a property no component passes: it could never fire on a real
stack (or always fire), however the layouts spell it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from domain.contract import CONTRACT, HOST, TENANT_NETWORK, optional_keys, required_keys
from policies.rules import evaluate
from policies.rules.model import ResourceRecord

from .layouts import EXTRA_VIOLATIONS, UNKNOWNS, VIOLATIONS, Layout, compliant, to_records, variant


class _LoggedProps(dict[str, Any]):
    """A props dict that logs ``(type token, key)`` for every read by name."""

    def __init__(self, data: dict[str, Any], token: str, log: set[tuple[str, str]]) -> None:
        super().__init__(data)
        self._token, self._log = token, log

    def __getitem__(self, key: str) -> Any:
        self._log.add((self._token, key))
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._log.add((self._token, key))
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._log.add((self._token, key))
        return super().__contains__(key)


def _layouts() -> list[Layout]:
    mutations = [*VIOLATIONS.values(), *UNKNOWNS.values(), *(m for _, m in EXTRA_VIOLATIONS.values())]
    return [compliant(), *(variant(m) for m in mutations)]


def _reads() -> set[tuple[str, str]]:
    log: set[tuple[str, str]] = set()
    for layout in _layouts():
        records: list[ResourceRecord] = [
            replace(r, props=_LoggedProps(dict(r.props), r.type, log)) if r.type in CONTRACT else r
            for r in to_records(layout)
        ]
        evaluate(records)
    return log


def test_rules_read_only_properties_the_contract_declares() -> None:
    reads = _reads()
    undeclared = sorted(
        (token, key) for token, key in reads if key not in required_keys(token) | optional_keys(token)
    )
    assert not undeclared, f"rules read component properties the contract does not declare: {undeclared}"
    # the log works: the rules read (at least) these declared properties
    assert {(HOST, "bmc_verify_tls"), (TENANT_NETWORK, "vxlan_id")} <= reads
