"""planner.access: the access pattern read from the server's row counters (issue 22, os-read-ahead-tiny)."""

from __future__ import annotations

from agenticdb.models import StateDelta
from agenticdb.planner import access


def _d(**totals: float) -> StateDelta:
    return StateDelta(totals={k.replace("__", "."): v for k, v in totals.items()}, seconds=10.0)


def test_postgresql_full_scans_are_analytic_and_key_lookups_are_not() -> None:
    # 30 statements each counting a 2 M-row table by sequential scan
    scans = _d(pg_stat_database__tup_returned=60e6, pg_stat_database__tup_fetched=40, pg_stat_database__xact_commit=30)
    share, per_statement = access.scan_figures(scans)  # type: ignore[misc]
    assert share > 0.99 and per_statement > 1e6
    assert access.workload_class("oltp", scans) == "olap"
    # pgbench: index lookups, a few rows per transaction
    lookups = _d(
        pg_stat_database__tup_returned=90_000,
        pg_stat_database__tup_fetched=88_000,
        pg_stat_database__xact_commit=30_000,
    )
    assert access.observed_class(lookups) is None
    assert access.workload_class("oltp", lookups) == "oltp"
    # a scan-heavy share of tiny tables (pgbench_branches scanned by seq scan) is not whole-table reading
    small = _d(
        pg_stat_database__tup_returned=100_000, pg_stat_database__tup_fetched=0, pg_stat_database__xact_commit=10_000
    )
    assert access.observed_class(small) is None


def test_mariadb_table_scans_are_read_from_the_handler_counters() -> None:
    scans = _d(
        global_status__Handler_read_rnd_next=5e6, global_status__Handler_read_key=10, global_status__Questions=100
    )
    assert access.workload_class("mixed", scans) == "olap"
    lookups = _d(
        global_status__Handler_read_rnd_next=1_000,
        global_status__Handler_read_key=200_000,
        global_status__Handler_read_next=2_000_000,
        global_status__Questions=200_000,
    )
    assert access.workload_class("oltp", lookups) == "oltp"


def test_a_declared_analytic_workload_and_a_sample_without_row_counters_keep_their_class() -> None:
    lookups = _d(pg_stat_database__tup_returned=10, pg_stat_database__tup_fetched=10, pg_stat_database__xact_commit=10)
    assert access.workload_class("olap", lookups) == "olap"
    assert access.scan_figures(_d(host__cpu_user=5.0)) is None
    assert access.scan_figures(None) is None
    assert access.workload_class("oltp", _d(pg_stat_database__tup_returned=0.0)) == "oltp"


def test_mariadb_count_star_by_full_index_scan_is_a_scan() -> None:
    """InnoDB counts a whole table through an index: Handler_read_first once per statement, then
    Handler_read_next per row; Handler_read_rnd_next stays 0 (review of 2026-12-03)."""
    counts = _d(
        global_status__Handler_read_rnd_next=0,
        global_status__Handler_read_first=100,
        global_status__Handler_read_next=2_000_000,
        global_status__Com_select=100,
        global_status__Questions=400,
    )
    assert access.workload_class("oltp", counts) == "olap"
    # range reads by key (Handler_read_key + read_next) without full index scans stay lookups
    ranges = _d(
        global_status__Handler_read_rnd_next=0,
        global_status__Handler_read_first=1,
        global_status__Handler_read_key=100,
        global_status__Handler_read_next=2_000_000,
        global_status__Com_select=100,
    )
    assert access.observed_class(ranges) is None


def test_the_thresholds_are_inclusive_and_both_must_hold() -> None:
    at = _d(
        pg_stat_database__tup_returned=100_000, pg_stat_database__tup_fetched=10_000, pg_stat_database__xact_commit=9
    )
    assert access.scan_figures(at) == (0.9, 10_000.0)
    assert access.observed_class(at) == "olap"
    below_share = _d(
        pg_stat_database__tup_returned=100_000, pg_stat_database__tup_fetched=10_001, pg_stat_database__xact_commit=1
    )
    assert access.observed_class(below_share) is None
    below_rows = _d(
        pg_stat_database__tup_returned=100_000, pg_stat_database__tup_fetched=0, pg_stat_database__xact_commit=11
    )
    assert access.observed_class(below_rows) is None


def _pg(share: float, rows_per_statement: float, statements: int = 10) -> StateDelta:
    """A PostgreSQL sample with ``share`` of rows read by sequential scans and ``rows_per_statement`` of them."""
    seq = rows_per_statement * statements
    returned = seq / share
    return _d(
        pg_stat_database__tup_returned=returned,
        pg_stat_database__tup_fetched=returned - seq,
        pg_stat_database__xact_commit=statements,
    )


def test_two_windows_either_side_of_the_threshold_name_one_class() -> None:
    # A new user's two `advise` runs seconds apart: the same workload read just below, then just above the bars
    # (SCAN_SHARE 0.9, SCAN_ROWS_PER_STATEMENT 10 000) and was called oltp, then olap.
    below, above = _pg(0.89, 9_000), _pg(0.91, 11_000)
    assert access.workload_class("oltp", below) == access.workload_class("oltp", above) == "mixed"
    call = access.class_call("oltp", above)
    assert call.borderline and call.figures is not None
    text = call.text()
    assert text.startswith("workload class borderline between oltp and olap, treated as mixed: 91% of rows"), text
    assert "(threshold 90%, +1 points)" in text and "11,000 rows per statement (threshold 10,000, ×1.1)" in text
    assert "SCAN_SHARE" in text and "SHARE_BAND" in text


def test_clear_scans_and_clear_lookups_keep_their_class_with_the_margin_told() -> None:
    scans = access.class_call("oltp", _pg(0.99, 2_000_000))
    assert (scans.cls, scans.borderline) == ("olap", False)
    assert "99% of rows read by sequential scans (threshold 90%, +9 points)" in scans.text()
    assert "2,000,000 rows per statement (threshold 10,000, ×200)" in scans.text()
    lookups = access.class_call("oltp", _pg(0.5, 30))
    assert (lookups.cls, lookups.borderline) == ("oltp", False)
    assert lookups.text("assumed").startswith("workload class oltp (assumed; no whole-table scans): 50% of rows")
    # one figure clearly out rules scanning out, however close the other is
    assert access.workload_class("oltp", _pg(0.91, 3_000)) == "oltp"
    assert access.workload_class("oltp", _pg(0.8, 11_000)) == "oltp"
    assert access.class_call("olap", _pg(0.5, 30)).cls == "olap"
    assert "no row counters" in access.class_call("oltp", None).text()
