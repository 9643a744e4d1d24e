"""Pristine data resets for benchmark sandboxes (``loop.reset_data``).

docs/measurement.md: on this kind of host: restoring a pristine copy of the data directory before
each trial (copy + sync + start: 2–3 s), then a warm-up, cut the TPS coefficient of variation from
11–19 % to about 5–11 % (PostgreSQL) and 3–7 % (MariaDB), because dead tuples and table growth no longer
drift the results within a session.

This throws away every write made since the copy, so it is refused anywhere but a private sandbox
(``target.sandbox`` set): on a real server it would lose data. The configuration files that agenticdb
tunes (``Target.pristine_keep_files``: PostgreSQL's ``postgresql.auto.conf`` and friends; MariaDB's
option files live outside the data dir) are never reset, so the trial's configuration stays in effect.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import structlog

from agenticdb.host.services import Service, ServiceError

log = structlog.get_logger(__name__)


class PristineSource(Protocol):
    """What a reset needs of a target (``targets.base.Target`` has it; sandbox stays beside targets)."""

    service: Service | None

    @property
    def data_dir(self) -> str | None: ...  # pragma: no cover - protocol

    def pristine_keep_files(self) -> tuple[str, ...]: ...  # pragma: no cover - protocol

    def prepare_clean_shutdown(self) -> None: ...  # pragma: no cover - protocol


class PristineError(RuntimeError):
    """The reset could not be set up or performed (message says why; the server is started again)."""


class PristineData:
    """Keeps a pristine copy of a sandbox data directory and puts it back before each measured run.

    Args:
        data_dir: the server's data directory.
        service: its controller (stop/start).
        keep: file names inside ``data_dir`` that are configuration and must not be reset.
        before_stop: called before each stop (MariaDB: ``SET GLOBAL innodb_fast_shutdown = 0`` so the
            copy needs no crash recovery, per docs/measurement.md).
    """

    def __init__(
        self,
        data_dir: str,
        service: Service,
        keep: tuple[str, ...] = (),
        before_stop: Callable[[], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.copy_dir = self.data_dir.parent / (self.data_dir.name + ".pristine")
        self.service = service
        self.keep = keep
        self.before_stop = before_stop

    @classmethod
    def for_target(cls, target: PristineSource) -> PristineData:
        """Pristine copies of ``target``'s data directory, kept and reset as the target says.

        Raises:
            PristineError: the target has no known data directory or no service controller.
        """
        data_dir, service = target.data_dir, target.service
        if not data_dir or service is None:
            raise PristineError("loop.reset_data needs the sandbox's data directory and service controller")
        return cls(data_dir, service, keep=target.pristine_keep_files(), before_stop=target.prepare_clean_shutdown)

    def _rsync(self, src: Path, dst: Path) -> None:
        excludes = [f"--exclude=/{name}" for name in self.keep]
        try:
            subprocess.run(
                ["rsync", "-a", "--delete", *excludes, f"{src}/", f"{dst}/"],
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
                start_new_session=True,  # out of reach of a terminal's Ctrl-C (workloads.common._started)
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise PristineError(f"copying {src} to {dst} failed: {exc}") from exc
        os.sync()

    def _stopped(self) -> None:
        if self.before_stop is not None:
            try:
                self.before_stop()
            except Exception as exc:  # noqa: BLE001 - a slow shutdown is still a clean shutdown
                log.info("pristine.before_stop_failed", reason=str(exc))
        self.service.stop()

    def capture(self) -> float:
        """Stop the server, copy the data directory (after the workload's data is loaded), start.

        Returns the seconds it took. Raises PristineError (server started again before raising).
        """
        t0 = time.monotonic()
        self._stopped()
        try:
            self.copy_dir.mkdir(mode=0o700, exist_ok=True)
            st = self.data_dir.stat()
            os.chown(self.copy_dir, st.st_uid, st.st_gid)
            self._rsync(self.data_dir, self.copy_dir)
        finally:
            self.service.start()
        took = time.monotonic() - t0
        log.info("pristine.captured", copy=str(self.copy_dir), seconds=round(took, 2))
        return took

    def reset(self) -> float:
        """Stop, put the pristine data back (configuration files untouched), start. Returns seconds."""
        if not self.copy_dir.is_dir():
            raise PristineError("no pristine copy captured")
        t0 = time.monotonic()
        self._stopped()
        try:
            self._rsync(self.copy_dir, self.data_dir)
        finally:
            try:
                self.service.start()
            except ServiceError as exc:
                raise PristineError(f"server did not start after the data reset: {exc}") from exc
        took = time.monotonic() - t0
        log.info("pristine.reset", seconds=round(took, 2))
        return took

    def discard(self) -> None:
        """Remove the pristine copy."""
        shutil.rmtree(self.copy_dir, ignore_errors=True)
