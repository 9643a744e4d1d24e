"""agenticdb: a closed-loop tuning agent for PostgreSQL, MySQL/MariaDB and Linux.

See docs/architecture.md for the round (Initializer → Planner → Validator → Executor → Recovery → Auditor).
"""

__version__ = "0.1.0"
