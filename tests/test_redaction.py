"""One redaction function for every output (issue 21), and where the LLM API key comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenticdb.config import load_config
from agenticdb.config.sections import PlannerConfig
from agenticdb.redaction import dsn_password, read_api_key, redact, redact_obj, register_secret
from agenticdb.store.journal import Journal


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgresql://tuner:S3cr%40t-pw@127.0.0.1:5432/db", "S3cr%40t-pw"),
        ("mysql://root:hunter2x@db:3306/x?unix_socket=/run/s", "hunter2x"),
        ("host=db user=tuner password=pa55word dbname=x", "pa55word"),
        ("host=db password='two words' dbname=x", "two words"),
        ("db.example:5432:*:tuner:pgpass-secret", "pgpass-secret"),
        ('{"api_key": "sk-abcdefghijklmnop"}', "sk-abcdefghijklmnop"),
        ("Authorization: Bearer tok.abc123", "tok.abc123"),
    ],
)
def test_patterns_remove_secrets(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and "***" in out


def test_ordinary_text_is_left_alone() -> None:
    text = "2026-12-01T03:52:51 round 3: shared_buffers=128MB kept (gain 4.1 %), host=127.0.0.1:5432"
    assert redact(text) == text


def test_registered_secret_is_removed_anywhere() -> None:
    register_secret("Zq9-registered-secret")
    assert redact("error: FATAL xyz Zq9-registered-secret failed") == "error: FATAL xyz *** failed"
    obj = redact_obj({"a": ["Zq9-registered-secret", 3], "password": "whatever", "n": 1.5})
    assert obj == {"a": ["***", 3], "password": "***", "n": 1.5}


def test_dsn_password() -> None:
    assert dsn_password("postgresql://u:p%40ss@h/db") == "p@ss"
    assert dsn_password("host=h password='a b'") == "a b"
    assert dsn_password("postgresql://u@h/db") is None


def test_journal_redacts_payloads(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as j:
        j.append("s", "session.start", {"dsn": "postgresql://u:leaky-pass@h/db", "api_key": "k-123456"})
        data = j.events()[0].data
    assert "leaky-pass" not in json.dumps(data) and data["api_key"] == "***"


def test_config_errors_do_not_show_the_password() -> None:
    from agenticdb.config import ConfigError

    with pytest.raises(ConfigError) as exc:
        load_config(None, {"target": {"kind": "mariadb", "dsn": "postgresql://u:cfg-err-secret@h/db"}})
    assert "cfg-err-secret" not in str(exc.value)


def test_api_key_from_file_and_from_systemd_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    key_file = tmp_path / "key"
    key_file.write_text("file-key-0123\n")
    assert read_api_key(PlannerConfig(api_key_file=key_file)) == "file-key-0123"
    assert redact("x file-key-0123 y") == "x *** y"
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "agenticdb-llm-api-key").write_text("cred-key-4567")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert read_api_key(PlannerConfig()) == "cred-key-4567"
    with pytest.raises(ValueError, match="planner.api_key_file = .*cannot be read"):
        read_api_key(PlannerConfig(api_key_file=tmp_path / "missing"))
