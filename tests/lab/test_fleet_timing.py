"""How the lab's timing grows with its kwok fleet: long enough for 5,000 Nodes, as before for a few."""

from __future__ import annotations

import pytest

from lab import fleet_timing

#: New Nodes per second kube-controller-manager's node lifecycle controller first observed on the
#: 2-core lab machine while 5,000 kwok Nodes were created (the rate the wait must allow for).
OBSERVED_NODES_PER_SECOND = 15


@pytest.mark.parametrize("count", [1000, 5000, 10000])
def test_the_wait_covers_the_lifecycle_controller_at_the_observed_rate(count: int) -> None:
    timeout, _ = fleet_timing.nodes_ready_wait(count)
    assert timeout >= count / OBSERVED_NODES_PER_SECOND


def test_a_small_lab_keeps_a_short_wait_and_a_quick_poll() -> None:
    timeout, interval = fleet_timing.nodes_ready_wait(2)
    assert timeout <= 61
    assert interval == 0.2


def test_a_large_fleet_is_polled_less_often() -> None:
    assert fleet_timing.nodes_ready_wait(5000)[1] > fleet_timing.nodes_ready_wait(1000)[1] >= 0.2


def test_a_negative_count_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        fleet_timing.nodes_ready_wait(-1)


def test_a_fleet_up_to_1000_nodes_keeps_the_40_s_lease_and_the_50_s_grace() -> None:
    assert fleet_timing.node_heartbeat(2) == (40, 50)
    assert fleet_timing.node_heartbeat(1000) == (40, 50)


@pytest.mark.parametrize("count", [1000, 2500, 5000, 10000])
def test_lease_renewals_stay_at_100_a_second_and_grace_keeps_five_renew_intervals(count: int) -> None:
    lease, grace = fleet_timing.node_heartbeat(count)
    renew = lease / 4  # kwok v0.7.0 renews a Lease every quarter of its duration
    assert count / renew <= 100.5
    assert grace >= 5 * renew


def test_heartbeat_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="negative"):
        fleet_timing.node_heartbeat(-1)
