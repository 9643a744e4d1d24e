"""Tuning targets: one module per kind (postgres, mysql, linux), each a subclass of ``Target``."""
