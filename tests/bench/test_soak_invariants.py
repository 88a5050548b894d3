"""The soak's invariant checkers (``bench.soak.invariants``): each fails on a crafted violating
history and passes on a clean one, so none passes vacuously; the timeline is reproducible."""

from __future__ import annotations

from bench.soak import invariants as inv
from bench.soak.observe import director_sample, edits_active, history, scrape
from bench.soak.plan import SoakConfig, timeline

TAG = "gpu-composer"


def _gpu(name: str, machine: str | None, tag: str = TAG) -> inv.GpuObs:
    return inv.GpuObs(name, machine, tag if machine else "")


# -- no GPU attached to two machines ------------------------------------------------------
def test_double_attachment_found_when_intervals_overlap_on_two_machines() -> None:
    hist = [inv.Attachment("a", "gpu0", 10, 30), inv.Attachment("b", "gpu0", 20, None)]
    out = inv.double_attachments(hist, end=100)
    assert [(v.check, v.subject) for v in out] == [("double_attach", "gpu0")]


def test_double_attachment_clean_when_handed_over() -> None:
    hist = [inv.Attachment("a", "gpu0", 10, 20), inv.Attachment("b", "gpu0", 20, None),
            inv.Attachment("a", "gpu1", 10, None), inv.Attachment("a", "gpu1", 5, 8)]
    assert inv.double_attachments(hist, end=100) == []


# -- every attached GPU accounted for -------------------------------------------------------
def _idle_run(start: float, stop: float, step: float = 5, busy: bool = False) -> list[inv.Sample]:
    return [inv.Sample(t, (_gpu("gpu0", "n1"), _gpu("gpu1", None), _gpu("gpu7", "n2", tag="")),
                       busy=frozenset({"n1"}) if busy else frozenset())
            for t in range(int(start), int(stop) + 1, int(step))]


def test_idle_gpu_past_bound_without_event_is_a_violation() -> None:
    out = inv.unaccounted_gpus(_idle_run(0, 100), [], [], owner_tag=TAG, bound=60)
    assert [(v.check, v.subject) for v in out] == [("unaccounted_gpu", "n1")]
    assert "gpu0" in out[0].detail and "no composer Event" in out[0].detail


def test_idle_gpu_event_without_metric_is_still_a_violation() -> None:
    ev = [inv.EventObs(50, "Normal", "ReclaimHeld", "Node", "n1")]
    out = inv.unaccounted_gpus(_idle_run(0, 100), ev, [], owner_tag=TAG, bound=60)
    assert len(out) == 1 and "no metric" in out[0].detail


def test_idle_gpu_held_by_a_named_guard_and_counted_is_clean() -> None:
    ev = [inv.EventObs(50, "Normal", "ReclaimHeld", "Node", "n1")]
    metrics = [(55.0, {"composer_reclaims_held": 1.0})]
    assert inv.unaccounted_gpus(_idle_run(0, 100), ev, metrics, owner_tag=TAG, bound=60) == []


def test_gpus_used_by_a_pod_within_the_timeout_or_not_tagged_are_clean() -> None:
    samples = _idle_run(0, 100, busy=True) + _idle_run(105, 140)  # idle 35 s only
    assert inv.unaccounted_gpus(samples, [], [], owner_tag=TAG, bound=60) == []


# -- no unexplained waits ---------------------------------------------------------------------
def test_long_wait_without_composer_warning_is_a_violation() -> None:
    pods = [inv.PodLife("p", created=0, running=200)]
    ev = [inv.EventObs(5, "Warning", "FailedScheduling", "Pod", "p", composer=False),
          inv.EventObs(150, "Warning", "ReservationExpired", "Pod", "p")]
    out = inv.unexplained_waits(pods, ev, reservation=45, slack=15, end=300)
    assert [(v.check, v.subject) for v in out] == [("unexplained_wait", "p")]
    assert "ReservationExpired" in out[0].detail  # named as too late


def test_long_wait_with_timely_warning_or_short_wait_is_clean() -> None:
    pods = [inv.PodLife("p", created=0, running=200), inv.PodLife("q", created=0, running=30),
            inv.PodLife("r", created=0, gone=50)]
    ev = [inv.EventObs(40, "Warning", "Unserved", "Pod", "p")]
    assert inv.unexplained_waits(pods, ev, reservation=45, slack=15, end=300) == []


# -- no Director transaction left open ---------------------------------------------------------
def test_edit_open_past_bound_and_at_the_end_is_a_violation() -> None:
    samples = [inv.Sample(t, (), edits=("fabric:n1",)) for t in range(0, 200, 10)]
    out = inv.open_transactions(samples, bound=90)
    assert [v.subject for v in out] == ["fabric:n1"]
    assert "open since 0" in out[0].detail


def test_edit_closed_and_opened_again_between_samples_is_two_edits() -> None:
    samples = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": 0.0 if t < 60 else 58.0})
               for t in range(0, 140, 10)] + [inv.Sample(140, ())]
    assert inv.open_transactions(samples, bound=90) == []
    same = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": 0.0})
            for t in range(0, 140, 10)]
    out = inv.open_transactions(same, bound=90)
    assert [v.subject for v in out if "since 0.000" in v.detail] == ["fabric:n1"]


def test_edit_age_runs_from_the_directors_opening_time_not_the_first_sample() -> None:
    samples = [inv.Sample(t, (), edits=("pool:gpu-pool",), edits_active={"pool:gpu-pool": 5.0})
               for t in (50, 96)]
    out = inv.open_transactions(samples, bound=90)
    assert out and out[0].t == 96 and "open since 5.000 (91 s > 90 s)" in out[0].detail


def test_refused_change_during_a_job_is_a_violation() -> None:
    out = inv.open_transactions([inv.Sample(0, (), job_violations=2)], bound=90)
    assert [v.subject for v in out] == ["director"]


def test_short_edits_closed_by_the_end_are_clean() -> None:
    samples = [inv.Sample(t, (), edits=("pool:gpu-pool",) if t < 50 else ()) for t in range(0, 200, 10)]
    assert inv.open_transactions(samples, bound=90) == []


# -- convergence after faults stop ------------------------------------------------------------
def test_composed_gpu_left_on_an_idle_machine_or_tagged_is_not_converged() -> None:
    final = inv.Sample(0, (_gpu("gpu0", "n1"), inv.GpuObs("gpu1", None, TAG)))
    out = inv.not_converged(final, {"gpu0", "gpu1"}, owner_tag=TAG, running_on={})
    assert [v.subject for v in out] == ["gpu0", "gpu1"]


def test_composed_gpu_back_in_the_pool_or_serving_is_converged() -> None:
    final = inv.Sample(0, (_gpu("gpu0", "n1"), _gpu("gpu1", None), _gpu("gpu7", "n2", tag="")))
    assert inv.not_converged(final, {"gpu0", "gpu1"}, owner_tag=TAG, running_on={"n1": 1}) == []


# -- observation parsing and the timeline -------------------------------------------------------
def test_director_state_is_read_into_samples_and_history() -> None:
    state = {
        "machines": [{"mach_id": 1, "name": "n1", "history": [
            {"name": "gpu0", "atime": 1000, "dtime": None, "udesc": TAG}]}],
        "groups": [{"grp_id": 1, "name": "gpu-pool"}],
        "gpus": [{"name": "gpu0", "mach_id": 1, "grp_id": 1, "udesc": TAG},
                 {"name": "gpu1", "mach_id": None, "grp_id": None, "udesc": ""}],
        "edits": {"1": {}}, "pool_edits": {"1": {}}, "violations": [{}],
    }
    gpus, edits, refused = director_sample(state, 0)
    assert gpus == (inv.GpuObs("gpu0", "n1", TAG, "gpu-pool"), inv.GpuObs("gpu1", None, "", None))
    assert edits == ("fabric:n1", "pool:gpu-pool") and refused == 1
    assert history(state) == [inv.Attachment("n1", "gpu0", 1.0, None)]
    assert edits_active(state) == {}
    state["edits"] = {"1": {"opened_at": 12.5, "changed_at": None}}
    assert edits_active(state) == {"fabric:n1": 12.5}
    state["edits"] = {"1": {"opened_at": 12.5, "changed_at": 40.0}}  # a relation since
    assert edits_active(state) == {"fabric:n1": 40.0}


def test_metrics_are_summed_over_labels() -> None:
    text = ('composer_reclaims_held{reason="window"} 1.0\ncomposer_reclaims_held{reason="budget"} 2.0\n'
            "composer_compositions_total 3.0\n")
    assert scrape(text) == {"composer_reclaims_held": 3.0, "composer_compositions_total": 3.0}


def test_timeline_is_reproducible_from_its_seed() -> None:
    cfg = SoakConfig(seconds=600, hosts=("n1", "n2"))
    a, b, c = timeline(3, cfg), timeline(3, cfg), timeline(4, cfg)
    assert a == b and a != c
    assert a.pods and a.faults and all(p.at < p.delete_at <= 600 for p in a.pods)
    assert {f.kind for f in a.faults} <= set(cfg.faults)
    assert timeline(3, SoakConfig(seconds=600, faults={})).faults == ()


def test_time_cut_off_from_the_director_does_not_count_towards_an_open_edit() -> None:
    samples = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": 0.0})
               for t in range(0, 130, 10)]
    samples.append(inv.Sample(130, ()))
    # open 120 s, 40 s of it cut off: 80 s of reachable time, within the bound
    assert inv.open_transactions(samples, bound=90, cut_off=[(30.0, 70.0)]) == []
    # a cut before the edit opened, or a short one, leaves it past the bound
    for cut in ([(-50.0, -10.0)], [(30.0, 40.0)]):
        out = inv.open_transactions(samples, bound=90, cut_off=cut)
        assert [v.subject for v in out] == ["fabric:n1"], cut
    out = inv.open_transactions(samples, bound=90, cut_off=[(30.0, 40.0)])
    assert "(100 s > 90 s, and 10 s cut off from the Director)" in out[0].detail
    # a cut before the edit fell due to be cancelled delays nothing: not excused
    out = inv.open_transactions(samples, bound=90, cut_off=[(30.0, 70.0)], excuse_after=60)
    assert out[0].t == 110 and "(100 s > 90 s, and 10 s cut off from the Director)" in out[0].detail
    assert inv.open_transactions(samples, bound=90, cut_off=[(60.0, 100.0)], excuse_after=60) == []


def test_an_edit_that_keeps_moving_is_not_left_open() -> None:
    # relations 40 s apart (jobs the composer waits for), then closed: never unmoved past 90 s
    samples = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": float(t // 40 * 40)})
               for t in range(0, 200, 10)] + [inv.Sample(200, ())]
    assert inv.open_transactions(samples, bound=90) == []
    still = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": 0.0})
             for t in range(0, 200, 10)]
    assert [v.subject for v in inv.open_transactions(still, bound=90)][:1] == ["fabric:n1"]


def test_overlap_counts_only_the_part_inside_the_span() -> None:
    assert inv.overlap([(0.0, 10.0), (20.0, 30.0)], 5.0, 25.0) == 10.0
    assert inv.overlap([], 0.0, 100.0) == 0.0


def test_edits_past_bound_leaves_out_the_end_and_job_checks_that_open_transactions_adds() -> None:
    # open 0-120 s (reported at 100 s), then moved at 130 s and open, unmoved, at the end
    samples = [inv.Sample(t, (), edits=("fabric:n1",), edits_active={"fabric:n1": 0.0})
               for t in range(0, 130, 10)]
    samples.append(inv.Sample(140, (), edits=("fabric:n1",), edits_active={"fabric:n1": 130.0},
                              job_violations=1))
    past, unreported = inv.edits_past_bound(samples, bound=90)
    assert [(v.subject, v.t) for v in past] == [("fabric:n1", 100)]
    assert unreported == {"fabric:n1": 130.0}
    out = inv.open_transactions(samples, bound=90)
    assert [(v.subject, v.detail.split(" (")[0]) for v in out] == [
        ("fabric:n1", "open since 0.000"),
        ("fabric:n1", "still open at the end"),
        ("director", "1 change(s) sent while a job held their resource"),
    ]
