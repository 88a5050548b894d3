"""The soak: random GPU pods against a running composer while faults are injected, with
invariants checked from the Director simulator's state and the cluster (``make soak``).

- :mod:`bench.soak.plan`: the timeline of pod and fault draws, from one seed (pure);
- :mod:`bench.soak.invariants`: the invariant checkers over observed data (pure);
- :mod:`bench.soak.proxy`: a TCP relay between the composer and the Director that can be cut;
- :mod:`bench.soak.inject`: carries out the fault draws on the lab (I/O);
- :mod:`bench.soak.observe`: samples the Director, the cluster and the composers' metrics (I/O);
- :mod:`bench.soak.run`: runs a timeline against a ``tests.composer.harness.Scenario``;
- :mod:`bench.soak.report`: ``bench/results/SOAK.md`` from a run's data;
- ``python -m bench.soak``: the whole soak on the lab.
"""
