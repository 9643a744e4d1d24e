"""Locate the data folders (catalogs/, validators/, benchmarks/, memory/, configs/, systemd/).

In a wheel they live in ``agenticdb/_data/<name>``; in a source checkout (editable install, tests)
they are the top-level folders of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder of shipped data named ``name`` (e.g. ``"catalogs"``).

    Raises:
        FileNotFoundError: neither the wheel location nor the checkout location exists.
    """
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"data folder {name!r} not found next to the agenticdb package")


def data_file(folder: str, name: str) -> Path:
    """Return ``<data folder>/<name>``; raises FileNotFoundError naming the path when it is missing."""
    path = data_dir(folder) / name
    if not path.exists():
        raise FileNotFoundError(f"shipped data file missing: {path}")
    return path
