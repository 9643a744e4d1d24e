"""Planners: ``heuristic`` (offline, rule-based DBA) and ``llm`` (OpenAI-compatible endpoint)."""
