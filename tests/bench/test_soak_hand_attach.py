"""Which GPUs the soak's operator attaches by hand, and where to."""

from __future__ import annotations

from bench.soak.inject import hand_attachable

TAG = "composer:soak"


def _state() -> dict:
    return {
        "machines": [{"mach_id": 1, "name": "m1", "grp_id": 7}, {"mach_id": 2, "name": "m2", "grp_id": 7},
                     {"mach_id": 3, "name": "x1", "grp_id": 8}],
        "gpus": [
            {"name": "sys", "grp_id": None, "mach_id": None, "udesc": "", "state": "online"},
            {"name": "grp", "grp_id": 7, "mach_id": None, "udesc": "", "state": "online"},
            {"name": "attached", "grp_id": 7, "mach_id": 1, "udesc": "", "state": "online"},
            {"name": "ours", "grp_id": 7, "mach_id": None, "udesc": TAG, "state": "online"},
            {"name": "pending", "grp_id": 7, "mach_id": None, "udesc": "", "state": "online"},
            {"name": "moving", "grp_id": None, "mach_id": None, "udesc": "", "state": "online"},
            {"name": "offline", "grp_id": 7, "mach_id": None, "udesc": "", "state": "offline"},
        ],
        "edits": {"2": {"attach": ["pending"], "detach": []}},
        "pool_edits": {"7": {"add": ["moving"], "remove": []}},
    }


def test_free_gpus_of_a_group_pool_go_to_that_groups_machines_and_system_pool_ones_anywhere() -> None:
    assert hand_attachable(_state(), owner_tag=TAG) == {"sys": ["m1", "m2", "x1"], "grp": ["m1", "m2"]}


def test_a_group_pool_gpu_counts_although_the_system_pool_is_empty() -> None:
    # the 2-hour run drew 19 hand attaches and skipped all: by then every free GPU sat in the group pool
    state = _state()
    state["gpus"] = [g for g in state["gpus"] if g["name"] != "sys"]
    assert list(hand_attachable(state, owner_tag=TAG)) == ["grp"]
