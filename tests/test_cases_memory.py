"""Memory and WAL the validator's budgets did not count (the breaker's session of 2026-12-07), against the
real catalogs, current values, hardware and gauges of the private PostgreSQL 15 and MariaDB 10.11 servers
(World/run_case of tests/test_cases.py).

* shared memory sized per entry of a knob (``[[memory_budget.shared_tables]]``): pg_stat_statements.max;
* per-session buffers allocated on demand (``[[memory_budget.per_session]]``): temp_buffers,
  logical_decoding_work_mem, MariaDB's in-memory temporary table (min(tmp_table_size, max_heap_table_size))
  and bulk_insert_buffer_size;
* archive_mode without an archiver (conflict ``pg.archive_mode-needs-archiver``): WAL kept forever.

Each case states what the real server did (PostgreSQL 15.20, MariaDB 10.11.19 on Debian 12).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_cases import World, mariadb_target, run_case, world_of

from agenticdb.targets.postgres import PostgresTarget


@pytest.fixture(scope="module")
def pg(pg_sandbox) -> Iterator[World]:  # type: ignore[no-untyped-def]
    with world_of(PostgresTarget.from_config(pg_sandbox.target_config()), pg_sandbox.data_dir) as w:
        yield w


@pytest.fixture(scope="module")
def maria(mariadb_sandbox, tmp_path_factory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    with world_of(
        mariadb_target(mariadb_sandbox, tmp_path_factory.mktemp("agenticdb-cache")), mariadb_sandbox.data_dir
    ) as w:
        yield w


def _case(target: str, propose: dict[str, object], **more: object) -> dict[str, object]:
    """A case without the per-round step bound: `tune --start-from`, `advise` and `apply` judge without it
    (README "Advice, apply and approval"), and these faults are not about step size."""
    return {"target": target, "stage": "dbms", "propose": propose, "policy": {"max_step_factor": 1e12}, **more}


def _budget_refusal(verdict, name: str):  # type: ignore[no-untyped-def]
    hits = [f for f in verdict.failed if f.check == "hardware" and f.rule_id == "memory_budget"]
    assert hits, f"{name}: no memory_budget refusal: {verdict.feedback()}"
    assert hits[0].parameter == name, verdict.feedback()
    return hits[0]


# ---- shared memory sized per entry of a knob


@pytest.mark.parametrize("value", [1073741823, 100000000])
@pytest.mark.parametrize("observed", [True, False], ids=["measured", "worst-case"])
def test_pg_stat_statements_max_shared_memory_is_refused(pg: World, value: int, observed: bool) -> None:
    """pg_stat_statements.max sizes a shared hash table allocated at start (PostgreSQL 15 manual F.32).
    Accepted before (apply restart); `agenticdb tune --sandbox postgres --start-from` with 1073741823 then
    failed the restart: "FATAL: could not map anonymous shared memory: Cannot allocate memory ...
    (currently 412497715200 bytes)". postgres -C shared_memory_size here: 1073741823 entries ask 393391 MB,
    100000000 ask 37029 MB, beyond this 23.6 GiB host either way."""
    assert "pg_stat_statements.max" in pg.catalog.knobs, "the sandbox preloads pg_stat_statements"
    verdict, _ = run_case(_case("postgresql-15", {"pg_stat_statements.max": value}, no_observed=not observed), pg)
    assert not verdict.ok, verdict.feedback()
    hit = _budget_refusal(verdict, "pg_stat_statements.max")
    assert hit.value == str(value)
    assert "pg_stat_statements.max × 384 bytes (raised)" in hit.message, hit.message
    assert "F.32 pg_stat_statements" in hit.source, hit.source


def test_pg_stat_statements_max_modest_raise_is_accepted(pg: World) -> None:
    """20000 entries are about 7 MB of shared memory (384 bytes each): nothing for the budget."""
    verdict, _ = run_case(_case("postgresql-15", {"pg_stat_statements.max": 20000}), pg)
    assert not [f for f in verdict.failed if f.check == "hardware"], verdict.feedback()


# ---- per-session buffers allocated on demand


@pytest.mark.parametrize(
    "propose",
    [{"temp_buffers": "64GB"}, {"logical_decoding_work_mem": "64GB"}],
    ids=["temp_buffers", "logical_decoding_work_mem"],
)
def test_pg_per_session_memory_beyond_ram_is_refused(pg: World, propose: dict[str, object]) -> None:
    """Each session may hold temp_buffers of local buffers, each replication connection (max_wal_senders)
    one logical_decoding_work_mem buffer (PostgreSQL 15 manual 20.4.1); 64GB on a 23.6 GiB host is the
    work_mem = 64GB case of another knob. Accepted before (reload)."""
    ((name, value),) = propose.items()
    verdict, _ = run_case(_case("postgresql-15", propose), pg)
    assert not verdict.ok, verdict.feedback()
    hit = _budget_refusal(verdict, name)
    assert f"{name}={value} (rule memory_budget)" in hit.message, hit.message


def test_pg_per_session_terms_count_only_when_raised(pg: World) -> None:
    """Lowering temp_buffers, or a modest raise, is not refused: the on-demand buffers count only when the
    change raises them, and 32MB × max_connections fits the host."""
    for value in ("4MB", "32MB"):
        verdict, _ = run_case(_case("postgresql-15", {"temp_buffers": value}), pg)
        assert not [f for f in verdict.failed if f.check == "hardware"], verdict.feedback()


@pytest.mark.parametrize(
    "propose,named",
    [
        ({"tmp_table_size": "16G", "max_heap_table_size": "16G"}, ("tmp_table_size", "max_heap_table_size")),
        ({"bulk_insert_buffer_size": "16G"}, ("bulk_insert_buffer_size",)),
    ],
    ids=["tmp_table_size", "bulk_insert_buffer_size"],
)
def test_mariadb_per_session_memory_beyond_ram_is_refused(
    maria: World, propose: dict[str, object], named: tuple[str, ...]
) -> None:
    """An in-memory temporary table may grow to min(tmp_table_size, max_heap_table_size) per query, a bulk
    insert buffer per thread (MariaDB KB Server System Variables); 16G of each on a 23.6 GiB host is the
    sort_buffer_size case of other knobs. Accepted before (dynamic)."""
    verdict, _ = run_case(_case("mariadb-10.11", propose), maria)
    assert not verdict.ok, verdict.feedback()
    hits = [f for f in verdict.failed if f.check == "hardware" and f.rule_id == "memory_budget"]
    assert hits and hits[0].parameter in named, verdict.feedback()


def test_mariadb_tmp_table_size_is_capped_by_max_heap_table_size(maria: World) -> None:
    """tmp_table_size alone at 16G with max_heap_table_size unchanged (16M here) keeps in-memory temporary
    tables at the smaller one (MariaDB KB tmp_table_size): not a memory risk."""
    heap = float(maria.current["max_heap_table_size"])
    assert heap <= 64 * 1024**2, f"max_heap_table_size here is {heap:g}"
    verdict, _ = run_case(_case("mariadb-10.11", {"tmp_table_size": "16G"}), maria)
    assert not [f for f in verdict.failed if f.check == "hardware"], verdict.feedback()


# ---- WAL that can never be removed


def test_pg_archive_mode_without_an_archive_command_is_refused(pg: World) -> None:
    """archive_mode = on with archive_command (and archive_library) empty keeps every WAL segment 'in the
    expectation that a command will soon be provided' (PostgreSQL 15 manual 20.5.3): on the sandbox here
    with max_wal_size 32MB, 12 segment switches left 13 .ready files and 225 MB of pg_wal after a
    checkpoint; the disk fills and PostgreSQL PANICs. Accepted before (apply restart)."""
    assert pg.current.get("archive_command", "") in ("", "(disabled)")
    for mode in ("on", "always"):
        verdict, _ = run_case(_case("postgresql-15", {"archive_mode": mode}), pg)
        assert not verdict.ok, verdict.feedback()
        hits = [f for f in verdict.failed if f.rule_id == "pg.archive_mode-needs-archiver"]
        assert hits and hits[0].check == "conflict" and hits[0].parameter == "archive_mode", verdict.feedback()
        assert "accumulate WAL segment files" in hits[0].source


def test_pg_archive_mode_with_a_configured_archiver_is_not_this_conflict(pg: World) -> None:
    """archive_command and archive_library are left out of the catalog (protected); their configured values
    (pg_settings.reset_val: setting reads "(disabled)" while archive_mode is off) are catalog facts, and a
    configured archiver satisfies the rule."""
    assert pg.catalog.facts.get("archive_command") == "", pg.catalog.facts.get("archive_command")
    assert pg.catalog.facts.get("archive_library") == ""
    for archiver in ({"archive_command": "cp %p /var/tmp/%f"}, {"archive_library": "basic_archive"}):
        catalog = pg.catalog.model_copy(update={"facts": {**pg.catalog.facts, **archiver}})
        world = World(catalog, pg.current, pg.hardware, None, pg.gauges)
        verdict, _ = run_case(_case("postgresql-15", {"archive_mode": "on"}), world)
        assert not [f for f in verdict.failed if f.rule_id.startswith("pg.archive_mode-needs")], verdict.feedback()
