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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import structlog
from psycopg import sql

from agenticdb.config.sections import TargetConfig
from agenticdb.connfault import describe_fault
from agenticdb.host.privileges import pg_is_superuser, unprivileged_parameters
from agenticdb.host.services import PgCtlService, Service, ServiceError, build_service
from agenticdb.measure.worldwatch import pg_mark
from agenticdb.models import ApplyMode, Catalog, NormalizedChange, RuntimeState, Snapshot
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.targets.postgres_catalog import ExclusionRules, build_catalog, conflict_reads, setting_facts
from agenticdb.targets.postgres_stats import parse_state, state_query, statement_counters
from agenticdb.units.compare import numbers_equal, values_equal
from agenticdb.validation.exclusions import denied_reason
from agenticdb.validation.rules import load_ruleset

log = structlog.get_logger(__name__)

AUTO_CONF = "postgresql.auto.conf"
PID_FILE = "postmaster.pid"

#: Files inside a PostgreSQL data directory that hold configuration, never data: a pristine data reset
#: leaves them alone so the trial's configuration stays in effect.
CONFIG_FILES = (AUTO_CONF, "postgresql.conf", "pg_hba.conf", "pg_ident.conf", "postmaster.opts", PID_FILE)
CONNECT_TIMEOUT_S = 5
RELOAD_WAIT_S = 10.0


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
        database: the workload's database: pg_stat_statements' counters are read there, of its statements only
            (a session's wiring sets it: ``app.build_workload``); None: in the DSN's database, the whole view
            (``advise`` observes the server as the DSN names it).
    """

    kind = "postgresql"

    def __init__(
        self,
        dsn: str,
        service: Service | None,
        data_dir: str | None = None,
        log_file: str | None = None,
        database: str | None = None,
    ) -> None:
        self.dsn = dsn
        self.database = database
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
                ok = conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error as exc:
            self.unavailable_reason = describe_fault(exc)
            return False
        self.unavailable_reason = None
        return ok

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

    def version_major(self) -> str:
        """The major version as experience is keyed ("15"; one number since PostgreSQL 10)."""
        return self.version().split(".")[0]

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

    def server_pid(self) -> int | None:
        """The postmaster's pid: the first line of ``postmaster.pid`` in the data directory (manual 19.2,
        "Creating a Database Cluster" / storage layout 73.1); None when unreadable."""
        try:
            return int((Path(self.data_dir) / PID_FILE).read_text().split()[0])
        except (OSError, ValueError, IndexError, TargetError):
            return None

    def pristine_keep_files(self) -> tuple[str, ...]:
        """The configuration files of the data directory (:data:`CONFIG_FILES`)."""
        return CONFIG_FILES

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
        rows = self._rows(
            "SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val, short_desc, category, context "
            "FROM pg_settings ORDER BY name"
        )
        version = self.version()
        cat = build_catalog(rows, self.rules(), self.kind, version)
        cat.facts.update(self._internal_facts(cat))
        self._drop_unprivileged(cat)
        log.info(
            "catalog.built",
            target=self.kind,
            version=version,
            knobs=len(cat.knobs),
            excluded=len(cat.excluded),
        )
        self._catalog = cat
        return cat

    def _drop_unprivileged(self, cat: Catalog) -> None:
        """Move the knobs this role may not ``ALTER SYSTEM`` (no superuser, no ``GRANT ALTER SYSTEM ON
        PARAMETER``, PostgreSQL 15+) to the exclusions with their reason from
        :func:`agenticdb.validation.exclusions.denied_reason`: the validator rule that made ``setup-role``
        leave a knob out is logged at info (expected), a real privilege gap as one warning."""
        if self.major() < 15:
            return
        with self._connect() as conn:
            user, superuser = pg_is_superuser(conn)
            if superuser:
                return
            denied = set(unprivileged_parameters(conn, list(cat.knobs)))
        rules = load_ruleset("postgresql")
        gaps: list[str] = []
        ruled: list[str] = []
        for name in [name for name in cat.knobs if name.lower() in denied]:
            del cat.knobs[name]
            item = denied_reason(rules, "postgresql", cat.version, name, user)
            cat.excluded[name] = item.reason
            (gaps if item.status == "unprivileged" else ruled).append(name)
        if ruled:
            log.info("catalog.never_granted", role=user, left_out=len(ruled), reason="validator rules (setup-role)")
        if gaps:
            log.warning(
                "catalog.unprivileged",
                role=user,
                dropped=len(gaps),
                names=gaps[:10],
                note=f"{len(gaps)} knob(s) lack GRANT ALTER SYSTEM ON PARAMETER: left out; "
                "`agenticdb setup-role --apply` grants them",
            )

    def _internal_facts(self, cat: Catalog) -> dict[str, float | str]:
        """Values fixed at initdb or build time (pg_settings context 'internal': wal_segment_size,
        block_size, …) that the server's own checks compare knobs with, and the configured values of the
        settings left out of ``cat`` that conflict rules read (:func:`conflict_reads`); sizes in bytes,
        times in ms."""
        rows = self._rows(
            "SELECT name, CASE WHEN context = 'internal' THEN setting ELSE reset_val END, unit, vartype "
            "FROM pg_settings WHERE context = 'internal' OR name = ANY(%s)",
            (conflict_reads(cat, load_ruleset("postgresql").conflict),),
        )
        return setting_facts(rows)

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
        1e-6), or with ``expected_base`` when the server computes the value (wal_buffers=-1); booleans
        compare on/off/true/false alike; enums and strings case-insensitively.

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
                computed = (
                    f" (the server computes {change.expected_base:g})" if change.expected_base is not None else ""
                )
                problems.append(
                    f"{change.name}: expected {change.value!r}{computed}, effective {pretty!r} (setting {setting})"
                )
        if problems:
            log.warning("verify.failed", problems=problems)
            raise VerifyError("not in effect: " + "; ".join(problems), logs=self.log_tail(20))
        log.info("verify.ok", effective=effective)
        return effective

    @staticmethod
    def _matches(vartype: str, setting: str, pretty: str, change: NormalizedChange) -> bool:
        """Numbers in the base unit against ``base_value``; anything else by the one value comparison
        against either spelling the server shows (``setting`` "on" / ``current_setting`` "on")."""
        if vartype in ("integer", "real") and change.base_value is not None:
            expected = change.expected_base if change.expected_base is not None else change.base_value
            return numbers_equal(float(setting), expected)
        return values_equal(change.value, setting) or values_equal(change.value, pretty)

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

    def runtime_state(self) -> RuntimeState:
        """One round trip of statistics.

        Counters: ``pg_stat_database.<col>`` (sum over databases), ``pg_stat_bgwriter.<col>``,
        ``pg_stat_wal.<col>`` (PG14+), ``pg_stat_io.<backend_type>.<object>.<context>.<col>`` (PG16+),
        ``pg_stat_statements.{jit_time, total_exec_time, jit_functions}`` (PG15+, when the extension is
        readable in the workload's database, its statements only; without ``database`` in the connected one:
        :func:`statement_counters`; when not, ``unread["pg_stat_statements"]`` says why).
        Gauges: ``pg_stat_activity.{total,active,idle_in_transaction}`` (client backends except ours),
        ``pg_locks.{waiting,total}``, ``pg_database.size_bytes`` (bytes), ``settings.max_connections``,
        ``settings.shared_buffers_bytes`` (bytes), ``settings.shared_memory_size_bytes`` (bytes, the shared
        memory the server allocated; PostgreSQL 15+), ``pg_prepared_xacts.total``, ``pg_replication_slots.total``,
        ``pg_stat_replication.total`` (what capacity settings must keep room for), ``pg_replication_slots.logical``
        (the wal_level a start needs). Times are ms, sizes bytes,
        others counts.
        ``wait_events``: {"<type>:<event>": sessions waiting now}.
        """
        query, views = state_query(self.major())
        with self._connect() as conn:
            row = conn.execute(query).fetchone()
            jit, why = statement_counters(conn, self.major(), self.dsn, self.database)
        assert row is not None
        state = parse_state(row, views)
        state.counters.update(jit)
        if why:
            state.unread["pg_stat_statements"] = why
        return state

    def world_mark(self) -> dict[str, str]:
        """Restart, reload and statistics-reset markers (``agenticdb.measure.worldwatch.pg_mark``)."""
        with self._connect(timeout=5) as conn:
            return pg_mark(conn)

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
