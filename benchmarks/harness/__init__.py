"""Side-by-side tuning benchmarks: agenticdb against the default, a static tuner and Optuna TPE.

Run ``python -m benchmarks.harness run --scenario NAME|all --budget-min M --out results/DATE/`` from the
repository root; see benchmarks/README.md.
"""
