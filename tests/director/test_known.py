"""The status records a process shares between its Director clients (``director.known``)."""

from __future__ import annotations

from dynamic_providers.director.known import SharedStatuses, shared_statuses
from dynamic_providers.director.models import DeviceStatus


def _status(name: str, dev_id: str) -> DeviceStatus:
    return DeviceStatus(name=name, dev_id=dev_id, device_state="active | online")


def test_records_are_given_only_while_young_enough_and_all_known() -> None:
    now = [100.0]
    known = SharedStatuses(clock=lambda: now[0])
    assert known.get(["gpu0"], max_age=30) is None  # nothing read yet
    known.put([_status("gpu0", "0x0b00"), _status("gpu1", "0x0b01")])
    got = known.get(["gpu1", "gpu0"], max_age=30)
    assert got is not None and {n: s.dev_id for n, s in got.items()} == {"gpu1": "0x0b01", "gpu0": "0x0b00"}
    assert known.get(["gpu0", "gpu9"], max_age=30) is None  # one unknown: read them all
    assert known.get(["gpu0"], max_age=0) is None  # reuse switched off
    now[0] += 30.5
    assert known.get(["gpu0"], max_age=30) is None  # too old
    known.put([_status("gpu0", "0x0b00")])
    assert known.get(["gpu0"], max_age=30) is not None
    known.forget()
    assert known.get(["gpu0"], max_age=30) is None


def test_one_shared_list_per_director() -> None:
    a = shared_statuses("http://127.0.0.1:1")
    assert shared_statuses("http://127.0.0.1:1") is a
    assert shared_statuses("http://127.0.0.1:2") is not a
