"""The soak's composer token outlives the run: its kubeconfig holds one TokenRequest token, which
the kubelet does not rotate, and the 2-hour soak of seed 1206 lost every composer to 401s on the
Lease an hour in, when a one-hour token expired."""

from __future__ import annotations

from bench.soak.plan import SoakConfig


def test_the_composer_token_outlives_the_whole_soak() -> None:
    for seconds in (120.0, 1800.0, 7200.0, 28800.0):
        cfg = SoakConfig(seconds=seconds)
        assert cfg.token_seconds() > cfg.seconds + cfg.settle_seconds + 600, seconds
