"""Secrets: one redaction function for every output, and where the LLM API key comes from (issue 21).

DSN passwords, API keys and ``.pgpass``-style lines must never reach the journal, logs, reports,
``memory export`` or error messages. Everything that writes one of those passes its text through
:func:`redact` (or :func:`redact_obj` for a JSON payload): the journal on append, structlog as a
processor (:func:`structlog_redactor`), the CLI's error printer, the config error formatter and the
Memory Book export.

:func:`redact` removes two kinds of secret:

- values registered with :func:`register_secret` (the configured DSN's password and the API key are
  registered when the configuration is loaded, ``config.register_settings_secrets``), wherever they occur;
- patterns that carry a secret whatever its value: ``scheme://user:PASSWORD@host`` (RFC 3986 userinfo),
  libpq ``password=...`` keywords (PostgreSQL manual 34.1.2 "Parameter Key Words"), ``api_key=...`` /
  ``"api_key": "..."``, ``Authorization: Bearer ...`` and ``.pgpass`` lines
  ``hostname:port:database:username:password`` (PostgreSQL manual 34.16 "The Password File").
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

MASK = "***"
"""What a secret is replaced with."""

MIN_SECRET_LEN = 4
"""Registered values shorter than this are not replaced verbatim (they would mask ordinary text);
the patterns still catch them in a DSN or a ``password=`` keyword."""

DEFAULT_CREDENTIAL = "agenticdb-llm-api-key"
"""Name of the systemd credential (``LoadCredential=agenticdb-llm-api-key:/path``) read from
``$CREDENTIALS_DIRECTORY`` (systemd.exec(5) "Credentials")."""

_SECRET_KEYS = re.compile(r"(?i)^(password|passwd|pwd|api_?key|secret|token|authorization)$")
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # userinfo of a URI: scheme://user:password@host
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@", re.I), rf"\1{MASK}@"),
    # libpq keyword string / my.cnf style: password=secret, password = 'se cret'
    (re.compile(r"(?i)(\b(?:password|passwd|pwd)\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s'\",;]+)"), rf"\1{MASK}"),
    # api_key=..., "api_key": "...", apikey: ...
    (re.compile(r"(?i)(\bapi[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), rf"\1{MASK}"),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"), rf"\1{MASK}"),
    # .pgpass line: hostname:port:database:username:password (port is digits or *)
    (re.compile(r"(?m)^([^:\s]+:(?:\d+|\*):[^:\s]+:[^:\s]+:)(\S.*)$"), rf"\1{MASK}"),
)

_lock = threading.Lock()
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Add ``value`` to the secrets :func:`redact` removes verbatim (ignored when None or shorter
    than :data:`MIN_SECRET_LEN`). Its URL-decoded form is registered too."""
    if not value:
        return
    with _lock:
        for v in {value, unquote(value)}:
            if len(v) >= MIN_SECRET_LEN:
                _registered.add(v)


def dsn_password(dsn: str | None) -> str | None:
    """The password in a DSN: the userinfo of a ``postgresql://``/``mysql://`` URI or a libpq
    ``password=`` keyword; None when it holds none."""
    if not dsn:
        return None
    if "://" in dsn:
        try:
            pw = urlsplit(dsn).password
        except ValueError:
            return None
        return unquote(pw) if pw else None
    m = re.search(r"(?i)\bpassword\s*=\s*('([^']*)'|(\S+))", dsn)
    if m is None:
        return None
    return m.group(2) if m.group(2) is not None else m.group(3)


def redact(text: str) -> str:
    """``text`` with every registered secret and every secret-carrying pattern replaced by ``***``."""
    if not text:
        return text
    with _lock:
        secrets = sorted(_registered, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_obj(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings, numbers) with every string redacted and the
    value of every key named like a secret (password, api_key, token, secret) masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {
            k: (MASK if isinstance(k, str) and _SECRET_KEYS.match(k) and v else redact_obj(v)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact_obj(v) for v in value]
    return value


def structlog_redactor(logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: redacts every value of the event (put it before the renderer)."""
    for key, val in list(event_dict.items()):
        if isinstance(val, BaseException):
            val = str(val)
        if isinstance(key, str) and _SECRET_KEYS.match(key) and val:
            event_dict[key] = MASK
        elif isinstance(val, (str, Mapping, list, tuple)):
            event_dict[key] = redact_obj(val)
    return event_dict


class ApiKeySource(Protocol):
    """Where an API key may come from (``config.PlannerConfig`` has these fields)."""

    api_key: str | None
    api_key_file: Path | None
    api_key_credential: str


def read_api_key(cfg: ApiKeySource) -> str | None:
    """The LLM API key, from the first of: ``planner.api_key``; the file ``planner.api_key_file``;
    the systemd credential ``planner.api_key_credential`` in ``$CREDENTIALS_DIRECTORY``
    (``LoadCredential=``, systemd.exec(5)); the ``OPENAI_API_KEY`` environment variable. The key is
    registered for redaction. Surrounding whitespace of a file's content is stripped.

    Raises:
        ValueError: ``api_key_file`` is set but cannot be read (names the file, never the content).
    """
    key: str | None = cfg.api_key
    if not key and cfg.api_key_file is not None:
        try:
            key = Path(cfg.api_key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = type(exc).__name__
            raise ValueError(f"planner.api_key_file = {cfg.api_key_file}: cannot be read ({why})") from None
    if not key and (cred_dir := os.environ.get("CREDENTIALS_DIRECTORY")):
        path = Path(cred_dir) / cfg.api_key_credential
        if path.is_file():
            key = path.read_text(encoding="utf-8").strip()
    key = key or os.environ.get("OPENAI_API_KEY")
    register_secret(key)
    return key or None
