"""Configuration: one pydantic model per section, loaded from TOML, overridden by ``AGENTICDB_*``
environment variables (nested with ``__``, e.g. ``AGENTICDB_LOOP__MAX_ROUNDS=3``), then by CLI flags.

Unknown keys are errors. ``load_config`` raises ``ConfigError`` with the file, key and rule.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import (
    DaemonConfig,
    HomeEnvError,
    LiveConfig,
    OSConfig,
    PlannerConfig,
    PolicyConfig,
    RemediationConfig,
    RootCauseConfig,
    StorageConfig,
    TargetConfig,
    WorkloadConfig,
    home_from_env,
)
from agenticdb.redaction import dsn_password, redact_obj, register_secret
from agenticdb.workload_kinds import KINDS, kind_spec, other_kinds_for


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the key and the rule."""


class _SectionsAsDicts(PydanticBaseSettingsSource):
    """The init kwargs with section models turned into dicts of the keys they set, so an environment
    variable for one key (``AGENTICDB_WORKLOAD__DURATION_S``) is merged into a section given as a model
    instead of replacing the whole section (pydantic-settings deep-merges dicts, not models)."""

    def __init__(self, settings_cls: type[BaseSettings], init: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.init = init

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {k: v.model_dump(exclude_unset=True) if isinstance(v, BaseModel) else v for k, v in self.init().items()}


class Settings(BaseSettings):
    """The whole configuration. Precedence: CLI flags > environment (AGENTICDB_*) > TOML file > defaults."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTICDB_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    target: TargetConfig = Field(default_factory=TargetConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    os: OSConfig = Field(default_factory=OSConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    live: LiveConfig = Field(default_factory=LiveConfig)
    rootcause: RootCauseConfig = Field(default_factory=RootCauseConfig)
    remediation: RemediationConfig = Field(default_factory=RemediationConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file arrives as init kwargs; the environment must override it, so env goes first.
        return (env_settings, _SectionsAsDicts(settings_cls, init_settings))

    @model_validator(mode="after")
    def _cross(self) -> Settings:
        check_settings(self)
        return self


def register_settings_secrets(cfg: Settings) -> None:
    """Register the secrets a configuration holds: the target DSN's password, the planner's API key
    (inline) and ``OPENAI_API_KEY`` from the environment."""
    register_secret(dsn_password(cfg.target.dsn))
    register_secret(cfg.planner.api_key)
    register_secret(os.environ.get("OPENAI_API_KEY"))
    register_secret(os.environ.get("PGPASSWORD"))


PRODUCIBLE_OBJECTIVES: dict[str, tuple[str, ...]] = {k.name: k.objectives for k in KINDS if k.objectives is not None}
"""Objectives each workload kind can measure: ``KindSpec.objectives`` of ``agenticdb.workload_kinds.KINDS``,
which says why (``command`` is absent: its output decides; live has none: it scores its own
live_time_index, README "Live mode")."""


def _check_objective(s: Settings) -> None:
    w = s.workload
    producible = PRODUCIBLE_OBJECTIVES.get(w.kind)
    if w.objective is None or producible is None or w.objective in producible:
        return
    if not producible:
        raise ValueError(
            f"workload.objective = {w.objective!r} cannot be used with workload.kind = {w.kind!r}: live mode "
            "scores its own objective (live_time_index); remove workload.objective"
        )
    raise ValueError(
        f"workload.objective = {w.objective!r} cannot be measured by workload.kind = {w.kind!r}, which "
        f'produces {", ".join(producible)} (README "Which objective to choose")'
    )


def check_settings(s: Settings) -> None:
    """Rules across sections that a single section cannot check.

    Raises:
        ValueError: the message names the keys (a kind that needs workload.command — command; a kind
            that runs only on some targets — pgbench, PostgreSQL only: ``KindSpec.targets``; scale > 0;
            workload.objective must be one the workload kind produces, :data:`PRODUCIBLE_OBJECTIVES`).
    """
    _check_objective(s)
    w = s.workload
    spec = kind_spec(w.kind)
    if spec.needs_command and not (w.command or "").strip():
        raise ValueError(f"workload.kind = {w.kind!r} needs workload.command (the shell command to run)")
    if spec.targets and s.target.kind not in spec.targets:
        raise ValueError(
            f"workload.kind = {w.kind!r} runs only on {spec.targets_label}, but target.kind = "
            f"{s.target.kind!r} (use {other_kinds_for(w.kind)})"
        )
    if not w.scale > 0:
        raise ValueError(
            f"workload.scale = {w.scale:g}: must be > 0 (pgbench scale, rows per table or TPC-H scale factor)"
        )


def recheck(s: Settings, where: str) -> Settings:
    """``s`` again through the rules across sections (:func:`check_settings`), for a configuration put together
    after loading: ``model_copy`` checks nothing, so a section swapped in (the ``--target``/``--sandbox`` server, the
    running [target] a daemon reload keeps) could pair pgbench with a MariaDB target that a file saying both is
    refused for.

    Returns:
        ``s`` itself when it keeps the rules.
    Raises:
        ConfigError: ``invalid configuration (<where>): <the rule>``, worded as :func:`load_config` words it.
    """
    try:
        check_settings(s)
    except ValueError as exc:
        raise ConfigError(f"invalid configuration ({where}): {exc}") from None
    return s


def _marker(info: FieldInfo, kind: str = "fraction") -> dict[str, Any] | None:
    """A field's ``fraction`` or ``percent`` marker (``agenticdb.config.sections.fraction`` /
    ``percent``), or None."""
    extra = info.json_schema_extra
    marker = extra.get(kind) if isinstance(extra, dict) else None
    return marker if isinstance(marker, dict) else None


def _fraction_of(key: str) -> dict[str, Any] | None:
    """The ``fraction`` marker of the dotted key ``key`` ("loop.min_gain"), or None."""
    model: Any = Settings
    info = None
    for part in key.split("."):
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return None
        info = fields[part]
        model = info.annotation
    return _marker(info) if info is not None else None


def fraction_hint(key: str, value: Any) -> str:
    """For a fraction-typed key (``loop.confidence``) given a value that reads like a percent: what the
    value means and what to write instead ("a fraction: 0.95 = 95 %; for 95 % write 0.95"), else ""."""
    marker = _fraction_of(key)
    try:  # an environment variable's value arrives as text
        number = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
    except ValueError:
        number = None
    if marker is None or number is None or number < 1:
        return ""
    ex = float(marker["example"])
    return f"{key} is a fraction: {ex:g} = {ex * 100:g} %; for {number:g} % write {number / 100:g}"


def _leaf_settings(s: BaseModel, prefix: str = "") -> list[tuple[str, Any, FieldInfo]]:
    """Every scalar setting of ``s`` as (dotted key, value, field), nested sections walked."""
    out: list[tuple[str, Any, FieldInfo]] = []
    for name, info in type(s).model_fields.items():
        value = getattr(s, name)
        key = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            out += _leaf_settings(value, key + ".")
        else:
            out.append((key, value, info))
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def fraction_warnings(s: BaseModel, prefix: str = "") -> list[str]:
    """One warning per fraction-typed setting (``agenticdb.config.sections.fraction``) at or above its
    ``warn_from``: ``loop.min_gain = 3`` is 300 %, almost surely 3 % typed as a number. A warning, not an
    error: such a value can be meant (a test may ask for a 500 % gain so every change is a tie)."""
    out: list[str] = []
    for key, value, info in _leaf_settings(s, prefix):
        marker = _marker(info)
        warn_from = marker.get("warn_from") if marker else None
        if warn_from is None or (number := _number(value)) is None or number < warn_from:
            continue
        out.append(
            f"{key} = {value:g} means {value * 100:g} %: a value >= {warn_from:g} is almost surely a percent "
            f"typed as a number ({fraction_hint(key, value)})"
        )
    return out


def percent_warnings(s: BaseModel, prefix: str = "") -> list[str]:
    """One warning per percent-typed setting (``agenticdb.config.sections.percent``) with a value in
    (0, 1): ``loop.disturbance_steal_pct = 0.1`` is 0.1 %, almost surely 10 % typed as a fraction. A
    warning, not an error: a threshold below 1 % can be meant; 0 (off) and 1 (1 %) are not warned."""
    out: list[str] = []
    for key, value, info in _leaf_settings(s, prefix):
        marker = _marker(info, "percent")
        if marker is None or (number := _number(value)) is None or not 0 < number < 1:
            continue
        ex, meant = float(marker["example"]), number * 100
        out.append(
            f"{key} = {number:g} means {number:g} %: a value between 0 and 1 is almost surely a fraction typed "
            f"where a percent belongs ({key} is a percent: {ex:g} = {ex:g} %; for {meant:g} % write {meant:g})"
        )
    return out


def unit_warnings(s: BaseModel) -> list[str]:
    """Fraction-typed settings that read like a percent and percent-typed ones that read like a fraction
    (:func:`fraction_warnings`, :func:`percent_warnings`), in that order."""
    return fraction_warnings(s) + percent_warnings(s)


def config_warnings(s: Settings) -> list[str]:
    """Things that are legal but will likely fail at run time unless the environment supplies them, and
    fraction- or percent-typed settings that read like the other (:func:`unit_warnings`)."""
    out = unit_warnings(s)
    if s.planner.kind == "llm" and not (s.planner.model or os.environ.get("AGENTICDB_LLM_MODEL")):
        out.append(
            "planner.kind = 'llm' but no planner.model and AGENTICDB_LLM_MODEL is not set here; "
            "the environment at run time must supply the model name"
        )
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _check_home_env() -> None:
    """Refuse a set but blank ``$AGENTICDB_HOME`` whichever source names the home: the next command without
    ``--home`` would take it silently (and ``Settings(**data)`` reads it before ``--home`` is applied).

    Raises:
        ConfigError: ``invalid configuration (environment): environment variable AGENTICDB_HOME = ''…``.
    """
    try:
        home_from_env()
    except HomeEnvError as exc:
        raise ConfigError(f"invalid configuration (environment): {exc}") from None


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Load ``path`` (TOML), apply environment overrides, then ``overrides`` (nested dict from CLI flags).

    Raises:
        ConfigError: unreadable file, TOML syntax error, unknown key or invalid value; the message
            names the file and the dotted key. Also a set but blank ``$AGENTICDB_HOME``
            (:func:`agenticdb.config.sections.home_from_env`), whatever else names the home.
    """
    data: dict[str, Any] = {}
    where = "defaults"
    if path is not None:
        where = str(path)
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"config file {path} is a directory, not a TOML file") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); TOML files must be UTF-8"
            ) from None
        except OSError as exc:
            raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: TOML syntax error: {exc}") from None
    _check_home_env()
    try:
        settings = Settings(**data)
        if overrides:
            # Validate each overridden section on its own model (not through Settings, whose env source
            # would win again): CLI flags beat the environment.
            updates: dict[str, Any] = {}
            for section, values in overrides.items():
                current = getattr(settings, section)
                # only what the file or environment set, so defaults still follow what the flags set
                merged = _deep_merge(current.model_dump(mode="python", exclude_unset=True), values)
                try:
                    updates[section] = type(current).model_validate(merged)
                except ValidationError as exc:
                    env = _env_values()
                    given = {  # a key the rule names that no flag gave: say where it was set
                        f"{section}.{k}": f"environment variable AGENTICDB_{section.upper()}__{k.upper()}"
                        if _from_env(env, (section, k))
                        else where
                        for k in current.model_fields_set - set(values)
                    }
                    raise ConfigError(
                        _format_validation(f"command-line option for [{section}]", exc, prefix=(section,), given=given)
                    ) from None
            settings = settings.model_copy(update=updates)
            try:
                check_settings(settings)
            except ValueError as exc:
                raise ConfigError(f"invalid configuration (command-line options): {exc}") from None
    except ValidationError as exc:
        env = _env_values()
        given = {".".join(k): f"environment variable AGENTICDB_{'__'.join(k).upper()}" for k in _leaves(env)}
        raise ConfigError(_format_validation(where, exc, env=env, given=given)) from None
    register_settings_secrets(settings)
    return settings


def _env_values() -> dict[str, Any]:
    """The nested values the ``AGENTICDB_*`` environment supplies (to tell which source a bad key came from)."""
    try:
        return EnvSettingsSource(Settings)()
    except Exception:  # noqa: BLE001 - only used to attribute errors; never fail on it
        return {}


def _leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths to the non-dict values of a nested dict: {"loop": {"min_pairs": "6"}} → [("loop", "min_pairs")]."""
    out: list[tuple[str, ...]] = []
    for k, v in tree.items():
        out += _leaves(v, (*prefix, str(k))) if isinstance(v, dict) else [(*prefix, str(k))]
    return out


def _from_env(env: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    node: Any = env
    for part in loc:
        if not isinstance(node, dict) or str(part) not in node:
            return False
        node = node[str(part)]
    return True


def _redacted(value: Any) -> Any:
    return redact_obj(value)


def _format_validation(
    where: str,
    exc: ValidationError,
    env: dict[str, Any] | None = None,
    prefix: tuple[str, ...] = (),
    given: dict[str, str] | None = None,
) -> str:
    """One line per error: the dotted key, the value, and the rule in words (the source is named:
    the file, ``environment variable AGENTICDB_X__Y`` or the command-line option). A rule across keys
    (``loop.baseline_max_runs = 3 is below loop.baseline_runs = 5``) names where each key in ``given`` (dotted key →
    its source, for keys not from ``where``) was set: a flag's error otherwise blamed the flag for the file's value."""
    lines = [f"invalid configuration ({where}):"]
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        key = ".".join(prefix + loc)
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f" = {_redacted(value)!r}"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            section = ".".join((prefix + loc)[:-1])
            msg = f"unknown key (not a setting of [{section}])" if section else "unknown section"
        elif err["type"] == "missing":
            msg = "required"
        source = ""
        if env and loc and not isinstance(value, dict) and _from_env(env, loc):
            source = f" (from environment variable AGENTICDB_{'__'.join(loc).upper()})"
        if err["type"] in ("less_than", "less_than_equal") and (hint := fraction_hint(key, value)):
            msg += f" ({hint})"  # confidence = 95: a percent typed where a fraction belongs
        if err["type"] == "value_error" and re.match(r"[a-z_]+\.[\w.\[\]]+ ", msg):
            named = dict.fromkeys(re.findall(r"\b([a-z_]+\.[a-z_]+) = ", msg))
            set_at = [f"{k} from {given[k]}" for k in named if given and k in given]
            source = f" ({'; '.join(set_at)})" if set_at else source
            lines.append(f"  {msg}{source}")  # our own validators already name the dotted key
        else:
            lines.append(f"  {key}{shown}: {msg}{source}")
    return "\n".join(lines)
