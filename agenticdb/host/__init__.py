"""The host and its edges: hardware, DBMS service control, database privileges, the server's log, sd_notify
(docs/architecture.md, layer 5).
"""
