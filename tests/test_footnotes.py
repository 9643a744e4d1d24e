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
