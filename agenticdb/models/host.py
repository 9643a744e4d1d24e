"""The host's facts as the DBMS sees them (:class:`Hardware`) and what the validator may know of the running
workload (:class:`Observed`); re-exported by :mod:`agenticdb.models`. Sizes in bytes."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from agenticdb.models.base import Strict


class Hardware(Strict):
    """Resources of the host as the DBMS sees them. Sizes in bytes.

    ``memory_limit_bytes`` is the lower of physical RAM and the cgroup memory limit (when one is set).
    """

    cpu_count: int
    memory_bytes: int
    memory_limit_bytes: int
    cgroup_memory_limit_bytes: int | None = None
    disk_total_bytes: int = 0
    disk_free_bytes: int = 0
    data_dir: str | None = None
    data_device: str | None = None
    storage_measured: str | None = None
    """"ssd"/"hdd" from timed random O_DIRECT reads (host.storage_probe); None: no class (``storage_probe``: why)."""
    storage_probe: str = ""
    """The probe's line: median ms, file, p90, reads — or why no class; "" when it did not run."""
    swap_bytes: int = 0
    committed_as_bytes: int | None = None
    commit_limit_bytes: int | None = None
    huge_pages_bytes: int | None = None
    """HugePages_Total × Hugepagesize from /proc/meminfo (reserved huge pages); None when unknown."""
    huge_page_sizes_bytes: list[int] = Field(default_factory=list)
    """Huge page sizes the kernel supports (/sys/kernel/mm/hugepages/hugepages-<N>kB)."""
    numa_nodes: int = 1
    """Online NUMA nodes (/sys/devices/system/node/online)."""
    stack_limit_bytes: int | None = None
    """The DBMS server's soft RLIMIT_STACK (/proc/<pid>/limits "Max stack size"); None = unlimited/unknown."""
    open_files_soft: int | None = None
    """The DBMS server's soft RLIMIT_NOFILE (/proc/<pid>/limits "Max open files"); None = unlimited/unknown."""
    open_files_hard: int | None = None
    """The DBMS server's hard RLIMIT_NOFILE; None = unlimited/unknown."""
    file_handles_allocated: int | None = None
    """Allocated file handles host-wide (first field of /proc/sys/fs/file-nr)."""
    aio_requests: int | None = None
    """Outstanding asynchronous I/O contexts host-wide (/proc/sys/fs/aio-nr)."""
    listen_backlog: int | None = None
    """The largest accept-queue limit of the DBMS server's listening TCP sockets (min(its listen() backlog,
    net.core.somaxconn when it listened); sock_diag, agenticdb.host.listen); None = unknown."""


class Observed(Strict):
    """What the validator may know of the running workload beyond the configuration (optional input).

    ``gauges`` are runtime-state gauges by name (``RuntimeState.gauges``: ``pg_stat_activity.total``,
    ``global_status.Max_used_connections``, ``global_status.Prepared_stmt_count``, …); capacity rules read
    the peaks they name from here. ``dbms_memory_bytes`` is the DBMS's planned memory in bytes (its memory
    estimate); the strict-overcommit rule counts it (default: the DBMS memory budget,
    ``policy.memory_fraction`` × memory limit). ``read`` (``Target.rule_gauges``) reads, by name, gauges too slow
    for every runtime sample (``memory_tables.*``) when a rule needs one missing from ``gauges``; what it answers
    goes into ``gauges`` and ``fetched`` (so each is read once per Observed), or it raises
    ``errors.GaugeUnknown`` and ``unknown`` keeps why, by gauge name, for the rule's refusal. None: ``gauges`` only.
    """

    gauges: dict[str, float] = Field(default_factory=dict)
    dbms_memory_bytes: float | None = None
    read: Callable[[list[str]], dict[str, float]] | None = Field(default=None, exclude=True, repr=False)
    fetched: dict[str, float] = Field(default_factory=dict)
    unknown: dict[str, str] = Field(default_factory=dict)
