"""The experience backends of issue 19 against real SQLite and a real private PostgreSQL (the central
Memory Book): the same retrieval cases on both, the versioned migration, concurrent writers, the
idempotent sync and the fallback to the local cache when the central database is stopped."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.models import Bottleneck, Decision, Layer, RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint, HostOrigin
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.backends import (
    ExperienceBackend,
    ExperienceRecord,
    RoundRecord,
    SqliteBackend,
    record_of,
    retrieve,
    retrieved_payload,
    storage_class,
)
from agenticdb.store.memory.central import CentralLink, PostgresBackend, attach_central, safe_url, sync


@pytest.fixture(scope="module")
def central_pg() -> Iterator[tuple[PostgresSandbox, PostgresSandboxInfo]]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-central-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    try:
        yield sb, info
    finally:
        sb.down()


_DB_SEQ = iter(range(1000))


@pytest.fixture()
def central_url(central_pg: tuple[PostgresSandbox, PostgresSandboxInfo]) -> str:
    """A fresh database in the central instance for one test."""
    _, info = central_pg
    name = f"central_{next(_DB_SEQ)}"
    with psycopg.connect(info.dsn, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name}")
    return f"postgresql://postgres@127.0.0.1:{info.port}/{name}"


def fp(**kw: object) -> Fingerprint:
    base: dict[str, object] = {
        "dbms": "postgresql",
        "version_major": "15",
        "benchmark": "pgbench",
        "workload_class": "oltp",
        "read_fraction": 0.5,
        "scale": 10,
        "concurrency": 8,
        "memory_gib": 16,
        "cpu_count": 8,
    }
    return Fingerprint.model_validate({**base, **kw})


def exp(session: str, host: str, f: Fingerprint, created: float, gain: float = 0.1) -> Experience:
    origin = HostOrigin(
        host=host,
        dbms=f.dbms,
        version_major=f.version_major,
        cpu_count=f.cpu_count,
        memory_gib=f.memory_gib,
        storage_class="ssd",
        workload_class=f.workload_class,
    )
    return Experience(
        fingerprint=f,
        session_id=session,
        best_gain=gain,
        created_at=created,
        best_config={"shared_buffers": "4GB"},
        best_config_relative={"shared_buffers": {"value": "4GB", "fraction_of_memory": 0.25}},
        origin=origin,
    )


CASES = [
    exp("s-same", "host-a", fp(), 1000.0),
    exp("s-olap", "host-b", fp(workload_class="olap", read_fraction=1.0, scale=1000), 1001.0),
    exp("s-mysql", "host-c", fp(dbms="mariadb", version_major="10.11", benchmark="sysbench"), 1002.0),
    exp("s-near", "host-b", fp(read_fraction=0.6, concurrency=16), 1003.0),
    exp("s-twin", "host-c", fp(), 999.0),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExperienceBackend]:
    if request.param == "sqlite":
        book = MemoryBook(tmp_path / "memory.db", host="here")
        b: ExperienceBackend = SqliteBackend(book)
        yield b
        book.close()
    else:
        url = request.getfixturevalue("central_url")
        pb = PostgresBackend(url)
        yield pb
        pb.close()


def test_same_retrieval_on_both_backends(backend: ExperienceBackend) -> None:
    assert backend.upsert([record_of(e, e.origin.host if e.origin else "") for e in CASES]) == len(CASES)
    found = retrieve(backend, fp(), limit=3)
    # Exact twins first (ties: the newer one first), then the near one; the other DBMS family never.
    assert [r.session_id for _, r in found] == ["s-same", "s-twin", "s-near"]
    assert found[0][0] == pytest.approx(1.0) and found[2][0] < 1.0
    assert [r.host for _, r in found] == ["host-a", "host-c", "host-b"]
    assert found[0][1].experience.origin is not None and found[0][1].experience.origin.storage_class == "ssd"
    assert [r.session_id for _, r in retrieve(backend, fp(), limit=1)] == ["s-same"]
    assert retrieve(backend, fp(workload_class="olap", read_fraction=1.0, scale=1000), limit=1)[0][1].session_id == (
        "s-olap"
    )
    mysql = retrieve(backend, fp(dbms="mysql", version_major="8.0", benchmark="sysbench"), threshold=0.0)
    assert [r.session_id for _, r in mysql] == ["s-mysql"]
    # Idempotent: the same records again add nothing.
    assert backend.upsert([record_of(e, e.origin.host if e.origin else "") for e in CASES]) == 0
    assert len(backend.records()) == len(CASES)


def test_central_schema_is_versioned_and_migrated_once(central_url: str) -> None:
    first = PostgresBackend(central_url)
    assert first.applied == [1] and first.schema_version() == 1
    second = PostgresBackend(central_url)
    assert second.applied == []
    with psycopg.connect(central_url) as c:
        rows = c.execute("SELECT version, name FROM agenticdb.schema_version").fetchall()
    assert rows == [(1, "0001_experience.sql")]
    first.close()
    second.close()


def _outcome(session: str, n: int) -> RoundOutcome:
    return RoundOutcome(
        session_id=session,
        round_no=n,
        stage=Layer.dbms,
        bottleneck=Bottleneck.io_queue,
        decision=Decision.continue_,
        reason="test",
    )


def test_two_concurrent_writers_lose_nothing(central_url: str) -> None:
    """Two agents upload at once: 40 sessions each, 10 of them the same keys (a retried upload), every
    session with 3 rounds. Every distinct key is stored exactly once."""
    PostgresBackend(central_url).close()  # migrate first, like an agent that started earlier
    shared = [exp(f"shared-{i}", "host-s", fp(), 2000.0 + i) for i in range(10)]

    def batch(host: str) -> tuple[list[ExperienceRecord], list[RoundRecord]]:
        own = [exp(f"{host}-{i}", host, fp(), 3000.0 + i) for i in range(30)]
        recs = [record_of(e, e.origin.host if e.origin else host) for e in own + shared]
        rounds = [
            RoundRecord(host=r.host, session_id=r.session_id, round_no=n, outcome=_outcome(r.session_id, n))
            for r in recs
            for n in (1, 2, 3)
        ]
        return recs, rounds

    added: dict[str, int] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(host: str) -> None:
        try:
            b = PostgresBackend(central_url)
            recs, rounds = batch(host)
            barrier.wait()
            n = 0
            for i in range(0, len(recs), 5):  # many small transactions interleave with the other writer
                n += b.upsert(
                    recs[i : i + 5], [r for r in rounds if r.session_id in {x.session_id for x in recs[i : i + 5]}]
                )
            added[host] = n
            b.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(h,)) for h in ("host-1", "host-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    check = PostgresBackend(central_url)
    assert check.count("experience") == 30 + 30 + 10
    assert check.count("rounds") == (30 + 30 + 10) * 3
    assert added["host-1"] + added["host-2"] == 70  # each shared key inserted by exactly one writer
    check.close()


def test_concurrent_sqlite_writers_lose_nothing(tmp_path: Path) -> None:
    """The embedded default under the same load: two books on one file, overlapping keys."""
    shared = [exp(f"shared-{i}", "host-s", fp(), 2000.0 + i) for i in range(10)]
    errors: list[BaseException] = []

    def writer(host: str) -> None:
        try:
            with MemoryBook(tmp_path / "memory.db", host=host) as book:
                b = SqliteBackend(book)
                own = [exp(f"{host}-{i}", host, fp(), 3000.0 + i) for i in range(20)]
                for e in own + shared:
                    b.upsert([record_of(e, e.origin.host if e.origin else host)])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(h,)) for h in ("host-1", "host-2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    with MemoryBook(tmp_path / "memory.db", host="x") as book:
        assert len(SqliteBackend(book).records()) == 50


def test_unreachable_central_falls_back_once_and_sync_uploads_once(
    central_pg: tuple[PostgresSandbox, PostgresSandboxInfo], central_url: str, tmp_path: Path
) -> None:
    sb, info = central_pg
    said: list[str] = []
    book = attach_central(MemoryBook(tmp_path / "memory.db", host="host-a"), central_url, said.append)
    assert book.central is not None
    book.write_experience(exp("online", "host-a", fp(), 1000.0))
    svc = sb.service(info)
    svc.stop()
    try:
        # Retrieval and writes keep working on the local cache; the outage is reported once.
        found = book.retrieve(fp())
        assert [e.session_id for _, e in found] == ["online"]
        book.write_experience(exp("offline", "host-a", fp(), 1001.0))
        book.write_experience(exp("offline-2", "host-a", fp(), 1002.0))
        assert len(said) == 1 and said[0].startswith("central Memory Book postgresql:")
        assert len(SqliteBackend(book).pending()[0]) == 2
    finally:
        svc.start()
    central = PostgresBackend(central_url)
    assert {r.session_id for r in central.records()} == {"online"}
    first = sync(book, central)
    assert (first.uploaded, first.already_there) == (2, 0)
    again = sync(book, central)
    assert (again.uploaded, again.already_there) == (0, 0)
    assert central.count("experience") == 3
    # A sync interrupted after the upload (rows not marked) uploads nothing twice.
    book.db.conn.execute("UPDATE experience SET synced_at = NULL")
    book.db.conn.commit()
    replay = sync(book, central)
    assert (replay.uploaded, replay.already_there) == (0, 3) and central.count("experience") == 3
    central.close()
    book.close()


def test_link_retrieves_other_hosts_and_labels_them(central_url: str, tmp_path: Path) -> None:
    """Host B (16 GiB) retrieves what host A (64 GiB) learned; the payload names A and the memory scale."""
    a = attach_central(MemoryBook(tmp_path / "a.db", host="host-a"), central_url)
    a.write_experience(exp("learned-on-a", "host-a", fp(memory_gib=64), 1000.0))
    a.close()
    b = attach_central(MemoryBook(tmp_path / "b.db", host="host-b"), central_url)
    here = fp(memory_gib=16)
    found = b.retrieve(here)
    assert [e.session_id for _, e in found] == ["learned-on-a"]
    payload = retrieved_payload(found, b.host, here)
    item = payload["experience"][0]  # type: ignore[index]
    assert item["host"] == "host-a" and item["from_other_host"] is True and item["memory_scale"] == 0.25
    assert SqliteBackend(b).records() == []  # nothing learned on B yet
    b.close()


def test_storage_class_from_sysfs(tmp_path: Path) -> None:
    for dev, rot in (("sda", "1"), ("nvme0n1", "0"), ("vdb", "0")):
        q = tmp_path / "block" / dev / "queue"
        q.mkdir(parents=True)
        (q / "rotational").write_text(rot + "\n")
    assert storage_class("sda1", tmp_path) == "hdd"
    assert storage_class("nvme0n1p2", tmp_path) == "nvme"
    assert storage_class("/dev/vdb", tmp_path) == "ssd"
    assert storage_class("xyz", tmp_path) == "unknown" and storage_class(None, tmp_path) == "unknown"


def test_safe_url_hides_the_password() -> None:
    assert safe_url("postgresql://agent:s3cret@db:5432/book") == "postgresql://agent:***@db:5432/book"
    assert safe_url("postgresql://agent@db/book") == "postgresql://agent@db/book"


def test_unused_link_is_harmless(tmp_path: Path) -> None:
    link = CentralLink("postgresql://nobody@127.0.0.1:1/none")
    link.close()
    book = MemoryBook(tmp_path / "m.db", host="h")
    assert book.central is None and book.host == "h"
    book.close()


def test_memory_url_must_be_postgresql() -> None:
    from pydantic import ValidationError

    from agenticdb.config.sections import StorageConfig

    with pytest.raises(ValidationError, match="must be a postgresql:// URL"):
        StorageConfig(memory_url="mysql://agent@db/book")
    assert StorageConfig(memory_url="postgres://agent@db/book").memory_url == "postgres://agent@db/book"


def test_llm_context_names_the_origin_host() -> None:
    from agenticdb.planner.context import render_experience

    text = render_experience([exp("s-a", "host-a", fp(memory_gib=64), 1.0)])
    assert "learned on host host-a: 8 CPUs, 64 GiB, ssd storage" in text
    assert "learned on host" not in render_experience([exp("s", "h", fp(), 1.0).model_copy(update={"origin": None})])
