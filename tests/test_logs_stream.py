"""Log lines go to the stderr of the moment they are written: a command run inside ``CliRunner`` configures
logging while the runner's stream stands in for stderr, and the runner closes that stream afterwards."""

from __future__ import annotations

import io
import sys

import pytest
import structlog

from agenticdb.logs import configure_logging


def test_a_log_line_after_the_configuring_stream_was_closed_goes_to_the_current_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    saved = structlog.get_config()
    runner_stream = io.StringIO()
    real = sys.stderr
    try:
        sys.stderr = runner_stream  # what CliRunner.invoke does around a command
        configure_logging(level=20)
        structlog.get_logger("t").info("inside.runner")
        sys.stderr = real
        runner_stream.close()
        structlog.get_logger("t").info("after.runner")  # raised "I/O operation on closed file" before
    finally:
        sys.stderr = real
        structlog.configure(**saved)
    assert "after.runner" in capsys.readouterr().err
