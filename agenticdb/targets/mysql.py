"""MySQL 8 and MariaDB 10.11/11.x as a tuning target (PyMySQL), one adapter for both families.

Flavour (``kind`` = "mariadb" | "mysql") comes from ``SELECT VERSION()``. Catalog: see
``agenticdb.targets.mysql_catalog``.

Apply (``apply``):
- dynamic knobs: ``SET GLOBAL`` (MySQL 8: ``SET PERSIST``, which also writes mysqld-auto.cnf).
- restart-only knobs: MariaDB — written to the managed option file (``target.option_file``) under
  ``[mysqld]`` (read by both MySQL and MariaDB servers; never a client section); MySQL 8 —
  ``SET PERSIST_ONLY``; then ``service.restart()``.
- Choice: on MariaDB dynamic changes are *also* written to the managed option file, so a later restart
  (ours, a DBA's, a crash) keeps what was measured instead of silently reverting to the old value —
  except variables without an option-file form on this server version (``KnobSpec.option_file`` False,
  from ``mariadbd --help --verbose``: agenticdb.targets.mysql_options): they are set with ``SET GLOBAL``
  only (written to the file they would stop the next start with "unknown variable"), logged as
  ``apply.runtime_only``, and set again after every restart agenticdb makes.
- A failing statement puts back every value already set and the option file, then raises ApplyError
  naming variable, value and server error (no half-applied change set). A failing restart raises
  ApplyError with the error-log tail; the file is left as written so recovery can restore the snapshot.

Verify: sizes are predicted as the server rounds them — values round down to ``NUMERIC_BLOCK_SIZE`` and
clamp to the range (MariaDB KB "Server System Variables", my_getopt); ``innodb_buffer_pool_size`` rounds
up to a multiple of ``innodb_buffer_pool_chunk_size × innodb_buffer_pool_instances`` when the chunk size is
non-zero (MySQL 8.0 manual 15.8.3.1 "Configuring InnoDB Buffer Pool Size"); the rounded value is accepted.

Runtime state names (``runtime_state``; the heuristic planner reads them):
- counters ``global_status.<Variable_name>`` for every numeric SHOW GLOBAL STATUS value that is not a
  gauge: Innodb_buffer_pool_reads, Innodb_buffer_pool_read_requests, Innodb_buffer_pool_wait_free,
  Innodb_log_waits, Innodb_log_writes, Innodb_os_log_fsyncs, Innodb_data_fsyncs, Innodb_pages_written,
  Innodb_row_lock_waits, Innodb_row_lock_time, Innodb_lsn_current, Created_tmp_disk_tables,
  Created_tmp_tables, Threads_created, Connections, Questions, Com_commit, Handler_*,
  Table_open_cache_misses, Opened_tables, Sort_merge_passes, Select_full_join, …
- gauges ``global_status.<Variable_name>`` for point-in-time values (catalogs/mariadb.toml
  [status_gauges]): Threads_connected, Threads_running, Open_tables, Innodb_buffer_pool_pages_dirty,
  Innodb_buffer_pool_pages_free, Innodb_buffer_pool_pages_total, Innodb_row_lock_current_waits,
  Innodb_checkpoint_age (MariaDB), …
- counters ``innodb_metrics.<name>`` (information_schema.INNODB_METRICS, enabled, TYPE counter or
  status_counter); gauges ``innodb_metrics.<name>`` for TYPE value.
- gauges ``innodb.log_sequence_number``, ``innodb.checkpoint_age_bytes`` (SHOW ENGINE INNODB STATUS, LOG
  section: "Log sequence number" − "Last checkpoint at"), ``variables.max_connections``,
  ``variables.innodb_buffer_pool_size``, ``variables.innodb_log_file_size``,
  ``variables.innodb_redo_log_capacity`` (bytes; MySQL 8.0.30+, else log_file_size × files_in_group).
"""

from __future__ import annotations

import configparser
import io
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
import structlog

from agenticdb.config import TargetConfig
from agenticdb.models import ApplyMode, Catalog, NormalizedChange, RuntimeState, Snapshot
from agenticdb.services import Service, ServiceError, build_service
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.targets.mysql_catalog import load_data, mariadb_catalog, mysql8_catalog
from agenticdb.targets.mysql_options import find_binary, option_names

log = structlog.get_logger(__name__)

_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.I)
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}  # option-file suffixes are 1024-based
_LSN_RE = re.compile(r"^Log sequence number\s+(\d+)", re.M)
_CKPT_RE = re.compile(r"^Last checkpoint at\s+(\d+)", re.M)
MANAGED_HEADER = "# Managed by agenticdb: knobs it applied. Edit with care; snapshots restore this file.\n"


def parse_mysql_dsn(dsn: str) -> dict[str, Any]:
    """``mysql://user:pass@host:port/db?unix_socket=/path`` → PyMySQL connect kwargs.

    Raises:
        ValueError: the scheme is not mysql/mariadb (names the DSN and the rule).
    """
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise ValueError(f"target.dsn = {dsn!r}: expected mysql://user:pass@host:port/db[?unix_socket=...]")
    query = parse_qs(parts.query)
    kwargs: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username) if parts.username else "root",
        "password": unquote(parts.password) if parts.password else "",
    }
    if db := parts.path.lstrip("/"):
        kwargs["database"] = db
    if sock := query.get("unix_socket"):
        kwargs["unix_socket"] = sock[0]
    return kwargs


def parse_size(value: str | int | float) -> int:
    """Integer from "512M", "4G", "1048576" (1024-based suffixes, as in option files).

    Raises:
        ValueError: not an integer with an optional K/M/G/T suffix.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"{value!r}: expected an integer with an optional K/M/G/T suffix")
    return int(m.group(1)) * _SUFFIX[m.group(2).lower()]


def _defaults_value(defaults_file: str, key: str) -> str | None:
    """Value of ``--key`` as mariadbd would read it (my_print_defaults follows !include)."""
    for tool in ("my_print_defaults", "mariadb-print-defaults"):
        try:
            out = subprocess.run(
                [tool, f"--defaults-file={defaults_file}", "mysqld", "mariadbd", "server"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        found = None
        for line in out.splitlines():
            if line.startswith(f"--{key}="):
                found = line.split("=", 1)[1]
        return found
    return None


class MySQLTarget(Target):
    """A MySQL 8 or MariaDB server reached with PyMySQL; restarts through ``service``.

    Args:
        connect_kwargs: PyMySQL ``connect`` arguments (host/port/user/password or unix_socket).
        service: controller used for restarts (``NoService`` when restarts are impossible).
        option_file: the managed option file (restart-only knobs); None = restart knobs unavailable on
            MariaDB (apply raises ApplyError).
        log_file: server error log (default ``@@log_error``).
        bindir: directory of the server binary (for ``--help --verbose``; default: PATH, /usr/sbin).
        cache_dir: where the option names per server version are cached (``app.build_target`` passes
            ``<storage.home>/cache``); None = read them from the binary once per catalog, keep nothing.
    """

    def __init__(
        self,
        connect_kwargs: dict[str, Any],
        service: Service,
        option_file: str | None = None,
        log_file: str | None = None,
        bindir: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.connect_kwargs = {k: v for k, v in connect_kwargs.items() if k != "database"}
        self.service = service
        self.option_file = Path(option_file) if option_file else None
        self.log_file = log_file
        self.bindir = bindir
        self.cache_dir = cache_dir
        self._runtime_touched: set[str] = set()
        self._conn: pymysql.connections.Connection | None = None
        self._catalog: Catalog | None = None
        self._version: str | None = None
        self._datadir: str | None = None
        self.kind = "mariadb"

    # ---- construction / connection -------------------------------------------------------------------
    @classmethod
    def from_config(cls, target_cfg: TargetConfig, cache_dir: Path | None = None) -> MySQLTarget:
        """Build from ``[target]``: DSN, managed option file, service (pid file from the defaults file or
        ``SELECT @@pid_file``); ``cache_dir`` as in the constructor. Raises ValueError for a bad DSN or
        service section."""
        if not target_cfg.dsn:
            raise ValueError("target.dsn is not set: there is no default server to tune")
        kwargs = parse_mysql_dsn(target_cfg.dsn)

        def ready() -> bool:
            pymysql.connect(**{k: v for k, v in kwargs.items() if k != "database"}, connect_timeout=2).close()
            return True

        svc_cfg = target_cfg.service
        pid_file = None
        if svc_cfg.kind == "mariadbd":
            if not svc_cfg.defaults_file:
                raise ValueError("target.service.kind = 'mariadbd' needs target.service.defaults_file")
            pid_file = _defaults_value(svc_cfg.defaults_file, "pid-file") or _defaults_value(
                svc_cfg.defaults_file, "pid_file"
            )
            if pid_file is None:
                try:
                    with (
                        pymysql.connect(
                            **{k: v for k, v in kwargs.items() if k != "database"}, connect_timeout=2
                        ) as conn,
                        conn.cursor() as cur,
                    ):
                        cur.execute("SELECT @@pid_file")
                        pid_file = str(cur.fetchone()[0])
                except pymysql.MySQLError as exc:
                    raise ValueError(
                        f"target.service.defaults_file = {svc_cfg.defaults_file!r} has no "
                        f"pid-file and the server is unreachable: {exc}"
                    ) from None
        service = build_service(svc_cfg, ready, pid_file=pid_file)
        target = cls(kwargs, service, target_cfg.option_file, svc_cfg.log_file, svc_cfg.bindir, cache_dir)
        if service.is_ready():
            target._detect()
        return target

    @property
    def data_dir(self) -> str | None:
        """The server's data directory (``@@datadir``), known once the server answered ``version()``.

        Used for disk budgets, the data device of the OS stage and sandbox data resets.
        """
        if self._datadir is None:
            try:
                self.version()
            except Exception:  # noqa: BLE001 - unknown while the server is down
                return None
        return self._datadir

    @property
    def pid_file(self) -> str | None:
        """``@@pid_file`` (absolute, or relative to the data dir), None while the server is down."""
        try:
            conn = self._connect()
        except Exception:  # noqa: BLE001 - unknown while the server is down
            return None
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@pid_file, @@datadir")
                row = cur.fetchone()
        finally:
            conn.close()
        if not row or not row[0]:
            return None
        return str(Path(str(row[1])) / str(row[0]))

    def prepare_clean_shutdown(self) -> None:
        """``SET GLOBAL innodb_fast_shutdown = 0`` before a shutdown whose data files are copied: a slow
        shutdown leaves no redo to apply, so a copy starts without crash recovery (MEASUREMENT.md)."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL innodb_fast_shutdown = 0")
        finally:
            conn.close()

    def _connect(self) -> pymysql.connections.Connection:
        if self._conn is not None:
            try:
                self._conn.ping(reconnect=False)
                return self._conn
            except pymysql.MySQLError:
                self._conn = None
        self._conn = pymysql.connect(
            **self.connect_kwargs, connect_timeout=5, autocommit=True, cursorclass=pymysql.cursors.Cursor
        )
        return self._conn

    @contextmanager
    def _cursor(self) -> Iterator[pymysql.cursors.Cursor]:
        with self._connect().cursor() as cur:
            yield cur

    def _rows(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        with self._connect().cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def _detect(self) -> None:
        with self._cursor() as cur:
            cur.execute("SELECT VERSION(), @@datadir")
            version, datadir = cur.fetchone()
        self._version = str(version)
        self._datadir = str(datadir)
        self.kind = "mariadb" if "mariadb" in self._version.lower() else "mysql"

    def version(self) -> str:
        if self._version is None:
            self._detect()
        return str(self._version)

    def available(self) -> bool:
        try:
            with self._cursor() as cur:
                cur.execute("SELECT 1")
            return True
        except pymysql.MySQLError:
            self._conn = None
            return False

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.MySQLError:
                pass
            self._conn = None

    # ---- catalog / values -----------------------------------------------------------------------------
    def catalog(self) -> Catalog:
        if self._catalog is None:
            version = self.version()
            if self.kind == "mariadb":
                rows = self._rows("SELECT * FROM information_schema.SYSTEM_VARIABLES")
                names = option_names(version, self.cache_dir, find_binary(self.bindir)) if self._local() else None
                self._catalog = mariadb_catalog(rows, version, option_names=names)
            else:
                info = self._rows(
                    "SELECT VARIABLE_NAME, MIN_VALUE, MAX_VALUE, VARIABLE_SOURCE FROM performance_schema.variables_info"
                )
                values = {
                    r["VARIABLE_NAME"]: r["VARIABLE_VALUE"]
                    for r in self._rows("SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_variables")
                }
                self._catalog = mysql8_catalog(info, values, version)
            log.info(
                "catalog.loaded",
                target=self.kind,
                knobs=len(self._catalog.knobs),
                excluded=len(self._catalog.excluded),
            )
        return self._catalog

    def _local(self) -> bool:
        """True when the server runs on this host (unix socket or a loopback address): only then is the
        local server binary the one whose options count."""
        host = str(self.connect_kwargs.get("host") or "localhost")
        return bool(self.connect_kwargs.get("unix_socket")) or host in ("localhost", "127.0.0.1", "::1")

    def _variable(self, name: str) -> str:
        """Server variable behind catalog name ``name`` (aliases resolved), checked as an identifier."""
        alias = load_data().aliases.get(name)
        var = alias[0] if alias and self.kind == "mariadb" else name
        if not _NAME_RE.match(var):
            raise ValueError(f"variable name {name!r}: expected letters, digits and underscores")
        return var

    def _canonical(self, name: str, raw: Any) -> str:
        spec = self.catalog().get(name)
        if raw is None:
            return ""
        if isinstance(raw, bytes):
            raw = raw.decode(errors="replace")
        if spec is not None and spec.vartype == "bool":
            return "ON" if str(raw).upper() in ("1", "ON", "TRUE", "YES") else "OFF"
        if spec is not None and spec.vartype == "real":
            return repr(float(raw)).removesuffix(".0") if float(raw).is_integer() else repr(float(raw))
        return str(raw)

    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        """``SELECT @@GLOBAL.<name>`` as canonical strings: integers (sizes in bytes) as digits, bools
        "ON"/"OFF", enums as the server spells them. Unknown names raise ValueError."""
        cat = self.catalog()
        names = list(cat.knobs) if names is None else names
        out: dict[str, str] = {}
        for i in range(0, len(names), 100):
            chunk = names[i : i + 100]
            cols = ", ".join(f"@@GLOBAL.{self._variable(n)}" for n in chunk)
            with self._cursor() as cur:
                cur.execute(f"SELECT {cols}")
                row = cur.fetchone()
            out.update({n: self._canonical(n, v) for n, v in zip(chunk, row, strict=True)})
        return out

    # ---- option file ---------------------------------------------------------------------------------
    def _read_option_file(self) -> configparser.ConfigParser:
        parser = configparser.ConfigParser(
            allow_no_value=True,
            strict=False,
            interpolation=None,
            delimiters=("=",),
            comment_prefixes=("#", ";"),
        )
        parser.optionxform = _option_name  # type: ignore[method-assign,assignment]
        if self.option_file and self.option_file.exists():
            parser.read_string(self.option_file.read_text())
        if not parser.has_section("mysqld"):
            parser.add_section("mysqld")
        return parser

    def _write_option_file(self, settings: dict[str, str]) -> None:
        if self.option_file is None:
            raise ApplyError("restart-only change needs target.option_file (the managed option file)")
        parser = self._read_option_file()
        aliases = load_data().option_aliases
        for name, value in settings.items():
            var = self._variable(name)
            parser.set("mysqld", aliases.get(var, var), value)
        buf = io.StringIO()
        parser.write(buf)
        _write_atomic(self.option_file, MANAGED_HEADER + buf.getvalue())

    def _file_value(self, change: NormalizedChange) -> str:
        spec = self.catalog().get(change.name)
        if spec is not None and spec.vartype == "integer":
            return str(self._int_value(change))
        return str(change.value)

    # ---- snapshot / apply / verify / restore ------------------------------------------------------------
    def _files(self) -> list[Path]:
        files = [self.option_file] if self.option_file else []
        if self.kind == "mysql" and self._datadir:
            files.append(Path(self._datadir) / "mysqld-auto.cnf")
        return files

    def snapshot(self, names: list[str] | None = None, label: str = "") -> Snapshot:
        """Values of ``names`` (all knobs when None) + the managed option file and, on MySQL 8,
        ``<datadir>/mysqld-auto.cnf`` (content, or None when absent)."""
        files = {str(p): (p.read_text() if p.exists() else None) for p in self._files()}
        return Snapshot(target=self.kind, values=self.current_values(names), files=files, label=label)

    def _int_value(self, change: NormalizedChange) -> int:
        try:
            return int(change.base_value) if change.base_value is not None else parse_size(change.value)
        except ValueError as exc:
            raise ApplyError(f"{change.name}={change.value!r}: not an integer value ({exc})") from None

    def _set_sql(self, name: str, value: str, persist: str) -> tuple[str, list[Any]]:
        spec = self.catalog().get(name)
        var = self._variable(name)
        if spec is not None and spec.vartype == "integer":
            return f"SET {persist} {var} = {parse_size(value)}", []
        if spec is not None and spec.vartype == "real":
            return f"SET {persist} {var} = {float(value)!r}", []
        return f"SET {persist} {var} = %s", [str(value)]

    def apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        """Apply all ``changes`` or none; restart when any needs it. Returns True when it restarted.

        Raises:
            ApplyError: unknown knob, SQL error (everything already set is put back first) or a failed
                restart (logs attached; the option file stays as written for recovery).
        """
        cat = self.catalog()
        for ch in changes:
            if cat.get(ch.name) is None:
                raise ApplyError(
                    f"{ch.name}={ch.value}: not a tunable variable of this server "
                    f"({cat.excluded.get(ch.name, 'unknown variable')})"
                )
        restart = [c for c in changes if cat.knobs[c.name].apply == ApplyMode.restart]
        dynamic = [c for c in changes if c not in restart]
        # no option-file form on this version: SET GLOBAL only (the file would stop the next start)
        runtime = [c for c in changes if cat.knobs[c.name].option_file is False]
        in_file = [c for c in changes if c not in runtime]
        if runtime:
            log.info("apply.runtime_only", parameters=[c.name for c in runtime], reason="no option-file form")
            self._runtime_touched.update(c.name for c in runtime)
        previous = self.current_values([c.name for c in changes])
        old_file = self.option_file.read_text() if self.option_file and self.option_file.exists() else None
        done: list[NormalizedChange] = []
        mysql8 = self.kind == "mysql"
        try:
            for ch in dynamic:
                sql, args = self._set_sql(ch.name, self._file_value(ch), "PERSIST" if mysql8 else "GLOBAL")
                self._execute(sql, args, ch)
                done.append(ch)
            for ch in restart if mysql8 else []:
                sql, args = self._set_sql(ch.name, self._file_value(ch), "PERSIST_ONLY")
                self._execute(sql, args, ch)
                done.append(ch)
            if not mysql8 and (restart or self.option_file) and in_file:
                self._write_option_file({c.name: self._file_value(c) for c in in_file})
        except (ApplyError, OSError) as exc:
            self._undo(done, previous, old_file, mysql8)
            log.warning("apply.failed", error=str(exc), rolled_back=[c.name for c in done])
            raise ApplyError(str(exc), self.log_tail(20)) from None
        log.info("apply.done", dynamic=[c.name for c in dynamic], restart=[c.name for c in restart])
        if not restart and mode != ApplyMode.restart:
            return False
        keep = self._runtime_values()
        try:
            self.close()
            self.service.restart()
        except ServiceError as exc:
            log.warning("apply.restart_failed", error=str(exc))
            raise ApplyError(
                f"restart after writing {[c.name for c in restart]} failed: {exc}",
                exc.output.splitlines()[-40:] or self.log_tail(40),
            ) from None
        self._set_runtime_values(keep)
        return True

    def _runtime_values(self) -> dict[str, str]:
        """Current values of the runtime-only variables agenticdb has set (a restart loses them)."""
        names = sorted(self._runtime_touched)
        return self.current_values(names) if names else {}

    def _set_runtime_values(self, values: dict[str, str]) -> None:
        """Set runtime-only values again after a restart agenticdb made.

        Raises:
            ApplyError: the server refused one (names variable, value and the server's error).
        """
        now = self.current_values(list(values)) if values else {}
        for name, value in values.items():
            if now.get(name) != value:
                sql, args = self._set_sql(name, value, "GLOBAL")
                self._execute(sql, args, NormalizedChange(name=name, value=value, apply=ApplyMode.dynamic))
                log.info("apply.runtime_only_reset", parameter=name, value=value, reason="lost at the restart")

    def _execute(self, sql: str, args: list[Any], ch: NormalizedChange) -> None:
        try:
            with self._cursor() as cur:
                cur.execute(sql, args or None)
        except pymysql.MySQLError as exc:
            raise ApplyError(
                f"{ch.name}={ch.value}: server refused {sql.split('=')[0].strip()}: {exc.args[-1] if exc.args else exc}"
            ) from None

    def _undo(self, done: list[NormalizedChange], previous: dict[str, str], old_file: str | None, mysql8: bool) -> None:
        for ch in reversed(done):
            try:
                if mysql8:
                    self._execute(f"RESET PERSIST IF EXISTS {self._variable(ch.name)}", [], ch)
                if self.catalog().knobs[ch.name].apply == ApplyMode.dynamic:
                    sql, args = self._set_sql(ch.name, previous[ch.name], "GLOBAL")
                    self._execute(sql, args, ch)
            except ApplyError as exc:
                log.error("apply.undo_failed", parameter=ch.name, error=str(exc))
        if self.option_file is not None:
            _restore_file(self.option_file, old_file)

    def expected_value(self, change: NormalizedChange) -> str:
        """The value the server will report for ``change`` (rounding predicted; see module docstring)."""
        spec = self.catalog().knobs[change.name]
        if spec.vartype == "bool":
            return "ON" if str(change.value).upper() in ("1", "ON", "TRUE", "YES") else "OFF"
        if spec.vartype != "integer":
            return str(change.value)
        v = self._int_value(change)
        if change.name == "innodb_buffer_pool_size":
            chunk, instances = self._bp_chunk()
            if chunk > 0:
                unit = chunk * instances
                return str(-(-v // unit) * unit)  # rounded up (MySQL 8.0 manual 15.8.3.1)
        if spec.block_size and spec.block_size > 1:
            v -= v % spec.block_size
        if spec.min_value is not None:
            v = max(v, int(spec.min_value))
        if spec.max_value is not None:
            v = min(v, int(spec.max_value))
        return str(v)

    def _bp_chunk(self) -> tuple[int, int]:
        names = ["innodb_buffer_pool_chunk_size"]
        if "innodb_buffer_pool_instances" in self.catalog().knobs or self.kind == "mysql":
            names.append("innodb_buffer_pool_instances")
        try:
            with self._cursor() as cur:
                cur.execute("SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names))
                row = cur.fetchone()
        except pymysql.MySQLError:
            return 0, 1
        return int(row[0] or 0), int(row[1]) if len(row) > 1 and row[1] else 1

    def verify(self, changes: list[NormalizedChange]) -> dict[str, str]:
        """Read back; return effective values by name (rounded sizes accepted as predicted).

        Raises:
            VerifyError: a value differs from the prediction (names parameter, expected, actual).
        """
        actual = self.current_values([c.name for c in changes])
        bad = []
        for ch in changes:
            want = self.expected_value(ch)
            got = actual[ch.name]
            spec = self.catalog().knobs[ch.name]
            same = got.lower() == want.lower()
            if not same and spec.vartype == "real":
                same = abs(float(got) - float(want)) <= 1e-6 * max(1.0, abs(float(want)))
            if not same:
                bad.append(f"{ch.name}: expected {want} (requested {ch.value}), server reports {got}")
            elif want != str(ch.value):
                log.info("verify.rounded", parameter=ch.name, requested=str(ch.value), effective=got)
        if bad:
            raise VerifyError("; ".join(bad), self.log_tail(20))
        return actual

    def restore(self, snapshot: Snapshot) -> None:
        """Write the snapshot's files back (also while the server is down), start or restart the server
        as needed, then set differing dynamic values back and verify every value.

        Raises:
            TargetError: the server does not come back or a value differs afterwards (logs attached).
        """
        for path, content in snapshot.files.items():
            _restore_file(Path(path), content)
        try:
            self.close()
            if not self.service.is_ready():
                self.service.start()
            else:
                cat = self.catalog()
                now = self.current_values(list(snapshot.values))
                if any(
                    now[n] != v
                    for n, v in snapshot.values.items()
                    if n in cat.knobs and cat.knobs[n].apply == ApplyMode.restart
                ):
                    self.service.restart()
        except ServiceError as exc:
            raise TargetError(
                f"server did not come back after restoring files: {exc}", exc.output.splitlines()[-40:]
            ) from None
        self.close()
        if not self.available():
            raise TargetError("server accepts no connection after restore", self.log_tail(40))
        cat = self.catalog()
        now = self.current_values(list(snapshot.values))
        for name, value in snapshot.values.items():
            spec = cat.knobs.get(name)
            if spec is not None and now[name] != value and spec.apply == ApplyMode.dynamic:
                sql, args = self._set_sql(name, value, "GLOBAL")
                try:
                    with self._cursor() as cur:
                        cur.execute(sql, args or None)
                except pymysql.MySQLError as exc:
                    raise TargetError(f"restore {name}={value}: {exc}", self.log_tail(20)) from None
        final = self.current_values(list(snapshot.values))
        diff = {n: (v, final[n]) for n, v in snapshot.values.items() if final[n] != v}
        if diff:
            raise TargetError(f"values differ after restore (snapshot, actual): {diff}", self.log_tail(20))
        log.info("restore.done", values=len(snapshot.values), files=list(snapshot.files))

    # ---- observation ---------------------------------------------------------------------------------
    def runtime_state(self) -> RuntimeState:
        """Counters and gauges named as in the module docstring."""
        data = load_data()
        state = RuntimeState()
        with self._cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS")
            status = cur.fetchall()
        for name, value in status:
            try:
                num = float(value)
            except (TypeError, ValueError):
                continue
            (state.gauges if data.is_gauge(name) else state.counters)[f"global_status.{name}"] = num
        enabled = "ENABLED = 1" if self.kind == "mariadb" else "STATUS = 'enabled'"
        metrics = f"SELECT NAME, TYPE, COUNT FROM information_schema.INNODB_METRICS WHERE {enabled}"
        for row in self._rows(metrics):
            bucket = state.gauges if str(row["TYPE"]).lower() == "value" else state.counters
            bucket[f"innodb_metrics.{row['NAME']}"] = float(row["COUNT"] or 0)
        with self._cursor() as cur:
            cur.execute("SHOW ENGINE INNODB STATUS")
            text = str(cur.fetchone()[2])
        lsn, ckpt = _LSN_RE.search(text), _CKPT_RE.search(text)
        if lsn:
            state.gauges["innodb.log_sequence_number"] = float(lsn.group(1))
            if ckpt:
                state.gauges["innodb.checkpoint_age_bytes"] = float(int(lsn.group(1)) - int(ckpt.group(1)))
        names = ["max_connections", "innodb_buffer_pool_size", "innodb_log_file_size"]
        extra: list[str] = [
            n
            for n in ("innodb_redo_log_capacity", "innodb_log_files_in_group")
            if n in self.catalog().knobs or n in self.catalog().excluded
        ]
        with self._cursor() as cur:
            cur.execute("SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names + extra))
            values = dict(zip(names + extra, cur.fetchone(), strict=True))
        for n in names:
            state.gauges[f"variables.{n}"] = float(values[n])
        capacity = values.get("innodb_redo_log_capacity") or (
            float(values["innodb_log_file_size"]) * float(values.get("innodb_log_files_in_group") or 1)
        )
        state.gauges["variables.innodb_redo_log_capacity"] = float(capacity)
        return state

    def log_tail(self, lines: int = 50) -> list[str]:
        """Last ``lines`` of the error log (service log file, else ``@@log_error`` under the datadir)."""
        path = self.log_file
        if path is None and self.available():
            with self._cursor() as cur:
                cur.execute("SELECT @@log_error, @@datadir")
                err, datadir = cur.fetchone()
            if err and str(err) != "stderr":
                path = str(Path(str(datadir)) / str(err))  # an absolute err replaces datadir in the join
        if not path:
            return []
        try:
            return Path(path).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []


def _option_name(name: str) -> str:
    """Option-file keys: dashes and underscores are the same option (MariaDB KB "mariadbd Options")."""
    return name.strip().replace("-", "_")


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by rename, keeping the old file's mode and owner (the server must read it)."""
    tmp = path.with_name(path.name + ".agenticdb-tmp")
    tmp.write_text(text)
    if path.exists():
        st = path.stat()
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except PermissionError:
            pass
    tmp.replace(path)


def _restore_file(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        _write_atomic(path, content)
