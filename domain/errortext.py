"""Operator-facing error text: one line, foreign text bounded, only the details that are known.

The typed errors of the Director client (:mod:`dynamic_providers.director.errors`) and of the
SSH preparation (:mod:`dynamic_providers.ssh.errors`) derive from :class:`DetailedError`: a
one-sentence summary, then the details the error knows (the call, the target, the vendor's or
the remote tool's own words, clipped by :func:`clip`). Standard library only, like the rest of
:mod:`domain` (the composer image carries it).
"""

from __future__ import annotations

from collections.abc import Iterable

#: Longest piece of foreign text (a vendor message, remote output) kept in an error, characters.
MAX_QUOTED_CHARS = 300


def clip(text: str | None, limit: int = MAX_QUOTED_CHARS) -> str | None:
    """``text`` with its white space folded to single blanks, cut to ``limit`` characters (the
    last one then ``…``); ``None`` stays ``None``.

    ``clip("a\\n  b")`` -> ``"a b"``; ``clip("x" * 400)`` -> 299 ``x`` and ``…`` (300 characters).
    """
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DetailedError(Exception):
    """An error whose message is its :attr:`summary` followed by the details it knows.

    A subclass sets its own fields, then calls ``super().__init__(summary)``, and yields its
    details (already worded, ``None`` or ``""`` for an unknown one) from :meth:`_details`; the
    message is ``"<summary> <detail> <detail> ..."`` on one line.

    Attributes:
        summary: what went wrong, in one sentence.
        transient: ``True`` on classes whose cause may pass by itself (retrying can help).
    """

    transient: bool = False

    def __init__(self, summary: str) -> None:
        self.summary = summary
        super().__init__(" ".join([summary, *(d for d in self._details() if d)]))

    def _details(self) -> Iterable[str | None]:
        """The details after the summary, in order (none here)."""
        return ()
