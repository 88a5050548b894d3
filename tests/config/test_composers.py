"""A composer per GPU cluster: the ``composers`` list, the one-composer ``composer`` form, and the
rule :func:`stack_config.rules.composers_apart` that keeps composers sharing a Director apart.

Each clash is refused by the loader (before the program registers any resource), naming the key
and the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stack_config import EstateConfigError, load_estate
from stack_config.fleet import split_estate
from stack_config.inventory import InventoryFile, load_inventory
from stack_config.rules import composers_apart
from tests.config.factories import two_composers, valid_estate
from tests.config.test_inventory import _credentials, _split

RULE = "(rule composers_apart: two composers sharing a Director must not meet)"


def _two(*changes: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    raw = valid_estate()
    two_composers(raw)
    for change in changes:
        change(raw)
    return raw


def _second(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        raw["composers"][1][key] = value

    return change


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


def test_two_composers_load_each_with_its_key_path_and_target():
    estate = load_estate(_two())
    assert estate.composer is None
    entries = [
        (k, c.target_cluster, c.pool, c.owner_tag, c.release_name) for k, c in estate.composer_entries()
    ]
    assert entries == [
        ("composers[0]", "workers", "pool-a", "gpu-composer", "composer"),
        ("composers[1]", "workers-b", "pool-b", "composer-b", "composer-b"),
    ]


def test_the_one_composer_form_is_the_only_composer():
    estate = load_estate(valid_estate())
    assert [k for k, _ in estate.composer_entries()] == ["composer"]
    assert estate.all_composers() == [estate.composer]


def test_composer_and_composers_together_are_refused():
    def both(raw: dict[str, Any]) -> None:
        raw["composer"] = raw["composers"][0]
        raw["composers"] = raw["composers"][1:]

    assert (
        "composers: set composer (one composer) or composers (one per GPU cluster), not both "
        "(rule composers_apart)"
    ) in _problems(_two(both))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "target_cluster",
            "workers",
            "composers[1].target_cluster: duplicate target cluster 'workers' "
            "(first at composers[0].target_cluster)",
        ),
        (
            "owner_tag",
            "gpu-composer",
            "composers[1].owner_tag: duplicate owner tag 'gpu-composer' (first at composers[0].owner_tag)",
        ),
        ("pool", "pool-a", "composers[1].pool: duplicate fabric pool 'pool-a' (first at composers[0].pool)"),
        (
            "release_name",
            "composer",
            "composers[1].release_name: duplicate release name 'composer' "
            "(first at composers[0].release_name)",
        ),
    ],
)
def test_a_second_composer_sharing_a_key_is_refused_naming_it(key, value, message):
    assert f"{message} {RULE}" in _problems(_two(_second(key, value)))


def test_two_fabric_pools_of_one_director_group_are_refused():
    def same_group(raw: dict[str, Any]) -> None:
        raw["fabric"]["pools"][1]["group"] = "pool-a"

    assert (
        f"composers[1].pool: duplicate Director group 'pool-a' (first at composers[0].pool) {RULE}"
        in _problems(_two(same_group))
    )


def test_a_host_served_by_two_composers_is_refused():
    """The second composer lists ``bm-1`` (a host of the first's cluster) in a pool while
    targeting the mothership, where any host may have its Node."""
    change = _do_all(
        _second("target_cluster", "mothership"),
        _second("pools", [{"name": "b", "hosts": ["bm-1"], "tenants": ["red"]}]),
    )
    msgs = _problems(_two(change))
    assert f"composers[1].pools: host 'bm-1' is already served by composers[0] {RULE}" in msgs


def test_a_composer_serving_every_host_is_refused_beside_another():
    msgs = _problems(_two(_second("target_cluster", "mothership")))
    assert (
        "composers[1].pools: composer of 'mothership' serves every host (no pools, target the mothership); "
        f"with several composers list its hosts in pools {RULE}"
    ) in msgs


def test_the_rule_is_silent_for_one_composer_and_for_two_apart():
    assert list(composers_apart(load_estate(valid_estate()))) == []
    assert list(composers_apart(load_estate(_two()))) == []


def test_per_composer_rules_name_the_list_entry():
    msgs = _problems(_two(_second("pool", "nowhere")))
    assert "composers[1].pool: pool 'nowhere' is not defined in fabric.pools" in msgs


def test_each_composers_target_gets_the_tenants_it_serves():
    """A composer with no pools serves every namespace of its cluster: every tenant's namespace
    and quota go to both composers' clusters."""
    estate = load_estate(_two())
    green = estate.tenant("green")
    assert green is not None
    assert [c.target_cluster for c in estate.composers_serving(green)] == ["workers", "workers-b"]
    assert "workers-b" in estate.tenant_workload_clusters(green)


def test_the_fleet_split_gives_each_composer_to_its_clusters_stack():
    parts = _split(_two())
    hosts = parts["hosts/rack-a.yaml"]["hosts"] + parts["hosts/rack-b.yaml"]["hosts"]
    parts["hosts/rack-a.yaml"] = {"hosts": hosts[:4]}  # hv-1, bm-1, bm-2, dpu-host-1
    parts["hosts/rack-b.yaml"] = {"hosts": hosts[4:]}  # bm-3, the host of workers-b
    parts["estate.yaml"]["dpu_cluster"]["hosts"] = ["dpu-host-1"]
    files = [InventoryFile(f"inv/{k}", v) for k, v in sorted(parts.items())]
    fleet = split_estate(files, load_inventory(files, _credentials(), folder="inv"), folder="inv")
    held = {role: s.composers for role, s in fleet.slices.items() if s.composers}
    assert held == {"hosts:rack-a": ("workers",), "hosts:rack-b": ("workers-b",)}
    assert {"hosts:rack-a", "hosts:rack-b"} <= set(fleet.file_roles["inv/estate.yaml"])


def _do_all(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        for c in changes:
            c(raw)

    return change
