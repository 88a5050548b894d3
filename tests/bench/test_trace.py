"""The trace file format (bench/trace.py): round trips, errors naming the line, generators."""

from __future__ import annotations

import pytest

from bench.trace import TraceError, TracePod, bursty_trace, handover_trace, read_trace, write_trace


def test_csv_round_trip_keeps_every_field_and_blank_means_any(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text(
        "arrival_seconds,duration_seconds,gpus,model,host\n120.5,600,1,,\n0,3600,2,Tesla-T4,blade-slot-1\n"
    )
    pods = read_trace(f)
    assert [(p.arrival_seconds, p.gpus, p.model, p.host) for p in pods] == [
        (0.0, 2, "Tesla-T4", "blade-slot-1"),
        (120.5, 1, None, None),
    ]
    assert pods[0].name == "pod-3" and pods[1].name == "pod-2"  # line numbers
    out = write_trace(tmp_path / "again.csv", pods)
    assert read_trace(out) == pods


def test_jsonl_round_trip_skips_comments_and_blank_lines(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('# my trace\n\n{"arrival_seconds": 5, "duration_seconds": 10, "gpus": 4, "model": null}\n')
    pods = read_trace(f)
    assert pods == [TracePod(arrival_seconds=5, duration_seconds=10, gpus=4, name="pod-3")]
    assert read_trace(write_trace(tmp_path / "o.jsonl", pods)) == pods


@pytest.mark.parametrize(
    ("name", "text", "line", "needle"),
    [
        ("a.csv", "arrival_seconds,gpus\n1,1\n", 1, "duration_seconds"),
        ("b.csv", "arrival_seconds,duration_seconds,gpus\n0,10,1\n0,10,0\n", 3, "gpus"),
        ("c.csv", "arrival_seconds,duration_seconds,gpus\n-1,10,1\n", 2, "arrival_seconds"),
        ("d.jsonl", '{"arrival_seconds": 0, "duration_seconds": 1, "gpus": 1}\n{oops\n', 2, "not JSON"),
        (
            "e.jsonl",
            '{"arrival_seconds": 0, "duration_seconds": 1, "gpus": 1, "colour": "red"}\n',
            1,
            "colour",
        ),
        ("f.jsonl", "[1, 2]\n", 1, "JSON object"),
    ],
)
def test_bad_records_name_the_line_and_the_field(tmp_path, name, text, line, needle):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(TraceError) as err:
        read_trace(f)
    assert err.value.line == line
    assert needle in str(err.value)


def test_unknown_extension_is_refused(tmp_path):
    with pytest.raises(TraceError, match="extension"):
        read_trace(tmp_path / "t.txt")
    with pytest.raises(TraceError, match="extension"):
        write_trace(tmp_path / "t.txt", [])


def test_bursty_trace_is_reproducible_from_its_seed_and_bursty():
    a = bursty_trace(seed=1, hours=24)
    assert a == bursty_trace(seed=1, hours=24)
    assert a != bursty_trace(seed=2, hours=24)
    assert all(0 <= p.arrival_seconds < 24 * 3600 and p.gpus in (1, 2, 4) for p in a)
    # bursty: the busiest hour sees several times the mean hourly arrivals
    per_hour = [0] * 24
    for p in a:
        per_hour[int(p.arrival_seconds // 3600)] += 1
    assert max(per_hour) >= 3 * (len(a) / 24)
    assert 0 < sum(1 for p in a if p.host) < len(a)


def test_handover_trace_alternates_two_hosts_without_overlap():
    pods = handover_trace(cycles=2, run_seconds=100, gap_seconds=50)
    assert [p.host for p in pods] == ["blade-slot-1", "blade-slot-2"] * 2
    for a, b in zip(pods, pods[1:], strict=False):
        assert b.arrival_seconds >= a.arrival_seconds + a.duration_seconds
