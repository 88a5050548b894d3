"""The pack through the real CLI: `pulumi preview --policy-pack policies` on a temporary project
(``fixture_program.py``) per stack, on a local file backend.

Each case is its own project, stack and backend under tmp_path, so the previews are independent;
they run a few at a time in the background when the module starts (a preview is ~1 s of CPU,
but a failing one can wait ~5 s for the engine to stop the language host), and each test checks
its own case. Timings are printed at the end of the module (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from policies.rules import RULES

from .layouts import EXTRA_VIOLATIONS, UNKNOWNS, VIOLATIONS, Layout, compliant, find, variant

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "policies"
PROGRAM = Path(__file__).with_name("fixture_program.py")
WORKERS = int(os.environ.get("POLICY_CLI_WORKERS", "4"))
TIMEOUT_SECONDS = 240

pytestmark = pytest.mark.cli

MANDATORY_RULES = [r.name for r in RULES if r.enforcement == "mandatory"]


def _staging(layout: Layout) -> None:
    VIOLATIONS["bmc-tls-verification"](layout)
    find(layout, "estate")["environment"] = "staging"


def _production(layout: Layout) -> None:
    find(layout, "estate")["environment"] = "production"


# case -> (layout, policy config file or None)
CASES: dict[str, tuple[Layout, Path | None]] = {
    "compliant": (compliant(), None),
    **{f"violates-{rule}": (variant(VIOLATIONS[rule]), None) for rule in MANDATORY_RULES},
    **{case: (variant(change), None) for case, (_, change) in EXTRA_VIOLATIONS.items()},
    "unknown-vxlan-id": (variant(UNKNOWNS["tenant-network-uniqueness"]), None),
    "tls-off-in-staging": (variant(_staging), None),
    "tls-off-in-production": (variant(_production), PACK / "config" / "production.json"),
}


@dataclass(frozen=True)
class Preview:
    """Outcome of one ``pulumi preview``: exit code, combined output, wall time in seconds."""

    returncode: int
    output: str
    seconds: float

    def violations(self) -> list[tuple[str, str]]:
        """``(level, rule)`` of each policy violation the CLI printed."""
        return re.findall(r"- \[(mandatory|advisory)\](?: \[severity: \w+\])?\s+([a-z0-9-]+)\s", self.output)


def run_case(workdir: Path, layout: Layout, config: Path | None, base_env: dict[str, str]) -> Preview:
    """Create the project and stack in ``workdir`` and preview it with the pack.

    ``base_env``: the environment, copied in the test's thread: this runs on a pool thread, and
    copying ``os.environ`` here races pytest setting and removing ``PYTEST_CURRENT_TEST``
    (a ``KeyError`` while iterating it)."""
    (workdir / "state").mkdir()
    (workdir / "Pulumi.yaml").write_text(
        f"name: policy-fixture\nruntime:\n  name: python\n  options:\n    virtualenv: {ROOT / '.venv'}\n"
    )
    (workdir / "__main__.py").write_text(PROGRAM.read_text())
    (workdir / "layout.json").write_text(json.dumps(layout))
    env = dict(
        base_env,
        PULUMI_BACKEND_URL=f"file://{workdir / 'state'}",
        PULUMI_CONFIG_PASSPHRASE="policy-tests",
        PULUMI_SKIP_UPDATE_CHECK="1",
    )

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=workdir,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )

    init = pulumi("stack", "init", "test")
    assert init.returncode == 0, init.stdout
    with (workdir / "Pulumi.test.yaml").open("a") as f:  # a stack with no config trips the language host
        f.write(f"config:\n  policy-fixture:layout: {workdir / 'layout.json'}\n")
    args = ["preview", "--color", "never", "--policy-pack", str(PACK)]
    if config is not None:
        args += ["--policy-pack-config", str(config)]
    start = time.monotonic()
    done = pulumi(*args)
    return Preview(done.returncode, done.stdout, round(time.monotonic() - start, 2))


@pytest.fixture(scope="module")
def previews(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future]]:
    """Start the previews of the cases this session selected, a few at a time."""
    wanted = [
        item.callspec.params["case"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "case" in item.callspec.params
    ]
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    base_env = dict(os.environ)
    futures = {
        case: pool.submit(run_case, tmp_path_factory.mktemp(case), *CASES[case], base_env)
        for case in dict.fromkeys(wanted)
    }
    yield futures
    pool.shutdown(wait=True)
    timings = {case: f.result().seconds for case, f in futures.items() if f.done() and not f.exception()}
    print("\npulumi preview seconds per case:", json.dumps(timings, indent=1))


def _result(previews: dict[str, Future], case: str) -> Preview:
    return previews[case].result(timeout=TIMEOUT_SECONDS * 2)


@pytest.mark.parametrize("case", ["compliant"])
def test_compliant_stack_passes(previews, case):
    result = _result(previews, case)
    assert result.returncode == 0, result.output
    assert result.violations() == [], result.output
    assert "composable-gpu-tenant-isolation@v0.1.0" in result.output


@pytest.mark.parametrize("case", [f"violates-{rule}" for rule in MANDATORY_RULES])
def test_violating_stack_fails_and_names_its_rule(previews, case):
    rule = case.removeprefix("violates-")
    result = _result(previews, case)
    assert result.returncode != 0, result.output
    assert "preview failed" in result.output
    assert {r for _, r in result.violations()} == {rule}, result.output
    assert all(level == "mandatory" for level, _ in result.violations())
    assert "Fix: " in result.output


@pytest.mark.parametrize("case", sorted(EXTRA_VIOLATIONS))
def test_each_further_violation_fails_its_rule_alone(previews, case):
    rule = EXTRA_VIOLATIONS[case][0]
    result = _result(previews, case)
    assert result.returncode != 0, result.output
    assert {r for _, r in result.violations()} == {rule}, result.output
    assert "Fix: " in result.output


@pytest.mark.parametrize("case", ["unknown-vxlan-id"])
def test_unknown_value_fails_a_mandatory_rule_instead_of_warning(previews, case):
    result = _result(previews, case)
    assert result.returncode != 0, result.output
    assert ("mandatory", "tenant-network-uniqueness") in result.violations(), result.output
    assert "vxlan_id is not known during preview, so this rule cannot be proven" in result.output
    assert "can't run policy" not in result.output  # pulumi-policy's advisory fallback never fires


@pytest.mark.parametrize("case", ["tls-off-in-staging"])
def test_tls_off_outside_a_lab_is_advisory_by_default(previews, case):
    result = _result(previews, case)
    assert result.returncode == 0, result.output
    assert set(result.violations()) == {("advisory", "bmc-tls-verification")}, result.output
    assert "environment is 'staging', not a lab" in result.output


@pytest.mark.parametrize("case", ["tls-off-in-production"])
def test_tls_off_in_production_is_mandatory_through_policy_config(previews, case):
    result = _result(previews, case)
    assert result.returncode != 0, result.output
    assert set(result.violations()) == {("mandatory", "bmc-tls-verification")}, result.output
