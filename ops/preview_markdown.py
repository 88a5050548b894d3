"""The pull-request summary of a ``pulumi preview``: a pure function from a parsed
:class:`~ops.preview_events.Preview` to GitHub-flavoured Markdown.

Sections, in order (empty ones are left out):

1. Title, result, policy verdict and the plan's counts.
2. A ``[!CAUTION]`` alert listing **hardware-affecting replacements and deletions**: steps that
   replace or delete a custom resource whose kind is in :data:`HARDWARE_KINDS` (the last
   segment of its type token, e.g. ``BareMetalHost``, ``DpuPosture``) or that sits inside a
   component in :data:`HARDWARE_COMPONENTS` (``GpuComposition``, ``Dpu``). Such steps detach
   GPUs, reset DPUs or re-provision hosts.
3. **GPUs per host**: totals of ``composable:infra:GpuComposition`` ``count`` per ``host``
   before and after, for hosts whose total or models change.
4. **Tenants and networks**: ``composable:infra:Tenant`` and ``TenantNetwork`` added, removed
   or changed (CIDR, VXLAN, VLAN, quota).
5. **Other component changes**: property changes of the other ``composable:infra:*``
   components (the component contract in ``docs/architecture.md``).
6. **Policy results**: violations with their enforcement level, the packs that ran.
7. **Changes by component**: every non-``same`` step, grouped under its nearest
   ``composable:infra:*`` component (parent chain from the URNs), as a table.
8. Diagnostics (warnings, errors) and, optionally, the raw ``pulumi preview --diff`` text in a
   collapsed block.

Output is deterministic for a given input (everything is sorted), so it can be compared with
expected files in tests.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from domain.contract import TOKEN_PREFIX
from ops.preview_events import SECRET_SIG, UNKNOWN, PolicyViolation, Preview, Step

#: Type-token prefix of the program's components (the component contract).
COMPONENT_PREFIX = TOKEN_PREFIX
#: Kinds (last segment of a type token) whose replacement or deletion touches hardware.
#: (Director compositions; Redfish DPU posture and BIOS settings; mlxconfig and kernel arguments
#: over SSH, which need a DPU reset or host reboot; Metal3 hosts; DPF DPU provisioning.)
HARDWARE_KINDS = frozenset({
    "GpuComposition", "GpuAttachment", "DpuPosture", "BiosAttributes", "DpuMlxconfig", "HostKernelPrep",
    "BareMetalHost", "DPUSet", "DPUFlavor", "BFB", "DPU",
})
#: Components whose every custom child touches hardware.
HARDWARE_COMPONENTS = frozenset({"GpuComposition", "Dpu"})
#: Component properties shown when a component (other than tenants, networks and GPU
#: compositions, which have their own sections) is added or removed.
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "Estate": ("environment",),
    "Host": ("role", "gpu_mode", "cluster", "dpu"),
    "Dpu": ("host", "mode", "host_privilege", "host_rshim"),
    "HypervisorCluster": ("hosts", "gpu_workload_mode", "kubevirt"),
    "DpuCluster": ("hosts", "template"),
    "TenantCluster": (
        "tenant", "template", "control_plane", "hypervisor_cluster", "gpu_mode", "gpu_model", "gpu_count"
    ),
    "GpuSharing": ("strategy", "replicas", "mig_profile", "hosts", "tenants"),
    "Composer": ("pool", "target_cluster", "idle_timeout_seconds", "cluster_admin"),
}
#: Above this many steps the "Changes by component" tables are collapsed.
COLLAPSE_CHANGES_ABOVE = 40
#: GitHub's limit for a comment body is 65536 characters; keep well below it.
DEFAULT_MAX_DIFF_CHARS = 30_000

_OPS_ORDER = ["create", "update", "replace", "delete", "import", "read", "refresh", "discard"]
_OP_SYMBOL = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "read": ">", "import": "=",
              "refresh": "~", "discard": "-"}
_LEVEL_ICON = {"mandatory": "🚫", "advisory": "⚠️", "remediate": "🔧", "disabled": "⏸️"}
_LEVEL_ORDER = {"mandatory": 0, "remediate": 1, "advisory": 2, "disabled": 3}
_MAX_VALUE_CHARS = 60
_MAX_KEYS_PER_ROW = 4


def short_type(type_token: str) -> str:
    """Last segment of a type token: ``composable:infra:Host`` → ``Host``,
    ``kubernetes:metal3.io/v1alpha1:BareMetalHost`` → ``BareMetalHost``."""
    return type_token.rsplit(":", 1)[-1]


def format_value(value: Any) -> str:
    """A property value for a table cell: secrets as ``[secret]``, unknowns as
    ``(known after apply)``, ``None`` as ``–``, others as compact JSON (strings bare),
    cut to 60 characters."""
    if isinstance(value, dict) and SECRET_SIG in value:
        return "[secret]"
    if value == UNKNOWN:
        return "(known after apply)"
    if value is None:
        return "–"
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(_mask(value), sort_keys=True, separators=(",", ":"))
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return "[secret]"
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return "(known after apply)" if value == UNKNOWN else value


_PATH_TOKEN = re.compile(r'\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]|([^.\[\]]+)')


def lookup(props: Mapping[str, Any], path: str) -> Any:
    """The value at a Pulumi property path (``spec.online``, ``rules[0].verbs``,
    ``metadata.labels["nvidia.com/gpu.product"]``) in ``props``; ``None`` if absent."""
    value: Any = props
    for quoted, index, plain in _PATH_TOKEN.findall(path):
        if index and isinstance(value, list):
            value = value[int(index)] if int(index) < len(value) else None
        elif isinstance(value, Mapping):
            value = value.get(quoted or plain or index)
        else:
            return None
        if value is None:
            return None
    return value


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text.replace('`', '')}`"


class _Tree:
    """Parent links and component chains over all steps (``same`` ones included)."""

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps = {s.urn: s for s in steps}

    def _type_and_name(self, urn: str) -> tuple[str, str]:
        step = self.steps.get(urn)
        if step is not None:
            return step.type, step.name
        qualified = urn.split("::")[2] if urn.count("::") >= 3 else ""
        return qualified.rsplit("$", 1)[-1], urn.rsplit("::", 1)[-1]

    def components(self, urn: str) -> list[tuple[str, str, str]]:
        """``(urn, type, name)`` of the composable components from the root down to ``urn``
        itself (included if it is one)."""
        chain: list[tuple[str, str, str]] = []
        current: str | None = urn
        seen: set[str] = set()
        while current and current not in seen:
            seen.add(current)
            type_token, name = self._type_and_name(current)
            if type_token.startswith(COMPONENT_PREFIX):
                chain.append((current, type_token, name))
            step = self.steps.get(current)
            current = step.parent if step else None
        return list(reversed(chain))

    def label(self, urn: str) -> str:
        """``Host `blade-slot-1` › GpuComposition `blade-slot-1-gpus``` for the component
        chain of ``urn`` (an outer ``Estate`` is left out unless it is all there is)."""
        chain = self.components(urn)
        if len(chain) > 1 and short_type(chain[0][1]) == "Estate":
            chain = chain[1:]
        return " › ".join(f"{short_type(t)} {_code(n)}" for _, t, n in chain) or "Stack-level resources"

    def resource_label(self, urn: str | None) -> str:
        if not urn:
            return "the stack"
        type_token, name = self._type_and_name(urn)
        return f"{short_type(type_token)} {_code(name)}"


def _counts_line(counts: Mapping[str, int]) -> str:
    changes = {op: n for op, n in counts.items() if op != "same" and n}
    if not changes:
        return f"**Plan:** no changes ({counts.get('same', 0)} unchanged)"
    main = ("create", "update", "replace", "delete")
    extra = [op for op in _OPS_ORDER if op in changes and op not in main]
    extra += sorted(set(changes) - set(_OPS_ORDER))
    parts = [f"{changes.get(op, 0)} to {op}" for op in (*main, *extra)]
    return f"**Plan:** {' · '.join(parts)} · {counts.get('same', 0)} unchanged"


def _verdict(preview: Preview) -> str:
    mandatory = sum(1 for v in preview.violations if v.enforcement_level == "mandatory")
    advisory = sum(1 for v in preview.violations if v.enforcement_level != "mandatory")
    if preview.result is None:
        status = "⚠️ **Preview did not finish**"
    elif preview.result == "failed" or mandatory:
        status = "❌ **Preview failed**"
    else:
        status = "✅ **Preview succeeded**"
    if not preview.policy_packs:
        policy = "⚠️ no policy pack ran"
    elif not preview.violations and preview.result != "succeeded":
        policy = "⚠️ policies not fully evaluated (the preview failed first)"
    elif not preview.violations:
        policy = f"✅ all {_plural(len(preview.policies_passed), 'policy', 'policies')} passed"
    else:
        bits = []
        if mandatory:
            bits.append(f"🚫 {mandatory} mandatory policy violation{'s' if mandatory != 1 else ''}")
        if advisory:
            bits.append(f"⚠️ {advisory} advisory")
        policy = " · ".join(bits)
    return f"{status} · {policy}"


def _change_text(step: Step, *, limit: int = _MAX_KEYS_PER_ROW) -> str:
    if step.op in ("create", "delete", "read", "import") or step.old is None or step.new is None:
        return "–"
    forced = set(step.keys or ()) if step.op == "replace" else set()
    bits = []
    keys = step.changed_keys
    for key in keys[:limit]:
        before = format_value(lookup(step.old.inputs, key))
        after = format_value(lookup(step.new.inputs, key))
        mark = " (forces replacement)" if key in forced else ""
        bits.append(f"{_code(key)}: {before} → {after}{mark}")
    if len(keys) > limit:
        bits.append(f"+{len(keys) - limit} more")
    return "; ".join(bits) or "–"


def _is_hardware(step: Step, tree: _Tree) -> bool:
    state = step.new or step.old
    if step.op not in ("replace", "delete") or state is None or not state.custom:
        return False
    if short_type(step.type) in HARDWARE_KINDS:
        return True
    return any(short_type(t) in HARDWARE_COMPONENTS for _, t, _ in tree.components(step.urn))


def _hardware_section(steps: list[Step], tree: _Tree) -> list[str]:
    hits = sorted((s for s in steps if _is_hardware(s, tree)), key=lambda s: (s.op != "replace", s.urn))
    if not hits:
        return []
    noun = "replacement or deletion" if len(hits) == 1 else "replacements or deletions"
    out = ["> [!CAUTION]",
           f"> **{len(hits)} hardware-affecting {noun}**: GPUs are detached, DPUs reset or hosts "
           "re-provisioned. Check the maintenance window and the workloads on these hosts."]
    for step in hits:
        where = tree.label(step.urn)
        line = f"> - **{step.op}** {short_type(step.type)} {_code(step.name)} ({where})"
        if step.op == "replace":
            line += f": {_change_text(step, limit=8)}"
        out.append(line)
    return out + [""]


def _inputs(state: Any) -> dict[str, Any]:
    return dict(state.inputs) if state is not None else {}


def _gpu_section(steps: list[Step]) -> list[str]:
    before: dict[str, list[Any]] = defaultdict(list)
    after: dict[str, list[Any]] = defaultdict(list)
    models: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for step in steps:
        if step.type != f"{COMPONENT_PREFIX}GpuComposition":
            continue
        for side, state, which in ((before, step.old, 0), (after, step.new, 1)):
            if state is None:
                continue
            props = _inputs(state)
            host = format_value(props.get("host"))
            side[host].append(props.get("count"))
            if props.get("model") not in (None, UNKNOWN):
                models[host][which].add(str(props["model"]))
    rows = []
    for host in sorted(set(before) | set(after)):
        old_total, new_total = _total(before.get(host, [])), _total(after.get(host, []))
        old_models, new_models = models[host]
        if old_total == new_total and old_models == new_models:
            continue
        delta = ""
        if isinstance(old_total, int) and isinstance(new_total, int) and old_total != new_total:
            delta = f" ({new_total - old_total:+d})"
        model_text = ", ".join(sorted(new_models)) or "–"
        if old_models and old_models != new_models:
            model_text = f"{', '.join(sorted(old_models)) or '–'} → {model_text}"
        rows.append(f"| {_code(host)} | {old_total} | {new_total}{delta} | {_cell(model_text)} |")
    if not rows:
        return []
    return ["### GPUs per host", "", "| host | before | after | models |", "|---|---:|---:|---|", *rows, ""]


def _total(counts: list[Any]) -> int | str:
    if any(not isinstance(c, int | float) or isinstance(c, bool) for c in counts):
        return "?"
    return int(sum(counts))


_CHANGE_ICON = {"create": "➕ added", "delete": "➖ removed", "update": "✏️ changed", "replace": "🔁 replaced"}


def _network_details(props: Mapping[str, Any]) -> str:
    bits = [format_value(props.get("cidr"))]
    if props.get("vxlan_id") is not None:
        bits.append(f"VXLAN {format_value(props.get('vxlan_id'))}")
    if props.get("vlan_id") is not None:
        bits.append(f"VLAN {format_value(props.get('vlan_id'))}")
    return ", ".join(bits)


def _tenant_details(props: Mapping[str, Any]) -> str:
    bits = []
    if "gpu_quota" in props:
        bits.append(f"GPU quota {format_value(props.get('gpu_quota'))}")
    if props.get("allowed_models"):
        bits.append(f"models {format_value(props.get('allowed_models'))}")
    return ", ".join(bits) or "–"


def _tenant_section(steps: list[Step]) -> list[str]:
    rows: list[tuple[str, str, str, str]] = []
    for step in steps:
        if step.op not in _CHANGE_ICON:
            continue
        kind = step.type.removeprefix(COMPONENT_PREFIX)
        props = _inputs(step.new if step.op != "delete" else step.old)
        whole = step.op in ("create", "delete")
        if kind == "Tenant":
            tenant, network = format_value(props.get("name", step.name)), ""
            details = _tenant_details(props) if whole else _change_text(step, limit=8)
        elif kind == "TenantNetwork":
            tenant, network = format_value(props.get("tenant")), format_value(props.get("name", step.name))
            details = _network_details(props) if whole else _change_text(step, limit=8)
        else:
            continue
        rows.append((tenant, network, _CHANGE_ICON[step.op], details))
    if not rows:
        return []
    lines = ["### Tenants and networks", "", "| change | tenant | network | details |", "|---|---|---|---|"]
    for tenant, network, change, details in sorted(rows):
        network_cell = _code(network) if network else "–"
        lines.append(f"| {change} | {_code(tenant)} | {network_cell} | {_cell(details)} |")
    return lines + [""]


def _props_summary(type_token: str, props: Mapping[str, Any]) -> str:
    keys = SUMMARY_KEYS.get(short_type(type_token), ())
    bits = [f"{key}={format_value(props[key])}" for key in keys if props.get(key) not in (None, [], {})]
    return ", ".join(bits) or "–"


def _other_components_section(steps: list[Step], tree: _Tree) -> list[str]:
    skip = {f"{COMPONENT_PREFIX}{k}" for k in ("GpuComposition", "Tenant", "TenantNetwork")}
    rows = []
    for step in steps:
        if not step.type.startswith(COMPONENT_PREFIX) or step.type in skip or step.op not in _CHANGE_ICON:
            continue
        if step.op in ("update", "replace"):
            details = _change_text(step, limit=8)
        else:
            details = _props_summary(step.type, _inputs(step.new if step.op == "create" else step.old))
        rows.append(f"| {tree.label(step.urn)} | {_CHANGE_ICON[step.op]} | {_cell(details)} |")
    if not rows:
        return []
    return ["### Other component changes", "", "| component | change | details |", "|---|---|---|",
            *sorted(rows), ""]


def _violation_key(v: PolicyViolation) -> tuple[int, str, str, str]:
    return (_LEVEL_ORDER.get(v.enforcement_level, 9), v.policy_pack_name, v.policy_name, v.resource_urn or "")


def _policy_section(preview: Preview, tree: _Tree) -> list[str]:
    lines = ["### Policy results", ""]
    if not preview.policy_packs:
        return lines + ["No policy pack ran with this preview.", ""]
    packs = ", ".join(f"{_code(name)} {ver}".strip() for name, ver in sorted(preview.policy_packs.items()))
    passed = _plural(len(preview.policies_passed), "policy", "policies")
    if not preview.violations and preview.result != "succeeded":
        return lines + [
            f"⚠️ No violations reported, but the preview failed before the program registered every "
            f"resource, so the policies did not judge the whole stack. Packs: {packs}; {passed} passed.",
            "",
        ]
    if not preview.violations:
        return lines + [f"✅ No violations. Packs: {packs}; {passed} passed.", ""]
    lines += ["| level | policy | resource | message |", "|---|---|---|---|"]
    for v in sorted(preview.violations, key=_violation_key):
        icon = _LEVEL_ICON.get(v.enforcement_level, "")
        lines.append(
            f"| {icon} {v.enforcement_level} | {_code(f'{v.policy_pack_name}/{v.policy_name}')} | "
            f"{tree.resource_label(v.resource_urn)} | {_cell(v.detail)} |"
        )
    failed = _plural(len(preview.policies_failed), "policy", "policies")
    return lines + ["", f"Packs: {packs}; {failed} violated, {passed} passed.", ""]


def _changes_by_component(steps: list[Step], tree: _Tree) -> list[str]:
    groups: dict[str, list[Step]] = defaultdict(list)
    for step in steps:
        if step.op == "same" or step.type == "pulumi:pulumi:Stack":
            continue
        groups[tree.label(step.urn)].append(step)
    if not groups:
        return []
    total = sum(len(g) for g in groups.values())
    lines = ["### Changes by component", ""]
    collapsed = total > COLLAPSE_CHANGES_ABOVE
    if collapsed:
        lines += [f"<details><summary>{total} resources in {len(groups)} components</summary>", ""]
    for label in sorted(groups):
        lines += [f"#### {label}", "", "| op | resource | type | changes |", "|---|---|---|---|"]
        for step in sorted(groups[label], key=lambda s: (_OPS_ORDER.index(s.op) if s.op in _OPS_ORDER else 99,
                                                         s.name)):
            symbol = _OP_SYMBOL.get(step.op, "")
            lines.append(f"| {symbol} {step.op} | {_code(step.name)} | {_cell(step.type)} | "
                         f"{_cell(_change_text(step))} |")
        lines.append("")
    if collapsed:
        lines += ["</details>", ""]
    return lines


def _diagnostics_section(preview: Preview, tree: _Tree) -> list[str]:
    seen: set[tuple[str, str, str | None]] = set()
    lines = []
    for diag in preview.diagnostics:
        text = " ".join(diag.message.split())
        key = (diag.severity, text, diag.urn)
        if key in seen or not text:
            continue
        seen.add(key)
        where = f" ({tree.resource_label(diag.urn)})" if diag.urn else ""
        lines.append(f"- **{diag.severity}**{where}: {text[:500]}")
    return ["### Diagnostics", "", *lines, ""] if lines else []


def _diff_block(diff_text: str, max_chars: int) -> list[str]:
    text = diff_text.rstrip()
    note = []
    if len(text) > max_chars:
        text = text[:max_chars].rsplit("\n", 1)[0]
        note = ["", f"_Output cut at {max_chars} characters; the full text is in the CI job's artifacts._"]
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return ["<details><summary>Full <code>pulumi preview --diff</code> output</summary>", "", f"{fence}text",
            text, fence, *note, "", "</details>", ""]


def render_markdown(
    preview: Preview,
    *,
    title: str | None = None,
    diff_text: str | None = None,
    max_diff_chars: int = DEFAULT_MAX_DIFF_CHARS,
) -> str:
    """Render the pull-request summary of ``preview`` (see the module docstring for the
    sections). ``title`` defaults to ``Pulumi preview: `<project>` / `<stack>```;
    ``diff_text`` (the ``pulumi preview --diff`` output, uncoloured) is appended in a collapsed
    block, cut to ``max_diff_chars`` characters. Returns Markdown ending in one newline."""
    tree = _Tree(preview.steps)
    steps = preview.steps
    heading = title or f"Pulumi preview: {_code(preview.project or '?')} / {_code(preview.stack or '?')}"
    lines = [f"## {heading}", "", f"{_verdict(preview)}  ", _counts_line(preview.change_counts), ""]
    lines += _hardware_section(steps, tree)
    lines += _gpu_section(steps)
    lines += _tenant_section(steps)
    lines += _other_components_section(steps, tree)
    lines += _policy_section(preview, tree)
    lines += _changes_by_component(steps, tree)
    lines += _diagnostics_section(preview, tree)
    if diff_text:
        lines += _diff_block(diff_text, max_diff_chars)
    return "\n".join(lines).rstrip("\n") + "\n"


#: GitHub rejects issue and pull-request comments longer than 65536 characters.
GITHUB_COMMENT_LIMIT = 65_536
_DIFF_BLOCK = re.compile(
    r"<details><summary>Full <code>pulumi preview --diff</code> output</summary>\n.*?</details>\n", re.DOTALL
)
_DIFF_BLOCK_DROPPED = ("_The full `pulumi preview --diff` output was left out to fit the comment; see the CI "
                       "artifacts._\n")


def fit_comment(markdown: str, *, limit: int = GITHUB_COMMENT_LIMIT - 1_000) -> str:
    """Shrink a (possibly multi-stack) summary to at most ``limit`` characters for a comment:
    drop the embedded ``--diff`` blocks, last first, then cut the text at a line boundary with
    a note. Returns ``markdown`` unchanged when it fits."""
    while len(markdown) > limit:
        blocks = list(_DIFF_BLOCK.finditer(markdown))
        if not blocks:
            break
        last = blocks[-1]
        markdown = markdown[: last.start()] + _DIFF_BLOCK_DROPPED + markdown[last.end():]
    if len(markdown) > limit:
        note = "\n\n_Summary cut to fit a comment; the full text is in the CI artifacts._\n"
        markdown = markdown[: limit - len(note)].rsplit("\n", 1)[0] + note
    return markdown


def main(argv: list[str] | None = None) -> int:
    """``python -m ops.preview_markdown fit IN OUT [--limit N]``: write :func:`fit_comment` of IN."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m ops.preview_markdown")
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="shrink a summary to fit a GitHub comment")
    fit.add_argument("source", type=Path)
    fit.add_argument("dest", type=Path)
    fit.add_argument("--limit", type=int, default=GITHUB_COMMENT_LIMIT - 1_000)
    args = parser.parse_args(argv)
    args.dest.write_text(fit_comment(args.source.read_text(), limit=args.limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
