"""Text cut for people: the one way a long text is shortened where it must be (a one-line error in a note, a
statement quoted in a root cause, a summary line).

A new user's story read "… vda average queue depth wei)": a note had been cut with a plain slice in the middle
of a word and closed as if it were whole. :func:`clip` cuts at a word boundary and says it cut ("…"). A text a
DBA needs to act on (a rationale, a source, why a knob was left) is not cut at all: the journal keeps it whole.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: object, limit: int) -> str:
    """``text`` on one line (runs of white space → one space), at most ``limit`` characters.

    Returns the text unchanged when it fits; otherwise the longest head that ends at a word boundary (a space),
    trailing ``,;:(`` and spaces dropped, followed by "…". A single word longer than half the limit is cut
    inside it (still followed by "…"), so a long path or token never leaves a near-empty text; a head made only
    of those separators (a text of punctuation) keeps them rather than leave "…" alone. Empty only for a blank
    text. Pure.

    Raises:
        ValueError: ``limit`` < 2 (no room for one character and "…").
    """
    if limit < 2:
        raise ValueError(f"clip: limit = {limit}: must be at least 2 (one character and '{ELLIPSIS}')")
    one = " ".join(str(text).split())
    if len(one) <= limit:
        return one
    keep = limit - len(ELLIPSIS)
    head = one[:keep]
    space = head.rfind(" ")
    if one[keep] != " " and space >= limit // 2:  # the head ends inside a word: back to the last space
        head = head[:space]
    # a dangling "(" or "," reads as if the text went on; but not at the cost of the whole head
    return (head.rstrip(" ,;:(") or head.rstrip(" ")) + ELLIPSIS


def counted(n: object, noun: str) -> str:
    """``"1 client"``, ``"4 clients"``, ``"0 files"``: ``n`` and ``noun`` in the plural unless ``n`` is 1 (the
    plural by adding "s": the nouns the story counts — clients, files, values, pairs — take it). A story read
    "1 clients" and "1 files" (a new user's TPC-H trial, 2026-12-07). Pure."""
    return f"{n} {noun}" if str(n) in ("1", "1.0") else f"{n} {noun}s"


_ACRONYMS = {"olap": "OLAP", "oltp": "OLTP"}
"""Workload classes written as the acronyms DBAs read (``models.planning`` classes: oltp, olap, mixed)."""


def a_workload(workload_class: str) -> str:
    """``"an OLAP workload"``, ``"an OLTP workload"``, ``"a mixed workload"``: the class with its article. The
    article goes by the sound (OLAP and OLTP are read "oh-…"): a story read "a olap workload" (2026-12-07). Pure."""
    word = _ACRONYMS.get(workload_class, workload_class)
    return f"{'an' if word[:1].lower() in 'aeiou' and word else 'a'} {word} workload"


__all__ = ["ELLIPSIS", "a_workload", "clip", "counted"]
