"""Configuration: every shipped example loads; every bad example fails naming the key and the rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agenticdb.config import ConfigError, Settings, load_config, unit_warnings

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

BAD_EXPECT = {
    "unknown-key.toml": "loop.max_round",
    "bad-durability.toml": "policy.durability",
    "bad-window.toml": "restart_window",
    "empty-window.toml": "the window is empty",
    "unknown-workload.toml": "workload.kind",
    "zero-rounds.toml": "loop.max_rounds",
    "toml-syntax.toml": "TOML syntax error",
    "share-ratio-one.toml": "loop.disturbance_share_ratio",
    "renamed-confirm-runs.toml": "loop.confirm_runs was replaced: use loop.max_pairs",
    "pairs-inverted.toml": "loop.max_pairs = 2 is below loop.min_pairs = 4",
    "objective-workload.toml": "workload.objective = 'tps' cannot be measured by workload.kind = 'tpch'",
}


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda p: p.name)
def test_good_examples_load(path: Path) -> None:
    cfg = load_config(path)
    assert cfg.policy.durability == "strict"
    assert unit_warnings(cfg) == []  # no shipped fraction reads like a percent, no percent like a fraction


def test_every_percent_setting_is_marked() -> None:
    """A setting named ``*_pct`` carries the ``percent`` marker, so ``0.1`` there is warned as 0.1 %."""
    found = []
    for section, info in Settings.model_fields.items():
        model = info.annotation
        for name, field in getattr(model, "model_fields", {}).items():
            if name.endswith("_pct"):
                extra = field.json_schema_extra
                assert isinstance(extra, dict) and "percent" in extra, f"{section}.{name}"
                found.append(f"{section}.{name}")
    assert "loop.disturbance_steal_pct" in found


@pytest.mark.parametrize("name", sorted(BAD_EXPECT))
def test_bad_examples_name_the_key(name: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(CONFIGS / "bad" / name)
    assert BAD_EXPECT[name] in str(exc.value)


def test_every_bad_example_is_covered() -> None:
    assert {p.name for p in (CONFIGS / "bad").glob("*.toml")} == set(BAD_EXPECT)


def test_environment_overrides_file_and_flags_override_environment(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nmax_rounds = 5\n[workload]\nduration_s = 20\n")
    os.environ["AGENTICDB_LOOP__MAX_ROUNDS"] = "7"
    try:
        cfg = load_config(f)
        assert cfg.loop.max_rounds == 7 and cfg.workload.duration_s == 20
        cfg = load_config(f, {"loop": {"max_rounds": 2}})
        assert cfg.loop.max_rounds == 2
    finally:
        del os.environ["AGENTICDB_LOOP__MAX_ROUNDS"]


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_storage_paths_follow_home(tmp_path: Path) -> None:
    """A home given alone takes the files with it. The paths derived from the first home (the default one)
    were kept as if given: a test passing only storage.home wrote /var/lib/agenticdb (tests/hosthome.py)."""
    cfg = load_config(None, {"storage": {"home": tmp_path}})
    assert cfg.storage.memory_db == tmp_path / "memory.db"
    assert cfg.storage.journal_db == tmp_path / "journal.db"
    assert cfg.storage.key_path() == tmp_path / "journal.key"
    f = tmp_path / "a.toml"
    f.write_text(f'[storage]\nmemory_db = "{tmp_path / "book.db"}"\n')
    cfg = load_config(f, {"storage": {"home": tmp_path / "h"}})
    assert cfg.storage.memory_db == tmp_path / "book.db"  # a file given stays
    assert cfg.storage.journal_db == tmp_path / "h" / "journal.db"


def test_flags_derive_the_loop_bounds_again(tmp_path: Path) -> None:
    """A bound derived from the file's value follows the flag's: `--baseline-runs 5` over a file's
    baseline_runs = 3 was refused ('baseline_max_runs = 3 is below baseline_runs = 5'), the derived 3 kept as
    if given."""
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nbaseline_runs = 3\nmin_pairs = 6\n")
    cfg = load_config(f)
    assert (cfg.loop.baseline_max_runs, cfg.loop.max_pairs) == (3, 6)
    cfg = load_config(f, {"loop": {"baseline_runs": 5, "min_pairs": 8}})
    assert (cfg.loop.baseline_runs, cfg.loop.baseline_max_runs) == (5, 5)
    assert (cfg.loop.min_pairs, cfg.loop.max_pairs) == (8, 8)
    f.write_text("[loop]\nmin_pairs = 6\nmax_pairs = 6\n")  # both given: they must still agree
    with pytest.raises(ConfigError, match="loop.max_pairs = 6 is below loop.min_pairs = 8"):
        load_config(f, {"loop": {"min_pairs": 8}})


def test_unreadable_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    f = tmp_path / "latin1.toml"
    f.write_bytes(b"# caf\xe9\n")
    with pytest.raises(ConfigError, match="latin1.toml is not UTF-8"):
        load_config(f)


def test_environment_errors_name_the_variable(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nmax_rounds = 5\n")
    os.environ["AGENTICDB_LOOP__MAX_ROUNDS"] = "abc"
    try:
        with pytest.raises(ConfigError, match="environment variable AGENTICDB_LOOP__MAX_ROUNDS"):
            load_config(f)
    finally:
        del os.environ["AGENTICDB_LOOP__MAX_ROUNDS"]


def test_dsn_may_be_absent_but_must_fit_the_kind(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text('[target]\nkind = "mariadb"\n[workload]\nkind = "tpch"\n')
    assert load_config(f).target.dsn is None
    f.write_text('[target]\nkind = "mariadb"\ndsn = "postgresql://u@h/d"\n[workload]\nkind = "tpch"\n')
    with pytest.raises(ConfigError, match="target.dsn .* does not fit target.kind = 'mariadb'"):
        load_config(f)


def test_cli_overrides_are_checked_across_sections() -> None:
    with pytest.raises(ConfigError, match=r"(?s)\[workload\].*duration_s"):
        load_config(None, {"workload": {"duration_s": -5}})
    with pytest.raises(ConfigError, match="workload.command"):
        load_config(None, {"workload": {"kind": "command"}})


@pytest.mark.parametrize(
    "kind,objective",
    [
        ("tpch", "tps"),
        ("tpch", "tps_per_p95"),
        ("pgbench", "total_time"),
        ("sysbench-oltp-read-write", "total_time"),
        ("ycsb-a", "total_time"),
        ("live", "tps"),
    ],
)
def test_objective_the_workload_cannot_produce_is_a_config_error(tmp_path: Path, kind: str, objective: str) -> None:
    """The error names both settings, from the file and when a command-line --workload changes the kind."""
    f = tmp_path / "c.toml"
    f.write_text(f'[workload]\nkind = "{kind}"\nobjective = "{objective}"\n')
    with pytest.raises(ConfigError) as exc:
        load_config(f)
    assert f"workload.objective = {objective!r}" in str(exc.value) and f"workload.kind = {kind!r}" in str(exc.value)
    f.write_text(f'[workload]\nobjective = "{objective}"\n')
    if objective != "total_time":  # pgbench (the default kind) produces the others
        load_config(f)
    with pytest.raises(ConfigError, match=r"workload\.objective = .* workload\.kind = "):
        load_config(f, {"workload": {"kind": kind}})


@pytest.mark.parametrize(
    "kind,objective",
    [("tpch", "total_time"), ("tpch", "p95"), ("pgbench", "p99"), ("command", "total_time"), ("command", "tps")],
)
def test_objective_the_workload_produces_loads(tmp_path: Path, kind: str, objective: str) -> None:
    f = tmp_path / "c.toml"
    extra = 'command = "true"\n' if kind == "command" else ""
    f.write_text(f'[workload]\nkind = "{kind}"\nobjective = "{objective}"\n{extra}')
    assert load_config(f).workload.objective == objective


def test_a_rule_across_keys_says_where_each_key_was_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--baseline-runs 5` over a file's baseline_max_runs = 3 is refused naming both values and the rule; it also
    says the 3 is the file's (the error's header names the command-line option, which never gave it), and an
    environment variable's value is named as such."""
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nbaseline_max_runs = 3\n")
    with pytest.raises(ConfigError) as flag:
        load_config(f, {"loop": {"baseline_runs": 5}})
    assert (
        "loop.baseline_max_runs = 3 is below loop.baseline_runs = 5 (rule: baseline_max_runs >= baseline_runs) "
        f"(loop.baseline_max_runs from {f})" in str(flag.value)
    ), str(flag.value)
    monkeypatch.setenv("AGENTICDB_LOOP__BASELINE_RUNS", "5")
    with pytest.raises(ConfigError) as env:
        load_config(f)
    assert "(loop.baseline_runs from environment variable AGENTICDB_LOOP__BASELINE_RUNS)" in str(env.value), str(
        env.value
    )


@pytest.mark.parametrize("key", ["home", "memory_db", "journal_db", "journal_key_file"])
def test_an_empty_storage_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """An empty path was Path('.'): `AGENTICDB_STORAGE__JOURNAL_DB=` (a unit's way to 'unset' it) passed
    validate-config, then `journal list` died with a traceback ('PosixPath('.') has an empty name') and `memory
    list` tried to open the current directory as the Memory Book; an empty home put the files in whatever
    directory the command ran from."""
    f = tmp_path / "a.toml"
    f.write_text(f'[storage]\n{key} = ""\n')
    with pytest.raises(ConfigError, match=rf"storage\.{key} = '': must be a path"):
        load_config(f)
    monkeypatch.setenv(f"AGENTICDB_STORAGE__{key.upper()}", " ")
    with pytest.raises(ConfigError, match=rf"from environment variable AGENTICDB_STORAGE__{key.upper()}"):
        load_config(None)
