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
Runtime state: see ``agenticdb.targets.mysql_stats``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pymysql
import structlog

from agenticdb.config.sections import TargetConfig
from agenticdb.connfault import describe_fault
from agenticdb.dialect import parse_mysql_dsn
from agenticdb.host.services import Service, ServiceError, build_service
from agenticdb.measure.worldwatch import my_mark
from agenticdb.models import ApplyMode, Catalog, NormalizedChange, RuntimeState, Snapshot
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.targets.mysql_catalog import load_data, mariadb_catalog, mysql8_catalog
from agenticdb.targets.mysql_files import defaults_value, parse_size, restore_file, write_option_file
from agenticdb.targets.mysql_options import find_binary, option_names
from agenticdb.targets.mysql_stats import fetch_one, read_rule_gauges, read_state
from agenticdb.units import bool_of
from agenticdb.units.compare import values_equal
from agenticdb.validation.validator import no_effect_here

log = structlog.get_logger(__name__)

_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")


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

    service: Service

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
            pid_file = defaults_value(svc_cfg.defaults_file, "pid-file") or defaults_value(
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

    def server_pid(self) -> int | None:
        """The server's pid from ``@@pid_file`` (None while the server is down or the file unreadable)."""
        pid_file = self.pid_file
        if not pid_file:
            return None
        try:
            return int(Path(pid_file).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

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
        shutdown leaves no redo to apply, so a copy starts without crash recovery (docs/measurement.md)."""
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
            version, datadir = fetch_one(cur, "SELECT VERSION(), @@datadir")
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
            self.unavailable_reason = None
            return True
        except pymysql.MySQLError as exc:
            self.unavailable_reason = describe_fault(exc)
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
                active = frozenset(
                    str(r["PLUGIN_NAME"]).lower()
                    for r in self._rows(
                        "SELECT PLUGIN_NAME FROM information_schema.PLUGINS WHERE PLUGIN_STATUS = 'ACTIVE'"
                    )
                )
                self._catalog = mariadb_catalog(rows, version, option_names=names, active_plugins=active)
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
            return "ON" if bool_of(str(raw)) else "OFF"
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
                row = fetch_one(cur, f"SELECT {cols}")
            out.update({n: self._canonical(n, v) for n, v in zip(chunk, row, strict=True)})
        return out

    # ---- option file ---------------------------------------------------------------------------------
    def _write_option_file(self, settings: dict[str, str]) -> None:
        if self.option_file is None:
            raise ApplyError("restart-only change needs target.option_file (the managed option file)")
        aliases = load_data().option_aliases
        settings_by_option = {}
        for name, value in settings.items():
            var = self._variable(name)
            settings_by_option[aliases.get(var, var)] = value
        write_option_file(self.option_file, settings_by_option)

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
            restore_file(self.option_file, old_file)

    def expected_value(self, change: NormalizedChange) -> str:
        """The value the server will report for ``change`` (rounding predicted; see module docstring)."""
        spec = self.catalog().knobs[change.name]
        if spec.vartype == "bool":
            return "ON" if bool_of(str(change.value)) else "OFF"
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
                row = fetch_one(cur, "SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names))
        except (pymysql.MySQLError, TargetError):
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
            if not values_equal(want, got):
                bad.append(f"{ch.name}: expected {want} (requested {ch.value}), server reports {got}")
            elif want != str(ch.value):
                log.info("verify.rounded", parameter=ch.name, requested=str(ch.value), effective=got)
        if bad:
            raise VerifyError("; ".join(bad), self.log_tail(20))
        return actual

    def restore(self, snapshot: Snapshot) -> None:
        """Write the snapshot's files back (also while the server is down), start or restart the server
        as needed, then set differing dynamic values back and verify every value; one no SET brings back
        that has no effect in this configuration is left alone (``inert``, logged ``restore.left_alone``).

        Raises:
            TargetError: the server does not come back or a value differs afterwards (logs attached).
        """
        for path, content in snapshot.files.items():
            restore_file(Path(path), content)
        try:
            self.close()
            if not self.service.is_ready():
                self.service.start()
            else:
                cat = self.catalog()
                now = self.current_values(list(snapshot.values))
                if any(
                    not values_equal(v, now[n])
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
            if spec is not None and not values_equal(value, now[name]) and spec.apply == ApplyMode.dynamic:
                sql, args = self._set_sql(name, value, "GLOBAL")
                try:
                    with self._cursor() as cur:
                        cur.execute(sql, args or None)
                except pymysql.MySQLError as exc:
                    raise TargetError(f"restore {name}={value}: {exc}", self.log_tail(20)) from None
        final = self.current_values(list(snapshot.values))
        diff = {n: (v, final[n]) for n, v in snapshot.values.items() if not values_equal(v, final[n])}
        left = self.inert({n: v for n, (v, _) in diff.items()}) if diff else {}
        if diff := {n: d for n, d in diff.items() if n not in left}:
            raise TargetError(f"values differ after restore (snapshot, actual): {diff}", self.log_tail(20))
        log.info("restore.done", values=len(snapshot.values), files=list(snapshot.files))

    def inert(self, values: dict[str, str]) -> dict[str, str]:
        """Those of ``values`` with no effect in this server's configuration now, with why
        (``validation.validator.no_effect_here``); logged as ``restore.left_alone``."""
        left = no_effect_here(self.catalog(), self.current_values(), values)
        if left:
            log.warning("restore.left_alone", values={n: values[n] for n in left}, why=left)
        return left

    # ---- observation ---------------------------------------------------------------------------------
    def runtime_state(self) -> RuntimeState:
        """Counters and gauges named as in ``agenticdb.targets.mysql_stats``."""
        cat = self.catalog()
        return read_state(self._connect(), self.kind, set(cat.knobs) | set(cat.excluded))

    def rule_gauges(self, names: list[str]) -> dict[str, float]:
        """``memory_tables.*`` and ``data.innodb_*`` when ``names`` asks for one (``mysql_stats.read_rule_gauges``).

        Raises:
            GaugeUnknown: the account may not see every schema's MEMORY tables (``mysql_stats.unseen_tables``)."""
        return read_rule_gauges(self._connect, self.kind, names)

    def world_mark(self) -> dict[str, str]:
        """Restart, FLUSH STATUS and digest-truncation markers (``agenticdb.measure.worldwatch.my_mark``)."""
        with self._cursor() as cur:
            return my_mark(cur)

    def log_tail(self, lines: int = 50) -> list[str]:
        """Last ``lines`` of the error log (service log file, else ``@@log_error`` under the datadir)."""
        path = self.log_file
        if path is None and self.available():
            with self._cursor() as cur:
                err, datadir = fetch_one(cur, "SELECT @@log_error, @@datadir")
            if err and str(err) != "stderr":
                path = str(Path(str(datadir)) / str(err))  # an absolute err replaces datadir in the join
        if not path:
            return []
        try:
            return Path(path).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []
