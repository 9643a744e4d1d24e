"""Text cut for people: the one way a long text is shortened where it must be (a one-line error in a note, a
statement quoted in a root cause, a summary line).

A new user's story read "… vda average queue depth wei)": a note had been cut with a plain slice in the middle
of a word and closed as if it were whole. :func:`clip` cuts at a word boundary and says it cut ("…"). A text a
DBA needs to act on (a rationale, a source, why a knob was left) is not cut at all: the journal keeps it whole.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: object, limit: int) -> str:
    """``text`` on one line (runs of white space → one space), at most ``limit`` characters (≥ 2).

    Returns the text unchanged when it fits; otherwise the longest head that ends at a word boundary (a space),
    trailing ``,;:(`` and spaces dropped, followed by "…". A single word longer than half the limit is cut
    inside it (still followed by "…"), so a long path or token never leaves a near-empty text. Pure.
    """
    one = " ".join(str(text).split())
    limit = max(limit, 2)
    if len(one) <= limit:
        return one
    keep = limit - len(ELLIPSIS)
    head = one[:keep]
    space = head.rfind(" ")
    if one[keep] != " " and space >= limit // 2:  # the head ends inside a word: back to the last space
        head = head[:space]
    return head.rstrip(" ,;:(") + ELLIPSIS


__all__ = ["ELLIPSIS", "clip"]
