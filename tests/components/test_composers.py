"""A composer per GPU cluster in the program: each ``composers`` entry is its own Composer (chart,
Director account, destroy guard) through its target cluster's provider, with its own owner tag,
Director group, release, Lease and orphan-timer ConfigMap; a clash registers nothing."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components import Estate, EstateArgs
from stack_config import load_estate
from tests.components.conftest import Recorder, run, uses_provider
from tests.config.factories import two_composers, valid_estate

ROOT = Path(__file__).resolve().parents[2]
CHART = "kubernetes:helm.sh/v4:Chart"


def _two() -> dict[str, Any]:
    raw = valid_estate()
    two_composers(raw)
    raw["composers"][0]["kubeconfig"] = "/etc/workers.kubeconfig"
    raw["composers"][1]["kubeconfig"] = "/etc/workers-b.kubeconfig"
    return raw


def test_each_composer_is_deployed_through_its_clusters_provider(mocks: Recorder, tmp_path: Path) -> None:
    cfg = load_estate(_two())
    estate = run(lambda: Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path)))
    # registration order follows Pulumi's output resolution, not the config's order
    assert sorted(r.name for r in mocks.of_type("composable:infra:Composer")) == ["composer", "composer-b"]
    assert len(estate.composers) == 2 and estate.composer is None
    providers = {
        r.name: r.inputs["kubeconfig"]
        for r in mocks.of_type("pulumi:providers:kubernetes")
        if "composer" in r.name
    }
    assert providers == {
        "estate-composer-target": "/etc/workers.kubeconfig",
        "estate-composer-target-workers-b": "/etc/workers-b.kubeconfig",
    }
    for release, provider in (
        ("composer", "estate-composer-target"),
        ("composer-b", "estate-composer-target-workers-b"),
    ):
        objects = [
            r
            for r in mocks.children_of(release, "composable:infra:Composer")
            if r.typ.startswith("kubernetes:")
        ]
        assert objects and all(uses_provider(r, provider) for r in objects), release


def test_each_composer_has_its_own_tag_group_lease_and_orphan_configmap(
    mocks: Recorder, tmp_path: Path
) -> None:
    cfg = load_estate(_two())
    run(lambda: Estate("estate", EstateArgs(config=cfg, stack="test", project_root=tmp_path)))
    seen = {}
    for release in ("composer", "composer-b"):
        values = mocks.named(release, CHART).inputs["values"]
        guard = mocks.named(f"{release}-gpu-guard").inputs
        component = mocks.named(release, "composable:infra:Composer").inputs
        lease_rules = [r for r in component["rbac_rules"] if r.get("resourceNames")]
        seen[release] = (
            values["composer"]["ownerTag"],
            guard["owner_tag"],
            guard["group"],
            values["leaderElection"]["leaseName"],
            [n for r in lease_rules for n in r["resourceNames"]],
            component["target_cluster"],
        )
    assert seen == {
        "composer": (
            "gpu-composer",
            "gpu-composer",
            "pool-a",
            "gpu-composer",
            ["gpu-composer", "gpu-composer-orphans"],
            "workers",
        ),
        "composer-b": (
            "composer-b",
            "composer-b",
            "pool-b",
            "composer-b",
            ["composer-b", "composer-b-orphans"],
            "workers-b",
        ),
    }


def test_two_composers_with_one_owner_tag_register_nothing(mocks: Recorder) -> None:
    raw = _two()
    raw["composers"][1]["owner_tag"] = "gpu-composer"
    pulumi.runtime.set_all_config({"composable-gpu:estate": json.dumps(raw)}, ["composable-gpu:estate"])
    try:
        with pytest.raises(pulumi.RunError) as err:
            run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})
    assert "composers[1].owner_tag: duplicate owner tag 'gpu-composer'" in str(err.value)
    assert "rule composers_apart" in str(err.value)
    assert mocks.registrations == []
