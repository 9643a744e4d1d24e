"""Workloads: one module per benchmark family, each a subclass of ``workloads.base.Workload``."""
