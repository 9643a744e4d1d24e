"""The opening's data (issue 36 point 1): whole candidate configurations and what the generator says about
them. Plain frozen dataclasses, so the race (``agenticdb.planner.opening`` consumers) and the journal can
read them without importing the sources."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from agenticdb.models import ApplyMode, KnobSpec, Proposal

SourceName = Literal["host-sized", "evidence", "limits", "experience", "llm"]
SOURCES: tuple[SourceName, ...] = ("host-sized", "evidence", "limits", "experience", "llm")
"""Every candidate source, in the order the generator asks them."""


@dataclass(frozen=True)
class Candidate:
    """One whole configuration the opening may race.

    Attributes:
        name: its source: "host-sized" | "evidence" | "limits" | "experience" | "llm".
        changes: knob → value in the server's spelling ("256MB", "off", "1.1"; MariaDB sizes in bytes).
            Only knobs whose value differs from the current configuration.
        rationale: one paragraph: what the set is for and why these values.
        sources: knob → where its figure comes from (a manual page, a tool's documented rule, a measured
            statistic of this baseline, an experience record, the LLM's reply).
        apply_modes: knob → how it takes effect (server metadata: ``KnobSpec.apply``); filled by the
            generator, so :attr:`restart_knobs` needs no catalog.
        repaired: what the set validation changed to make the set fit (``"work_mem: 64MB → 32MB (trade: …)"``),
            empty when it passed as generated.
        warnings: the validator's warnings for the whole set (worst-case memory, auto values …).
        kept: knob → where its figure comes from, for knobs the source sized at the value already in
            effect (so not in ``changes``): the host-sized set's answer "leave it" (``advice.sizing``).
    """

    name: str
    changes: dict[str, str]
    rationale: str
    sources: dict[str, str]
    apply_modes: dict[str, ApplyMode] = field(default_factory=dict)
    repaired: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    kept: dict[str, str] = field(default_factory=dict)

    @property
    def restart_knobs(self) -> list[str]:
        """The knobs of the set that take effect only after a restart (sorted)."""
        return sorted(k for k, m in self.apply_modes.items() if m == ApplyMode.restart and k in self.changes)

    @property
    def needs_restart(self) -> bool:
        """Whether applying the set needs a server restart."""
        return bool(self.restart_knobs)

    def key(self) -> tuple[tuple[str, str], ...]:
        """Identity of the configuration (sorted knob/value pairs, values lower-cased): two candidates with
        the same key are the same configuration whatever their source."""
        return tuple(sorted((k.lower(), str(v).strip().lower()) for k, v in self.changes.items()))


@dataclass(frozen=True)
class Opening:
    """The opening: up to K validated whole configurations, and what could not be produced.

    Attributes:
        candidates: validated sets, in race order (the strongest first), at most K, pairwise different.
        absent: one line per source that produced no set, with why ("experience: no experience retrieved").
        notes: evidence the sources needed and did not have ("JIT share not measured: …").
        dropped: (candidate name, reason) for sets the validation refused and could not repair, and for
            duplicates and sets beyond K.
        diagnosis: the LLM planner's own diagnosis of the baseline (the ``bottleneck``, ``evidence`` and
            ``rationale`` of the reply that gave its whole configuration), whether or not its set passed the
            validation; None without an LLM planner or when it gave no usable reply. The session journals it
            as its ``diagnosis`` event (the scenario suite scores it) when the LLM planner runs.
    """

    candidates: list[Candidate]
    absent: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    diagnosis: Proposal | None = None

    @property
    def restart_knobs(self) -> list[str]:
        """Restart-only knobs across all candidates (sorted): the race restarts once when they agree."""
        return sorted({k for c in self.candidates for k in c.restart_knobs})

    def restart_groups(self) -> list[tuple[tuple[str, str], ...]]:
        """The distinct restart-only configurations of the candidates that restart (sorted knob/value pairs),
        in race order: the race needs one restart per group."""
        groups: list[tuple[tuple[str, str], ...]] = []
        for c in self.race_order():
            g = tuple(sorted((k, c.changes[k]) for k in c.restart_knobs))
            if g and g not in groups:
                groups.append(g)
        return groups

    def race_order(self) -> list[Candidate]:
        """The candidates in an order that restarts least: those that need no restart first, then grouped by
        their restart-only values (the group of the first restarting candidate first); stable otherwise."""
        firsts: dict[tuple[tuple[str, str], ...], int] = {}
        for i, c in enumerate(self.candidates):
            firsts.setdefault(tuple(sorted((k, c.changes[k]) for k in c.restart_knobs)), i)

        def rank(item: tuple[int, Candidate]) -> tuple[int, int, int]:
            i, c = item
            g = tuple(sorted((k, c.changes[k]) for k in c.restart_knobs))
            return (1 if g else 0, firsts[g], i)

        return [c for _, c in sorted(enumerate(self.candidates), key=rank)]

    def describe(self) -> str:
        """A readable multi-line summary (one block per candidate, then absent/notes/dropped)."""
        lines: list[str] = []
        for c in self.candidates:
            lines.append(f"[{c.name}] " + ", ".join(f"{k}={v}" for k, v in sorted(c.changes.items())))
            lines.append(f"  why: {c.rationale}")
            lines += [f"  repaired: {r}" for r in c.repaired]
        lines += [f"absent: {a}" for a in self.absent]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"dropped {n}: {r}" for n, r in self.dropped]
        return "\n".join(lines)


def apply_modes(c: Candidate, specs: dict[str, KnobSpec]) -> dict[str, ApplyMode]:
    """How each knob of ``c`` takes effect: its own apply modes, else the catalog's (unknown knobs left out)."""
    modes = {k: c.apply_modes.get(k) or (specs[k].apply if k in specs else None) for k in c.changes}
    return {k: m for k, m in modes.items() if m is not None}


def restart_only(c: Candidate, specs: dict[str, KnobSpec]) -> set[str]:
    """The knobs of ``c`` that take effect only after a restart (:func:`apply_modes`)."""
    return {k for k, m in apply_modes(c, specs).items() if m == ApplyMode.restart}


def _sentence(text: str) -> str:
    """``text`` ended by a full stop when it ends in none (a rationale such as "… = 662 MiB" before another
    sentence)."""
    text = text.rstrip()
    return text if not text or text.endswith((".", "!", "?", ":")) else f"{text}."


def without_restart(candidates: list[Candidate], specs: dict[str, KnobSpec]) -> list[Candidate]:
    """Each candidate without its restart-only knobs (:func:`restart_only`), named ``"<source> without
    restart"``: what a budget that pays for no restart can still race. Sets left empty, and sets identical to
    an earlier one, are left out; a candidate with no restart-only knob stays as it is."""
    out: list[Candidate] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for c in candidates:
        cut = restart_only(c, specs)
        lighter = (
            c
            if not cut
            else replace(
                c,
                name=f"{c.name} without restart",
                changes={k: v for k, v in c.changes.items() if k not in cut},
                sources={k: v for k, v in c.sources.items() if k not in cut},
                apply_modes={k: m for k, m in c.apply_modes.items() if k not in cut},
                rationale=f"{_sentence(c.rationale)} Raced without its restart-only knobs ({', '.join(sorted(cut))}): "
                "the time budget pays for no restart.",
            )
        )
        if lighter.changes and lighter.key() not in seen:
            seen.add(lighter.key())
            out.append(lighter)
    return out
