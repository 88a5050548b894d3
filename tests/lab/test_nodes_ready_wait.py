"""How long the lab waits for its kwok Nodes: long enough for a 5,000-Node fleet, short for a few."""

from __future__ import annotations

import pytest

from lab import kube

#: New Nodes per second kube-controller-manager's node lifecycle controller first observed on the
#: 2-core lab machine while 5,000 kwok Nodes were created (the rate the wait must allow for).
OBSERVED_NODES_PER_SECOND = 15


@pytest.mark.parametrize("count", [1000, 5000, 10000])
def test_the_wait_covers_the_lifecycle_controller_at_the_observed_rate(count: int) -> None:
    timeout, _ = kube.nodes_ready_wait(count)
    assert timeout >= count / OBSERVED_NODES_PER_SECOND


def test_a_small_lab_keeps_a_short_wait_and_a_quick_poll() -> None:
    timeout, interval = kube.nodes_ready_wait(2)
    assert timeout <= 61
    assert interval == 0.2


def test_a_large_fleet_is_polled_less_often() -> None:
    assert kube.nodes_ready_wait(5000)[1] > kube.nodes_ready_wait(1000)[1] >= 0.2


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        kube.nodes_ready_wait(-1)
