"""The workload kinds table (issue 37): every consumer reads ``workload_kinds.KINDS``, so a kind is one
``KindSpec`` plus its Workload module. No server needed: builders are resolved and constructed only."""

from __future__ import annotations

from typing import get_args

import pytest

from agenticdb.cli.help_model import config_help
from agenticdb.config import PRODUCIBLE_OBJECTIVES, ConfigError, load_config
from agenticdb.config.sections import LiveConfig, WorkloadConfig, WorkloadKind
from agenticdb.workload_kinds import FIRST_RUN, KIND_NAMES, KINDS, kind_patterns, kind_spec, other_kinds_for
from agenticdb.workloads import WorkloadError, build_workload, connection_from_dsn
from agenticdb.workloads.registry import builder_of

PG = connection_from_dsn("postgresql", "postgresql://postgres@127.0.0.1:5432/postgres", "bench")


def test_the_config_literal_and_the_help_list_follow_the_table() -> None:
    assert get_args(WorkloadKind) == KIND_NAMES
    text = config_help("workload.kind", "the benchmark, or live")
    assert " | ".join(KIND_NAMES) in " ".join(text.split())


def test_objectives_and_first_run_defaults_are_read_from_the_table() -> None:
    assert PRODUCIBLE_OBJECTIVES == {k.name: k.objectives for k in KINDS if k.objectives is not None}
    assert "command" not in PRODUCIBLE_OBJECTIVES and PRODUCIBLE_OBJECTIVES["live"] == ()
    assert FIRST_RUN == {k.name: dict(k.first_run) for k in KINDS if k.first_run}


@pytest.mark.parametrize("name", KIND_NAMES)
def test_every_builder_resolves(name: str) -> None:
    assert callable(builder_of(kind_spec(name)))


def test_an_observe_only_kind_is_built_with_the_live_settings() -> None:
    cfg = WorkloadConfig(kind="live")
    with pytest.raises(WorkloadError, match=r"\[live\] settings"):
        build_workload(cfg, PG, progress=False)
    assert build_workload(cfg, PG, progress=False, live=LiveConfig()).name == "live"


def test_target_rule_names_the_kinds_that_fit_every_target() -> None:
    assert other_kinds_for("pgbench") == "sysbench-oltp-*, ycsb-*, tpch or command"
    assert kind_patterns([kind_spec("tpch")]) == "tpch"
    with pytest.raises(
        ConfigError, match=r"runs only on PostgreSQL, .*\(use sysbench-oltp-\*, ycsb-\*, tpch or command\)"
    ):
        load_config(None, {"target": {"kind": "mariadb"}, "workload": {"kind": "pgbench"}})


def test_unknown_kind_is_refused_with_the_list() -> None:
    with pytest.raises(KeyError, match="expected one of pgbench, "):
        kind_spec("observe")
    wrong = WorkloadConfig.model_construct(kind="observe")
    with pytest.raises(WorkloadError, match="expected one of pgbench, "):
        build_workload(wrong, PG)
