"""How a DBMS is started, stopped and checked: pg_ctl on a data dir, a private mariadbd, a systemd unit,
or explicit commands.

"Started" means accepting connections: every controller takes a ``ready_check`` callable that opens a
real connection, and ``start``/``restart`` poll it until ``start_timeout_s``.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import psutil
import structlog

from agenticdb.config.sections import ServiceConfig

log = structlog.get_logger(__name__)


class ServiceError(RuntimeError):
    """Start/stop failed or the server did not accept connections in time; ``output`` has tool output."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def joiner(cgroup: str | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that moves the child into ``cgroup`` (a cgroup directory) before it runs, or None.

    Writing a pid to ``cgroup.procs`` moves that process; processes it forks are born in the same cgroup
    (kernel Documentation/admin-guide/cgroup-v2.rst, "Processes"), so a server started this way and
    every page it caches are charged to ``cgroup`` from the first byte."""
    if not cgroup:
        return None
    procs = Path(cgroup) / "cgroup.procs"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    return join


def run_as(
    argv: list[str], user: str | None, timeout: float = 120.0, cwd: str | None = None, cgroup: str | None = None
) -> str:
    """Run ``argv`` (as ``user`` via runuser when we are root and user is set; inside ``cgroup`` when
    given, see ``joiner``); return stdout+stderr.

    Raises:
        ServiceError: non-zero exit or timeout, with the combined output.
    """
    if user and os.geteuid() == 0:
        argv = ["runuser", "-u", user, "--", *argv]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or "/",
            stdin=subprocess.DEVNULL,
            preexec_fn=joiner(cgroup),
            start_new_session=True,  # a terminal's Ctrl-C must not kill pg_ctl halfway (see workloads.common)
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"{shlex.join(argv)} timed out after {timeout:.0f}s", str(exc.output or "")) from None
    out = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        raise ServiceError(f"{shlex.join(argv)} exited {proc.returncode}", out)
    return out


class Service(ABC):
    """Controller of one DBMS service."""

    def __init__(self, ready_check: Callable[[], bool], start_timeout_s: float = 60.0) -> None:
        self.ready_check = ready_check
        self.start_timeout_s = start_timeout_s
        self.restart_seconds: list[float] = []  # wall time of each completed restart (s), for the cost priors

    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def _stop(self) -> None: ...

    def can_restart(self) -> bool:
        return True

    def start(self) -> None:
        """Start and wait until ``ready_check`` passes. Raises ServiceError with the start output."""
        self._start()
        self.wait_ready()

    def stop(self) -> None:
        """Stop the server (fast shutdown: committed data is kept)."""
        self._stop()

    def restart(self) -> None:
        """Stop then start; raises ServiceError when the server does not come back. A completed restart's wall
        time (seconds, shutdown checkpoint included) is appended to ``restart_seconds``
        (``loop.race_cost.CostBasis``: the session's measured restart cost)."""
        log.info("service.restart", controller=type(self).__name__)
        began = time.monotonic()
        self._stop()
        self.start()
        self.restart_seconds.append(time.monotonic() - began)

    def is_ready(self) -> bool:
        try:
            return bool(self.ready_check())
        except Exception:  # noqa: BLE001 - any connection error means "not ready"
            return False

    def wait_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout_s)
        while time.monotonic() < deadline:
            if self.is_ready():
                return
            time.sleep(0.1)
        raise ServiceError(f"server not accepting connections after {timeout or self.start_timeout_s:.0f}s")


class PgCtlService(Service):
    """PostgreSQL controlled with pg_ctl on a data directory (sandbox, tests, self-managed hosts).

    ``options`` are passed to postgres with ``-o`` (port, socket dir); the log goes to ``log_file``.
    """

    def __init__(
        self,
        ready_check: Callable[[], bool],
        data_dir: str,
        bindir: str,
        os_user: str | None = None,
        options: str = "",
        log_file: str | None = None,
        start_timeout_s: float = 60.0,
        cgroup: str | None = None,
    ) -> None:
        super().__init__(ready_check, start_timeout_s)
        self.data_dir = data_dir
        self.pg_ctl = str(Path(bindir) / "pg_ctl")
        self.os_user = os_user
        self.options = options
        self.log_file = log_file or str(Path(data_dir).parent / "postgresql.log")
        self.cgroup = cgroup

    def running(self) -> bool:
        try:
            run_as([self.pg_ctl, "status", "-D", self.data_dir], self.os_user, timeout=15)
            return True
        except ServiceError:
            return False

    def _start(self) -> None:
        if self.running():
            return
        argv = [
            self.pg_ctl,
            "start",
            "-w",
            "-t",
            str(int(self.start_timeout_s)),
            "-D",
            self.data_dir,
            "-l",
            self.log_file,
        ]
        if self.options:
            argv += ["-o", self.options]
        try:
            run_as(argv, self.os_user, timeout=self.start_timeout_s + 10, cgroup=self.cgroup)
        except ServiceError as exc:
            raise ServiceError(f"PostgreSQL did not start: {exc}", exc.output + self._log_tail()) from None

    def _stop(self) -> None:
        if not self.running():
            return
        run_as([self.pg_ctl, "stop", "-w", "-m", "fast", "-D", self.data_dir], self.os_user, timeout=120)

    def _log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(Path(self.log_file).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class MariadbdService(Service):
    """A private mariadbd/mysqld started from ``defaults_file`` (sandbox and tests).

    The server runs detached in its own session (like a service manager would run it) with
    ``--defaults-file`` and, when we are root, ``--user=<os_user>``. Start fails fast when the process
    exits before accepting connections (an unknown variable or an impossible value aborts mariadbd in
    well under a second), with the error-log tail attached. Shutdown sends SIGTERM to the pid in the pid
    file: a normal, clean InnoDB shutdown (MariaDB KB "mariadbd Options", "Shutdown").
    """

    def __init__(
        self,
        ready_check: Callable[[], bool],
        defaults_file: str,
        pid_file: str,
        os_user: str | None = "mysql",
        binary: str = "/usr/sbin/mariadbd",
        log_file: str | None = None,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 120.0,
        cgroup: str | None = None,
    ) -> None:
        super().__init__(ready_check, start_timeout_s)
        self.cgroup = cgroup
        self.defaults_file = defaults_file
        self.pid_file = pid_file
        self.os_user = os_user if os.geteuid() == 0 else None
        self.binary = binary
        self.log_file = log_file
        self.stop_timeout_s = stop_timeout_s

    @staticmethod
    def _alive(pid: int) -> bool:
        """True when ``pid`` runs and is not a zombie; reaps it when it is our exited child."""
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return False
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False

    def _pid(self) -> int | None:
        """The live server pid from the pid file, or None (missing file, stale pid, zombie)."""
        try:
            pid = int(Path(self.pid_file).read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if self._alive(pid) else None

    def running(self) -> bool:
        return self._pid() is not None

    def _start(self) -> None:
        if self._pid() is not None:
            return
        argv = [self.binary, f"--defaults-file={self.defaults_file}"]
        if self.os_user:
            argv.append(f"--user={self.os_user}")
        log_offset = self._log_size()
        # stderr goes to an unlinked temp file, not a pipe: a pipe nobody drains would block the server
        # once full, and stderr is where mariadbd complains when it cannot open its error log.
        stderr_file = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr_file,
            start_new_session=True,
            cwd="/",
            preexec_fn=joiner(self.cgroup),
        )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.is_ready():
                return
            code = proc.poll()
            if code is not None:
                stderr_file.seek(0)
                stderr = stderr_file.read().decode(errors="replace")
                raise ServiceError(
                    f"mariadbd exited with code {code} before accepting connections",
                    stderr + self._log_since(log_offset),
                )
            time.sleep(0.1)
        raise ServiceError(
            f"mariadbd not accepting connections after {self.start_timeout_s:.0f}s",
            self._log_since(log_offset),
        )

    def _stop(self) -> None:
        pid = self._pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while time.monotonic() < deadline:
            if not self._alive(pid):
                return
            time.sleep(0.1)
        raise ServiceError(f"mariadbd pid {pid} did not stop within {self.stop_timeout_s:.0f}s", self._log_tail())

    def _log_size(self) -> int:
        try:
            return Path(self.log_file).stat().st_size if self.log_file else 0
        except OSError:
            return 0

    def _log_since(self, offset: int, n: int = 40) -> str:
        """Error-log lines written since byte ``offset`` (at most the last ``n``)."""
        if not self.log_file:
            return ""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-n:])

    def _log_tail(self, n: int = 30) -> str:
        return self._log_since(0, n)


class SystemdService(Service):
    """A systemd unit (``systemctl start|stop|restart UNIT``)."""

    def __init__(self, ready_check: Callable[[], bool], unit: str, start_timeout_s: float = 120.0) -> None:
        super().__init__(ready_check, start_timeout_s)
        self.unit = unit

    def _start(self) -> None:
        try:
            run_as(["systemctl", "start", self.unit], None, timeout=self.start_timeout_s)
        except ServiceError as exc:
            status = ""
            try:
                status = run_as(["journalctl", "-u", self.unit, "-n", "30", "--no-pager"], None, timeout=15)
            except ServiceError:
                pass
            raise ServiceError(f"systemctl start {self.unit} failed: {exc}", exc.output + status) from None

    def _stop(self) -> None:
        run_as(["systemctl", "stop", self.unit], None, timeout=self.start_timeout_s)


class CommandService(Service):
    """Explicit shell commands for start/stop (and an optional status command)."""

    def __init__(self, ready_check: Callable[[], bool], start: str, stop: str, start_timeout_s: float = 60.0):
        super().__init__(ready_check, start_timeout_s)
        self.start_cmd = start
        self.stop_cmd = stop

    def _start(self) -> None:
        run_as(["sh", "-c", self.start_cmd], None, timeout=self.start_timeout_s)

    def _stop(self) -> None:
        run_as(["sh", "-c", self.stop_cmd], None, timeout=self.start_timeout_s)


class NoService(Service):
    """No controller configured: restarts are impossible and the validator rejects restart changes."""

    def can_restart(self) -> bool:
        return False

    def _start(self) -> None:
        raise ServiceError("no service controller configured (target.service.kind = 'none')")

    def _stop(self) -> None:
        raise ServiceError("no service controller configured (target.service.kind = 'none')")


def build_service(
    cfg: ServiceConfig, ready_check: Callable[[], bool], options: str = "", pid_file: str | None = None
) -> Service:
    """Build the controller ``cfg`` describes.

    Raises:
        ValueError: a required field of the chosen kind is missing (names the field).
    """
    if cfg.kind == "pg_ctl":
        if not cfg.data_dir or not cfg.bindir:
            raise ValueError("target.service.kind = 'pg_ctl' needs target.service.data_dir and .bindir")
        return PgCtlService(
            ready_check,
            cfg.data_dir,
            cfg.bindir,
            cfg.os_user,
            options,
            cfg.log_file,
            cfg.start_timeout_s,
            cgroup=cfg.cgroup,
        )
    if cfg.kind == "mariadbd":
        if not cfg.defaults_file or not pid_file:
            raise ValueError("target.service.kind = 'mariadbd' needs target.service.defaults_file")
        return MariadbdService(
            ready_check,
            cfg.defaults_file,
            pid_file,
            cfg.os_user or "mysql",
            log_file=cfg.log_file,
            start_timeout_s=cfg.start_timeout_s,
            cgroup=cfg.cgroup,
        )
    if cfg.kind == "systemd":
        if not cfg.unit:
            raise ValueError("target.service.kind = 'systemd' needs target.service.unit")
        return SystemdService(ready_check, cfg.unit, cfg.start_timeout_s)
    if cfg.kind == "command":
        if not cfg.start or not cfg.stop:
            raise ValueError("target.service.kind = 'command' needs target.service.start and .stop")
        return CommandService(ready_check, cfg.start, cfg.stop, cfg.start_timeout_s)
    return NoService(ready_check)
