"""The memory of agenticdb (docs/architecture.md "Memory"): the Memory Book in SQLite (sessions, rounds,
experience, LLM call accounting, saved OS originals), experience distillation and retrieval, and the
book's export/import.

=================  ===============================================================================
module             role
=================  ===============================================================================
``book``           :class:`MemoryBook`: the SQLite store
``experience``     :func:`similarity` of fingerprints; :func:`distill_experience` at the end of a session
``transfer``       export to / import from a JSON document
=================  ===============================================================================
"""

from agenticdb.store.memory.book import MemoryBook, MemoryBookError, OsOriginal, SessionRecord, StoredExperience
from agenticdb.store.memory.experience import WEIGHTS, dbms_family, distill_experience, relative_values, similarity

__all__ = [
    "WEIGHTS",
    "MemoryBook",
    "MemoryBookError",
    "OsOriginal",
    "SessionRecord",
    "StoredExperience",
    "dbms_family",
    "distill_experience",
    "relative_values",
    "similarity",
]
