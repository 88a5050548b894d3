"""Assertions on what the ``pulumi`` CLI printed when a provider refused something.

Our providers' typed errors reach the user as one line (``dynamic_providers.oneline``); the
engine prints each diagnostic twice, on the resource's progress line and again under
"Diagnostics:", both with the same text after ``" error: "``.
"""

from __future__ import annotations


def error_lines(text: str, *fragments: str) -> set[str]:
    """The distinct error texts of the lines of ``text`` that carry every fragment.

    Asserts first that ``text`` (the CLI's stdout + stderr) holds no Python traceback.

    Returns:
        Each matching line from after its first ``" error: "`` (the whole line when it has none).
    """
    assert "Traceback" not in text and 'File "' not in text, text
    return {line.split(" error: ", 1)[-1] for line in text.splitlines() if all(f in line for f in fragments)}


def one_line_failure(returncode: int, text: str, *fragments: str) -> str:
    """The one error text carrying every fragment, of a run that failed without a traceback.

    Args:
        returncode: the CLI's exit status (must not be 0).
        text: its stdout + stderr.
        fragments: strings the error line must contain (resource name, endpoint, reason).

    Returns:
        That error text; asserts there is exactly one.
    """
    assert returncode != 0, text
    lines = error_lines(text, *fragments)
    assert len(lines) == 1, text
    return lines.pop()
