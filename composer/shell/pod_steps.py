"""One log line per step a gated pod passes inside the composer, with the step's timestamp.

A pod's wait for its GPUs, as far as the composer sees it, has these steps:

- ``admitted``: the pod-gating webhook answered the pod's CREATE with the gate (logged by
  :mod:`composer.shell.webhook` right before the answer is written). The line names the pod
  ``namespace/name`` (``request.name``, empty for a pod created with ``generateName``: Kubernetes
  docs, kubernetes/website ``content/en/docs/reference/config-api/apiserver-admission.v1.md``,
  ``AdmissionRequest``, read at commit 13c25bb): the API server runs mutating admission before the
  registry's create (kubernetes/kubernetes
  ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go``), which sets the UID and the
  ``creationTimestamp`` (``staging/src/k8s.io/apiserver/pkg/registry/rest/meta.go``,
  ``FillObjectMetaSystemFields``; both read at older commits 02e16cb and 0254399), so the pod has
  neither yet;
- ``planned``: the round whose plan placed the pod on a node (logged by
  :class:`composer.run.controller.Controller` once the decision is made, before the node job that
  calls the Director is started), with when the composer's pod informer first delivered the pod
  (``seen``, :attr:`composer.model.podspec.PodView.seen_at`; absent when unknown, e.g. a pod that
  came in a relist).

Each line is ``pod-step {json}`` at INFO on the logger ``composer.pod_steps``; the JSON object has
``step``, ``pod`` (``namespace/name``), ``t`` (seconds since the epoch, ``time.time()``) and per
step ``uid``, ``node``, ``devices`` (GPUs composed for it), ``seen``, ``gated``. An operator
filters them by the logger name or the ``pod-step`` marker (e.g. a log pipeline's JSON parse of
the text after it); the benchmark
(``bench/wait_steps.py``) reads them from the composer's log with :func:`parse`.

Why log lines, not histograms: a step's duration needs two timestamps of the same pod, and the
benchmark joins them with what it observes itself (its own create call, the Director's request
log) per pod; a histogram keeps only bucketed aggregates of one process. The cost on the hot path
is one formatted line per gated pod admitted and per placement, no API call.
"""

from __future__ import annotations

import json
import logging
from typing import Any

#: The logger the step lines go to.
LOGGER = "composer.pod_steps"
#: The text before each line's JSON object.
MARKER = "pod-step "
#: The steps logged, in the order a pod passes them.
STEPS = ("admitted", "planned")

log = logging.getLogger(LOGGER)


def log_step(step: str, pod: str, t: float, **fields: Any) -> None:
    """Log one step of ``pod`` (``namespace/name``) at ``t`` (seconds since the epoch).

    ``fields`` (JSON-serialisable) are added to the line; nothing is formatted unless INFO is on.

    Raises:
        ValueError: ``step`` is not one of :data:`STEPS`.
    """
    if step not in STEPS:
        raise ValueError(f"pod step {step!r}: must be one of {', '.join(STEPS)}")
    if log.isEnabledFor(logging.INFO):
        log.info("%s%s", MARKER, json.dumps({"step": step, "pod": pod, "t": t, **fields}, sort_keys=True))


def parse(line: str) -> dict[str, Any] | None:
    """The JSON object of a step line (anywhere in ``line``, after the log format's prefix), or
    None when ``line`` is no step line or its object is malformed (a cut-off last line)."""
    at = line.find(MARKER)
    if at < 0:
        return None
    try:
        rec = json.loads(line[at + len(MARKER) :])
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("step") not in STEPS or not isinstance(rec.get("t"), int | float):
        return None
    if not isinstance(rec.get("pod"), str):
        return None
    return rec
