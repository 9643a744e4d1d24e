"""Sources told once (agenticdb.report.footnotes): a clause is cut at "; " only outside quotations and brackets.

The catalogs' sources quote with single quotes; an LLM planner's rationale (or an operator's note) quotes the
manual with double or typographic quotes and lists ranges in brackets. Cut inside a quotation, a repeated half
was numbered inside the quote and the other text's reference left a lone closing quote behind ('see [1]; the
rest"'): the source misquoted in the story.
"""

from __future__ import annotations

import pytest

from agenticdb.report.footnotes import Footnotes, clauses

SENTENCE = (
    "Larger settings for shared_buffers usually require a corresponding increase in max_wal_size; this spreads "
    "out the process of writing large quantities of new or changed data over a longer period of time"
)


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        (f'PostgreSQL 15 manual, 20.4.1: "{SENTENCE}"', f'PostgreSQL 15 manual, 20.4.1: "{SENTENCE}"'),
        (f"PostgreSQL 15 manual, 20.4.1: “{SENTENCE}”", f"PostgreSQL 15 manual, 20.4.1: “{SENTENCE}”"),
        (f"PGTune’s manual quote: ‘{SENTENCE}’", f"PGTune’s manual quote: ‘{SENTENCE}’"),
        ("work_mem within the server's range [64kB; 2147483647kB] by pg_settings", None),
    ],
    ids=["double", "typographic-double", "typographic-single", "brackets"],
)
def test_a_quotation_or_bracket_is_one_clause(text: str, whole: str | None) -> None:
    assert clauses(f"{text}; next source") == [whole or text, "next source"]


def test_two_sources_quoting_one_sentence_each_keep_their_quotation_whole() -> None:
    first = f'PostgreSQL 15 manual, 20.4.1: "{SENTENCE}"; PGTune: max_wal_size 8GB for oltp'
    second = f'PostgreSQL 15 manual, 20.4.1: "{SENTENCE}"'
    notes = Footnotes()
    for text in (first, second):
        notes.tell(text)
    notes.settle()
    told = [notes.tell(first), notes.tell(second)]
    assert told == [
        f'PostgreSQL 15 manual, 20.4.1: "{SENTENCE}" [1]; PGTune: max_wal_size 8GB for oltp',
        "see [1]",
    ], told
    assert all(t.count('"') % 2 == 0 for t in told), told


def test_an_apostrophe_opens_no_quotation() -> None:
    assert clauses("PGTune’s rule for ssd storage; it’s the manual’s too; done") == [
        "PGTune’s rule for ssd storage",
        "it’s the manual’s too",
        "done",
    ]


def test_a_short_source_head_shared_by_clauses_is_told_once_then_by_its_name() -> None:
    """A new user's TPC-H trial printed "PGTune (le0pard/pgtune rules as of 830d3bb)" 11 times: each rule it heads
    is a different clause, and the head alone (43 characters) is never a clause of its own."""
    head = "PGTune (le0pard/pgtune rules as of 830d3bb)"
    texts = [f"{head}: 1.1 on SSD/NVMe; the manual", f"{head}: HDD 2, SSD 200, NVMe 1000", f"{head}: 1.1 on SSD/NVMe"]
    notes = Footnotes()
    for text in texts:
        notes.tell(text)
    notes.settle()
    assert [notes.tell(t) for t in texts] == [
        f"{head} [1]: 1.1 on SSD/NVMe [2]; the manual",
        "PGTune [1]: HDD 2, SSD 200, NVMe 1000",
        "see [2]",
    ]


def test_a_head_told_once_or_short_stays_whole() -> None:
    texts = ["PGTune (le0pard/pgtune rules as of 830d3bb): HDD 2", "MySQLTuner (x): a", "MySQLTuner (x): b"]
    notes = Footnotes()
    for text in texts:
        notes.tell(text)
    notes.settle()
    assert [notes.tell(t) for t in texts] == texts
