"""The ``agenticdb`` command line: tune, daemon, sandbox, validate, catalog, rollback, report, journal, memory.

Every command that talks to a database accepts ``--config FILE``, ``--target DSN`` and
``--sandbox postgres|mariadb``. Exit codes: 0 success, 1 the operation failed (one-line reason on
stderr), 2 bad usage or configuration.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import structlog
import typer
from rich.console import Console
from rich.markup import escape

from agenticdb import __version__
from agenticdb.cli.change_file import ChangeFileError, parse_change_file
from agenticdb.cli.help_model import PROPOSAL_HELP, TARGET_HELP, config_help
from agenticdb.cli.journal_cmd import home_option, journal_app
from agenticdb.cli.memory_cmd import memory_app
from agenticdb.cli.output import OutputFormat
from agenticdb.cli.role_cmd import read_password, sandbox_role, setup_role
from agenticdb.config import (
    ConfigError,
    Settings,
    config_warnings,
    load_config,
    register_settings_secrets,
    unit_warnings,
)
from agenticdb.config.sections import HOME_ORDER
from agenticdb.dialect import is_mysql_dsn, is_pg_dsn
from agenticdb.host.privileges import PrivilegeError
from agenticdb.invocation import command, remember
from agenticdb.logs import configure_logging
from agenticdb.redaction import redact
from agenticdb.sandbox import sandbox_kind, sandbox_kinds_help, sandbox_of
from agenticdb.store.faults import StorageError

if TYPE_CHECKING:
    from agenticdb.sandbox import Sandbox

# typer's rich help prints a type tag (<bool>, <str>, <float>) beside every option; the help text says
# what an option takes, and a tag on every flag (even --help <bool>) is noise a DBA reads past (issue 39).
# An option or argument still shows its metavar when it declares one.
typer.core.TyperOption.display_type_rich = lambda self, ctx: self.metavar  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = lambda self, ctx: self.metavar  # type: ignore[method-assign]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Closed-loop tuning agent for PostgreSQL, MySQL/MariaDB and Linux.",
)
sandbox_app = typer.Typer(no_args_is_help=True, help="Private database instances for trying agenticdb.")
app.add_typer(sandbox_app, name="sandbox")
# Piped stdout (a log, a ticket): lines are not wrapped at rich's 80-column default (tables print
# through agenticdb.cli.output.print_table, at most 120 columns).
console = Console(soft_wrap=not Console().is_terminal)
err = Console(stderr=True)
log = structlog.get_logger(__name__)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="agenticdb.toml")]
TargetOpt = Annotated[str | None, typer.Option("--target", help=TARGET_HELP)]
SandboxOpt = Annotated[str | None, typer.Option("--sandbox", help=f"private instance: {sandbox_kinds_help()}")]
HomeOpt = Annotated[Path | None, home_option("agenticdb data dir (SQLite files, sandboxes)")]
FormatOpt = Annotated[
    str, typer.Option("--format", help="text (a table; plain and at most 120 columns when piped) | json")
]


def fail(message: str, code: int = 1) -> None:
    """Print a one-line reason and exit with ``code``.

    The message is printed verbatim (no Rich markup: "[workload]" in a message stays visible) and is
    not wrapped, so it can be grepped and copied.
    """
    err.print(f"[bold red]error:[/] {escape(redact(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warn(lines: list[str]) -> None:
    """Print each line as a one-line ``warning:`` on stderr (verbatim, not wrapped)."""
    for line in lines:
        err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def settings(
    config: Path | None,
    target: str | None,
    sandbox: str | None,
    home: Path | None,
    extra: dict[str, Any] | None = None,
) -> Settings:
    """Load configuration with CLI overrides (flags > environment > file > defaults)."""
    remember(config, target, sandbox, home)  # the hints this command prints carry the same flags
    overrides: dict[str, Any] = {}
    if home is not None:  # the files follow unless the file or environment names them (StorageConfig._paths)
        overrides["storage"] = {"home": home}
    for section, values in (extra or {}).items():
        values = {k: v for k, v in values.items() if v is not None}
        if values:
            overrides.setdefault(section, {}).update(values)
    try:
        cfg = load_config(config, overrides)
        if sandbox:
            from agenticdb.app import SetupError, sandbox_target_config  # lazy: start-up cost (loads 30 modules)

            try:
                tcfg = sandbox_target_config(sandbox, cfg.storage.home)
            except SetupError as exc:
                fail(str(exc), 2)
            update: dict[str, Any] = {"database": cfg.target.database}
            if cfg.target.service.cgroup:  # the sandbox server confined by the caller: restarts stay inside
                update["service"] = tcfg.service.model_copy(update={"cgroup": cfg.target.service.cgroup})
            cfg = cfg.model_copy(update={"target": tcfg.model_copy(update=update)})
        if target:
            kind = "postgresql" if is_pg_dsn(target) else cfg.target.kind
            if is_mysql_dsn(target) and kind == "postgresql":
                kind = "mariadb"
            cfg = cfg.model_copy(update={"target": cfg.target.model_copy(update={"dsn": target, "kind": kind})})
    except ConfigError as exc:
        fail(str(exc), 2)
    register_settings_secrets(cfg)  # --target/--sandbox DSNs came after load_config
    return cfg


def _print_version(value: bool) -> None:
    if value:
        console.print(f"agenticdb {__version__}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="debug logging")] = False,
    json_logs: Annotated[bool, typer.Option("--json-logs", help="log as JSON lines")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", help="print the version and exit", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    configure_logging(verbose=verbose, json_logs=json_logs)


# ----------------------------------------------------------------------------------------- tune
@app.command()
def tune(
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    workload: Annotated[str | None, typer.Option(help=config_help("workload.kind", "the benchmark, or live"))] = None,
    objective: Annotated[str | None, typer.Option(help=config_help("workload.objective", "what is optimised"))] = None,
    rounds: Annotated[int | None, typer.Option(help=config_help("loop.max_rounds", "max rounds"))] = None,
    duration: Annotated[float | None, typer.Option(help=config_help("workload.duration_s"))] = None,
    warmup: Annotated[float | None, typer.Option(help=config_help("workload.warmup_s"))] = None,
    warmup_max: Annotated[float | None, typer.Option(help=config_help("workload.warmup_max_s"))] = None,
    scale: Annotated[
        float | None, typer.Option(help=config_help("workload.scale", "benchmark scale (pgbench -s, rows, TPC-H SF)"))
    ] = None,
    clients: Annotated[int | None, typer.Option(help=config_help("workload.clients"))] = None,
    planner: Annotated[str | None, typer.Option(help=config_help("planner.kind", "who proposes changes"))] = None,
    stage: Annotated[str | None, typer.Option(help=config_help("loop.stage", "what is tuned"))] = None,
    start_from: Annotated[
        Path | None,
        typer.Option(
            "--start-from", help=config_help("loop.start_from", "TOML/JSON of name = value applied before the baseline")
        ),
    ] = None,
    baseline_runs: Annotated[int | None, typer.Option(help=config_help("loop.baseline_runs"))] = None,
    max_pairs: Annotated[int | None, typer.Option(help=config_help("loop.max_pairs"))] = None,
    time_budget: Annotated[
        float | None, typer.Option(help=config_help("loop.time_budget_s", "seconds for the whole session"))
    ] = None,
    latency_guard: Annotated[float | None, typer.Option(help=config_help("loop.latency_guard"))] = None,
    allow_restart: Annotated[
        bool | None,
        typer.Option(
            "--allow-restart/--no-restart",
            help=config_help(
                "policy.allow_restart", "may agenticdb restart the server for restart-only knobs (shared_buffers …)"
            ),
        ),
    ] = None,
    reset_data: Annotated[
        bool | None,
        typer.Option(
            "--reset-data",
            help=config_help("loop.reset_data", "sandbox only: " + "restore a pristine data copy before every run"),
        ),
    ] = None,
) -> None:
    """Run one closed-loop tuning session and print a live table of rounds."""
    cfg = settings(
        config,
        target,
        sandbox,
        home,
        {
            "workload": {
                "kind": workload,
                "objective": objective,
                "duration_s": duration,
                "warmup_s": warmup,
                "warmup_max_s": warmup_max,
                "scale": scale,
                "clients": clients,
            },
            "loop": {
                "max_rounds": rounds,
                "stage": stage,
                "baseline_runs": baseline_runs,
                "max_pairs": max_pairs,
                "time_budget_s": time_budget,
                "latency_guard": latency_guard,
                "reset_data": reset_data,
            },
            "planner": {"kind": planner},
            "policy": {"allow_restart": allow_restart},
        },
    )
    warn(unit_warnings(cfg))  # latency_guard = 25, steal_pct = 0.1: said before the session spends its time
    from agenticdb.cli.tune_cmd import budget_warning, run_tune  # lazy: start-up cost (loads 23 modules)

    warn(budget_warning(cfg))  # a budget the baseline alone uses up: said before it is spent

    start_file = start_from or (Path(cfg.loop.start_from) if cfg.loop.start_from else None)
    start = read_change_file(start_file) if start_file else None
    raise typer.Exit(run_tune(cfg, console, start))


def read_change_file(path: Path) -> dict[str, Any]:
    """A change file (:func:`agenticdb.cli.change_file.parse_change_file`); exits with code 2 and its
    one-line reason when it cannot be read as name = value."""
    try:
        return parse_change_file(path)
    except ChangeFileError as exc:
        fail(str(exc), 2)
        raise  # unreachable: fail raises


# ------------------------------------------------------------------------------------- sandbox
KindArg = Annotated[str, typer.Argument(help=f"which DBMS: {sandbox_kinds_help()}")]


def _sandbox_kind(kind: str) -> str:
    """The sandbox kind ``kind`` spells (agenticdb.sandbox.sandbox_kind), or exit 2 listing the names."""
    try:
        return sandbox_kind(kind)
    except ValueError as exc:
        fail(str(exc), 2)
        raise  # unreachable: fail raises


def _sandbox(kind: str, home: Path | None) -> Sandbox:
    kind = _sandbox_kind(kind)
    cfg = settings(None, None, None, home)
    return sandbox_of(kind, cfg.storage.home)


@sandbox_app.command("up")
def sandbox_up(kind: KindArg, home: HomeOpt = None) -> None:
    """Create (if needed) and start a private instance: own data dir, port and socket dir."""
    kind = _sandbox_kind(kind)
    try:
        info = _sandbox(kind, home).up()
    except Exception as exc:  # noqa: BLE001 - initdb/start errors are shown as one line
        fail(f"sandbox {kind} did not start: {exc} {getattr(exc, 'output', '')[-800:]}")
    console.print(f"[green]{kind} sandbox up[/]: {info.dsn}  (data dir {info.data_dir})")
    _sandbox_role(kind, home)


def _sandbox_role(kind: str, home: Path | None) -> None:
    """Create the sandbox's least-privilege role (``setup-role --apply``) once and record it, so
    ``tune --sandbox postgres|mariadb`` runs without superuser (README "Least privilege")."""
    try:
        role, dsn = sandbox_role(settings(None, None, kind, home), kind)
    except Exception as exc:  # noqa: BLE001 - the sandbox stays usable as superuser; say why
        fail(f"sandbox {kind} is up, but creating its agenticdb role failed: {exc}")
    hint = command(f"tune --sandbox {kind}", ("home",))  # a sandbox under another --home needs it again
    console.print(f"least-privilege role {role}: {hint} connects as {dsn}", highlight=False)


@sandbox_app.command("down")
def sandbox_down(kind: KindArg, home: HomeOpt = None) -> None:
    """Stop the private instance and delete its folder."""
    kind = _sandbox_kind(kind)
    sb = _sandbox(kind, home)
    if sb.info() is None and not sb.root.exists():
        console.print(f"no {kind} sandbox here ({sb.root} does not exist); nothing to remove", highlight=False)
        return
    sb.down()
    console.print(f"{kind} sandbox removed ({sb.root})", highlight=False)


@sandbox_app.command("status")
def sandbox_status(kind: KindArg, home: HomeOpt = None) -> None:
    """Show whether the private instance exists and accepts connections (exit 1 when it does not run)."""
    kind = _sandbox_kind(kind)
    sb = _sandbox(kind, home)
    st = sb.status()
    if not st.get("exists"):  # which home was looked in: --home, AGENTICDB_HOME and root/user homes differ
        st = {**st, "checked": str(sb.root)}
    console.print_json(data={k: str(v) if isinstance(v, Path) else v for k, v in st.items()})
    if not st.get("exists"):
        err.print(
            f"no {kind} sandbox in {sb.root}: the home is --home, else {HOME_ORDER}", highlight=False, soft_wrap=True
        )
    if not st.get("running"):
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------ validate
class ApplyClaim(StrEnum):
    """Apply modes a change set may claim (agenticdb.models.ApplyMode)."""

    dynamic = "dynamic"
    reload = "reload"
    restart = "restart"


class ValidateStage(StrEnum):
    """Which catalog ``validate`` checks against."""

    dbms = "dbms"
    os = "os"


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="TOML/JSON file of name = value")],
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    stage: Annotated[ValidateStage, typer.Option(help="which catalog: the DBMS or the Linux host")] = "dbms",  # type: ignore[assignment]
    apply_claim: Annotated[
        ApplyClaim | None,
        typer.Option("--apply", help="the apply mode you claim the set needs (checked against server metadata)"),
    ] = None,
    fmt: FormatOpt = "text",
) -> None:
    """Check a proposed change set against a live target; exit 0 only when it would be applied."""
    from agenticdb.cli.inspect_cmd import run_validate  # lazy: start-up cost (loads 38 modules)

    fmt = check_format(fmt)
    changes = read_change_file(file)
    cfg = settings(config, target, sandbox, home)
    claim = apply_claim.value if apply_claim else None
    raise typer.Exit(run_validate(cfg, changes, ValidateStage(stage).value, claim, console, fmt))


def check_format(fmt: str) -> str:
    """The ``--format`` value, or exit 2 naming it and the choices."""
    if fmt not in {f.value for f in OutputFormat}:
        fail(f"--format {fmt!r}: expected text or json", 2)
    return fmt


@app.command("validate-config")
def validate_config(config: Annotated[Path, typer.Argument(help="agenticdb.toml")]) -> None:
    """Check a configuration file (unknown keys and invalid values are errors)."""
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        fail(str(exc), 2)
    warn(config_warnings(cfg))
    console.print(
        f"[green]ok[/]: {escape(str(config))} (target {cfg.target.kind}, workload {cfg.workload.kind}, "
        f"durability {cfg.policy.durability})",
        highlight=False,
        soft_wrap=True,
    )


# ------------------------------------------------------------------------------------- catalog
@app.command()
def catalog(
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    excluded: Annotated[bool, typer.Option("--excluded", help="list exclusions with their reasons")] = False,
    os_stage: Annotated[bool, typer.Option("--os", help="the Linux catalog of this host")] = False,
    like: Annotated[str | None, typer.Option(help="only names containing this text")] = None,
    fmt: FormatOpt = "text",
) -> None:
    """Show the action catalog: tunable knobs with type, unit, range and apply requirement."""
    from agenticdb.cli.inspect_cmd import run_catalog  # lazy: start-up cost (loads 38 modules)

    fmt = check_format(fmt)
    cfg = settings(config, target, sandbox, home)
    raise typer.Exit(run_catalog(cfg, excluded, os_stage, like, console, fmt))


# ------------------------------------------------------------------------------------ rollback
@app.command()
def rollback(
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    dbms: Annotated[bool, typer.Option("--dbms", help="restore the DBMS configuration")] = False,
    os_: Annotated[bool, typer.Option("--os", help="restore saved original OS values")] = False,
    session: Annotated[str | None, typer.Option(help="session id (default: the latest)")] = None,
    to: Annotated[str, typer.Option(help="baseline | last-safe")] = "baseline",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show what would change, change nothing")] = False,
) -> None:
    """Put back what agenticdb changed: the newest session's starting DBMS configuration (or the last safe one before its latest change), and/or the original OS values saved before the first write. Every value is restored, including ones changed by others since: preview with --dry-run."""  # noqa: E501 - typer shows the docstring as one help paragraph
    from agenticdb.cli.rollback_cmd import run_rollback  # lazy: start-up cost (loads 17 modules)

    if not dbms and not os_:
        fail("say what to roll back: --dbms, --os or both", 2)
    cfg = settings(config, target, sandbox, home)
    raise typer.Exit(run_rollback(cfg, dbms, os_, session, to, console, dry_run=dry_run))


# -------------------------------------------------------------------------------------- report
@app.command()
def report(
    session: Annotated[str | None, typer.Argument(help="session id (default: the latest)")] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="also draw the objective curve to this PNG")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="text (Markdown), json, or html (with the curve embedded)")
    ] = "text",
) -> None:
    """A Markdown report of one session: baseline, rounds, best configuration, every change's reason."""
    from agenticdb.cli.inspect_cmd import run_report  # lazy: start-up cost (loads 38 modules)

    cfg = settings(config, None, None, home)
    if fmt == "md":
        fmt = "text"
    if fmt not in ("text", "json", "html"):
        fail(f"--format={fmt!r}: must be text (Markdown), json or html", 2)
    if fmt == "html" or plot is not None:
        from agenticdb.cli.report_plot import run_plot_report  # lazy: start-up cost (loads 25 modules)

        code = run_plot_report(cfg, session, plot, "html" if fmt == "html" else "md", console)
        if code or fmt == "html":
            raise typer.Exit(code)
    raise typer.Exit(run_report(cfg, session, console, fmt))


# -------------------------------------------------------------------------------------- daemon
@app.command()
def daemon(
    config: ConfigOpt = None, target: TargetOpt = None, sandbox: SandboxOpt = None, home: HomeOpt = None
) -> None:
    """Run as a long-lived service: scheduled sessions, crash reconciliation, sd_notify."""
    from agenticdb.app import SetupError, require_dsn  # lazy: start-up cost (loads 30 modules)
    from agenticdb.daemon import run_daemon  # lazy: start-up cost (loads prometheus_client; 73 modules)

    cfg = settings(config, target, sandbox, home)
    try:  # without a server every scheduled session would only fail; refuse before anything is written
        require_dsn(cfg)
    except SetupError as exc:
        fail(str(exc), 2)
    raise typer.Exit(
        run_daemon(cfg, config_path=config, overrides={"target": target, "sandbox": sandbox, "home": home})
    )


# ------------------------------------------------------------------- advise / apply / approval
@app.command()
def advise(
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    format_: Annotated[str, typer.Option("--format", help="text | json | sql | conf | sysctl | tuned")] = "text",
    fail_on: Annotated[
        str | None, typer.Option("--fail-on", help="exit 3 when anything reaches: info|low|medium|high|critical")
    ] = None,
    observe: Annotated[float, typer.Option(help="seconds of runtime statistics to observe (no load)")] = 5.0,
    no_os: Annotated[bool, typer.Option("--no-os", help="leave out the Linux sysctl/block advice")] = False,
) -> None:
    """Recommend without changing anything: diagnosis, playbook sizing, experience and the validator's verdict."""
    from agenticdb.cli.advise_cmd import run_advise  # lazy: start-up cost (loads 31 modules)

    cfg = settings(config, target, sandbox, home)
    raise typer.Exit(run_advise(cfg, format_, fail_on, observe, not no_os, console))


@app.command("apply")
def apply_(
    ids: Annotated[list[str], typer.Argument(help="recommendation ids from `agenticdb advise`")],
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    measure: Annotated[bool, typer.Option("--measure", help="run the workload once before and after")] = False,
    observe: Annotated[float, typer.Option(help="seconds of statistics for recomputing the advice")] = 2.0,
) -> None:
    """Apply chosen recommendations through the validator, snapshot, verification and journal (undo: rollback)."""
    from agenticdb.cli.advise_cmd import run_apply  # lazy: start-up cost (loads 31 modules)

    cfg = settings(config, target, sandbox, home)
    raise typer.Exit(run_apply(cfg, ids, measure, observe, console))


@app.command()
def pending(config: ConfigOpt = None, home: HomeOpt = None) -> None:
    """List the daemon's proposals waiting for approval (policy.mode = approve | advise)."""
    from agenticdb.cli.advise_cmd import run_pending  # lazy: start-up cost (loads 31 modules)

    raise typer.Exit(run_pending(settings(config, None, None, home), console))


@app.command()
def approve(
    proposal: Annotated[str, typer.Argument(help=PROPOSAL_HELP)],
    config: ConfigOpt = None,
    home: HomeOpt = None,
    wait: Annotated[float, typer.Option(help="seconds to wait until the daemon took the decision")] = 0.0,
) -> None:
    """Allow the daemon to apply one waiting proposal (journaled with your OS user)."""
    from agenticdb.cli.advise_cmd import run_decide  # lazy: start-up cost (loads 31 modules)

    raise typer.Exit(run_decide(settings(config, None, None, home), proposal, "approve", "", wait, console))


@app.command()
def reject(
    proposal: Annotated[str, typer.Argument(help=PROPOSAL_HELP)],
    config: ConfigOpt = None,
    home: HomeOpt = None,
    why: Annotated[str, typer.Option("--why", help="reason, journaled")] = "",
    wait: Annotated[float, typer.Option(help="seconds to wait until the daemon took the decision")] = 0.0,
) -> None:
    """Drop one waiting proposal; it is not proposed again (journaled with your OS user)."""
    from agenticdb.cli.advise_cmd import run_decide  # lazy: start-up cost (loads 31 modules)

    raise typer.Exit(run_decide(settings(config, None, None, home), proposal, "reject", why, wait, console))


# ---------------------------------------------------------------------------------- setup-role
@app.command("setup-role")
def setup_role_cmd(
    config: ConfigOpt = None,
    target: TargetOpt = None,
    sandbox: SandboxOpt = None,
    home: HomeOpt = None,
    role: Annotated[str, typer.Option(help="name of the login role to create")] = "agenticdb",
    password_file: Annotated[
        Path | None, typer.Option("--password-file", help="file holding the role's password (never printed)")
    ] = None,
    host: Annotated[str, typer.Option(help="MariaDB/MySQL: host part of the account")] = "localhost",
    apply: Annotated[bool, typer.Option("--apply", help="run the SQL through --target (must be a superuser)")] = False,
) -> None:
    """Print (and with --apply run) the SQL creating a least-privilege login role for agenticdb: ALTER SYSTEM on each tunable knob, pg_monitor and a benchmark database it owns (PostgreSQL 15); SUPER, PROCESS and its own schema (MariaDB: SET GLOBAL still needs SUPER); SYSTEM_VARIABLES_ADMIN (MySQL 8)."""  # noqa: E501 - typer shows the docstring as one help paragraph
    from agenticdb.app import SetupError, require_dsn  # lazy: start-up cost (loads 30 modules)

    cfg = settings(config, target, sandbox, home)
    try:
        require_dsn(cfg)
        result = setup_role(cfg, role, read_password(password_file), host, apply)
    except (SetupError, PrivilegeError, ValueError) as exc:
        fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - server errors (psycopg/PyMySQL) as one line
        fail(f"setup-role failed: {exc}")
    for note in result["notes"]:
        console.print(f"-- note: {note}", highlight=False, soft_wrap=True, markup=False)
    for stmt in result["statements"]:
        console.print(redact(stmt) + ";", highlight=False, soft_wrap=True, markup=False)
    if result["dsn"]:
        console.print(
            f"-- role {role} created ({len(result['applied'])} statements); set target.dsn = {redact(result['dsn'])}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )


def _add_subapps() -> None:
    app.add_typer(journal_app, name="journal", help="Read and verify the audit journal.")
    app.add_typer(memory_app, name="memory", help="Experience memory: list, show, forget, export, import, sync.")


_add_subapps()


def main() -> None:
    """Console-script entry point: set-up and configuration errors end as one line, exit 2."""
    from agenticdb.app import SetupError  # lazy: start-up cost (loads 30 modules)

    try:
        app(prog_name="agenticdb")
    except (SetupError, ConfigError) as exc:
        err.print(f"error: {redact(str(exc))}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    except StorageError as exc:  # journal or Memory Book cannot be opened/written: the file and the cause
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None
