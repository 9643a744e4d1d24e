"""Measurement: per-second series, the sequential paired test, host disturbance, process and host statistics, the
bound of a bad trial (docs/architecture.md, layer 4).
"""
