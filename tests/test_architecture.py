"""The map stays true (issue 37): docs/architecture.md lists every module and the layer order, the layer
order matches .importlinter, the contracts hold, every in-function import says why, no module passes 600
lines. Each failure says exactly what to change."""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "agenticdb"
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 600
"""STYLE.md: modules small enough to read in one sitting (judgement, the style guide's ~600 lines)."""
BEING_SPLIT: dict[str, int] = {}
"""Modules over the limit when the test was written (issue 37 splits them; an entry is removed when its
module is split). Their size may only go down."""


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts and p.name != "__main__.py")


def _packages() -> list[Path]:
    return sorted(p.parent for p in PKG.rglob("__init__.py") if p.parent != PKG and "__pycache__" not in p.parts)


def _section_block(title: str) -> list[str]:
    """The lines of the first fenced block after the heading ``## title`` in docs/architecture.md."""
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    block = text[start:].split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def test_every_module_has_a_line_in_the_module_map() -> None:
    listed = {line.split()[0] for line in _section_block("Module map")}
    missing = []
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        if rel.endswith("__init__.py") and rel != "__init__.py":
            continue  # the package line (`name/`) covers its __init__
        if rel not in listed:
            missing.append(f"  {rel:<27} <what it holds, in a few words>")
    missing += [f"  {p.relative_to(PKG).as_posix() + '/':<27} <what the package holds>" for p in _packages()]
    missing = [m for m in missing if m.split()[0] not in listed]
    assert not missing, (
        "docs/architecture.md '## Module map' has no line for these modules; add each line inside the map's "
        "code block, next to its package:\n" + "\n".join(missing)
    )


def test_the_module_map_names_no_module_that_does_not_exist() -> None:
    stale = [
        line.split()[0]
        for line in _section_block("Module map")
        if re.fullmatch(r"[\w/]+(\.py|/)", line.split()[0]) and not (PKG / line.split()[0]).exists()
    ]
    assert not stale, f"docs/architecture.md '## Module map' names modules that do not exist; remove: {stale}"


def _doc_layers() -> list[str]:
    return [re.sub(r"^\s*\d+\s+", "", line).strip() for line in _section_block("Layers")]


def _linter_layers() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    raw = cfg["importlinter:contract:layers"]["layers"]
    return [line.strip() for line in raw.splitlines() if line.strip()]


def _names(layer: str) -> list[str]:
    return [n.strip().strip("()") for n in layer.split("|")]


def test_the_layer_order_of_the_doc_is_that_of_importlinter() -> None:
    doc, linter = _doc_layers(), _linter_layers()
    assert doc == linter, (
        "docs/architecture.md '## Layers' and the layers contract of .importlinter differ; make them the "
        f"same list, top layer first.\n  doc:          {doc}\n  .importlinter: {linter}"
    )


def test_every_top_level_module_and_package_has_a_layer() -> None:
    placed = {name for layer in _linter_layers() for name in _names(layer)}
    children = {p.stem for p in PKG.glob("*.py") if p.name != "__init__.py"}
    children |= {d.name for d in PKG.iterdir() if (d / "__init__.py").exists()}
    missing = sorted(children - placed)
    assert not missing, (
        f"top-level modules without a layer: {missing}. Add each name to the line of its layer in BOTH "
        "the `layers` of .importlinter and the '## Layers' block of docs/architecture.md (a module may import "
        "only from lower lines; see the layer list there)."
    )


def test_layer_contracts_hold() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    broken = out.stdout[out.stdout.find("Broken contracts") :] if "Broken contracts" in out.stdout else out.stderr
    assert out.returncode == 0, (
        "an import breaks the layer order or closes a circle (.importlinter). Move the imported thing down "
        "to the layer of its users, or pass it in; never hide the import inside a function.\n" + broken
    )


def _lazy_imports_without_reason() -> list[str]:
    found = []
    for path in _modules():
        src = path.read_text()
        lines = src.splitlines()
        for fn in ast.walk(ast.parse(src)):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom) and "# lazy:" not in lines[node.lineno - 1]:
                    rel = path.relative_to(ROOT).as_posix()
                    found.append(f"  {rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def test_every_in_function_import_says_why() -> None:
    found = _lazy_imports_without_reason()
    assert not found, (
        "imports inside functions without a reason. Move each to the top of its module; keep it inside the "
        "function only for start-up cost or an optional dependency, and then append "
        "`  # lazy: <reason>` to its line (e.g. `# lazy: start-up cost (loads optuna)`):\n" + "\n".join(found)
    )


def test_no_module_over_600_lines() -> None:
    big = [
        f"  {p.relative_to(ROOT).as_posix()}: {n} lines"
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > BEING_SPLIT.get(p.relative_to(ROOT).as_posix(), MAX_LINES)
    ]
    assert not big, (
        f"modules over {MAX_LINES} lines (STYLE.md: readable in one sitting). Split each by role into a new "
        "module beside it (and give the new module its line in docs/architecture.md's module map):\n" + "\n".join(big)
    )


def test_the_command_line_starts_without_the_heavy_libraries() -> None:
    """Every ``agenticdb`` command imports agenticdb.cli first; scipy (~1.5 s of a 2-s import on the 2-core
    test host, 2026-12-06), optuna and openai load only in the commands that use them (``# lazy:`` imports).
    The suite runs the CLI in a subprocess a few hundred times."""
    heavy = "{'scipy', 'optuna', 'openai'}"
    code = f"import sys, agenticdb.cli; print(sorted({{m.split('.')[0] for m in sys.modules}} & {heavy}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", (
        "importing agenticdb.cli loads " + out.stdout.strip() + ": find the chain with "
        "`python -X importtime -c 'import agenticdb.cli'` and import the heavy module inside the function that "
        "needs it, with `# lazy: start-up cost (loads ...)`"
    )
