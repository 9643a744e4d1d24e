"""PostgreSQL target: knob metadata from ``pg_settings``, changes via ``ALTER SYSTEM``, restore from
``postgresql.auto.conf``.

Sources: PostgreSQL 15 manual, 54.24 pg_settings (context, vartype, unit, pending_restart);
ALTER SYSTEM (writes ``postgresql.auto.conf``, cannot run inside a transaction block);
9.27.2 Server Signaling Functions (``pg_reload_conf()``); 9.26 System Information Functions
(``pg_conf_load_time()``); 28.2 The Cumulative Statistics System (pg_stat_* views).

Every operation opens a fresh autocommit connection: the server is restarted under us, and a session
that was open across ``pg_reload_conf()`` may answer one more query with the old values.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import structlog
from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agenticdb.config import TargetConfig
from agenticdb.models import ApplyMode, Catalog, KnobSpec, NormalizedChange, RuntimeState, Snapshot
from agenticdb.resources import data_file
from agenticdb.services import PgCtlService, Service, ServiceError, build_service
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.units import quantity

log = structlog.get_logger(__name__)

AUTO_CONF = "postgresql.auto.conf"
CONNECT_TIMEOUT_S = 5
RELOAD_WAIT_S = 10.0

# pg_settings.context -> how a change takes effect when written with ALTER SYSTEM.
# Source: PostgreSQL 15 manual, 54.24 pg_settings ("There are several possible values of context").
# 'backend'/'superuser-backend' values apply to sessions started after the reload, which is what a
# benchmark run (fresh connections) sees.
_CONTEXT_APPLY: dict[str, ApplyMode] = {"postmaster": ApplyMode.restart} | {
    ctx: ApplyMode.reload for ctx in ("sighup", "superuser-backend", "backend", "superuser", "user")
}

_DB_COUNTERS = (
    "xact_commit",
    "xact_rollback",
    "blks_read",
    "blks_hit",
    "tup_returned",
    "tup_fetched",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "temp_files",
    "temp_bytes",
    "deadlocks",
    "blk_read_time",
    "blk_write_time",
)
_BGWRITER_COUNTERS = (
    "checkpoints_timed",
    "checkpoints_req",
    "checkpoint_write_time",
    "checkpoint_sync_time",
    "buffers_checkpoint",
    "buffers_clean",
    "maxwritten_clean",
    "buffers_backend",
    "buffers_backend_fsync",
    "buffers_alloc",
)
_WAL_COUNTERS = (
    "wal_records",
    "wal_fpi",
    "wal_bytes",
    "wal_buffers_full",
    "wal_write",
    "wal_sync",
    "wal_write_time",
    "wal_sync_time",
)
# One-row statistics views: (view, first major that has it, counter prefix, {view column: counter}).
# PostgreSQL 17 moved the checkpoint columns of pg_stat_bgwriter to pg_stat_checkpointer (17 release
# notes); they keep their pg_stat_bgwriter.* names so deltas compare across versions. pg_stat_wal is
# PG14+ (PostgreSQL 14 manual, 28.2.12 pg_stat_wal). Columns a version lacks are skipped.
_STAT_VIEWS: tuple[tuple[str, int, str, dict[str, str]], ...] = (
    ("pg_stat_bgwriter", 0, "pg_stat_bgwriter", {c: c for c in _BGWRITER_COUNTERS}),
    (
        "pg_stat_checkpointer",
        17,
        "pg_stat_bgwriter",
        {
            "num_timed": "checkpoints_timed",
            "num_requested": "checkpoints_req",
            "write_time": "checkpoint_write_time",
            "sync_time": "checkpoint_sync_time",
            "buffers_written": "buffers_checkpoint",
        },
    ),
    ("pg_stat_wal", 14, "pg_stat_wal", {c: c for c in _WAL_COUNTERS}),
)
_PG_STAT_IO_SINCE = 16  # PostgreSQL 16 manual, 28.2.13 pg_stat_io
_IO_KEYS = ("backend_type", "object", "context", "op_bytes")


# ---- exclusion rules (catalogs/postgresql.toml) -------------------------------------------------------


class ExclusionRule(BaseModel):
    """One entry of ``catalogs/postgresql.toml``: exactly one matcher, a reason and a source."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    prefix: str | None = None
    category: str | None = None
    context: str | None = None
    reason: str
    source: str

    @model_validator(mode="after")
    def _one_matcher(self) -> ExclusionRule:
        given = [k for k in ("name", "prefix", "category", "context") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"exclusion rule needs exactly one of name/prefix/category/context, got {given}")
        return self

    def matches(self, name: str, category: str, context: str) -> bool:
        if self.name is not None:
            return self.name.lower() == name.lower()
        if self.prefix is not None:
            return name.lower().startswith(self.prefix.lower())
        if self.category is not None:
            parent = self.category.endswith("/") and category.startswith(self.category)
            return category == self.category or parent
        return context == self.context


class ExclusionRules(BaseModel):
    """The shape of ``catalogs/postgresql.toml``: which pg_settings rows are not tunables, and why."""

    model_config = ConfigDict(extra="forbid")
    keep: list[str] = Field(default_factory=list)
    rule: list[ExclusionRule] = Field(default_factory=list)

    @classmethod
    def load(cls, path: Path | None = None) -> ExclusionRules:
        """Load and validate the rules file (default: the shipped ``catalogs/postgresql.toml``).

        Raises:
            FileNotFoundError: the file is missing.
            pydantic.ValidationError: an entry lacks reason/source, has an unknown key or two matchers.
        """
        path = path or data_file("catalogs", "postgresql.toml")
        with open(path, "rb") as f:
            return cls.model_validate(tomllib.load(f))

    def reason_for(self, name: str, category: str, context: str) -> str | None:
        """Why ``name`` is not a tunable ("<reason> (source: ...)"), or None when it is one.

        Exact-name rules win over contexts, categories and prefixes (in that order).
        """
        if name.lower() in {k.lower() for k in self.keep}:
            return None
        order = {"name": 0, "context": 1, "category": 2, "prefix": 3}
        ranked = sorted(self.rule, key=lambda r: min(order[k] for k in order if getattr(r, k) is not None))
        for rule in ranked:
            if rule.matches(name, category, context):
                return f"{rule.reason} (source: {rule.source})"
        return None


def _float(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


# Boolean spellings PostgreSQL accepts (manual 20.1.1 Parameter Names and Values; unique prefixes aside).
_BOOL_WORDS = {
    "on": True,
    "true": True,
    "yes": True,
    "1": True,
    "off": False,
    "false": False,
    "no": False,
    "0": False,
}


def _same_bool(a: str, b: str) -> bool | None:
    """Compare two PostgreSQL boolean spellings; None when either is not a boolean."""
    x, y = _BOOL_WORDS.get(a.strip().lower()), _BOOL_WORDS.get(b.strip().lower())
    return None if x is None or y is None else x == y


def _keyed_as_asked(names: list[str], by_lower: dict[str, Any]) -> dict[str, Any]:
    """Re-key server answers (lower-cased GUC names) by the spelling the caller used."""
    return {n: by_lower[n.lower()] for n in names if n.lower() in by_lower}


class PostgresTarget(Target):
    """A PostgreSQL server reached by ``dsn`` (superuser), restarted by ``service``.

    Args:
        dsn: libpq URI or keyword string of a superuser connection (ALTER SYSTEM needs superuser).
        service: controller used for restarts and for starting a stopped server; None → no restarts.
        data_dir: the cluster's data directory; default: the pg_ctl service's, else ``SHOW
            data_directory`` on first need (cached so restore works while the server is down).
        log_file: server log used for ``log_tail``; default: the pg_ctl service's log file.
    """

    kind = "postgresql"

    def __init__(
        self, dsn: str, service: Service | None, data_dir: str | None = None, log_file: str | None = None
    ) -> None:
        self.dsn = dsn
        self.service = service
        if isinstance(service, PgCtlService):
            data_dir = data_dir or service.data_dir
            log_file = log_file or service.log_file
        self._data_dir = data_dir
        self.log_file = log_file
        self._version: str | None = None
        self._version_num: int | None = None
        self._catalog: Catalog | None = None
        self._rules: ExclusionRules | None = None

    # ---- connections --------------------------------------------------------------------------------

    @contextmanager
    def _connect(self, timeout: int = CONNECT_TIMEOUT_S) -> Iterator[psycopg.Connection[Any]]:
        """A fresh autocommit connection (ALTER SYSTEM cannot run in a transaction block)."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=timeout) as conn:
            yield conn

    def _rows(self, query: str | sql.Composed, params: Any = None) -> list[tuple[Any, ...]]:
        with self._connect() as conn:
            return conn.execute(query, params).fetchall()

    def available(self) -> bool:
        """True when ``SELECT 1`` answers within a 2 s connect timeout."""
        try:
            with self._connect(timeout=2) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error:
            return False

    def close(self) -> None:
        """Nothing is held open between operations."""

    @classmethod
    def from_config(cls, target_cfg: TargetConfig) -> PostgresTarget:
        """Same as the module-level :func:`from_config`."""
        return from_config(target_cfg)

    # ---- metadata ---------------------------------------------------------------------------------

    def version(self) -> str:
        """Server version number from ``SHOW server_version``, e.g. "15.14" (cached)."""
        if self._version is None:
            row = self._rows("SELECT current_setting('server_version'), current_setting('server_version_num')")[0]
            # Debian builds report "15.14 (Debian 15.14-1.pgdg120+1)": keep the number only.
            self._version, self._version_num = str(row[0]).split()[0], int(row[1])
        return self._version

    def major(self) -> int:
        """Major version, e.g. 15 (``server_version_num`` // 10000; cached)."""
        self.version()
        return int(self._version_num or 0) // 10000

    @property
    def data_dir(self) -> str:
        """The data directory (``SHOW data_directory`` once, then cached).

        Raises:
            TargetError: unknown and the server cannot be asked.
        """
        if self._data_dir is None:
            try:
                self._data_dir = str(self._rows("SHOW data_directory")[0][0])
            except psycopg.Error as exc:
                raise TargetError(f"data_directory unknown and server unreachable: {exc}") from exc
        return self._data_dir

    @property
    def auto_conf(self) -> Path:
        """Path of ``postgresql.auto.conf``, the file ALTER SYSTEM writes."""
        return Path(self.data_dir) / AUTO_CONF

    def rules(self) -> ExclusionRules:
        if self._rules is None:
            self._rules = ExclusionRules.load()
        return self._rules

    def catalog(self) -> Catalog:
        """Tunable knobs built live from ``pg_settings``, exclusions from ``catalogs/postgresql.toml``.

        ``KnobSpec.unit`` is pg_settings.unit ("8kB", "kB", "MB", "ms", "s", "min" or None);
        min/max are in that unit; ``default`` is boot_val (also in that unit); ``apply`` comes from
        the context (postmaster → restart, everything settable → reload). Cached after the first call.
        """
        if self._catalog is not None:
            return self._catalog
        rules = self.rules()
        rows = self._rows(
            "SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val, short_desc, category, context "
            "FROM pg_settings ORDER BY name"
        )
        version = self.version()
        cat = Catalog(target=self.kind, version=version)
        for name, vartype, unit, min_val, max_val, enumvals, boot_val, desc, category, context in rows:
            reason = rules.reason_for(name, category, context)
            if reason is None and context not in _CONTEXT_APPLY:
                reason = f"context {context!r} cannot be set with ALTER SYSTEM (source: 54.24 pg_settings)"
            if reason is not None:
                cat.excluded[name] = reason
                continue
            cat.knobs[name] = KnobSpec(
                name=name,
                vartype=vartype,
                unit=unit,
                min_value=_float(min_val),
                max_value=_float(max_val),
                enum_values=list(enumvals) if enumvals else None,
                apply=_CONTEXT_APPLY[context],
                default=boot_val,
                description=desc or "",
                category=category or "",
                source=f"pg_settings (PostgreSQL {version}), context {context}",
            )
        cat.facts.update(self._internal_facts())
        log.info(
            "catalog.built",
            target=self.kind,
            version=version,
            knobs=len(cat.knobs),
            excluded=len(cat.excluded),
        )
        self._catalog = cat
        return cat

    def _internal_facts(self) -> dict[str, float | str]:
        """Values fixed at initdb or build time (pg_settings context 'internal': wal_segment_size,
        block_size, …) that the server's own checks compare knobs with; sizes in bytes, times in ms."""
        facts: dict[str, float | str] = {}
        rows = self._rows("SELECT name, setting, unit, vartype FROM pg_settings WHERE context = 'internal'")
        for name, setting, unit, vartype in rows:
            number = _float(setting) if vartype in ("integer", "real") else None
            if number is None:
                facts[name] = setting
                continue
            spec = KnobSpec(name=name, vartype=vartype, unit=unit, apply=ApplyMode.restart)
            facts[name] = quantity("postgresql", spec, number)
        return facts

    # ---- reading values ---------------------------------------------------------------------------

    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        """Effective values in PostgreSQL's own spelling (``current_setting``: "128MB", "on", "4GB").

        Args:
            names: parameter names (case-insensitive, returned keyed as given); None → every catalog knob.
                Names the server does not know are left out.
        """
        wanted = list(self.catalog().knobs) if names is None else list(names)
        rows = self._rows(
            "SELECT name, current_setting(name) FROM pg_settings WHERE lower(name) = ANY(%s)",
            ([n.lower() for n in wanted],),
        )
        return _keyed_as_asked(wanted, {name.lower(): value for name, value in rows})

    def raw_settings(self, names: list[str]) -> dict[str, tuple[str, str | None]]:
        """``{name: (pg_settings.setting, pg_settings.unit)}``: values in the base unit (e.g. shared_buffers
        ("16384", "8kB")). Keyed as given; unknown names are left out."""
        rows = self._rows(
            "SELECT name, setting, unit FROM pg_settings WHERE lower(name) = ANY(%s)",
            ([n.lower() for n in names],),
        )
        return _keyed_as_asked(names, {name.lower(): (setting, unit) for name, setting, unit in rows})

    def pending_restart(self) -> list[str]:
        """Names whose configured value waits for a restart (pg_settings.pending_restart)."""
        return [r[0] for r in self._rows("SELECT name FROM pg_settings WHERE pending_restart ORDER BY name")]

    def _contexts(self, names: list[str]) -> dict[str, str]:
        rows = self._rows(
            "SELECT lower(name), context FROM pg_settings WHERE lower(name) = ANY(%s)",
            ([n.lower() for n in names],),
        )
        return dict(rows)

    # ---- snapshot / apply / verify / restore ------------------------------------------------------

    def _read_auto_conf(self) -> str | None:
        """Content of postgresql.auto.conf (None when absent). Falls back to ``pg_read_file`` when this
        process may not read the data directory (not root, not the postgres user)."""
        try:
            with open(self.auto_conf, encoding="utf-8", errors="surrogateescape", newline="") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except PermissionError:
            try:
                return str(self._rows("SELECT pg_read_file(%s)", (AUTO_CONF,))[0][0])
            except psycopg.Error as exc:
                raise TargetError(f"cannot read {self.auto_conf}: {exc}") from exc

    def _write_file(self, path: Path, content: str | None) -> None:
        """Put ``path`` back exactly (atomic replace), owned like the data directory, mode 0600;
        delete it when ``content`` is None."""
        if content is None:
            path.unlink(missing_ok=True)
            return
        owner = Path(path).parent.stat()
        tmp = path.with_name(f".{path.name}.agenticdb.tmp")
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        if os.geteuid() == 0:
            os.chown(tmp, owner.st_uid, owner.st_gid)
        os.replace(tmp, path)

    def snapshot(self, names: list[str] | None = None, label: str = "") -> Snapshot:
        """Effective values of ``names`` (all knobs when None; empty while the server is down) and the
        whole ``postgresql.auto.conf`` (None when absent)."""
        values: dict[str, str] = {}
        try:
            values = self.current_values(names)
        except psycopg.Error as exc:
            log.warning("snapshot.values_unavailable", error=str(exc))
        return Snapshot(
            target=self.kind, values=values, files={str(self.auto_conf): self._read_auto_conf()}, label=label
        )

    def _alter_system(self, conn: psycopg.Connection[Any], name: str, value: str) -> None:
        ident = sql.Identifier(*name.split("."))  # custom GUCs: "ext"."param"
        conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(ident, sql.Literal(value)))

    def _reload(self) -> None:
        """``pg_reload_conf()`` and wait (≤ RELOAD_WAIT_S) until new sessions see the new
        ``pg_conf_load_time()``: the postmaster processes SIGHUP asynchronously."""
        with self._connect() as conn:
            before = conn.execute("SELECT pg_conf_load_time()").fetchone()[0]  # type: ignore[index]
            conn.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + RELOAD_WAIT_S
        while time.monotonic() < deadline:
            if self._rows("SELECT pg_conf_load_time()")[0][0] > before:
                return
            time.sleep(0.02)
        log.warning("reload.not_observed", waited_s=RELOAD_WAIT_S)

    def _service_restart(self) -> None:
        if self.service is None or not self.service.can_restart():
            raise ApplyError("restart required but no service controller is configured (target.service.kind)")
        try:
            self.service.restart()
        except ServiceError as exc:
            logs = self.log_tail(40) or exc.output.splitlines()[-40:]
            raise ApplyError(f"PostgreSQL restart failed: {exc}", logs=logs) from exc

    def apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        """Write ``changes`` with ALTER SYSTEM, then reload or restart. All or nothing: when one ALTER
        fails, the previous postgresql.auto.conf is written back and reloaded.

        Args:
            changes: canonical values ("512MB", "on") as the validator normalised them.
            mode: ``reload`` (``dynamic`` is treated as reload: PostgreSQL has no global SET) or ``restart``.

        Returns:
            True when the server was restarted.

        Raises:
            ApplyError: a knob needs a restart but mode is reload (nothing written); restart impossible;
                an ALTER failed (message names parameter, value and the server's message; nothing kept);
                the restart failed (``logs`` holds the server log tail).
        """
        if not changes:
            return False
        try:
            return self._apply(changes, mode)
        except psycopg.Error as exc:
            log.warning("apply.failed", reason=str(exc))
            raise ApplyError(f"apply failed, server error: {exc}", logs=self.log_tail(40)) from exc

    def _apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        names = [c.name for c in changes]
        contexts = self._contexts(names)
        unknown = [n for n in names if n.lower() not in contexts]
        if unknown:
            raise ApplyError(f"unknown PostgreSQL parameter(s) {unknown}: not in pg_settings")
        if mode != ApplyMode.restart:
            needs_restart = [n for n in names if contexts[n.lower()] == "postmaster"]
            if needs_restart:
                raise ApplyError(
                    f"parameter(s) {needs_restart} have context postmaster and need a restart, "
                    f"but apply mode is {mode.value} (source: 54.24 pg_settings)"
                )
        elif self.service is None or not self.service.can_restart():
            raise ApplyError("apply mode restart but no service controller is configured (target.service.kind)")

        original = self._read_auto_conf()
        log.info("apply.start", mode=mode.value, changes={c.name: c.value for c in changes})
        current = "connect for ALTER SYSTEM"
        try:
            with self._connect() as conn:
                for change in changes:
                    current = f"ALTER SYSTEM SET {change.name} = '{change.value}'"
                    self._alter_system(conn, change.name, change.value)
        except psycopg.Error as exc:
            self._rollback_auto_conf(original)
            msg = (exc.diag.message_primary if exc.diag else None) or str(exc)
            log.warning("apply.failed", statement=current, reason=msg)
            raise ApplyError(f"{current} failed: {msg}; postgresql.auto.conf put back") from exc

        if mode == ApplyMode.restart:
            self._service_restart()
            log.info("apply.done", mode=mode.value, restarted=True)
            return True
        self._reload()
        wanted = {n.lower() for n in names}
        pending = [n for n in self.pending_restart() if n.lower() in wanted]
        if pending:
            raise ApplyError(f"parameter(s) {pending} are pending_restart after reload: not in effect")
        log.info("apply.done", mode=mode.value, restarted=False)
        return False

    def _rollback_auto_conf(self, original: str | None) -> None:
        try:
            self._write_file(self.auto_conf, original)
            self._reload()
            log.info("apply.rolled_back", file=str(self.auto_conf))
        except (OSError, psycopg.Error) as exc:
            log.error("apply.rollback_failed", file=str(self.auto_conf), error=str(exc))

    def verify(self, changes: list[NormalizedChange]) -> dict[str, str]:
        """Check every change is in effect; return ``{name: current_setting}``.

        Numeric knobs compare pg_settings.setting (base unit) with ``base_value`` (relative tolerance
        1e-6); booleans compare on/off/true/false alike; enums and strings case-insensitively.

        Raises:
            VerifyError: a value differs, or a changed parameter is pending_restart (names parameter,
                expected and actual).
        """
        if not changes:
            return {}
        by_lower = {c.name.lower(): c for c in changes}
        try:
            rows = self._rows(
                "SELECT name, setting, vartype, pending_restart, current_setting(name) FROM pg_settings "
                "WHERE lower(name) = ANY(%s)",
                (list(by_lower),),
            )
        except psycopg.Error as exc:
            raise VerifyError(f"cannot read pg_settings to verify: {exc}", logs=self.log_tail(20)) from exc
        found = {r[0].lower(): r for r in rows}
        effective: dict[str, str] = {}
        problems: list[str] = []
        for low, change in by_lower.items():
            if low not in found:
                problems.append(f"{change.name}: not in pg_settings")
                continue
            _, setting, vartype, pending, pretty = found[low]
            effective[change.name] = pretty
            if pending:
                problems.append(f"{change.name}: pending_restart (file has {change.value!r}, running value {pretty!r})")
            elif not self._matches(vartype, setting, pretty, change):
                problems.append(f"{change.name}: expected {change.value!r}, effective {pretty!r} (setting {setting})")
        if problems:
            log.warning("verify.failed", problems=problems)
            raise VerifyError("not in effect: " + "; ".join(problems), logs=self.log_tail(20))
        log.info("verify.ok", effective=effective)
        return effective

    @staticmethod
    def _matches(vartype: str, setting: str, pretty: str, change: NormalizedChange) -> bool:
        want = change.value.strip()
        if vartype in ("integer", "real"):
            if change.base_value is not None:
                got = float(setting)
                return abs(got - change.base_value) <= max(1e-9, 1e-6 * max(abs(got), abs(change.base_value)))
            return want in (setting, pretty)
        if vartype == "bool":
            return bool(_same_bool(setting, want))
        want = want.strip("'")
        return want.lower() in (setting.lower(), pretty.lower())

    def restore(self, snapshot: Snapshot) -> None:
        """Write the snapshot's files back exactly, then bring the server up with them.

        Server down → start it. Server up → reload; restart when a parameter is pending_restart or a
        postmaster-context value of the snapshot differs from the running one. Ends with a real query.

        Raises:
            TargetError: the server does not start/answer afterwards (``logs`` has the log tail).
        """
        for path, content in snapshot.files.items():
            self._write_file(Path(path), content)
        log.info("restore.files_written", files=list(snapshot.files), label=snapshot.label)
        try:
            if not self.available():
                if self.service is None:
                    raise TargetError("server is down and no service controller is configured")
                log.info("restore.start", reason="server down")
                self.service.start()
            else:
                self._reload()
                pending = self.pending_restart()
                differs = self._postmaster_differs(snapshot.values)
                if pending or differs:
                    log.info("restore.restart", pending_restart=pending, postmaster_differs=differs)
                    if self.service is None or not self.service.can_restart():
                        raise TargetError(
                            f"restore needs a restart ({pending or differs}) but no service controller is configured"
                        )
                    self.service.restart()
        except ServiceError as exc:
            raise TargetError(
                f"restore could not start PostgreSQL: {exc}",
                logs=self.log_tail(40) or exc.output.splitlines()[-40:],
            ) from exc
        if not self.available():
            raise TargetError("PostgreSQL does not answer after restore", logs=self.log_tail(40))
        log.info("restore.done", label=snapshot.label)

    def _postmaster_differs(self, values: dict[str, str]) -> list[str]:
        if not values:
            return []
        contexts = self._contexts(list(values))
        restart_names = [n for n in values if contexts.get(n.lower()) == "postmaster"]
        now = self.current_values(restart_names) if restart_names else {}
        return [n for n in restart_names if n in now and now[n] != values[n]]

    # ---- runtime state ------------------------------------------------------------------------

    def _state_query(self) -> tuple[str, list[tuple[str, dict[str, str]]]]:
        views = [(prefix, cols) for view, since, prefix, cols in _STAT_VIEWS if self.major() >= since]
        parts = [
            "(SELECT to_jsonb(d) FROM (SELECT "
            + ", ".join(f"sum({c})::float8 AS {c}" for c in _DB_COUNTERS)
            + " FROM pg_stat_database) d)",
            "(SELECT jsonb_agg(to_jsonb(i)) FROM pg_stat_io i)" if self.major() >= _PG_STAT_IO_SINCE else "NULL::jsonb",
            # Client sessions other than ours; idle_in_transaction includes "(aborted)".
            "(SELECT jsonb_build_object('total', count(*), "
            "'active', count(*) FILTER (WHERE state = 'active'), "
            "'idle_in_transaction', count(*) FILTER (WHERE state LIKE 'idle in transaction%')) "
            "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())",
            "(SELECT jsonb_build_object('waiting', count(*) FILTER (WHERE NOT granted), 'total', count(*)) "
            "FROM pg_locks WHERE pid IS DISTINCT FROM pg_backend_pid())",
            "(SELECT sum(pg_database_size(oid))::float8 FROM pg_database)",
            "current_setting('max_connections')::float8",
            "(SELECT setting::float8 * current_setting('block_size')::float8 FROM pg_settings "
            "WHERE name = 'shared_buffers')",
            # Waits of busy sessions and background workers; idle loops (Activity) and idle clients
            # (Client:ClientRead while state = idle) say nothing about a bottleneck.
            "(SELECT jsonb_object_agg(k, n) FROM (SELECT wait_event_type || ':' || wait_event AS k, "
            "count(*) AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event IS NOT NULL "
            "AND wait_event_type <> 'Activity' AND coalesce(state, '') <> 'idle' GROUP BY 1) x)",
            # what capacity settings must keep room for (validators/postgresql.toml [[capacity]])
            "jsonb_build_object('pg_prepared_xacts', (SELECT count(*) FROM pg_prepared_xacts), "
            "'pg_replication_slots', (SELECT count(*) FROM pg_replication_slots), "
            "'pg_stat_replication', (SELECT count(*) FROM pg_stat_replication))",
            *(f"(SELECT to_jsonb(v) FROM {view} v)" for view, since, _, _ in _STAT_VIEWS if self.major() >= since),
        ]
        return "SELECT " + ",\n  ".join(parts), views

    def runtime_state(self) -> RuntimeState:
        """One round trip of statistics.

        Counters: ``pg_stat_database.<col>`` (sum over databases), ``pg_stat_bgwriter.<col>``,
        ``pg_stat_wal.<col>`` (PG14+), ``pg_stat_io.<backend_type>.<object>.<context>.<col>`` (PG16+).
        Gauges: ``pg_stat_activity.{total,active,idle_in_transaction}`` (client backends except ours),
        ``pg_locks.{waiting,total}``, ``pg_database.size_bytes`` (bytes), ``settings.max_connections``,
        ``settings.shared_buffers_bytes`` (bytes), ``pg_prepared_xacts.total``, ``pg_replication_slots.total``,
        ``pg_stat_replication.total`` (what capacity settings must keep room for). Times are ms, sizes bytes,
        others counts.
        ``wait_events``: {"<type>:<event>": sessions waiting now}.
        """
        query, views = self._state_query()
        with self._connect() as conn:
            row = conn.execute(query).fetchone()
        assert row is not None
        db, io, act, locks, size, max_conn, sb, waits, usage, *view_rows = row
        counters = {f"pg_stat_database.{c}": float((db or {}).get(c) or 0.0) for c in _DB_COUNTERS}
        for (prefix, cols), data in zip(views, view_rows, strict=True):
            counters.update(
                {
                    f"{prefix}.{name}": float(data[col])
                    for col, name in cols.items()
                    if data and data.get(col) is not None
                }
            )
        for entry in io or []:
            key = ".".join(str(entry.get(k)) for k in _IO_KEYS[:3])
            counters.update(
                {
                    f"pg_stat_io.{key}.{col}": float(val)
                    for col, val in entry.items()
                    if col not in _IO_KEYS and type(val) in (int, float)
                }
            )
        gauges = {f"pg_stat_activity.{k}": float(act[k]) for k in ("total", "active", "idle_in_transaction")}
        gauges |= {f"pg_locks.{k}": float(locks[k]) for k in ("waiting", "total")}
        gauges |= {
            "settings.max_connections": float(max_conn),
            "pg_database.size_bytes": float(size or 0.0),
            "settings.shared_buffers_bytes": float(sb or 0.0),
        }
        gauges |= {f"{view}.total": float(n) for view, n in (usage or {}).items()}
        return RuntimeState(counters=counters, gauges=gauges, wait_events={k: int(v) for k, v in (waits or {}).items()})

    def log_tail(self, lines: int = 50) -> list[str]:
        """Last ``lines`` lines of the server log file (empty when no log file is known/readable)."""
        if not self.log_file:
            return []
        try:
            return Path(self.log_file).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []


def from_config(target_cfg: TargetConfig) -> PostgresTarget:
    """Build a PostgresTarget and its service controller from the ``[target]`` config section.

    The service's ready check is a real connection with ``connect_timeout=2``.

    Raises:
        ValueError: ``target.kind`` is not postgresql, or the service section lacks a required field.
    """
    if target_cfg.kind != "postgresql":
        raise ValueError(f"target.kind = {target_cfg.kind!r}: from_config builds PostgreSQL targets only")
    if not target_cfg.dsn:
        raise ValueError("target.dsn is not set: there is no default server to tune")
    dsn = target_cfg.dsn

    def ready() -> bool:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True

    service = build_service(target_cfg.service, ready)
    return PostgresTarget(dsn, service, data_dir=target_cfg.service.data_dir, log_file=target_cfg.service.log_file)
