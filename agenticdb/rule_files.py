"""Which validator rule files are shipped, and the ids of their ``[[harmful]]`` rules (layer 1: data only).

The rule files (``validators/<family>.toml``) are loaded and checked in full by
``agenticdb.validation.rules``; the configuration only needs the ids a ``policy.allow_harmful`` entry may
name, so it reads them here without depending on the validator (``config`` stays below ``validation``).
"""

from __future__ import annotations

import functools
import tomllib

from agenticdb.resources import data_dir

RULE_FILES = {"postgresql": "postgresql.toml", "mysql": "mysql.toml", "linux": "linux.toml"}
"""Rule family → file name under ``validators/``."""


@functools.cache
def harmful_rule_ids() -> frozenset[str]:
    """Ids of every shipped ``[[harmful]]`` rule (what ``policy.allow_harmful`` may name).

    Raises:
        OSError, tomllib.TOMLDecodeError: a shipped rule file is missing or is not TOML.
    """
    ids: set[str] = set()
    for name in RULE_FILES.values():
        data = tomllib.loads((data_dir("validators") / name).read_text())
        ids.update(str(rule["id"]) for rule in data.get("harmful", []))
    return frozenset(ids)
