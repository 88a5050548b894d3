"""A throw-away Pulumi project that runs this repository's program, for the real-CLI tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def local_project(tmp_path: Path) -> Path:
    """Write ``<tmp_path>/project/Pulumi.yaml`` (program: the repository root, run with its
    ``.venv``) and an empty ``state/`` folder for a file backend; returns the project folder."""
    work = tmp_path / "project"
    (work / "state").mkdir(parents=True)
    (work / "Pulumi.yaml").write_text(
        textwrap.dedent(f"""\
        name: composable-gpu
        main: {ROOT}
        runtime:
          name: python
          options:
            virtualenv: {ROOT / ".venv"}
        """)
    )
    return work


def file_backend(work: Path) -> str:
    """``PULUMI_BACKEND_URL`` of the project's own ``state/`` folder."""
    return f"file://{work / 'state'}"
