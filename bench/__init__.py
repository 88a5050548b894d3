"""Benchmarks of the composable-GPU project; ``python -m bench`` runs them all.

Parts, one module each, every one a pure ``run(...) -> dict`` that returns JSON-ready results:

- :mod:`bench.planner_bench` (1): time and peak memory of one planning round
  (:func:`composer.decide.planner.plan`) from 10 to 1,000 hosts / 10,000 pending pods, with a cProfile
  of the largest size.
- :mod:`bench.reaction` (2): pod unschedulable -> compose request issued -> pod Running on an
  isolated lab control plane with 10, 100 and 1,000 kwok nodes, for the composer and for a
  periodic-scan baseline (:mod:`bench.baseline`).
- :mod:`bench.savings` (3): a discrete-event replay of a pod trace (:mod:`bench.trace` defines
  the file format) through the planner: GPUs needed for a pending-time target, pool vs fixed.
- :mod:`bench.preview` (4): ``pulumi preview`` (with the policy pack) wall time, peak memory and the
  configuration bytes handed to the program and the analyzer for the dev stack and generated
  fleets (inventory folders), with the program's own Python time measured apart under Pulumi
  mocks; a 10,000-host fleet is generated and validated only.

:mod:`bench.report` writes ``bench/results/<part>.json``, ``REPORT.md`` and PNG plots;
:mod:`bench.machine` records the machine and the versions. ``--quick`` shrinks every part to a
smoke-test size (seconds, not minutes).
"""
