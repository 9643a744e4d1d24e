"""OpenAI chat-completion bodies for the local OpenAI-compatible HTTP server the LLM tests start."""

from __future__ import annotations

import time
from typing import Any


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
