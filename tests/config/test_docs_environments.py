"""README "Environments": the pull request that adds a host, applied to a copy of the dev stack's
inventory folder, gives a valid estate with one host more (and the error it quotes for a bad MAC)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from stack_config import EstateConfigError, load_stack_file

ROOT = Path(__file__).resolve().parents[2]


def _apply_readme_diff(project: Path) -> None:
    """Apply the README's ```diff block (added and replaced lines, file by file) under ``project``."""
    block = re.search(r"```diff\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "no diff block in README.md"
    target: Path | None = None
    added: list[str] = []
    removed: list[str] = []

    def flush() -> None:
        if target is None:
            return
        text = target.read_text()
        if removed:
            assert len(removed) == len(added) == 1 and removed[0] in text
            text = text.replace(removed[0], added[0])
        else:
            text = text.rstrip("\n") + "\n" + "\n".join(added) + "\n"
        target.write_text(text)

    for line in block.group(1).splitlines():
        if line.startswith("+++ b/"):
            flush()
            target, added, removed = project / line[len("+++ b/"):], [], []
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:])
    flush()


def test_the_readme_pull_request_adds_a_host(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "environments", tmp_path / "environments")
    shutil.copy(ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    before = load_stack_file(tmp_path / "Pulumi.dev.yaml")
    _apply_readme_diff(tmp_path)
    after = load_stack_file(tmp_path / "Pulumi.dev.yaml")
    assert [h.name for h in after.hosts] == [*(h.name for h in before.hosts), "blade-slot-3"]
    assert "blade-slot-3" in after.hypervisor_clusters[0].hosts
    assert after.hosts[2].bmc.password.get_secret_value() == after.hosts[0].bmc.password.get_secret_value()
    # the error the README quotes for a mistake in that file
    hosts = tmp_path / "environments" / "dev" / "hosts" / "lab-workers.yaml"
    hosts.write_text(hosts.read_text().replace('"52:54:00:00:01:03"', '"52:54:00:00:01"'))
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(tmp_path / "Pulumi.dev.yaml")
    first = str(err.value.problems[0])
    assert first.startswith("environments/dev/hosts/lab-workers.yaml: hosts[2].boot_mac: ")
