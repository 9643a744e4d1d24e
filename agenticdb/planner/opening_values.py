"""What every opening source reads and writes: the configuration in effect, the host's facts, values in the
server's spelling, and the memory the budget leaves for per-connection buffers (issue 36)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from agenticdb.config.sections import PolicyConfig
from agenticdb.dialect import family_of
from agenticdb.host.storage_probe import storage_choice
from agenticdb.models import KnobSpec, Proposal, StateDelta
from agenticdb.models.planning import PlanningContext
from agenticdb.planner import access
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.playbook import round_base
from agenticdb.store.memory.backends import storage_class
from agenticdb.targets.postgres_plans import PlanEvidence
from agenticdb.units import bytes_of, canonical, format_value, parse_value, unit_bytes

MiB = 1024**2
GiB = 1024**3


@dataclass(frozen=True)
class HostView:
    """The facts a source sizes from.

    Attributes:
        family: "postgresql" or "mysql" (units dialect, ``agenticdb.units.family_of``).
        flavor: "postgresql", "mariadb" or "mysql".
        memory_bytes: the memory the server may use: min(RAM, its cgroup limit) (``Hardware.memory_limit_bytes``).
        cgroup: True when that is a cgroup limit below RAM.
        cpus: logical CPUs.
        storage: "nvme" | "ssd" | "hdd" | "unknown": measured by timed random 8 kB O_DIRECT reads of the data
            directory's largest relation data file when that gave a class (``Hardware.storage_measured``,
            ``agenticdb.host.storage_probe``), else from /sys/block/<dev>/queue/rotational of the data device.
        storage_source: which, in one line for the knobs' sources ("storage ssd measured: median 0.07 ms
            random 8 kB O_DIRECT read of …" or "storage hdd (/sys/block/vda/queue/rotational); no class
            measured: …"; ``storage_probe.storage_choice``).
        device: the data device's name, None when unknown.
        workload_class: the declared class, or "olap" when the baseline measurably scans whole tables
            (``planner.access.workload_class``).
        data_bytes: the databases' size read by the statistics (PostgreSQL ``pg_database.size_bytes``,
            MariaDB ``information_schema`` sizes), None when not read.
        max_connections: the DBA's connection limit (never lowered by the opening).
        major: the server's major version (15, 10 …).
        data_why: why ``data_bytes`` is None ("" when measured, or not yet asked: :func:`with_data_size`).
    """

    family: str
    flavor: str
    memory_bytes: int
    cgroup: bool
    cpus: int
    storage: str
    storage_source: str
    device: str | None
    workload_class: str
    data_bytes: float | None
    max_connections: int
    major: int
    data_why: str = ""


@dataclass(frozen=True)
class SourceInput:
    """What a source reads: the context, the host's facts, the policy, plan evidence (PostgreSQL, read once
    outside measured runs; None when not read) and the LLM planner (None: none configured)."""

    ctx: PlanningContext
    host: HostView
    policy: PolicyConfig
    plans: PlanEvidence | None = None
    llm: object | None = None
    pinned: dict[str, str] = field(default_factory=dict)
    """Values decided elsewhere that the source must keep and size the rest from (``advise`` pins the
    knobs it recommends otherwise, and the ones it leaves as they are: :mod:`agenticdb.advice.sizing`)."""
    traded: bool = True
    """Whether the set goes through the opening's set repair (``opening_repair.repair_set``), which makes the
    trade of ``catalogs/trades.toml``: only then may a MariaDB pool take the room of caches measured unused
    (``trade.unused_cache_bytes``). ``advise``'s reference is not repaired and recommends no such give: its
    pool counted that room all the same and was over the memory budget beside the caches it left as they are
    (a 512 MiB host: 297 MiB of pool beside 256 MiB of key/Aria caches, refused as one set)."""


@dataclass
class SourceOutput:
    """A source's answer: its candidate (None: it has nothing to propose), why not, notes on evidence it
    needed and did not have ("JIT share not measured: …"), and its own diagnosis of the baseline when it
    makes one (the LLM's reply; rule-based sources leave it None)."""

    candidate: Candidate | None
    why: str = ""
    notes: list[str] = field(default_factory=list)
    diagnosis: Proposal | None = None


def current_config(ctx: PlanningContext) -> dict[str, str]:
    """The configuration in effect: the profile's values overlaid with the session's."""
    return {**ctx.profile.current_config, **ctx.current_config}


def delta_of(ctx: PlanningContext) -> StateDelta | None:
    """The newest runtime-statistics delta (the session's, else the baseline's)."""
    return ctx.last_delta or ctx.profile.baseline_state


def host_view(ctx: PlanningContext, flavor: str) -> HostView:
    """The :class:`HostView` of ``ctx`` (``flavor`` from ``agenticdb.validation.validator.flavor_of``)."""
    hw = ctx.profile.hardware
    cur = current_config(ctx)
    delta = delta_of(ctx)
    try:
        maxc = int(float(cur.get("max_connections", "100")))
    except ValueError:
        maxc = 100
    try:
        major = int(ctx.catalog.version.split(".")[0])
    except ValueError:
        major = 0
    storage, storage_source = storage_choice(
        hw.storage_measured, hw.storage_probe, storage_class(hw.data_device), hw.data_device
    )
    return HostView(
        family=family_of(ctx.catalog.target),
        flavor=flavor,
        memory_bytes=hw.memory_limit_bytes or hw.memory_bytes,
        cgroup=bool(hw.cgroup_memory_limit_bytes and hw.cgroup_memory_limit_bytes < hw.memory_bytes),
        cpus=max(1, hw.cpu_count),
        storage=storage,
        storage_source=storage_source,
        device=hw.data_device,
        workload_class=access.workload_class(ctx.fingerprint.workload_class, delta),
        data_bytes=access.data_bytes(delta),
        max_connections=maxc,
        major=major,
    )


_SEEN, _TABLES, _KNOWN = "data.innodb_bytes_seen", "data.innodb_tables_seen", "data.innodb_tables"


def with_data_size(host: HostView, read: Callable[[list[str]], dict[str, float]] | None) -> HostView:
    """``host`` with MariaDB/MySQL's data size, read now (``read``: ``Target.rule_gauges``, the gauges of
    ``agenticdb.targets.mysql_stats.read_data_size``): the InnoDB data + index bytes of information_schema.TABLES
    when the account sees every InnoDB table the data dictionary holds; otherwise ``data_bytes`` None and
    ``data_why`` says why ("the account sees 1 of 3 InnoDB tables …"). PostgreSQL's size comes with every
    runtime sample (``pg_database.size_bytes``): ``host`` is returned as it is then, and when already known."""
    if host.family != "mysql" or host.data_bytes is not None:
        return host
    got = read([_SEEN, _TABLES, _KNOWN]) if read is not None else {}
    if _SEEN not in got:
        why = "information_schema.TABLES not read" + ("" if read is not None else " (no reader of the server)")
        return replace(host, data_why=why)
    seen, known = got.get(_TABLES, 0.0), got.get(_KNOWN)
    if known is None:
        why = (
            f"information_schema.TABLES lists only the tables this account holds a privilege on ({seen:.0f} "
            "InnoDB tables) and the data dictionary (INNODB_SYS_TABLES, PROCESS privilege) was not readable to "
            "tell whether that is all of them"
        )
        return replace(host, data_why=why)
    if seen < known:
        why = (
            f"this account sees {seen:.0f} of the {known:.0f} InnoDB tables the data dictionary holds "
            "(information_schema.TABLES lists only tables it holds a privilege on)"
        )
        return replace(host, data_why=why)
    return replace(host, data_bytes=got[_SEEN], data_why="")


class SetBuilder:
    """Builds one candidate set: values in the server's spelling, only where they differ from the current
    configuration, each with its source.

    ``put_bytes``/``put`` round sizes as the playbook does (whole MiB, block multiples, the knob's own range)
    and skip knobs this server does not have (``absent`` lists them). A ``pinned`` knob keeps its given value
    whatever is put, and every size derived from it reads that value (:meth:`now`).
    """

    def __init__(self, ctx: PlanningContext, pinned: dict[str, str] | None = None) -> None:
        self.ctx = ctx
        self.pinned = dict(pinned or {})
        self.family = family_of(ctx.catalog.target)
        self.current = current_config(ctx)
        self.changes: dict[str, str] = {}
        self.sources: dict[str, str] = {}
        self.kept: dict[str, str] = {}
        """Knobs sized at the value in effect (not in ``changes``) → the source of that figure."""
        self.absent: list[str] = []

    def spec(self, name: str) -> KnobSpec | None:
        """The catalog's spec of ``name`` (None when the server does not have it or it is excluded)."""
        return self.ctx.catalog.knobs.get(name)

    def now(self, name: str) -> float | None:
        """The value in effect of ``name`` in its base unit (the set's, when the set already has it)."""
        spec = self.spec(name)
        if spec is None:
            return None
        raw = self.pinned.get(name, self.changes.get(name, self.current.get(name, spec.default)))
        return parse_value(raw, spec)

    def now_bytes(self, name: str) -> float | None:
        """The value in effect of a memory knob in bytes."""
        spec, base = self.spec(name), self.now(name)
        if spec is None or base is None:
            return None
        return bytes_of(self.family, spec, base)

    def before_bytes(self, name: str) -> float | None:
        """Bytes of memory knob ``name`` in the configuration in effect, whatever the set puts (None: the
        server has no such knob or its value does not parse)."""
        spec = self.spec(name)
        if spec is None:
            return None
        base = parse_value(self.current.get(name, spec.default), spec)
        return bytes_of(self.family, spec, base) if base is not None else None

    def put(self, name: str, value: str | float, source: str) -> bool:
        """Set ``name`` to ``value`` (a base-unit number, rounded, or a spelling such as "off"); False when the
        server has no such knob or the value is what is in effect already."""
        spec = self.spec(name)
        if spec is None:
            self.absent.append(name)
            return False
        if name in self.pinned:
            value, source = self.pinned[name], f"kept at {self.pinned[name]} (decided before this sizing)"
        text = (
            str(value)
            if isinstance(value, str)
            else str(format_value(round_base(float(value), spec), spec, self.family))
        )
        if name in self.current and canonical(name, text, spec) == canonical(name, self.current[name], spec):
            self.changes.pop(name, None)
            self.sources.pop(name, None)
            self.kept[name] = source
            return False
        self.changes[name] = text
        self.sources[name] = source
        self.kept.pop(name, None)
        return True

    def put_bytes(self, name: str, nbytes: float, source: str) -> bool:
        """Set a memory knob to ``nbytes`` bytes (converted to its base unit)."""
        spec = self.spec(name)
        ub = unit_bytes(spec.unit) if spec is not None else None
        if spec is None or not ub:
            if spec is None:
                self.absent.append(name)
            return False
        return self.put(name, nbytes / ub, source)


def budget_bytes(ctx: PlanningContext, policy: PolicyConfig) -> float:
    """The memory budget: ``policy.memory_fraction`` × the server's memory limit (validators' memory_budget)."""
    hw = ctx.profile.hardware
    return policy.memory_fraction * (hw.memory_limit_bytes or hw.memory_bytes)


def per_connection_room(
    committed_bytes: float, ctx: PlanningContext, policy: PolicyConfig, connections: int, multiplier: float
) -> float:
    """Bytes each connection's per-connection buffer may take so that ``committed_bytes`` (global buffers and
    maintenance memory) + ``connections`` × it × ``multiplier`` × ``policy.per_connection_work_mem_factor``
    fits the budget; 0 when nothing is left."""
    room = budget_bytes(ctx, policy) - committed_bytes
    per = max(connections, 1) * max(multiplier, 1.0) * policy.per_connection_work_mem_factor
    return max(room / per, 0.0)


def floor_mib(nbytes: float) -> float:
    """``nbytes`` rounded down to whole MiB (at least 1 MiB)."""
    return max(math.floor(nbytes / MiB), 1) * MiB
