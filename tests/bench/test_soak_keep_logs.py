"""The soak keeps its process logs, and only those, when an invariant was violated."""

from __future__ import annotations

from pathlib import Path

from bench.soak.__main__ import keep_logs


def test_keep_logs_copies_the_logs_and_leaves_the_token_and_kubeconfig(tmp_path: Path) -> None:
    src = tmp_path / "work"
    (src / "sub").mkdir(parents=True)
    (src / "composer-3.log").write_text("round failed\n")
    (src / "sub" / "director-sim.log").write_text("POST /fabric/edit\n")
    (src / "token").write_text("secret-token")
    (src / "kubeconfig").write_text("token: secret-token")
    dest = tmp_path / "kept"

    kept = keep_logs(src, dest)

    assert kept == [dest / "composer-3.log", dest / "sub" / "director-sim.log"]
    assert (dest / "composer-3.log").read_text() == "round failed\n"
    assert (dest / "sub" / "director-sim.log").read_text() == "POST /fabric/edit\n"
    left = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert left == ["composer-3.log", "sub/director-sim.log"]
