"""The Linux host as a tuning target: sysctls, block-queue files and transparent hugepages.

Every parameter is a file: ``vm.dirty_ratio`` is /proc/sys/vm/dirty_ratio, ``block.vda.read_ahead_kb``
is /sys/block/vda/queue/read_ahead_kb, ``thp.enabled`` is /sys/kernel/mm/transparent_hugepage/enabled.
Metadata (type, unit, range, path, reason, source) comes from ``catalogs/linux.toml``; what exists is
decided by the running kernel: a catalog name whose file is absent is *unsupported* (with the reason),
a file without a write bit is *excluded*.

Changes follow tuned's get / set / verify / restore pattern: before the first write of a parameter in
this target's lifetime its original value is saved (in memory and through ``state_store`` so the
session can persist it in the Memory Book and restore it after a crash); a batch that fails half-way
is rolled back before ApplyError is raised. Mutually exclusive pairs (vm.dirty_ratio / vm.dirty_bytes,
…) are saved and restored as one knob: only the non-zero member is written back, last.

All paths are resolved under ``root`` (default ``/``) so logic tests can run against a fake tree.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from agenticdb.measure.hoststats import host_state
from agenticdb.models import (
    ApplyMode,
    Catalog,
    KnobSpec,
    Layer,
    NormalizedChange,
    RuntimeState,
    Snapshot,
)
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.targets.linux_catalog import LinuxCatalogData, ParamDef, data_devices, load_linux_catalog
from agenticdb.units import bool_of
from agenticdb.units.compare import values_equal

log = structlog.get_logger(__name__)

StateStore = Callable[[str, str], None]
"""Called as ``state_store(name, original_value)`` before the first write of a parameter."""


# ---------------------------------------------------------------------------------------------- target


def _bracketed(text: str) -> tuple[list[str], str | None]:
    """Parse "none [mq-deadline] kyber bfq" into (choices, current)."""
    choices, current = [], None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            word = word[1:-1]
            current = word
        choices.append(word)
    return choices, current


def _errno_hint(exc: OSError) -> str:
    code = exc.errno or 0
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied: run as root (kernel parameters are writable by root only)"
    if code == errno.EINVAL:
        return "invalid argument: the kernel rejected the value"
    if code in (errno.ENOENT, errno.ENOTDIR):
        return "no such file: the parameter does not exist on this kernel"
    if code == errno.EISDIR:
        return "is a directory: not a parameter file"
    if code == errno.EBUSY:
        return "device or resource busy"
    return exc.strerror or str(exc)


class LinuxTarget(Target):
    """Sysctl + block-queue + THP parameters of one host (see module docstring).

    Args:
        root: filesystem root holding proc/ and sys/ (``/`` on a real host, a fake tree in tests).
        devices: block devices whose queue parameters are tunable; None = the disk(s) holding
            ``data_dir`` (see :func:`data_devices`), else all non-virtual disks.
        data_dir: the DBMS data directory, used to find the data device.
        state_store: called ``state_store(name, original)`` before the first write of each parameter so
            the session can persist originals (Memory Book / journal) for crash recovery.
    """

    kind = "linux"

    def __init__(
        self,
        root: Path = Path("/"),
        devices: list[str] | None = None,
        data_dir: str | None = None,
        state_store: StateStore | None = None,
        catalog_data: LinuxCatalogData | None = None,
    ) -> None:
        self.root = Path(root)
        self.data = catalog_data or load_linux_catalog()
        self.devices = list(devices) if devices is not None else data_devices(self.root, data_dir)
        self._state_store = state_store
        self._originals: dict[str, str] = {}
        self._catalog: Catalog | None = None

    # -- metadata ------------------------------------------------------------------------------------

    def version(self) -> str:
        """Kernel release from <root>/proc/sys/kernel/osrelease, e.g. "6.1.0-18-amd64"."""
        try:
            return (self.root / "proc/sys/kernel/osrelease").read_text().strip()
        except OSError as exc:
            raise TargetError(f"cannot read kernel version: {exc.strerror}") from exc

    def _expand(self) -> Iterable[tuple[str, str, ParamDef, str | None]]:
        """(name, path template, definition, device) for every catalog entry, block ones per device."""
        for template, pdef in self.data.params.items():
            if "{dev}" in template:
                for dev in self.devices:
                    yield template.replace("{dev}", dev), pdef.path.replace("{dev}", dev), pdef, dev
            else:
                yield template, pdef.path, pdef, None

    def catalog(self) -> Catalog:
        """Knobs whose files exist and are writable on this kernel; absent ones in ``unsupported``.

        Block parameters are expanded per device; enum choices of scheduler/THP files are the names
        the file lists; ``max_sectors_kb``'s maximum is the device's ``max_hw_sectors_kb``.
        """
        if self._catalog is not None:
            return self._catalog
        cat = Catalog(target=self.kind, version=self.version())
        for name, shown, pdef, dev in self._expand():
            path = self._path_of(shown)
            inactive = not path.exists() and pdef.scheduler is not None and pdef.scheduler in self._offered(dev)
            if not path.exists() and not inactive:
                note = f"; {pdef.unsupported_on}" if pdef.unsupported_on else ""
                if pdef.scheduler:
                    note += f"; the {pdef.scheduler} I/O scheduler is not offered for {dev}"
                cat.unsupported[name] = f"{name} does not exist on this kernel ({shown}){note}"
                continue
            mode = path.stat().st_mode if not inactive else 0o644
            if not mode & 0o222:
                cat.excluded[name] = f"{name} is read-only on this kernel ({shown}, mode {mode & 0o777:04o})"
                continue
            spec = KnobSpec(
                name=name,
                layer=Layer.os,
                vartype="enum" if pdef.type == "enum" else "integer",
                unit=pdef.unit,
                min_value=pdef.min,
                max_value=pdef.max,
                apply=ApplyMode.dynamic,
                default=pdef.default,
                description=pdef.affects,
                category=pdef.category,
                path=str(path),
                source=pdef.source,
            )
            try:
                if pdef.enum_from_file:
                    spec.enum_values = _bracketed(path.read_text())[0]
                if pdef.max_from:
                    spec.max_value = float((path.parent / pdef.max_from).read_text().split()[0])
            except (OSError, ValueError) as exc:
                cat.excluded[name] = f"{name}: cannot read its choices/limits ({shown}): {exc}"
                continue
            cat.knobs[name] = spec
        for dev in self.devices:
            depth = self._hw_queue_depth(dev)
            if depth is not None:
                cat.facts[f"block.{dev}.hw_queue_depth"] = float(depth)
        log.info(
            "linux.catalog",
            devices=self.devices,
            knobs=len(cat.knobs),
            unsupported=sorted(cat.unsupported),
            excluded=sorted(cat.excluded),
        )
        self._catalog = cat
        return cat

    def _offered(self, dev: str | None) -> list[str]:
        """I/O schedulers the device offers (its queue/scheduler file), [] when unknown."""
        if dev is None:
            return []
        try:
            return _bracketed((self.root / "sys/block" / dev / "queue/scheduler").read_text())[0]
        except OSError:
            return []

    def _hw_queue_depth(self, dev: str) -> int | None:
        """The device's hardware queue depth: the smallest ``nr_tags`` of its blk-mq hardware queues
        (/sys/block/<dev>/mq/<n>/nr_tags); without an I/O scheduler nr_requests cannot exceed it
        (kernel block/blk-mq.c blk_mq_update_nr_requests). None when the device is not blk-mq."""
        depths = []
        for tags in (self.root / "sys/block" / dev / "mq").glob("*/nr_tags"):
            try:
                depths.append(int(tags.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                continue
        return min(depths) if depths else None

    def _path_of(self, shown: str) -> Path:
        return self.root / shown.lstrip("/")

    def _spec(self, name: str) -> KnobSpec:
        spec = self.catalog().get(name)
        if spec is None:
            cat = self.catalog()
            why = cat.unsupported.get(name) or cat.excluded.get(name) or "not in catalogs/linux.toml"
            raise ApplyError(f"{name}: not a tunable parameter on this host: {why}")
        return spec

    def _pdef(self, name: str) -> ParamDef:
        if name in self.data.params:
            return self.data.params[name]
        dev_template = ".".join(["block", "{dev}", *name.split(".")[2:]])
        return self.data.params[dev_template]

    def pair_partner(self, name: str) -> str | None:
        """The other member of ``name``'s mutually exclusive pair (vm.dirty_ratio → vm.dirty_bytes)."""
        pair = self.data.pair_of(name)
        return None if pair is None else next(m for m in pair.members if m != name)

    # -- get -----------------------------------------------------------------------------------------

    def _read(self, name: str) -> str:
        """Canonical current value: integers as decimal, enum files as the bracketed choice."""
        spec = self._spec(name)
        pdef = self._pdef(name)
        path = Path(spec.path or "")
        if pdef.scheduler is not None and not path.exists() and pdef.default is not None:
            # the scheduler is not active: switching to it starts an instance with the kernel's defaults
            return pdef.default
        raw = path.read_text()
        if pdef.enum_from_file:
            current = _bracketed(raw)[1]
            return current if current is not None else " ".join(raw.split())
        text = " ".join(raw.split())
        try:
            return str(int(text))
        except ValueError:
            return text

    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        """Current values by name (all catalog knobs when ``names`` is None).

        Raises:
            ApplyError: a name is not a tunable parameter here (message gives the reason).
            OSError: a parameter file cannot be read.
        """
        return {n: self._read(n) for n in (names if names is not None else list(self.catalog().knobs))}

    def _with_partners(self, names: Iterable[str]) -> list[str]:
        out: list[str] = []
        for name in names:
            if name not in out:
                out.append(name)
            partner = self.pair_partner(name)
            if partner is not None and partner not in out and partner in self.catalog().knobs:
                out.append(partner)
        return out

    def snapshot(self, names: list[str] | None = None, label: str = "") -> Snapshot:
        """Current values of ``names`` (all catalog knobs when None); pair partners are always added."""
        wanted = list(self.catalog().knobs) if names is None else self._with_partners(names)
        return Snapshot(target=self.kind, values=self.current_values(wanted), label=label)

    # -- set -----------------------------------------------------------------------------------------

    def _kernel_value(self, spec: KnobSpec, value: str) -> str:
        text = str(value).strip()
        if spec.vartype == "enum":
            if spec.enum_values is not None and text not in spec.enum_values:
                choices = ", ".join(spec.enum_values)
                raise ApplyError(f"{spec.name}={text!r}: not offered by {spec.path}; choices: {choices}")
            return text
        flag = bool_of(text)
        if flag is not None:
            return "1" if flag else "0"
        try:
            return str(int(text))
        except ValueError:
            unit = spec.unit or "no unit"
            raise ApplyError(f"{spec.name}={text!r}: an integer is required ({unit})") from None

    def _write(self, name: str, value: str) -> None:
        path = self._spec(name).path or ""
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def _save_original(self, name: str) -> None:
        for member in self._with_partners([name]):
            if member in self._originals:
                continue
            original = self._read(member)
            self._originals[member] = original
            log.info("linux.original_saved", parameter=member, value=original)
            if self._state_store is not None:
                self._state_store(member, original)

    def _plan(self, values: dict[str, str]) -> list[tuple[str, str]]:
        """Order writes: block schedulers first; each exclusive pair ends with its non-zero member and never
        writes the zero member (the kernel zeroes it; a 0 write to a *_bytes member is EINVAL — vm.rst)."""
        # A device's scheduler goes first: switching it resets nr_requests and the iosched files, so a
        # value written before the switch would be lost (kernel block/elevator.c elevator_switch).
        plain = sorted(
            ((n, v) for n, v in values.items() if self.data.pair_of(n) is None),
            key=lambda nv: not nv[0].endswith(".scheduler"),
        )
        last: list[tuple[str, str]] = []
        for pair in self.data.exclusive_pairs:
            present = [(m, values[m]) for m in pair.members if m in values]
            nonzero = [(m, v) for m, v in present if v != "0"]
            if len(nonzero) > 1:
                (a, va), (b, vb) = nonzero
                raise ApplyError(f"{a}={va} and {b}={vb}: mutually exclusive, only one may be non-zero ({pair.source})")
            if nonzero:
                last += nonzero
            elif present and pair.members[0] in values:
                last.append((pair.members[0], "0"))  # both zero: the ratio member carries the state
            elif present:
                raise ApplyError(
                    f"{pair.members[1]}=0: cannot be written (the kernel rejects 0); set {pair.members[0]}"
                    f" instead, which clears {pair.members[1]} ({pair.source})"
                )
            for m, v in present:
                if (m, v) not in last:
                    log.info("linux.pair_member_skipped", parameter=m, value=v, reason="kernel zeroes it")
        return plain + last

    def _error(self, name: str, value: str, exc: OSError) -> str:
        return f"cannot set {name}={value} ({self._spec(name).path}): {_errno_hint(exc)} [{exc.strerror}]"

    def apply(self, changes: list[NormalizedChange], mode: ApplyMode = ApplyMode.dynamic) -> bool:
        """Write each change to its file (OS parameters are always dynamic; ``mode`` is not used).

        Originals are saved before the first write of each parameter (and its pair partner). On a write
        error the parameters already written in this batch are put back before raising.

        Returns:
            False: the host is never restarted.

        Raises:
            ApplyError: unknown/unsupported name, a value not allowed (enum choice not offered, not an
                integer, both pair members non-zero) — before anything is written — or a failed write,
                naming the parameter, value, path and errno reason (e.g. "permission denied: run as
                root"); the batch was rolled back.
        """
        values = {c.name: self._kernel_value(self._spec(c.name), c.value) for c in changes}
        plan = self._plan(values)
        try:
            before = self.snapshot([n for n, _ in plan], label="apply-batch")
        except OSError as exc:
            reason = _errno_hint(exc)
            raise ApplyError(f"cannot read {exc.filename} before writing: {reason}; nothing written") from exc
        written: list[str] = []
        for name, value in plan:
            try:
                self._save_original(name)
                self._write(name, value)
            except Exception as exc:  # any failure (write, state_store) undoes this batch first
                if isinstance(exc, OSError):
                    message = self._error(name, value, exc)
                else:
                    message = f"cannot set {name}={value}: saving the original failed: {exc}"
                log.error("apply.failed", parameter=name, value=value, error=message)
                rollback = {n: before.values[n] for n in self._with_partners(written)}
                try:
                    self._restore_values(rollback)
                except TargetError as rexc:
                    message += f"; rollback failed: {rexc}"
                else:
                    log.info("apply.rolled_back", parameters=sorted(rollback))
                    if written:
                        message += f"; rolled back {', '.join(sorted(rollback))}"
                raise ApplyError(message) from exc
            written.append(name)
            log.info("apply.written", parameter=name, value=value, previous=before.values.get(name))
        return False

    # -- verify --------------------------------------------------------------------------------------

    def verify(self, changes: list[NormalizedChange]) -> dict[str, str]:
        """Read back each changed parameter; integers compare numerically, enums by the bracketed name.

        Raises:
            VerifyError: a value differs (kernel rounding, e.g. read_ahead_kb is kept in pages, or another
                tool rewrote it); the message lists parameter, expected and actual.
        """
        actual: dict[str, str] = {}
        wrong: list[str] = []
        for change in changes:
            expected = self._kernel_value(self._spec(change.name), change.value)
            got = self._read(change.name)
            actual[change.name] = got
            if not values_equal(expected, got):
                wrong.append(f"{change.name}: expected {expected}, kernel reports {got}")
        if wrong:
            raise VerifyError("; ".join(wrong))
        return actual

    # -- restore -------------------------------------------------------------------------------------

    def _restore_values(self, values: dict[str, str]) -> None:
        """Write ``values`` back (pair rule applied), skipping ones already in effect; every parameter is
        attempted, failures are reported together as TargetError."""
        wanted = dict(values)
        for name, value in values.items():
            partner = self.pair_partner(name)
            if value == "0" and partner is not None and partner not in values:
                log.warning("restore.pair_zero_skipped", parameter=name, reason=f"set {partner} instead")
                del wanted[name]
        failures: list[str] = []
        for name, value in self._plan(wanted):
            if name not in self.catalog().knobs:
                failures.append(f"{name}={value}: not a tunable parameter on this host, not restored")
                continue
            try:
                if values_equal(value, self._read(name)):
                    continue
                self._write(name, value)
                log.info("restore.written", parameter=name, value=value)
            except OSError as exc:
                failures.append(self._error(name, value, exc))
        if failures:
            log.error("restore.failed", errors=failures)
            raise TargetError("; ".join(failures))

    def restore(self, snapshot: Snapshot) -> None:
        """Write the snapshot's values back (pairs as one knob: the non-zero member, last).

        Raises:
            TargetError: some values could not be written (each named with path and errno reason).
        """
        self._restore_values(dict(snapshot.values))

    def originals(self) -> dict[str, str]:
        """Values saved before the first write of each parameter in this target's lifetime."""
        return dict(self._originals)

    # -- state ---------------------------------------------------------------------------------------

    def available(self) -> bool:
        """True when <root>/proc/sys can be read."""
        return os.access(self.root / "proc/sys", os.R_OK)

    def runtime_state(self) -> RuntimeState:
        """Host counters/gauges for the data devices (see :func:`agenticdb.measure.hoststats.host_state`)."""
        return host_state(self.root, self.devices)
