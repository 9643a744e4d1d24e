"""Tuning targets: one module per kind (postgres, mysql, linux), each a subclass of ``Target``.

:func:`dbms_target` picks the factory of the configured DBMS kind; the Linux host is built by
``agenticdb.app.linux_target`` (it needs the ``[os]`` section and the Memory Book hook).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agenticdb.dialect import family_of

if TYPE_CHECKING:
    from agenticdb.config.sections import TargetConfig
    from agenticdb.targets.base import Target


def _postgres(cfg: TargetConfig, cache_dir: Path | None) -> Target:
    from agenticdb.targets.postgres import PostgresTarget  # lazy: start-up cost (loads 216 modules)

    return PostgresTarget.from_config(cfg)


def _mysql(cfg: TargetConfig, cache_dir: Path | None) -> Target:
    from agenticdb.targets.mysql import MySQLTarget  # lazy: start-up cost (loads pymysql; 236 modules)

    return MySQLTarget.from_config(cfg, cache_dir=cache_dir)


_DBMS_FACTORIES: dict[str, Callable[[TargetConfig, Path | None], Target]] = {"postgresql": _postgres, "mysql": _mysql}


def dbms_target(cfg: TargetConfig, cache_dir: Path | None = None) -> Target:
    """The DBMS target of ``[target]``, built by its kind's factory (MariaDB and MySQL share one).

    ``cache_dir`` holds facts read once per server version (MariaDB: which variables have an option-file
    form, from ``mariadbd --help --verbose``); None = read them again each time.

    Raises:
        ValueError: the DSN or the service section is invalid (names the key).
    """
    return _DBMS_FACTORIES[family_of(cfg.kind)](cfg, cache_dir)
