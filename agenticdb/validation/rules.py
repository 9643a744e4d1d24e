"""Rule sets as data: the models of ``validators/*.toml`` and their cached loader.

A rule file holds ``[[protected]]``, ``[[dangerous]]``, ``[[durability]]``, ``[[conflict]]``,
``[[server_check]]`` (the server's own checks beyond min/max), ``[[no_effect]]`` (changes that cannot act
on this host or in this mode), ``[[harmful]]`` (values known to hurt database hosts), ``[[capacity]]``
(never lowered below the observed peak), ``[[auto_value]]`` (special values such as -1 = auto, and what the
server makes of them), ``[[cpu_limit]]`` and ``[[ram_limit]]`` entries, plus one
``[memory_budget]`` and one ``[disk_budget]`` table. Every entry has an
``id``, a ``reason``, a ``source`` and ``versions``: where the parameters it names exist, as version
specifiers with an optional flavour prefix (``">=10"`` for PostgreSQL, ``"mariadb>=10.5"``,
``"mysql>=8.0.30"``, ``">=4.0"`` for a Linux kernel). Versions are tables, not if-chains.

Conflict language (evaluated on the resulting configuration, numbers compared on dimension-wide
quantities — bytes, ms — so ``min_wal_size <= max_wal_size`` works across units):

- a condition is ``{param, op, value}`` or ``{param, op, other}`` (another parameter) with op one of
  ``== != < <= > >= in not_in``, or the value-shape condition ``{param, op = "power_of_two"}`` (no operand:
  a positive whole number 2^k, as MariaDB's innodb_log_write_ahead_size must be); the table shorthand
  ``when = {wal_level = "minimal"}`` means ``==``;
- ``when`` (all must hold) → ``require`` (all must hold), e.g. wal_level=minimal requires
  max_wal_senders=0 and archive_mode=off;
- ``exclusive = [a, b]``: at most one of them in one change set (vm.dirty_ratio / vm.dirty_bytes).
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agenticdb.resources import data_dir
from agenticdb.rule_files import RULE_FILES

Op = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not_in", "power_of_two"]


class RuleFileError(ValueError):
    """A rule file is missing or invalid; the message names the file and the entry."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@functools.lru_cache(maxsize=1024)
def split_flavor(spec: str) -> tuple[str | None, SpecifierSet]:
    """``"mariadb>=10.5"`` → ("mariadb", SpecifierSet(">=10.5")); ``">=10"`` → (None, …).

    Raises:
        ValueError: the specifier is not PEP 440 syntax.
    """
    m = re.fullmatch(r"\s*([a-z]*)\s*(.*)", spec)
    assert m is not None
    flavor, rest = m.group(1) or None, m.group(2).strip()
    try:
        return flavor, SpecifierSet(rest)
    except InvalidSpecifier:
        raise ValueError(f"version specifier {spec!r}: expected e.g. '>=10' or 'mariadb>=10.5'") from None


@functools.lru_cache(maxsize=256)
def parse_version(text: str) -> Version | None:
    """Leading dotted number of a server/kernel version string ("10.11.19-MariaDB" → 10.11.19)."""
    m = re.search(r"\d+(?:\.\d+)*", text)
    if not m:
        return None
    try:
        return Version(m.group(0))
    except InvalidVersion:
        return None


class Versioned(_Strict):
    id: str
    reason: str
    source: str
    versions: list[str] = Field(min_length=1)

    @field_validator("versions")
    @classmethod
    def _specs(cls, v: list[str]) -> list[str]:
        for s in v:
            split_flavor(s)
        return v

    def applies(self, flavor: str, version: str) -> bool:
        """True when one of ``versions`` matches this flavour ("postgresql", "mariadb", "mysql", "linux")
        and version string (an unparsable version matches every specifier of the flavour). Cached: the
        validator asks for every rule and change of every proposal."""
        return _applies(tuple(self.versions), flavor, version)


@functools.lru_cache(maxsize=4096)
def _applies(versions: tuple[str, ...], flavor: str, version: str) -> bool:
    parsed = parse_version(version)
    for spec in versions:
        fl, specset = split_flavor(spec)
        if fl not in (None, flavor):
            continue
        if parsed is None or specset.contains(parsed, prereleases=True):
            return True
    return False


class NameRule(Versioned):
    """A protected or dangerous parameter (``parameter`` may be an fnmatch pattern: ``block.*.nomerges``)."""

    parameter: str

    def matches(self, name: str) -> bool:
        if any(c in self.parameter for c in "*?["):
            return fnmatch.fnmatchcase(name, self.parameter)
        return name.lower() == self.parameter.lower()


_NameRuleT = TypeVar("_NameRuleT", bound=NameRule)
_BY_NAME: dict[int, tuple[list[Any], dict[str, list[Any]], list[Any]]] = {}


def rules_for(rules: list[_NameRuleT], name: str) -> list[_NameRuleT]:
    """The rules of ``rules`` whose ``parameter`` is ``name`` (case-insensitive) or a pattern matching it,
    in file order. Indexed once per rule list: the validator asks for every change of every proposal."""
    hit = _BY_NAME.get(id(rules))
    if hit is None or hit[0] is not rules:
        exact: dict[str, list[Any]] = {}
        patterns: list[Any] = []
        for r in rules:
            if any(c in r.parameter for c in "*?["):
                patterns.append(r)
            else:
                exact.setdefault(r.parameter.lower(), []).append(r)
        hit = (rules, exact, patterns)
        if len(_BY_NAME) > 64:
            _BY_NAME.clear()
        _BY_NAME[id(rules)] = hit
    found = list(hit[1].get(name.lower(), []))
    found += [r for r in hit[2] if fnmatch.fnmatchcase(name, r.parameter)]
    if hit[2] and len(found) > 1:
        found.sort(key=rules.index)
    return found


class DurabilityRule(NameRule):
    """Values of ``parameter`` that risk committed data: listed in ``unsafe``, or anything not in
    ``safe``. ``allowed_when_relaxed`` lets ``durability = "relaxed"`` accept it as a journaled risk."""

    unsafe: list[str] | None = None
    safe: list[str] | None = None
    allowed_when_relaxed: bool = False

    @model_validator(mode="after")
    def _one(self) -> DurabilityRule:
        if (self.unsafe is None) == (self.safe is None):
            raise ValueError(f"durability rule {self.id}: give exactly one of 'unsafe' or 'safe'")
        return self

    def risky(self, canonical: str) -> bool:
        v = canonical.strip().lower()
        if self.unsafe is not None:
            return v in {str(u).lower() for u in self.unsafe}
        return v not in {str(s).lower() for s in self.safe or []}


class Condition(_Strict):
    """``param [+ plus…] op [factor ×] (value | other) [+ offset]``.

    ``param``/``other`` name a parameter of the resulting configuration, a read-only server fact
    (``Catalog.facts``: ``wal_segment_size``) or a host fact ``host.<Hardware field>`` (``host.swap_bytes``,
    ``host.numa_nodes``, ``host.stack_limit_bytes``); ``{dev}`` in a block-device name stands for the
    device of the changed parameter (``block.{dev}.scheduler``).
    """

    param: str
    op: Op = "=="
    value: str | int | float | bool | list[str | int | float] | None = None
    other: str | None = None
    plus: list[str] = Field(default_factory=list)
    factor: float = 1.0
    offset: float = 0.0

    @model_validator(mode="after")
    def _operand(self) -> Condition:
        if self.op == "power_of_two":
            if self.value is not None or self.other is not None:
                raise ValueError(f"condition on {self.param}: op power_of_two takes no 'value' or 'other'")
            return self
        if (self.value is None) == (self.other is None):
            raise ValueError(f"condition on {self.param}: give exactly one of 'value' or 'other'")
        if self.op in ("in", "not_in") and not isinstance(self.value, list):
            raise ValueError(f"condition on {self.param}: op {self.op} needs a list 'value'")
        return self

    def params(self) -> list[str]:
        return [self.param, *self.plus] + ([self.other] if self.other else [])

    def describe(self) -> str:
        lhs = " + ".join([self.param, *self.plus])
        if self.op == "power_of_two":
            return f"{lhs} = a power of two"
        rhs = self.other if self.other else repr(self.value)
        if self.factor != 1.0:
            rhs = f"{self.factor:g} × {rhs}"
        if self.offset:
            rhs = f"{rhs} {'+' if self.offset > 0 else '-'} {abs(self.offset):g}"
        return f"{lhs} {self.op.replace('_', ' ')} {rhs}"

    def for_device(self, dev: str) -> Condition:
        """This condition with ``{dev}`` replaced by ``dev``."""
        return self.model_copy(
            update={
                "param": self.param.replace("{dev}", dev),
                "other": self.other.replace("{dev}", dev) if self.other else None,
                "plus": [p.replace("{dev}", dev) for p in self.plus],
            }
        )


def _conditions(v: Any) -> Any:
    """Allow the table shorthand ``{name = value}`` (== ; a list value means ``in``)."""
    if isinstance(v, dict):
        return [{"param": k, "op": "in" if isinstance(x, list) else "==", "value": x} for k, x in v.items()]
    return v


class ConflictRule(Versioned):
    when: list[Condition] = Field(default_factory=list)
    require: list[Condition] = Field(default_factory=list)
    exclusive: list[str] = Field(default_factory=list)

    @field_validator("when", "require", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return _conditions(v)

    @model_validator(mode="after")
    def _shape(self) -> ConflictRule:
        if not self.require and len(self.exclusive) < 2:
            raise ValueError(f"conflict {self.id}: needs 'require' conditions or 'exclusive' (2+ names)")
        return self

    def params(self) -> list[str]:
        out = list(self.exclusive)
        for c in (*self.when, *self.require):
            out.extend(c.params())
        return out


Enforced = Literal["start", "assignment", "clamp", "write"]

ENFORCED_TEXT: dict[str, str] = {
    "start": "the server refuses to start with it (a reload accepts it and the failure waits for the next restart)",
    "assignment": "the server refuses the assignment (SET / reload / the next start)",
    "clamp": "the server silently uses another value, so what would be measured is not what was proposed",
    "write": "the kernel refuses the write (EINVAL)",
}
"""What happens when a server check fails, by ``ServerCheck.enforced``."""


class ServerCheck(Versioned):
    """A check the server or kernel makes itself, beyond the published min/max (a GUC check hook, a
    start-up check, a sysfs store function): ``when`` (all hold) → ``require`` (all must hold) on the
    resulting configuration. ``enforced`` says what the server does when it fails."""

    when: list[Condition] = Field(default_factory=list)
    require: list[Condition] = Field(min_length=1)
    enforced: Enforced

    @field_validator("when", "require", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return _conditions(v)

    def params(self) -> list[str]:
        return [p for c in (*self.when, *self.require) for p in c.params()]


class NoEffectRule(NameRule):
    """A change of ``parameter`` acts only while every ``require`` condition holds (another setting's
    mode, hardware the host has); otherwise it has no effect here and is never measured."""

    require: list[Condition] = Field(min_length=1)

    @field_validator("require", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return _conditions(v)


class HarmfulRule(NameRule):
    """A value of ``parameter`` that the field knows to hurt database hosts: harmful while every
    ``when`` condition holds on the resulting configuration and host. Refused unless ``policy.allow_harmful``
    names the rule's id; then accepted as a journaled risk."""

    when: list[Condition] = Field(min_length=1)

    @field_validator("when", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        return _conditions(v)


class CapacityRule(NameRule):
    """A capacity setting that stays tunable but is never lowered below the observed peak plus
    ``policy.capacity_headroom``: the peak is the largest of the ``observed`` gauges (``Observed.gauges``)
    or host facts (``host.file_handles_allocated``); ``reserve`` names settings whose values come on top
    (slots the application cannot use). Without any observation the setting is not lowered at all."""

    observed: list[str] = Field(min_length=1)
    reserve: list[str] = Field(default_factory=list)
    slots: list[str] = Field(default_factory=list)
    """When set, ``parameter`` is a per-slot figure: the capacity compared with the peak is its value ×
    (Σ ``slots`` + ``slots_plus``) (PostgreSQL's lock table: max_locks_per_transaction × the process slots)."""
    slots_plus: float = 0.0
    observed_in: str | None = None
    """When set, the ``observed`` gauges count blocks of this size: a parameter or read-only server fact in bytes
    (the MyISAM key cache's Key_blocks_used in key_cache_block_size, the Aria page cache's in aria_block_size);
    the peak compared with ``parameter`` is that many bytes. A block size not known counts as no observation."""


class AutoValue(NameRule):
    """A special value of ``parameter`` that stands for another one ("-1 = auto", "-1 = use X").

    ``meaning`` says what it stands for, in the manual's words. With ``of`` the server computes the value
    itself and reports the computed one (pg_settings shows wal_buffers=-1 as 4MB): ``factor`` × ``of`` (a
    parameter of the resulting configuration or a read-only server fact, in bytes/ms), then at least
    ``at_least`` and at most ``at_most`` (literals in ``parameter``'s spelling, or parameter/fact names),
    rounded down to ``parameter``'s base unit; the change is verified against that value. Without
    ``of`` the server keeps reporting the special value and falls back to ``uses`` where it acts.
    """

    value: str | int | float
    meaning: str
    of: str | None = None
    factor: float = 1.0
    at_least: str | int | float | None = None
    at_most: str | int | float | None = None
    uses: str | None = None


class CpuLimit(Versioned):
    """``parameter`` may be at most ``per_core`` × cores (+ ``plus``)."""

    parameter: str
    per_core: float
    plus: float = 0.0

    def cap(self, cpu_count: int) -> float:
        """The ceiling on a host with ``cpu_count`` cores: ``per_core`` × cores + ``plus``."""
        return self.per_core * cpu_count + self.plus


class RamLimit(Versioned):
    """``parameter`` × ``unit_bytes`` may be at most ``fraction`` × the host's memory limit
    (min(RAM, cgroup limit)); for reserves the kernel takes from everybody (vm.min_free_kbytes)."""

    parameter: str
    fraction: float = Field(gt=0, le=1)
    unit_bytes: int = 1

    def cap(self, memory_limit_bytes: int) -> float:
        """The ceiling in the parameter's own unit: ``fraction`` × the memory limit / ``unit_bytes``."""
        return self.fraction * memory_limit_bytes / self.unit_bytes


class SlotTerm(_Strict):
    """``count`` (a knob) × ``bytes`` of shared memory per process slot."""

    count: str
    bytes: float = Field(gt=0)


class SharedSlots(_Strict):
    """Shared memory sized per process slot at start (PostgreSQL's lock tables and PGPROC array): bytes =
    (Σ ``slots`` + ``plus``) × (``each_bytes`` + Σ ``per_slot`` count × bytes). Figures in bytes."""

    slots: list[str]
    plus: float = 0.0
    each_bytes: float = 0.0
    per_slot: list[SlotTerm] = Field(default_factory=list)
    source: str

    def params(self) -> list[str]:
        return [*self.slots, *(t.count for t in self.per_slot)]


class SharedTable(_Strict):
    """Shared memory an extension or subsystem sizes at start from one knob: ``count`` entries × ``bytes``
    each (pg_stat_statements.max entries of the statement hash table). Figures in bytes."""

    count: str
    bytes: float = Field(gt=0)
    source: str


class SessionTerm(_Strict):
    """Memory one session (``sessions``: a knob counting them, the budget's ``connections`` when absent) may
    allocate on demand: ``each`` bytes, or the smaller of ``each`` and ``capped_by`` when both bound it
    (MariaDB's in-memory temporary table: min(tmp_table_size, max_heap_table_size)). Unlike the
    per-connection terms it is not multiplied by hash_mem_multiplier or the policy factor."""

    each: str
    capped_by: str | None = None
    sessions: str | None = None
    source: str

    def params(self) -> list[str]:
        return [p for p in (self.each, self.capped_by, self.sessions) if p]


class MemoryBudget(_Strict):
    """Terms of the memory estimate (names of size knobs; absent knobs are skipped).

    ``total = Σ global + connections × Σ per_connection × policy factor + Σ workers.count × workers.each``.
    """

    reason: str
    source: str
    global_: list[str] = Field(default_factory=list, alias="global")
    per_connection: list[str] = Field(default_factory=list)
    connections: str | None = None
    workers: list[dict[str, str]] = Field(default_factory=list)
    # The measured estimate (agenticdb.validation.memory): gauges of RuntimeState.gauges by name.
    observed_connections: list[str] = Field(default_factory=list)
    """Gauges whose peak counts the backends/threads that may hold per-connection memory at once."""
    shared_memory_gauge: str | None = None
    """Gauge of the shared memory the server allocated (bytes), replacing the sum of the global terms."""
    per_connection_multiplier: str | None = None
    """A knob multiplying the per-connection terms (PostgreSQL hash_mem_multiplier)."""
    shared_slots: SharedSlots | None = None
    """Shared memory the server sizes per process slot; its change moves the estimate."""
    shared_tables: list[SharedTable] = Field(default_factory=list)
    """Shared memory sized per entry of a knob (beside ``shared_slots``); its change moves the estimate."""
    per_session: list[SessionTerm] = Field(default_factory=list)
    """Buffers a session allocates on demand (temporary tables, logical decoding, bulk insert)."""
    measured_source: str = ""

    def params(self) -> list[str]:
        """Every knob the estimate reads: a change of any of them is judged (the multiplier included: raising
        hash_mem_multiplier alone raises the per-connection terms as much as raising work_mem)."""
        out = list(self.global_) + list(self.per_connection) + ([self.connections] if self.connections else [])
        if self.per_connection_multiplier:
            out.append(self.per_connection_multiplier)
        for w in self.workers:
            out.extend(w.values())
        return out

    def term_sources(self, name: str) -> list[str]:
        """Sources of the ``shared_tables``/``per_session`` terms that read ``name`` (empty for the others)."""
        out = [t.source for t in self.shared_tables if t.count == name]
        return out + [t.source for t in self.per_session if name in t.params()]

    def judged(self) -> list[str]:
        """The knobs whose change the memory check judges: :meth:`params` (the sized buffers, their counts
        and multiplier), the per-slot counts of ``shared_slots``, the entry counts of ``shared_tables`` and
        the knobs of ``per_session``."""
        out = self.params()
        more = [*(self.shared_slots.params() if self.shared_slots is not None else [])]
        more += [t.count for t in self.shared_tables]
        more += [p for t in self.per_session for p in t.params()]
        out.extend(p for p in dict.fromkeys(more) if p not in out)
        return out


class DiskBudget(_Strict):
    """Size knobs that reserve disk on the data device (WAL, redo); their sum must fit the free space."""

    reason: str
    source: str
    parameters: list[str]


class EnumHint(_Strict):
    parameter: str
    value: str
    hint: str
    source: str


class RuleSet(_Strict):
    """One validators/*.toml file."""

    family: Literal["postgresql", "mysql", "linux"]
    protected: list[NameRule] = Field(default_factory=list)
    dangerous: list[NameRule] = Field(default_factory=list)
    durability: list[DurabilityRule] = Field(default_factory=list)
    conflict: list[ConflictRule] = Field(default_factory=list)
    cpu_limit: list[CpuLimit] = Field(default_factory=list)
    ram_limit: list[RamLimit] = Field(default_factory=list)
    server_check: list[ServerCheck] = Field(default_factory=list)
    no_effect: list[NoEffectRule] = Field(default_factory=list)
    harmful: list[HarmfulRule] = Field(default_factory=list)
    capacity: list[CapacityRule] = Field(default_factory=list)
    memory_budget: MemoryBudget | None = None
    disk_budget: DiskBudget | None = None
    enum_hint: list[EnumHint] = Field(default_factory=list)
    auto_value: list[AutoValue] = Field(default_factory=list)

    def all_rules(self) -> list[Versioned]:
        """Every rule with an id (budgets and hints have none)."""
        return [
            *self.protected,
            *self.dangerous,
            *self.durability,
            *self.conflict,
            *self.cpu_limit,
            *self.ram_limit,
            *self.server_check,
            *self.no_effect,
            *self.harmful,
            *self.capacity,
            *self.auto_value,
        ]

    @model_validator(mode="after")
    def _unique_ids(self) -> RuleSet:
        seen: set[str] = set()
        for r in self.all_rules():
            if r.id in seen:
                raise ValueError(f"duplicate rule id {r.id!r}")
            seen.add(r.id)
        return self


def load_ruleset_file(path: Path) -> RuleSet:
    """Load and validate one rule file.

    Raises:
        RuleFileError: unreadable, bad TOML, or an entry violates the schema (message names file + entry).
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleFileError(f"rule file {path}: {exc}") from None
    try:
        return RuleSet.model_validate(data)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise RuleFileError(f"rule file {path}: {errs}") from None


@functools.cache
def load_ruleset(family: str) -> RuleSet:
    """The shipped rule set of ``family`` ("postgresql", "mysql", "linux"), loaded once per process."""
    return load_ruleset_file(data_dir("validators") / RULE_FILES[family])
