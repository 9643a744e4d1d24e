"""The harness's ResettingWorkload shows the session what the inner workload offers beyond the Workload
interface: a query set's statements and connection, which the opening's plan evidence reads; and after its reset
it warms a prewarmed query set up as the executor does after a restart (no extra pass), on a real private
PostgreSQL 15."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from agenticdb.config.sections import WorkloadConfig
from agenticdb.models import Measurement
from agenticdb.workloads.base import Connection, Workload, WorkloadTraits
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


class _Pass(Workload):
    """A query set's shape (its warm-up is a whole pass); it records each warm-up it is asked for."""

    name = "pass"
    warmup_is_pass = True

    def __init__(self) -> None:
        self.warmups: list[float] = []

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits("pass", "olap", 1.0, "scan", 1, 1, "total_time")

    def prepare(self) -> None:
        return None

    def warmup(self, seconds: float) -> None:
        self.warmups.append(seconds)

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        return Measurement(workload=self.name, objective=1.0, objective_name="total_time", duration_s=1.0)


def test_a_query_set_prewarmed_after_the_reset_gets_no_extra_pass_and_says_what_was_loaded(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="agb-wrap-", dir="/tmp"))  # a Unix socket path must stay short
    inst = Instance("postgres", base, None)
    try:
        inst.up()
        inst.save_pristine()
        target = inst.target()
        inner = _Pass()
        wrapped = ResettingWorkload(inner, inst, 0.0, target)
        wrapped.warmup(3.0)  # what the executor asks after a restart
        assert wrapped.resets == 1 and inner.warmups == [], inner.warmups  # prewarmed: no extra pass
        m = wrapped.run(0.0)
        assert m.prewarm is not None and m.prewarm.startswith("pg_prewarm: "), m.prewarm
        inner.warmup_is_pass = False  # a time warm-up stays longer after the reset, prewarmed or not
        wrapped.warmup(3.0)
        assert inner.warmups == [3.0], inner.warmups
        no_target = ResettingWorkload(_Pass(), inst, 0.0, None)  # nothing prewarmed: the pass stays
        no_target.warmup(3.0)
        assert no_target.inner.warmups == [3.0]  # type: ignore[attr-defined]
    finally:
        inst.stop()
        shutil.rmtree(base, ignore_errors=True)
