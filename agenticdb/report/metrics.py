"""Prometheus metrics of the daemon (issue 19), computed from the journal so they always agree with it.

:class:`JournalCollector` is a ``prometheus_client`` custom collector: at each scrape (or textfile
write) it reads the journal events appended since the last one and updates its totals. Served with
``prometheus_client.start_http_server`` on ``[daemon] metrics_listen`` (``host:port``, localhost by
default) and/or written atomically to ``[daemon] metrics_textfile`` for node_exporter's textfile
collector (https://github.com/prometheus/node_exporter#textfile-collector).

=============================================  ======  ====================================================
metric                                          type    source in the journal
=============================================  ======  ====================================================
agenticdb_sessions_started_total                counter ``session.start``
agenticdb_sessions_completed_total              counter ``session.end`` with status completed
agenticdb_sessions_failed_total                 counter ``session.end`` with status failed or crashed
agenticdb_sessions_ended_total{status}          counter ``session.end`` by status
agenticdb_rounds_total                          counter ``decision`` (one per round)
agenticdb_trials_kept_total                     counter ``decision`` with kept = true
agenticdb_trials_reverted_total                 counter ``reverted``
agenticdb_trials_recovered_total                counter ``recovery``
agenticdb_validator_rejections_total{kind}      counter failed checks of ``verdict`` events, by rule kind
agenticdb_objective                             gauge   the objective in effect: baseline, then each kept
                                                        round's candidate median
agenticdb_baseline_objective                    gauge   ``baseline`` objective of the latest session
agenticdb_gain                                  gauge   objective vs baseline (relative, + = better)
agenticdb_last_trial_gain                       gauge   the latest ``judged`` gain estimate
agenticdb_last_decision{decision,judged,kept}   gauge   1 for the latest ``decision``
agenticdb_last_change_timestamp_seconds         gauge   time of the latest kept change (Unix s)
agenticdb_root_causes_total{cause}              counter ``root_cause`` with a dominant cause, by cause
agenticdb_root_cause{cause,finding}             gauge   1 while the latest ``root_cause`` names a dominant
                                                        cause (not a knob: the session proposed none)
agenticdb_last_decision_timestamp_seconds       gauge   time of the latest ``decision`` (Unix s)
=============================================  ======  ====================================================
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agenticdb.config import Settings
from agenticdb.config.sections import parse_listen
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent

log = structlog.get_logger(__name__)

FAILED_STATUSES = frozenset({"failed", "crashed"})
TEXTFILE_EVERY_S = 5.0


class JournalCollector(Collector):
    """Metrics over the events of the journal file at ``path`` (read-only connection per read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.last_id = 0
        self.counts: dict[str, float] = {
            k: 0.0 for k in ("started", "completed", "failed", "rounds", "kept", "reverted", "recovered")
        }
        self.ended: dict[str, float] = {}
        self.rejections: dict[str, float] = {}
        self.gauges: dict[str, float | None] = {
            k: None for k in ("objective", "baseline", "gain", "trial_gain", "last_change", "last_decision")
        }
        self.higher_is_better = True
        self.decision: dict[str, str] | None = None
        self.root_causes: dict[str, float] = {}
        self.root_cause: tuple[str, str] | None = None  # (cause, finding id) of the latest root_cause event

    def update(self) -> None:
        """Read the events appended since the last update."""
        if not self.path.exists():
            return
        with self.lock, Journal(self.path, read_only=True) as journal:
            for e in journal.events(after_id=self.last_id):
                self._event(e)
                self.last_id = e.id

    def _event(self, e: JournalEvent) -> None:
        d = e.data
        if e.event == "session.start":
            self.counts["started"] += 1
        elif e.event == "session.end":
            status = str(d.get("status", "ended"))
            self.ended[status] = self.ended.get(status, 0.0) + 1
            self.counts["completed"] += status == "completed"
            self.counts["failed"] += status in FAILED_STATUSES
        elif e.event == "baseline":
            self._baseline(d)
        elif e.event == "verdict" and not d.get("ok", True):
            for f in d.get("failed", []):
                kind = str(f.get("check", "unknown"))
                self.rejections[kind] = self.rejections.get(kind, 0.0) + 1
        elif e.event == "judged" and isinstance(d.get("gain"), int | float):
            self.gauges["trial_gain"] = float(d["gain"])
        elif e.event == "decision":
            self._decision(e)
        elif e.event == "reverted":
            self.counts["reverted"] += 1
        elif e.event == "recovery":
            self.counts["recovered"] += 1
        elif e.event == "root_cause":
            top = d.get("dominant") or {}
            self.root_cause = (str(top.get("cause")), str(top.get("id"))) if top else None
            if top:
                self.root_causes[str(top.get("cause"))] = self.root_causes.get(str(top.get("cause")), 0.0) + 1

    def _baseline(self, d: dict[str, Any]) -> None:
        objective = d.get("objective")
        runs = [x for x in d.get("objectives", []) if isinstance(x, int | float)]
        if objective is None and runs:
            objective = statistics.median(runs)
        self.higher_is_better = bool(d.get("higher_is_better", True))
        if isinstance(objective, int | float):
            self.gauges["baseline"] = self.gauges["objective"] = float(objective)
            self.gauges["gain"] = 0.0

    def _decision(self, e: JournalEvent) -> None:
        d = e.data
        ts = datetime.fromisoformat(e.ts).timestamp()
        self.counts["rounds"] += 1
        self.gauges["last_decision"] = ts
        self.decision = {
            "decision": str(d.get("decision", "")),
            "judged": str(d.get("judged") or "none"),
            "kept": "true" if d.get("kept") else "false",
        }
        if d.get("kept"):
            self.counts["kept"] += 1
            self.gauges["last_change"] = ts
            if isinstance(d.get("objective"), int | float):
                objective = float(d["objective"])
                self.gauges["objective"] = objective
                base = self.gauges["baseline"]
                if base:
                    diff = objective - base
                    self.gauges["gain"] = (diff if self.higher_is_better else -diff) / base

    def collect(self) -> Iterator[Metric]:
        """The metrics after reading new journal events (called by prometheus_client at each scrape)."""
        try:
            self.update()
        except Exception as exc:  # noqa: BLE001 - a scrape must answer even when the journal is busy
            log.warning("metrics.journal_read_failed", reason=str(exc))
        with self.lock:
            yield from self._families()

    def _families(self) -> Iterator[Metric]:
        helps = {
            "started": ("sessions_started", "Tuning sessions started"),
            "completed": ("sessions_completed", "Tuning sessions completed"),
            "failed": ("sessions_failed", "Tuning sessions that failed or crashed"),
            "rounds": ("rounds", "Rounds decided"),
            "kept": ("trials_kept", "Trials kept (beat the best configuration)"),
            "reverted": ("trials_reverted", "Trials reverted to the best configuration"),
            "recovered": ("trials_recovered", "Recoveries after a failed trial"),
        }
        for key, (name, text) in helps.items():
            yield CounterMetricFamily(f"agenticdb_{name}", text, value=self.counts[key])
        ended = CounterMetricFamily("agenticdb_sessions_ended", "Sessions ended, by status", labels=["status"])
        for status, n in sorted(self.ended.items()):
            ended.add_metric([status], n)
        yield ended
        rej = CounterMetricFamily(
            "agenticdb_validator_rejections", "Validator failed checks, by rule kind", labels=["kind"]
        )
        for kind, n in sorted(self.rejections.items()):
            rej.add_metric([kind], n)
        yield rej
        causes = CounterMetricFamily(
            "agenticdb_root_causes", "Sessions that found a dominant cause no setting fixes", labels=["cause"]
        )
        for cause, n in sorted(self.root_causes.items()):
            causes.add_metric([cause], n)
        yield causes
        if self.root_cause is not None:
            rc = GaugeMetricFamily(
                "agenticdb_root_cause", "The latest session's dominant non-knob cause (1)", labels=["cause", "finding"]
            )
            rc.add_metric(list(self.root_cause), 1.0)
            yield rc
        yield from self._gauges()

    def _gauges(self) -> Iterator[Metric]:
        names = {
            "objective": ("agenticdb_objective", "Objective of the configuration in effect"),
            "baseline": ("agenticdb_baseline_objective", "Baseline objective of the latest session"),
            "gain": ("agenticdb_gain", "Objective in effect vs baseline (relative, positive = better)"),
            "trial_gain": ("agenticdb_last_trial_gain", "Latest trial's paired gain estimate (relative)"),
            "last_change": ("agenticdb_last_change_timestamp_seconds", "Unix time of the latest kept change"),
            "last_decision": ("agenticdb_last_decision_timestamp_seconds", "Unix time of the latest decision"),
        }
        for key, (name, text) in names.items():
            value = self.gauges[key]
            if value is not None:
                yield GaugeMetricFamily(name, text, value=value)
        if self.decision is not None:
            last = GaugeMetricFamily(
                "agenticdb_last_decision", "The latest decision (value 1)", labels=["decision", "judged", "kept"]
            )
            last.add_metric([self.decision["decision"], self.decision["judged"], self.decision["kept"]], 1.0)
            yield last


class DaemonMetrics:
    """The daemon's metrics endpoint and/or textfile. :meth:`tick` (each idle loop) rewrites the
    textfile at most every ``TEXTFILE_EVERY_S`` s; :meth:`refresh` rewrites it now."""

    def __init__(self, journal_path: Path, listen: str | None, textfile: Path | None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = JournalCollector(journal_path)
        self.registry.register(self.collector)
        self.textfile = textfile
        self.server: Any = None
        self._written = 0.0
        if listen:
            host, port = parse_listen(listen)
            self.server, _thread = start_http_server(port, addr=host, registry=self.registry)
            log.info("metrics.listening", address=listen, path="/metrics")
        self.refresh()

    def refresh(self) -> None:
        """Write the textfile now (when configured)."""
        if self.textfile is None:
            return
        self.textfile.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(self.textfile), self.registry)
        self._written = time.monotonic()

    def tick(self) -> None:
        """Rewrite the textfile when the last write is older than ``TEXTFILE_EVERY_S``."""
        if self.textfile is not None and time.monotonic() - self._written >= TEXTFILE_EVERY_S:
            self.refresh()

    def close(self) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def start_metrics(cfg: Settings, journal: Journal) -> DaemonMetrics | None:
    """The metrics of ``[daemon] metrics_listen`` / ``metrics_textfile``; None when neither is set."""
    d = cfg.daemon
    if not d.metrics_listen and d.metrics_textfile is None:
        return None
    return DaemonMetrics(journal.path, d.metrics_listen, d.metrics_textfile)
