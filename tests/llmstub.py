"""The local OpenAI-compatible HTTP server the LLM tests start, and the chat-completion bodies it sends.

``ScriptedLLMServer`` is pytest-httpserver's real werkzeug server that also counts the requests its
handlers are still serving. ``scripted_llm()`` starts one and, when the test is done with it, asserts that
no request is still in flight before it stops: a handler that outlives its test would append to the next
test's request log (the cause of a flaky test in issue 39).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

# The longest a scripted handler may still be running when its test ends (seconds). Handlers that
# sleep must be released by their test; this only absorbs a response still being written.
DRAIN_S = 5.0


class ScriptedLLMServer(HTTPServer):
    """A pytest-httpserver that knows how many requests its handlers are serving right now."""

    def __init__(self) -> None:
        super().__init__(host="127.0.0.1", threaded=True)
        self._in_flight = 0
        self._idle = threading.Condition()

    def application(self, request: Request) -> Response:
        with self._idle:
            self._in_flight += 1
        try:
            return super().application(request)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float = DRAIN_S) -> bool:
        """True once no request is being served; False if one still is after ``timeout_s`` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout_s)

    def assert_idle(self, timeout_s: float = DRAIN_S) -> None:
        """Fail the test if a request is still in flight after ``timeout_s`` seconds."""
        assert self.wait_idle(timeout_s), (
            f"{self._in_flight} scripted LLM request(s) still in flight {timeout_s} s after the test ended: "
            "a handler outlived its test and would land in the next test's request log"
        )


@contextmanager
def scripted_llm() -> Iterator[ScriptedLLMServer]:
    """Start a ``ScriptedLLMServer``; on exit assert that no request is in flight, then stop it."""
    srv = ScriptedLLMServer()
    srv.start()
    try:
        yield srv
        srv.assert_idle()
    finally:
        srv.clear()
        srv.stop()


def chat_completion(content: str, prompt_tokens: int = 10, completion_tokens: int = 10) -> dict[str, Any]:
    """A ``chat.completion`` response whose one choice's message is ``content``, with its token usage."""
    return {
        "id": "c",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "tuner-1",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
