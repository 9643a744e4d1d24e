"""Building the MySQL/MariaDB action space from what the server reports plus the shipped data files.

Pure functions (rows in, ``Catalog`` out) so the MySQL 8 path is testable without a MySQL server:

- MariaDB: rows of ``information_schema.SYSTEM_VARIABLES`` → ``mariadb_catalog``.
- MySQL 8: rows of ``performance_schema.variables_info`` joined with ``global_variables`` plus
  ``catalogs/mysql-8.0.toml`` (types, dynamic-vs-restart from the MySQL 8.0 manual) → ``mysql8_catalog``.

Exclusions and byte-size facts come from ``catalogs/mariadb.toml`` (both families) and, for MySQL 8,
the extra ``[[name]]``/``[[pattern]]`` entries of ``catalogs/mysql-8.0.toml``.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import structlog
from packaging.version import Version

from agenticdb.models import ApplyMode, Catalog, KnobSpec, VarType
from agenticdb.resources import data_file
from agenticdb.validation.rules import parse_version

log = structlog.get_logger(__name__)

MARIADB_DATA = "mariadb.toml"
MYSQL8_DATA = "mysql-8.0.toml"
SYSVARS_SOURCE = "information_schema.SYSTEM_VARIABLES (MariaDB KB, Information Schema SYSTEM_VARIABLES Table)"

# information_schema.SYSTEM_VARIABLES.VARIABLE_TYPE → KnobSpec.vartype (MariaDB KB, "Information Schema
# SYSTEM_VARIABLES Table"). FLAGSET (optimizer_switch) is a comma list of flag=on|off: kept as string.
_MARIADB_TYPES: dict[str, VarType] = {
    "BOOLEAN": "bool",
    "INT": "integer",
    "INT UNSIGNED": "integer",
    "BIGINT": "integer",
    "BIGINT UNSIGNED": "integer",
    "DOUBLE": "real",
    "ENUM": "enum",
    "SET": "enum",
    "FLAGSET": "string",
    "VARCHAR": "string",
}


@dataclass(frozen=True)
class Exclusions:
    """Names/globs that are not tunables, each with "reason (source)"; ``keep`` overrides patterns."""

    names: dict[str, str] = field(default_factory=dict)
    patterns: list[tuple[str, str]] = field(default_factory=list)
    keep: frozenset[str] = frozenset()

    def reason(self, name: str) -> str | None:
        """Why ``name`` (lower case) is excluded, or None when it is tunable."""
        if name in self.names:
            return self.names[name]
        if name in self.keep:
            return None
        for pattern, why in self.patterns:
            if fnmatch.fnmatchcase(name, pattern):
                return why
        return None


@dataclass(frozen=True)
class MySQLData:
    """Parsed ``catalogs/mariadb.toml`` (+ optional ``mysql-8.0.toml``)."""

    exclusions: Exclusions
    byte_patterns: tuple[str, ...]
    byte_names: frozenset[str]
    not_bytes: frozenset[str]
    byte_source: str
    aliases: dict[str, tuple[str, str]]
    gauge_names: frozenset[str]
    gauge_patterns: tuple[str, ...]
    mysql8_knobs: dict[str, dict[str, Any]]
    mysql8_manual: str
    runtime_only: frozenset[str] = frozenset()
    session_only: frozenset[str] = frozenset()
    """``[session_only]`` of catalogs/mariadb.toml: variables SYSTEM_VARIABLES lists with scope SESSION (a global
    value shown) whose global value the server refuses to set (MariaDB 10.11: tcp_nodelay, sql_log_bin; error
    1238 "Variable '…' is a SESSION variable")."""
    session_only_source: str = ""
    option_aliases: dict[str, str] = field(default_factory=dict)
    enum_plugins: tuple[tuple[str, str, str, str, str], ...] = ()
    """``[[enum_plugin]]`` entries: (variable, value, plugin, since, source) — an enum value that servers from
    version ``since`` on accept only while the plugin is active (MariaDB 10.7+ compression providers)."""

    def has_option_form(self, name: str, option_names: frozenset[str] | None) -> bool:
        """True when variable ``name`` may be written to an option file: the server's own option list
        when known (an option named differently, ``time_zone`` → ``default_time_zone``, counts), else
        not in the shipped ``[runtime_only]`` list."""
        if option_names is None:
            return name not in self.runtime_only
        return name in option_names or self.option_aliases.get(name, "") in option_names

    def is_bytes(self, name: str) -> bool:
        """True when variable ``name`` holds a size in bytes (unit "B")."""
        if name in self.not_bytes:
            return False
        return name in self.byte_names or any(fnmatch.fnmatchcase(name, p) for p in self.byte_patterns)

    def is_gauge(self, status_name: str) -> bool:
        """True when a SHOW GLOBAL STATUS value is point-in-time (not a monotonic counter)."""
        return status_name in self.gauge_names or any(fnmatch.fnmatchcase(status_name, p) for p in self.gauge_patterns)


def _exclusions(*docs: dict[str, Any]) -> Exclusions:
    names: dict[str, str] = {}
    patterns: list[tuple[str, str]] = []
    keep: set[str] = set()
    for doc in docs:
        keep.update(k.lower() for k in doc.get("keep", []))
        for entry in doc.get("name", []):
            names[entry["name"].lower()] = f"{entry['reason']} ({entry['source']})"
        for entry in doc.get("pattern", []):
            patterns.append((entry["pattern"].lower(), f"{entry['reason']} ({entry['source']})"))
    return Exclusions(names, patterns, frozenset(keep))


@lru_cache(maxsize=1)
def load_data() -> MySQLData:
    """Load and check the shipped data files.

    Raises:
        FileNotFoundError: a data file is missing.
        ValueError: an entry lacks ``reason``/``source`` or a knob has an unknown ``type``.
    """
    maria = tomllib.loads(data_file("catalogs", MARIADB_DATA).read_text())
    mysql8 = tomllib.loads(data_file("catalogs", MYSQL8_DATA).read_text())
    for doc, fname in ((maria, MARIADB_DATA), (mysql8, MYSQL8_DATA)):
        for kind in ("name", "pattern"):
            for entry in doc.get(kind, []):
                missing = [k for k in (kind, "reason", "source") if not entry.get(k)]
                if missing:
                    raise ValueError(f"catalogs/{fname}: [[{kind}]] entry {entry!r} lacks {missing}")
    for name, knob in mysql8.get("knobs", {}).items():
        if knob.get("type") not in ("bool", "integer", "real", "enum", "string"):
            raise ValueError(
                f"catalogs/{MYSQL8_DATA}: knobs.{name}.type = {knob.get('type')!r}: "
                "expected bool|integer|real|enum|string"
            )
        if "dynamic" not in knob or not knob.get("source"):
            raise ValueError(f"catalogs/{MYSQL8_DATA}: knobs.{name} needs 'dynamic' and 'source'")
    sizes = maria.get("byte_sizes", {})
    gauges = maria.get("status_gauges", {})
    return MySQLData(
        exclusions=_exclusions(maria),
        byte_patterns=tuple(sizes.get("patterns", [])),
        byte_names=frozenset(sizes.get("names", [])),
        not_bytes=frozenset(sizes.get("not_bytes", [])),
        byte_source=sizes.get("source", ""),
        aliases={k: (v["variable"], v["source"]) for k, v in maria.get("aliases", {}).items()},
        gauge_names=frozenset(gauges.get("names", [])),
        gauge_patterns=tuple(gauges.get("patterns", [])),
        mysql8_knobs={k.lower(): v for k, v in mysql8.get("knobs", {}).items()},
        mysql8_manual=mysql8.get("manual", "MySQL 8.0 Reference Manual"),
        runtime_only=frozenset(n.lower() for n in maria.get("runtime_only", {}).get("names", [])),
        session_only=frozenset(n.lower() for n in maria.get("session_only", {}).get("names", [])),
        session_only_source=maria.get("session_only", {}).get("source", ""),
        option_aliases={k.lower(): v.lower() for k, v in maria.get("option_aliases", {}).get("names", {}).items()},
        enum_plugins=tuple(_enum_plugins(maria.get("enum_plugin", []))),
    )


def _enum_plugins(entries: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """``[[enum_plugin]]`` entries of catalogs/mariadb.toml as (variable, value, plugin, since, source).

    Raises:
        ValueError: an entry lacks ``variable``, ``value``, ``plugin``, ``since`` or ``source``.
    """
    keys = ("variable", "value", "plugin", "since", "source")
    out: list[tuple[str, str, str, str, str]] = []
    for entry in entries:
        missing = [k for k in keys if not entry.get(k)]
        if missing:
            raise ValueError(f"catalogs/{MARIADB_DATA}: [[enum_plugin]] entry {entry!r} lacks {missing}")
        out.append(
            (
                entry["variable"].lower(),
                entry["value"].lower(),
                entry["plugin"].lower(),
                entry["since"],
                entry["source"],
            )
        )
    return out


@lru_cache(maxsize=1)
def mysql8_exclusions() -> Exclusions:
    """mariadb.toml exclusions plus the MySQL-8-only entries of mysql-8.0.toml."""
    maria = tomllib.loads(data_file("catalogs", MARIADB_DATA).read_text())
    mysql8 = tomllib.loads(data_file("catalogs", MYSQL8_DATA).read_text())
    return _exclusions(maria, mysql8)


def _num(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _canonical_default(vartype: VarType, value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    if vartype == "bool":
        return "ON" if text.upper() in ("1", "ON", "TRUE", "YES") else "OFF"
    return text


IGNORED_COMMENTS = ("deprecated parameter with no effect", "deprecated, has no effect")
"""How MariaDB describes a variable it accepts but ignores (SYSTEM_VARIABLES.VARIABLE_COMMENT, 10.11)."""


def _fact(row: dict[str, Any]) -> float | str | None:
    value = row.get("GLOBAL_VALUE")
    if value is None:
        return None
    number = _num(value) if str(row.get("VARIABLE_TYPE", "")).startswith(("INT", "BIGINT", "DOUBLE")) else None
    return number if number is not None else str(value)


def mariadb_catalog(
    rows: list[dict[str, Any]],
    version: str,
    data: MySQLData | None = None,
    option_names: frozenset[str] | None = None,
    active_plugins: frozenset[str] | None = None,
) -> Catalog:
    """Catalog from ``SELECT * FROM information_schema.SYSTEM_VARIABLES`` rows (dicts keyed by column).

    Exclusions, in order: scope ``SESSION ONLY`` (no global value), and the variables of ``[session_only]`` in
    catalogs/mariadb.toml, which SYSTEM_VARIABLES lists with scope ``SESSION`` though the server refuses
    ``SET GLOBAL`` of them (tcp_nodelay: error 1238 "is a SESSION variable"); ``READ_ONLY = 'YES'`` without a
    ``COMMAND_LINE_ARGUMENT`` (version/build/state information, settable nowhere); a read-only variable
    without an option-file form; the entries of catalogs/mariadb.toml. ``READ_ONLY = 'YES'`` →
    ApplyMode.restart (written to the option file), else ApplyMode.dynamic (``SET GLOBAL``). Aliases from
    the data file are added with the target's metadata.

    Args:
        option_names: the options this server version accepts in an option file (lower case, dashes as
            underscores; ``mysqld --help --verbose``, see agenticdb.targets.mysql_options), or None when
            unknown (then the shipped ``[runtime_only]`` list of catalogs/mariadb.toml decides).
            ``KnobSpec.option_file`` is False for a variable without one.
        active_plugins: names (lower case) of ``information_schema.PLUGINS`` with status ACTIVE, or None when
            unknown. An enum value that needs a plugin (``[[enum_plugin]]`` of catalogs/mariadb.toml:
            innodb_compression_algorithm=lzma needs provider_lzma) is dropped from ``enum_values`` when its
            plugin is not active, and ``Catalog.unavailable_values`` says why: SYSTEM_VARIABLES'
            ENUM_VALUE_LIST names every value the source knows, not what this build accepts.

    Facts (``Catalog.facts``): the global value of every variable that is not a knob (``innodb_page_size``,
    numbers as floats), and ``ignored:<name>`` with the server's comment for variables it describes as
    deprecated with no effect.
    """
    data = data or load_data()
    cat = Catalog(target="mariadb", version=version)
    for row in rows:
        name = str(row["VARIABLE_NAME"]).lower()
        comment = str(row.get("VARIABLE_COMMENT") or "")
        if any(c in comment.lower() for c in IGNORED_COMMENTS):
            cat.facts[f"ignored:{name}"] = comment
        if (fact := _fact(row)) is not None:
            cat.facts[name] = fact
        if row["VARIABLE_SCOPE"] == "SESSION ONLY":
            cat.excluded[name] = "session-only variable: no global value to tune (SYSTEM_VARIABLES.VARIABLE_SCOPE)"
            continue
        if name in data.session_only:
            cat.excluded[name] = (
                "session-only variable: the server refuses SET GLOBAL of it (error 1238 'Variable is a SESSION "
                "variable') though SYSTEM_VARIABLES.VARIABLE_SCOPE says SESSION, so there is no global value to "
                f"tune ({data.session_only_source})"
            )
            continue
        read_only = row["READ_ONLY"] == "YES"
        if read_only and row.get("COMMAND_LINE_ARGUMENT") is None:
            cat.excluded[name] = (
                "informational (version, build or state): read-only and no server option "
                "(SYSTEM_VARIABLES.READ_ONLY, COMMAND_LINE_ARGUMENT)"
            )
            continue
        has_option = data.has_option_form(name, option_names)
        if read_only and not has_option:
            cat.excluded[name] = (
                "read-only and no option-file form on this server version (mysqld --help --verbose does not "
                "list it): it cannot be set at all"
            )
            continue
        if why := data.exclusions.reason(name):
            cat.excluded[name] = why
            continue
        cat.knobs[name] = _mariadb_knob(row, name, read_only, has_option, data)
    for name in cat.knobs:
        cat.facts.pop(name, None)  # knobs are read from the current values, facts are the rest
    _add_aliases(cat, data)
    if active_plugins is not None:
        _drop_unavailable(cat, data, active_plugins)
    return cat


def _drop_unavailable(cat: Catalog, data: MySQLData, active: frozenset[str]) -> None:
    """Remove enum values whose plugin is not active (on versions from the entry's ``since`` on) from the
    knobs' ``enum_values`` and record why in ``cat.unavailable_values``."""
    running = parse_version(cat.version)
    for variable, value, plugin, since, source in data.enum_plugins:
        spec = cat.knobs.get(variable)
        if spec is None or spec.enum_values is None or plugin in active:
            continue
        if running is not None and running < Version(since):
            continue  # built in before the provider plugins
        spec.enum_values = [v for v in spec.enum_values if v.lower() != value]
        cat.unavailable_values.setdefault(variable, {})[value] = (
            f"needs the plugin {plugin}, which is not active on this server (information_schema.PLUGINS); "
            f"the server refuses the value ({source})"
        )
        log.info("catalog.enum_value_unavailable", variable=variable, value=value, plugin=plugin)


def _mariadb_knob(row: dict[str, Any], name: str, read_only: bool, has_option: bool, data: MySQLData) -> KnobSpec:
    """One SYSTEM_VARIABLES row as a KnobSpec (types per _MARIADB_TYPES, sizes in bytes per the data file)."""
    vartype: VarType = _MARIADB_TYPES.get(str(row["VARIABLE_TYPE"]), "string")
    enum_values = None
    if vartype == "enum":
        raw = row.get("ENUM_VALUE_LIST")
        if raw:
            enum_values = str(raw).split(",")
        else:
            vartype = "string"  # character sets/collations: ENUM without a list
    block = _num(row.get("NUMERIC_BLOCK_SIZE"))
    unit = "B" if vartype == "integer" and data.is_bytes(name) else None
    numeric = vartype in ("integer", "real")
    return KnobSpec(
        name=name,
        vartype=vartype,
        unit=unit,
        min_value=_num(row.get("NUMERIC_MIN_VALUE")) if numeric else None,
        max_value=_num(row.get("NUMERIC_MAX_VALUE")) if numeric else None,
        enum_values=enum_values,
        apply=ApplyMode.restart if read_only else ApplyMode.dynamic,
        default=_canonical_default(vartype, row.get("DEFAULT_VALUE")),
        description=str(row.get("VARIABLE_COMMENT") or ""),
        category=name.split("_", 1)[0] if name.startswith(("innodb_", "aria_", "myisam_")) else "server",
        block_size=int(block) if block and block > 1 else None,
        source=SYSVARS_SOURCE + (f"; unit: {data.byte_source}" if unit else ""),
        option_file=has_option,
    )


def _add_aliases(cat: Catalog, data: MySQLData) -> None:
    for alias, (variable, source) in data.aliases.items():
        spec = cat.knobs.get(variable)
        if alias not in cat.knobs and alias not in cat.excluded and spec is not None:
            cat.knobs[alias] = spec.model_copy(update={"name": alias, "source": source})


def mysql8_catalog(
    info_rows: list[dict[str, Any]], values: dict[str, str], version: str, data: MySQLData | None = None
) -> Catalog:
    """MySQL 8 catalog from ``performance_schema.variables_info`` rows (VARIABLE_NAME, MIN_VALUE,
    MAX_VALUE, VARIABLE_SOURCE) and ``global_variables`` values (name → value).

    Type and dynamic-vs-restart come from catalogs/mysql-8.0.toml (the server does not expose them);
    the server's MIN/MAX win over the file's. Variables not described by the file are excluded (type and
    apply mode unknown — a guess could write a string to an integer or restart needlessly); variables the
    file describes but the server lacks (e.g. innodb_redo_log_capacity before 8.0.30) go to
    ``unsupported``. Facts (``Catalog.facts``), as for MariaDB: the global value of every variable that is not a
    knob (numbers as floats): key_cache_block_size, which the file leaves out, sizes the MyISAM key cache's blocks
    in use for the trade move (``planner.trade``); without it the default 1024 B was taken, and a server with
    4096-B blocks had a quarter of its cache in use counted.
    """
    data = data or load_data()
    excl = mysql8_exclusions()
    cat = Catalog(target="mysql", version=version)
    server_names: set[str] = set()
    for row in info_rows:
        name = str(row["VARIABLE_NAME"]).lower()
        if name not in {k.lower() for k in values}:
            continue  # session-only: variables_info lists it, global_variables does not
        server_names.add(name)
        if why := excl.reason(name):
            cat.excluded[name] = why
            continue
        facts = data.mysql8_knobs.get(name)
        if facts is None:
            cat.excluded[name] = (
                f"not described in catalogs/{MYSQL8_DATA}: type and dynamic-vs-restart "
                f"unknown (see {data.mysql8_manual}, Server System Variables)"
            )
            continue
        vartype: VarType = facts["type"]
        min_v = _num(row.get("MIN_VALUE")) if vartype in ("integer", "real") else None
        max_v = _num(row.get("MAX_VALUE")) if vartype in ("integer", "real") else None
        if min_v is not None and max_v is not None and min_v == 0 and max_v == 0:
            min_v = max_v = None  # variables_info reports 0/0 for "no range"
        cat.knobs[name] = KnobSpec(
            name=name,
            vartype=vartype,
            unit=facts.get("unit"),
            min_value=min_v if min_v is not None else _num(facts.get("min")),
            max_value=max_v if max_v is not None else _num(facts.get("max")),
            enum_values=facts.get("enum_values"),
            apply=ApplyMode.dynamic if facts["dynamic"] else ApplyMode.restart,
            default=_canonical_default(vartype, facts.get("default")),
            category=name.split("_", 1)[0] if name.startswith("innodb_") else "server",
            block_size=facts.get("block_size"),
            source=f"{facts['source']}; range: performance_schema.variables_info",
        )
    for name in data.mysql8_knobs:
        if name not in server_names:
            cat.unsupported[name] = f"described in catalogs/{MYSQL8_DATA} but this server ({version}) does not have it"
    for raw, value in values.items():  # as for MariaDB: the global value of every variable that is not a knob
        name = str(raw).lower()
        if name not in cat.knobs and value is not None:
            number = _num(value)
            cat.facts[name] = number if number is not None else str(value)
    return cat
