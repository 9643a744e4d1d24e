"""The harness's ResettingWorkload shows the session what the inner workload offers beyond the Workload
interface: a query set's statements and connection, which the opening's plan evidence reads."""

from __future__ import annotations

from agenticdb.config.sections import WorkloadConfig
from agenticdb.workloads.base import Connection
from agenticdb.workloads.tpch import TpchWorkload
from benchmarks.harness.competitors import ResettingWorkload
from benchmarks.harness.instance import Instance


def test_the_query_set_of_the_inner_workload_is_visible_through_the_reset_wrapper() -> None:
    conn = Connection(kind="postgresql", host="127.0.0.1", port=5432, user="postgres", database="x")
    inner = TpchWorkload(WorkloadConfig(kind="tpch", scale=0.01), conn)
    wrapped = ResettingWorkload(inner, Instance.__new__(Instance), 1.0)
    assert wrapped.conn is inner.conn  # type: ignore[attr-defined]
    queries = wrapped.queries()  # type: ignore[attr-defined]
    assert sorted(queries) == sorted(inner.queries()) and len(queries) == 22, sorted(queries)
    assert wrapped.traits() == inner.traits()
