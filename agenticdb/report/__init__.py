"""Reports from the journal: live statement report, tuning curve, Prometheus metrics, objective labels, JSON report
data (docs/architecture.md, layer 5).
"""
