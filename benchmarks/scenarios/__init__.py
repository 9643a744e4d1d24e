"""Injected-fault scenarios with known causes: Diagnosis, Outcome and Safe Pass of a planner (issue 22)."""
