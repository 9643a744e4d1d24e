"""Fuzzing the validator boundary (issue 21, item 6).

For each target kind (PostgreSQL 15, MariaDB 10.11, the Linux host) hypothesis generates 1,000
proposals — catalog names and invented ones, case games, unicode, huge and negative numbers, NaN and
infinities, random units, enum values and in-range numbers — and feeds them through the same path as a
planner's output (``Proposal.model_validate`` then ``validate``). Every example must end in a verdict
(or a pydantic refusal of the proposal itself) without an exception, and every refusal must name the
check, the parameter and the rule.

At least 50 accepted configurations per DBMS are then checked by the server itself without touching the
running instance: PostgreSQL ``postgres -C`` on a scratch copy of the configuration files (the accepted
values in a scratch ``postgresql.auto.conf``), MariaDB ``mariadbd --help --verbose`` on a scratch option
file. Configurations with disjoint names are checked together (one server run per batch); a refused
batch is re-run one configuration at a time. A control configuration with a bad value proves each check
can fail.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.models import Catalog, Hardware, KnobSpec, Layer, NormalizedChange, Proposal, Verdict
from agenticdb.sandbox.mariadb import MARIADBD, MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.linux import LinuxTarget
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.validator import validate

EXAMPLES = 1000
MIN_ACCEPTED = 50
BATCH = 12
CHECKS = {
    "stage", "unknown", "type", "unit", "enum", "range", "protected", "dangerous", "durability", "hardware",
    "conflict", "server_check", "no_effect", "harmful", "capacity", "step", "apply", "excluded", "unsupported",
}  # fmt: skip
UNITS = ["", "B", "kB", "KB", "8kB", "MB", "MiB", "GB", " GB", "TB", "k", "M", "G", "ms", "s", "min", "h", "d",
         "us", "%", "bogus", "ñ"]  # fmt: skip
POLICY = PolicyConfig(max_step_factor=1e9)


@dataclass
class World:
    kind: str
    stage: Layer
    catalog: Catalog
    current: dict[str, str]
    hardware: Hardware


@pytest.fixture(scope="module")
def pg_world(pg_sandbox: PostgresSandboxInfo) -> Iterator[World]:
    t = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        yield World("postgresql", Layer.dbms, t.catalog(), t.current_values(), detect_hardware(pg_sandbox.data_dir))
    finally:
        t.close()


@pytest.fixture(scope="module")
def maria_world(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[World]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        yield World("mariadb", Layer.dbms, t.catalog(), t.current_values(), detect_hardware(mariadb_sandbox.data_dir))
    finally:
        t.close()


def _plausible(spec: KnobSpec) -> st.SearchStrategy[Any]:
    """Values a careful planner might send: enum members, in-range numbers (bare, in the base unit)."""
    if spec.enum_values:
        return st.sampled_from(spec.enum_values)
    if spec.vartype == "bool":
        return st.sampled_from(["on", "off", "true", "false", "1", "0", True, False])
    if spec.vartype in ("integer", "real") and spec.min_value is not None and spec.max_value is not None:
        lo, hi = spec.min_value, min(spec.max_value, max(spec.min_value, 1.0) * 1e6)
        if spec.vartype == "integer":
            return st.integers(int(math.ceil(lo)), int(math.floor(hi))) if hi >= lo else st.just(int(lo))
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    return st.text(max_size=12)


WILD = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(),
    st.booleans(),
    st.text(max_size=24),
    st.builds(lambda n, u: f"{n}{u}", st.integers(-(10**20), 10**20), st.sampled_from(UNITS)),
    st.builds(lambda x, u: f"{x}{u}", st.floats(allow_nan=True), st.sampled_from(UNITS)),
)
"""Anything: huge/negative integers, NaN and infinities, random units, unicode, booleans."""


def proposals(world: World) -> st.SearchStrategy[dict[str, Any]]:
    """Raw planner output for ``world``: half careful (catalog names, plausible values), half wild
    (invented, upper-cased or excluded names; any value)."""
    known = sorted(world.catalog.knobs)
    other = sorted(world.catalog.excluded) or known
    cross = ["vm.swappiness", "shared_buffers", "innodb_buffer_pool_size", "block.sda.nr_requests"]
    plausible = {n: _plausible(spec) for n, spec in world.catalog.knobs.items()}

    def careful(name: str) -> st.SearchStrategy[dict[str, Any]]:
        return plausible[name].map(lambda v: {"name": name, "value": v})

    def wild(name: str) -> st.SearchStrategy[dict[str, Any]]:
        values = st.one_of(plausible[name], WILD) if name in plausible else WILD
        return values.map(lambda v: {"name": name, "value": v})

    careful_change = st.sampled_from(known).flatmap(careful)
    names = st.one_of(
        st.sampled_from(known),
        st.sampled_from(known).map(str.upper),
        st.sampled_from(other),
        st.text(max_size=30),
        st.sampled_from(cross),
    )
    wild_change = names.flatmap(wild)
    changes = st.one_of(st.lists(careful_change, min_size=1, max_size=3), st.lists(wild_change, min_size=1, max_size=6))
    return st.fixed_dictionaries(
        {"bottleneck": st.just("unknown"), "layer": st.just(world.stage.value), "changes": changes}
    )


def _assert_clear(verdict: Verdict) -> None:
    assert verdict.ok or verdict.failed, "refused without a failed check"
    for f in verdict.failed:
        assert f.check in CHECKS, f
        assert f.message.strip(), f
        if f.check in ("unknown", "type", "unit", "enum", "range") and f.parameter.strip():
            assert f.parameter.lower() in f.message.lower(), f


def fuzz(world: World) -> tuple[int, list[list[NormalizedChange]]]:
    """Run EXAMPLES proposals through the validator; returns (examples run, accepted change sets)."""
    seen = [0]
    accepted: list[list[NormalizedChange]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(raw=proposals(world))
    def run(raw: dict[str, Any]) -> None:
        seen[0] += 1
        try:
            proposal = Proposal.model_validate(raw)
        except ValidationError as exc:  # the planner-output boundary refuses it: must say where
            assert all(e["loc"] for e in exc.errors()), exc
            return
        verdict = validate(proposal, world.catalog, world.current, world.hardware, POLICY, world.stage)
        _assert_clear(verdict)
        if verdict.ok and verdict.changes:
            accepted.append(list(verdict.changes))

    run()
    return seen[0], accepted


def batches(sets: list[list[NormalizedChange]]) -> list[list[list[NormalizedChange]]]:
    """Group change sets whose names do not overlap, at most BATCH per group."""
    groups: list[tuple[set[str], list[list[NormalizedChange]]]] = []
    for cs in sets:
        names = {c.name.lower() for c in cs}
        for used, members in groups:
            if not used & names and len(members) < BATCH:
                used |= names
                members.append(cs)
                break
        else:
            groups.append((set(names), [cs]))
    return [members for _, members in groups]


def server_refusals(sets: list[list[NormalizedChange]], check: Callable[[list[NormalizedChange]], str]) -> list[str]:
    """``check`` returns '' when the server accepts the changes, else its complaint."""
    out: list[str] = []
    for group in batches(sets):
        if check([c for cs in group for c in cs]):
            out += [f"{cs}: {why}" for cs in group if (why := check(cs))]
    return out


def _as_user(argv: list[str], user: str | None) -> list[str]:
    return ["runuser", "-u", user, "--", *argv] if user and os.geteuid() == 0 else argv


def pg_checker(info: PostgresSandboxInfo, scratch: Path) -> Callable[[list[NormalizedChange]], str]:
    """``postgres -C`` on a scratch copy: postgresql.conf with data_directory pointing at a scratch folder
    that holds only postgresql.auto.conf (the server reads nothing else before ``-C`` prints and exits)."""
    data = Path(info.data_dir)
    (scratch / "data").mkdir(parents=True)
    for name in ("postgresql.conf", "pg_hba.conf", "pg_ident.conf"):
        shutil.copy(data / name, scratch / name)
    with open(scratch / "postgresql.conf", "a") as f:
        f.write(f"\ndata_directory = '{scratch / 'data'}'\n")
    base = (data / "postgresql.auto.conf").read_text() if (data / "postgresql.auto.conf").exists() else ""
    if info.os_user:
        shutil.chown(scratch, info.os_user)
        for p in scratch.rglob("*"):
            shutil.chown(p, info.os_user)

    def check(changes: list[NormalizedChange]) -> str:
        lines = "".join(f"{c.name} = '{c.value.replace(chr(39), chr(39) * 2)}'\n" for c in changes)
        (scratch / "data" / "postgresql.auto.conf").write_text(base + lines)
        argv = _as_user([f"{info.bindir}/postgres", "-D", str(scratch), "-C", changes[0].name], info.os_user)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        said = [
            ln.split("]  ", 1)[-1] for ln in (proc.stderr or proc.stdout).splitlines() if "contains errors" not in ln
        ]
        return "" if proc.returncode == 0 else " | ".join(said)[:600]

    return check


def maria_checker(info: MariaDBSandboxInfo, scratch: Path) -> Callable[[list[NormalizedChange]], str]:
    """``mariadbd --defaults-file=<scratch> --help --verbose``: the sandbox's defaults (without log-error,
    so errors reach stderr) including a scratch copy of the managed option file plus the changes."""
    scratch.mkdir(parents=True, exist_ok=True)
    option = scratch / "agenticdb.cnf"
    managed = Path(info.option_file).read_text() if Path(info.option_file).exists() else "[mysqld]\n"
    defaults = Path(info.defaults_file).read_text().replace(info.option_file, str(option))
    defaults = "".join(line for line in defaults.splitlines(keepends=True) if not line.startswith("log-error"))
    (scratch / "my.cnf").write_text(defaults)
    user = ["--user=mysql"] if os.geteuid() == 0 else []

    def check(changes: list[NormalizedChange]) -> str:
        lines = "".join(f"{c.name} = {c.value}\n" for c in changes if not c.runtime_only)
        option.write_text(managed.rstrip("\n") + "\n" + lines)
        argv = [MARIADBD, f"--defaults-file={scratch / 'my.cnf'}", *user, "--help", "--verbose"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        errors = [ln for ln in proc.stderr.splitlines() if "[ERROR]" in ln]
        return "" if proc.returncode == 0 and not errors else ("; ".join(errors) or proc.stderr)[-400:]

    return check


@pytest.fixture()
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="agenticdb-fuzz-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _control(spec_name: str, value: str) -> list[NormalizedChange]:
    from agenticdb.models import ApplyMode

    return [NormalizedChange(name=spec_name, value=value, apply=ApplyMode.restart)]


def test_fuzz_postgres(pg_world: World, pg_sandbox: PostgresSandboxInfo, scratch: Path) -> None:
    seen, accepted = fuzz(pg_world)
    assert seen >= EXAMPLES and len(accepted) >= MIN_ACCEPTED, (seen, len(accepted))
    check = pg_checker(pg_sandbox, scratch / "pg")
    assert "shared_buffers" in check(_control("shared_buffers", "99999999999GB"))  # the check can fail
    assert server_refusals(accepted[: MIN_ACCEPTED * 2], check) == []


def test_fuzz_mariadb(maria_world: World, mariadb_sandbox: MariaDBSandboxInfo, scratch: Path) -> None:
    seen, accepted = fuzz(maria_world)
    assert seen >= EXAMPLES and len(accepted) >= MIN_ACCEPTED, (seen, len(accepted))
    check = maria_checker(mariadb_sandbox, scratch / "my")
    assert check(_control("innodb_flush_method", "bogus"))  # the check can fail
    assert server_refusals(accepted[: MIN_ACCEPTED * 2], check) == []


def test_fuzz_linux() -> None:
    t = LinuxTarget(root=Path("/"), data_dir="/var/tmp")
    world = World("linux", Layer.os, t.catalog(), t.current_values(), detect_hardware("/var/tmp"))
    seen, accepted = fuzz(world)
    assert seen >= EXAMPLES, seen
    assert accepted, "no OS proposal was ever accepted: the fuzzer does not reach the checks"
