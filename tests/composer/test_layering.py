"""Import layering (docs/architecture.md, STYLE "Applied" 4-5), checked on the source.

- The decision modules are pure: no Kubernetes or Director client, no HTTP, no I/O module of
  the composer.
- Only ``composer.shell.kube`` (calls) and ``composer.shell.cache`` (watches) talk to the Kubernetes API;
  the Director client is reached only through ``composer.model.fabric`` (lazily), ``act`` and
  ``controller`` (its error types).
- The lab's GPU-Operator stand-in imports nothing from ``composer`` or ``dynamic_providers``
  (it may import ``domain``, the dependency-free package of domain facts).
"""

from __future__ import annotations

import pytest

from tests.imports import ROOT, imported_names

PURE = (
    "model/models",
    "decide/scheduling",
    "decide/planner",
    "model/annotations",
    "model/podspec",
    "model/nodestate",
    "decide/decide",
    "decide/round_types",
    "decide/intents",
    "decide/reclaim",
    "decide/capacity",
    "model/fabric",
    "decide/gating",
    "decide/reclaim_guard",
)
IO_MODULES = (
    "composer.shell.kube",
    "composer.shell.cache",
    "composer.shell.act",
    "composer.run.controller",
    "composer.shell.leader",
    "composer.shell.health",
    "composer.shell.webhook",
    "composer.shell.gates",
    "composer.shell.timers",
    "composer.__main__",
    "composer.run.loop",
)
FORBIDDEN_IN_PURE = (
    "requests",
    "urllib3",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.watch",
    "http",
    "socket",
    "subprocess",
    *IO_MODULES,
)


def _hits(mods: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if any(m == b or m.startswith(b + ".") for b in banned))


@pytest.mark.parametrize("module", PURE)
def test_decision_modules_are_pure(module):
    mods = imported_names(ROOT / "composer" / f"{module}.py", top_level_only=True)
    assert _hits(mods, FORBIDDEN_IN_PURE) == []
    assert _hits(mods, ("dynamic_providers",)) == []


def test_only_kube_module_uses_the_kubernetes_api():
    for path in (ROOT / "composer").rglob("*.py"):
        if path.stem in ("kube", "cache") and path.parent.name == "shell":
            continue
        kube_api = ("kubernetes.client", "kubernetes.config", "kubernetes.watch")
        assert _hits(imported_names(path), kube_api) == [], path


def test_lab_agent_does_not_import_the_product():
    for path in (ROOT / "lab" / "gpu_agent").glob("*.py"):
        assert _hits(imported_names(path), ("composer", "dynamic_providers")) == [], path
