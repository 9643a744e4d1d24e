"""Advice without change and approval mode: advise, findings, output formats, apply, the approval queue
(docs/architecture.md, layer 9).
"""
