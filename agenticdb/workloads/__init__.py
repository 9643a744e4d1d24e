"""Workloads: one module per benchmark family, each a subclass of ``workloads.base.Workload``.

``build_workload(cfg, conn)`` picks the class for ``workload.kind``; ``connection_from_dsn`` turns a
target DSN into the ``Connection`` the tools use.
"""

from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.registry import build_workload, connection_from_dsn

__all__ = [
    "Connection",
    "Workload",
    "WorkloadError",
    "WorkloadTraits",
    "build_workload",
    "connection_from_dsn",
]
