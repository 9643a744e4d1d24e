"""The tuning loop's roles: initializer, planning, executor, auditor, recovery, the round's steps and the session
(docs/architecture.md, layer 8).
"""
