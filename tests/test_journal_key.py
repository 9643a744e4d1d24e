"""Keyed journal (issue 21): rows chained with an HMAC under a key kept outside the journal."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenticdb.cli.journal_cmd import journal_app
from agenticdb.store.journal import GENESIS_HASH, Journal, row_hash
from agenticdb.store.journal_key import KEYED_PREFIX, JournalKeyError, anchor_head, load_key


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _session(j: Journal, n: int = 6, sid: str = "s1") -> None:
    j.append(sid, "session.start", {"target": "postgresql"})
    for i in range(1, n - 1):
        j.append(sid, "decision", {"round": i, "kept": i % 2 == 0}, round_no=i)
    j.append(sid, "session.end", {"status": "completed"})


def _rewrite_unkeyed(path: Path, row_id: int, data: str) -> None:
    """What an attacker without the key does: drop the triggers, change a row, recompute the whole
    plain SHA-256 chain (keyed rows cannot be recomputed without the key)."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER journal_no_update")
    conn.execute("UPDATE journal SET data = ? WHERE id = ?", (data, row_id))
    rows = conn.execute("SELECT id, ts, session_id, round_no, event, data FROM journal ORDER BY id").fetchall()
    prev = GENESIS_HASH
    for rid, ts, sid, rnd, ev, dat in rows:
        digest = row_hash(prev, rid, ts, sid, rnd, ev, dat)
        conn.execute("UPDATE journal SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, rid))
        prev = digest
    # put the trigger back so missing_triggers() does not give the game away
    conn.execute(
        "CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal "
        "BEGIN SELECT RAISE(ABORT, 'journal is append-only: UPDATE is forbidden'); END"
    )
    conn.commit()
    conn.close()


def test_keyed_rows_verify_and_files_are_private(tmp_path: Path) -> None:
    path, key = tmp_path / "home" / "journal.db", tmp_path / "home" / "journal.key"
    with Journal(path, key_file=key) as j:
        _session(j)
        assert j.head()[1].startswith(KEYED_PREFIX)
    assert _mode(key) == 0o600 and _mode(path) == 0o600
    loaded = load_key(key)
    assert loaded is not None and loaded.unkeyed_until == 0 and len(loaded.key) == 32
    with Journal(path, read_only=True, key_file=key) as j:
        res = j.verify()
    assert res.ok and res.rows_checked == 6 and res.keyed_rows == 6, res
    assert "every row keyed" in res.note


def test_rewrite_with_recomputed_unkeyed_chain_fails_with_the_key(tmp_path: Path) -> None:
    path, key = tmp_path / "journal.db", tmp_path / "keys" / "journal.key"  # not the sibling: opt-in
    with Journal(path, key_file=key) as j:
        _session(j)
    _rewrite_unkeyed(path, 3, '{"kept":true,"round":2}')
    # Without the key the forged plain chain passes: that is the weakness the key closes.
    with Journal(path, read_only=True) as j:
        assert j.verify().ok
        assert j.missing_triggers() == []
    with Journal(path, read_only=True, key_file=key) as j:
        res = j.verify()
    assert not res.ok and res.first_bad_id == 1
    assert "rewritten without the key" in res.reason


def test_forged_prefix_without_the_key_fails(tmp_path: Path) -> None:
    path, key = tmp_path / "journal.db", tmp_path / "keys" / "journal.key"
    with Journal(path, key_file=key) as j:
        _session(j, 3)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER journal_no_update")
    conn.execute("UPDATE journal SET hash = ? WHERE id = 3", (KEYED_PREFIX + "0" * 64,))
    conn.commit()
    conn.close()
    with Journal(path, read_only=True, key_file=key) as j:
        res = j.verify()
    assert not res.ok and res.first_bad_id == 3 and "was modified" in res.reason
    # a keyed row without the key cannot be checked: the reason names the setting
    with Journal(path, read_only=True) as j:
        res = j.verify()
    assert not res.ok and res.first_bad_id == 1 and "storage.journal_key_file" in res.reason


def test_legacy_journal_gets_a_key_and_its_old_rows_are_chained_into_keyed_ones(tmp_path: Path) -> None:
    path, key = tmp_path / "journal.db", tmp_path / "journal.key"
    with Journal(path) as j:  # a journal written before keys existed
        _session(j, 4, "old")
    with Journal(path, key_file=key) as j:
        _session(j, 3, "new")
    loaded = load_key(key)
    assert loaded is not None and loaded.unkeyed_until == 4
    with Journal(path, read_only=True, key_file=key) as j:
        res = j.verify()
    assert res.ok and res.keyed_rows == 3 and "rows 1..4 predate the key" in res.note, res
    # rewriting an old row and recomputing the plain chain breaks at the first keyed row
    _rewrite_unkeyed(path, 2, '{"kept":false,"round":1}')
    with Journal(path, read_only=True, key_file=key) as j:
        res = j.verify()
    assert not res.ok and res.first_bad_id == 5, res


def test_unkeyed_journal_verifies_with_a_note(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        _session(j, 3)
        res = j.verify()
    assert res.ok and res.keyed_rows == 0 and "no key" in res.note


def test_malformed_key_file_is_a_clear_error(tmp_path: Path) -> None:
    key = tmp_path / "journal.key"
    key.write_text("key = 'not hex'\n")
    with pytest.raises(JournalKeyError, match="journal key file .*64 hex digits"):
        Journal(tmp_path / "j.db", key_file=key)


def test_cli_verify_uses_the_configured_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Journal(home / "journal.db", key_file=home / "journal.key") as j:
        _session(j)
    runner = CliRunner()
    res = runner.invoke(journal_app, ["verify", "--home", str(home)])
    assert res.exit_code == 0, res.output
    assert "6 rows verified (6 keyed)" in res.output
    _rewrite_unkeyed(home / "journal.db", 4, '{"forged":true}')
    res = runner.invoke(journal_app, ["verify", "--home", str(home)])
    assert res.exit_code == 1 and "broken at row 1" in res.output and "without the key" in res.output


def test_anchor_head_reports_its_channel() -> None:
    channel = anchor_head("test-session", 7, KEYED_PREFIX + "ab" * 32)
    assert channel in ("journald", "syslog") or (channel.startswith("none: ") and "/dev/log" in channel)


def test_a_writer_without_key_file_keeps_keying_with_the_sibling_key(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with Journal(path, key_file=tmp_path / "journal.key") as j:
        _session(j, 3)
    with Journal(path) as j:  # e.g. a test or a tool that does not pass the key
        j.append("s2", "session.start", {})
        res = j.verify()
    assert res.ok and res.keyed_rows == 4


def test_daemon_anchors_the_session_head_and_journals_the_channel(tmp_path: Path) -> None:
    from agenticdb.daemon import anchor_session

    with Journal(tmp_path / "journal.db", key_file=tmp_path / "journal.key") as j:
        _session(j, 3)
        head_id, head = j.head()
        channel = anchor_session(j, "s1")
        (ev,) = [e for e in j.events() if e.event == "journal.anchored"]
        assert ev.data == {"row": head_id, "hash": head, "channel": channel}
        assert ev.id == head_id + 1 and j.verify().ok
