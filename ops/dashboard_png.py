"""The composer dashboard's main panels as a PNG, drawn with matplotlib from a real Prometheus.

Grafana itself is not built here; this draws the panels named in :data:`MAIN_PANELS` of the chart's
dashboard (``charts/composer/dashboards/composer.json``) with the same PromQL: each panel's
targets are run through Prometheus's range-query API (``/api/v1/query_range``) over
``[start, end]`` with the dashboard variables substituted (``$namespace``; ``$__rate_interval``
as Grafana defines it, max(4 x scrape interval, step + scrape interval): Grafana's documentation,
"Variables: $__rate_interval"), and every returned series is drawn as one line labelled by the
target's legend format (``{{label}}`` replaced by the series' label).

Usage::

    python -m ops.dashboard_png --prometheus http://127.0.0.1:19090 --namespace gpu-composer \\
        --minutes 30 --out composer-dashboard.png

matplotlib is a development dependency (requirements-dev.txt); it is imported only to draw.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[1] / "charts" / "composer" / "dashboards" / "composer.json"
#: The panels drawn, by title, in this order (two columns).
MAIN_PANELS = (
    "Free GPUs by pool and model",
    "GPU pods waiting",
    "Compose latency",
    "Compose and decompose calls",
    "GPUs moved",
    "Reclaims held by guard",
)
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")

#: ``(promql, start, end, step) -> result matrix`` (``[{"metric": {...}, "values": [[t, "v"]]}]``).
RangeQuery = Callable[[str, float, float, float], list[dict[str, Any]]]


@dataclass(frozen=True)
class Series:
    """One line: its legend, times (seconds since the epoch) and values."""

    legend: str
    times: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class Panel:
    """One drawn panel: title, unit (Grafana's, e.g. ``s``), lines."""

    title: str
    unit: str
    series: tuple[Series, ...]


def rate_interval(scrape_seconds: float, step_seconds: float) -> str:
    """Grafana's ``$__rate_interval`` (module docstring), in whole seconds: ``"20s"``."""
    return f"{int(max(4 * scrape_seconds, step_seconds + scrape_seconds))}s"


def substitute(expr: str, variables: Mapping[str, str]) -> str:
    """``expr`` with ``$name`` (and ``${name}``) replaced by ``variables[name]``, longest names first."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    return expr


def legend(fmt: str, labels: Mapping[str, str]) -> str:
    """A Grafana legend format filled from a series' labels (``{{reason}}`` -> its value)."""
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt).strip() or "value"


def main_panels(dashboard: Mapping[str, Any], titles: Sequence[str] = MAIN_PANELS) -> list[dict[str, Any]]:
    """The dashboard's panels with those ``titles``, in that order.

    Raises:
        KeyError: a title is not on the dashboard.
    """
    by_title = {p["title"]: p for p in dashboard["panels"]}
    missing = [t for t in titles if t not in by_title]
    if missing:
        raise KeyError(f"not on the dashboard: {', '.join(missing)}")
    return [by_title[t] for t in titles]


def collect(
    dashboard: Mapping[str, Any],
    query_range: RangeQuery,
    *,
    namespace: str,
    start: float,
    end: float,
    step: float,
    scrape_seconds: float,
    titles: Sequence[str] = MAIN_PANELS,
) -> list[Panel]:
    """Run every target of the main panels over ``[start, end]`` (seconds since the epoch)."""
    variables = {"namespace": namespace, "__rate_interval": rate_interval(scrape_seconds, step)}
    out = []
    for p in main_panels(dashboard, titles):
        lines = []
        for t in p.get("targets", []):
            for r in query_range(substitute(t["expr"], variables), start, end, step):
                pts = [(float(ts), float(v)) for ts, v in r["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if pts:
                    lines.append(
                        Series(
                            legend(t.get("legendFormat", ""), r["metric"]),
                            tuple(x for x, _ in pts),
                            tuple(y for _, y in pts),
                        )
                    )
        out.append(
            Panel(p["title"], str(p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")), tuple(lines))
        )
    return out


def draw(panels: Sequence[Panel], out: Path, *, title: str) -> Path:
    """Write the panels as one PNG (two columns, shared time axis in UTC); returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(14, 3.2 * rows), squeeze=False)
    for ax, p in zip(axes.flat, panels, strict=False):
        for s in p.series:
            ax.plot(
                [datetime.fromtimestamp(t, UTC) for t in s.times], s.values, label=s.legend, linewidth=1.4
            )
        ax.set_title(p.title, fontsize=10)
        if p.unit == "s":
            ax.set_ylabel("seconds")
        elif p.unit == "ops":
            ax.set_ylabel("per second")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))  # type: ignore[no-untyped-call]
        ax.grid(alpha=0.3)
        if p.series:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def render(
    prometheus: str,
    out: Path,
    *,
    namespace: str,
    start: float,
    end: float,
    scrape_seconds: float = 5.0,
    dashboard: Path = DASHBOARD,
) -> Path:
    """Query ``prometheus`` (base URL) and draw the main panels into ``out`` (module docstring).

    Raises:
        requests.RequestException / ValueError: Prometheus did not answer a query.
    """
    from lab.prometheus import query_range

    step = max(scrape_seconds, (end - start) / 300)
    panels = collect(
        json.loads(dashboard.read_text()),
        lambda q, s, e, st: query_range(prometheus, q, start=s, end=e, step=st),
        namespace=namespace,
        start=start,
        end=end,
        step=step,
        scrape_seconds=scrape_seconds,
    )
    first, last = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    span = f"{first:%Y-%m-%d %H:%M:%S} - {last:%H:%M:%S} UTC"
    return draw(panels, out, title=f"GPU composer, namespace {namespace}: {span}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (1 when Prometheus cannot be read)."""
    ap = argparse.ArgumentParser(
        prog="python -m ops.dashboard_png",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--prometheus", required=True, help="Prometheus base URL")
    ap.add_argument("--namespace", required=True, help="the composer's namespace")
    ap.add_argument("--minutes", type=float, default=30.0, help="the last N minutes (default 30)")
    ap.add_argument("--scrape-seconds", type=float, default=5.0, help="the scrape interval (default 5)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import requests

    end = time.time()
    try:
        render(
            args.prometheus,
            args.out,
            namespace=args.namespace,
            start=end - args.minutes * 60,
            end=end,
            scrape_seconds=args.scrape_seconds,
        )
    except (requests.RequestException, ValueError) as exc:
        print(f"dashboard_png: {args.prometheus}: {exc}", file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
