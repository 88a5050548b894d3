"""The metric names the composer exports, read from its own registry (:mod:`composer.shell.metrics`)."""

from __future__ import annotations

import re

from composer.shell.metrics import Metrics

#: A composer metric name inside a PromQL expression.
METRIC_IN_QUERY = re.compile(r"\bcomposer_[a-z0-9_]+\b")

#: Sample-name suffixes of each metric type in the text exposition format.
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """Every sample name a composer replica's ``/metrics`` can carry (``composer_*`` only)."""
    names = set()
    for family in Metrics().registry.collect():
        for suffix in _SUFFIXES[family.type]:
            names.add(family.name + suffix)
    return {n for n in names if n.startswith("composer_")}


def named_in(query: str) -> set[str]:
    """The composer metric names a PromQL expression reads."""
    return set(METRIC_IN_QUERY.findall(query))
