"""Sources told once: a long clause a story repeats is printed in full where it first appears, numbered, and
referred to by its number after that (``agenticdb journal show``).

Why: the opening's candidates cite their sources knob by knob (a PGTune rule, a manual's sentence, the storage
probe's measurement of the data device), and one source backs several knobs and several sets. A new user's
6-minute demo printed each PGTune or manual source up to three times (once per candidate set that used it and
again in the proof) and the storage probe's sentence ("storage ssd measured: median 0.0571 ms random 8 kB
O_DIRECT read of …") 8 times, in a 238-line story. The facts all stay: each is printed once, whole, and every
later place that cites it says ``see [n]``.

A text is cut into clauses at ``"; "`` outside parentheses, brackets and quotations (the sources' own separator:
"PGTune …: 1.1 on SSD/NVMe; PostgreSQL 15 manual …; storage ssd measured: …"). A clause of at least
:data:`MIN_CHARS` characters that the story tells more than once — alone, or as the tail of a longer clause after
``": "`` (the proof's rationale ends with its candidate's) — gets a number. Which clauses repeat is known only
after the whole story, so the story is rendered twice: a first pass :meth:`Footnotes.count` s every clause,
:meth:`Footnotes.settle` picks the repeated ones, the second pass prints.

A source's name is folded too when it heads several different clauses ("PGTune (le0pard/pgtune rules as of
830d3bb): 1.1 on SSD/NVMe", "PGTune (le0pard/pgtune rules as of 830d3bb): HDD 2, SSD 200, NVMe 1000"): a head
of the form ``Name (where or which version)`` before ``": "``, of at least :data:`MIN_HEAD_CHARS` characters, is
printed whole and numbered the first time ("PGTune (le0pard/pgtune rules as of 830d3bb) [5]: 1.1 on SSD/NVMe")
and as its name with the number after that ("PGTune [5]: HDD 2, SSD 200, NVMe 1000"). A new user's TPC-H trial
printed that PGTune head 11 times, whole, in the story and again in the report (2026-12-07).
"""

from __future__ import annotations

import re

MIN_CHARS = 40
"""Shortest clause worth a number (characters): a shorter one ("= CPUs", "test") costs no more to repeat than
its reference would (judgement)."""

MIN_HEAD_CHARS = 24
"""Shortest source head ("Name (where)") worth a number (characters): shorter ones ("PGTune (ssd)") repeat for
about what their number costs (judgement)."""

_SEP = "; "

_HEAD = re.compile(r"(?:^|: )([A-Z][^:;()\[\]'\"]{0,60}? \([^()]+\))(?=: )")
"""A source's head: a capitalised name and a parenthesised aside ending right before ``": "``, at the start of a
clause or after another ``": "`` (a change's "name: source: detail")."""


_CLOSE = {'"': '"', "“": "”", "‘": "’", "'": "'"}
"""Quotation marks → the mark that closes them: straight double, typographic double and single, straight single."""


def clauses(text: str) -> list[str]:
    """``text`` cut at ``"; "`` outside parentheses, brackets and quotations (a parenthesised aside, a bracketed
    range "[64kB; 2GB]" or a quoted sentence, "'… appropriate'; solid-state drives 'might …'", stays whole).
    A quotation is in single, double or typographic quotes (‘…’, “…”); a single quote opens one only after a space,
    "(", "[" or ":" and closes before a non-letter, so an apostrophe inside or after a word, as in "PGTune's" or
    "PGTune’s", opens none. An unclosed quotation or bracket keeps the rest whole. Pure."""
    out, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        before = text[i - 1] if i else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if quote:
            if ch == _CLOSE[quote] and (quote not in "'‘" or not after.isalnum()):
                quote = ""
        elif ch in '"“' or (ch in "'‘" and before in " ([:"):
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif ch == ";" and text.startswith("; ", i) and depth == 0:
            out.append(text[start:i])
            start = i + 2
    out.append(text[start:])
    return out


class Footnotes:
    """The repeated clauses of one story and their numbers, in the order they are first printed.

    Counting pass: :meth:`tell` records each clause and returns the text unchanged. After :meth:`settle`,
    :meth:`tell` returns the text with each repeated clause in full and numbered (``"… [3]"``) the first time,
    ``"see [3]"`` after that (consecutive references are merged: ``"see [1] [2] [3]"``).
    """

    def __init__(self) -> None:
        self._told: list[str] = []
        self._repeated: set[str] | None = None  # None: the counting pass
        self._numbers: dict[str, int] = {}
        self._heads: set[str] = set()

    def settle(self) -> None:
        """End the counting pass: a clause of at least :data:`MIN_CHARS` characters told at least twice, alone or
        as the tail after ``": "`` of another clause, is repeated."""
        long = {c for c in self._told if len(c) >= MIN_CHARS}
        tails: dict[str, int] = dict.fromkeys(long, 0)
        for told in self._told:
            for c in long:
                if told == c or told.endswith(": " + c):
                    tails[c] += 1
        self._repeated = {c for c, n in tails.items() if n >= 2}
        heads: dict[str, int] = {}
        for told in set(self._told):  # each distinct clause once: a repeated one is printed whole once
            for head in {m.group(1) for m in _HEAD.finditer(told)}:
                heads[head] = heads.get(head, 0) + 1
        self._heads = {h for h, n in heads.items() if n >= 2 and len(h) >= MIN_HEAD_CHARS}

    def tell(self, text: str) -> str:
        """``text`` as the story prints it (see the class docstring); unchanged in the counting pass."""
        parts = clauses(text)
        if self._repeated is None:
            self._told += parts
            return text
        out: list[str] = []
        for part in parts:
            told = self._told_part(part)
            if told.startswith("see [") and out and out[-1].startswith("see ["):
                out[-1] += " " + told.removeprefix("see ")  # "see [1] [2]", not "see [1]; see [2]"
            else:
                out.append(told)
        return _SEP.join(out)

    def _told_part(self, part: str) -> str:
        repeated = self._repeated or set()
        if part in repeated:
            return self._ref(part)
        tails = [c for c in repeated if part.endswith(": " + c)]
        if not tails:
            return self._fold_heads(part)
        tail = max(tails, key=len)  # the head before it is numbered first: numbers follow the print order
        return self._fold_heads(part[: -len(tail)]) + self._ref(tail)

    def _fold_heads(self, part: str) -> str:
        """``part`` with each repeated source head numbered (first time) or shortened to its name and number."""

        def fold(m: re.Match[str]) -> str:
            head = m.group(1)
            if head not in self._heads:
                return m.group(0)
            lead = m.group(0)[: m.start(1) - m.start(0)]
            if head in self._numbers:
                return f"{lead}{head.partition(' (')[0]} [{self._numbers[head]}]"
            self._numbers[head] = len(self._numbers) + 1
            return f"{lead}{head} [{self._numbers[head]}]"

        return _HEAD.sub(fold, part)

    def _ref(self, clause: str) -> str:
        if clause in self._numbers:
            return f"see [{self._numbers[clause]}]"
        text = self._fold_heads(clause)  # its source's head numbered before it when another clause shares it
        self._numbers[clause] = len(self._numbers) + 1
        return f"{text} [{self._numbers[clause]}]"

    @property
    def numbered(self) -> dict[str, int]:
        """The clauses numbered so far → their numbers (in print order)."""
        return dict(self._numbers)


__all__ = ["MIN_CHARS", "MIN_HEAD_CHARS", "Footnotes", "clauses"]
