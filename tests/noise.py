"""Settings for tests whose fault is far beyond anything other load on the host does to a run.

A fault of 10x or more (commit_delay at 100 ms, a sort spilling 2 s per call) is far beyond any
disturbance another job on the host causes, so the tests of its diagnosis do not flag disturbed runs
at all: under load every pair of one CI run was flagged and the decision ended "host too disturbed" with
no valid pair. Flagging and repeating disturbed runs has its own tests (tests/test_disturbance.py with a
real CPU hog, tests/test_session_branches.py).
"""

FAULT_FAR_BEYOND_DISTURBANCE = {
    "AGENTICDB_LOOP__DISTURBANCE_CPU_CORES": "64",
    "AGENTICDB_LOOP__DISTURBANCE_SHARE_RATIO": "1000",
    "AGENTICDB_LOOP__DISTURBANCE_STEAL_PCT": "100",
}
