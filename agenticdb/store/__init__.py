"""Stores: the hash-chained journal and its key, the Memory Book, storage faults, the single-instance lock
(docs/architecture.md, layer 4).
"""
