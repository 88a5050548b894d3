"""The worked example of ``docs/composer-pools.md`` is a valid stack, and its two broken variants fail
with the messages the page quotes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config.errors import EstateConfigError
from stack_config.loader import load_estate

DOC = Path(__file__).resolve().parents[2] / "docs" / "composer-pools.md"


def _example() -> dict[str, Any]:
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block, "no yaml block in docs/composer-pools.md"
    raw = yaml.safe_load(block.group(1))["config"]["composable-gpu:estate"]

    def plain(v: Any) -> Any:  # Pulumi hands the program decrypted secrets
        if isinstance(v, dict):
            return "decrypted" if set(v) == {"secure"} else {k: plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    return plain(raw)


def _doc_text() -> str:
    return " ".join(DOC.read_text().split())


def test_worked_example_loads() -> None:
    estate = load_estate(_example())
    assert estate.composer_host_pools() == {
        "gpu-node-01": "acme", "gpu-node-02": "acme", "gpu-node-04": "acme", "gpu-node-03": "shared",
    }
    assert estate.composer_tenant_pool("initech") == "shared"


@pytest.mark.parametrize(
    ("path", "value"),
    [(("composer", "pools", 1, "hosts"), ["gpu-node-03", "gpu-node-04"]),
     (("composer", "pools", 0, "quota_gpus"), 11)],
)
def test_broken_variants_fail_with_the_quoted_message(path: tuple, value: Any) -> None:
    raw = _example()
    node: Any = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    if path[-1] == "hosts":  # the move: out of acme's pool, into the shared one
        raw["composer"]["pools"][0]["hosts"].remove("gpu-node-04")
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    messages = [str(p) for p in err.value.problems]
    assert len(messages) == 1 and f"`{messages[0]}`".replace("`", "") in _doc_text().replace("`", "")
