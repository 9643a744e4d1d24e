"""The ``llm`` planner: any OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek, vLLM, Ollama,
llama.cpp server) turned into a source of ``Proposal`` records that the product can depend on.

How it stays dependable:

* Structured output. ``planner.response_format = "json_schema"`` sends the Proposal JSON schema as
  ``response_format``; ``"json_object"`` uses JSON mode; ``"text"`` asks for JSON in the prompt and
  extracts it from a fenced block. An endpoint that answers 400 naming ``response_format`` is moved down
  that list for the lifetime of the planner. Every reply is validated by pydantic; an invalid reply is
  sent back once with the validation error; a second invalid reply makes this round use the fallback
  planner (event ``planner.fallback``).
* Retries with tenacity only (the openai client's own ``max_retries`` is forced to 0): exponential
  backoff with jitter on timeouts, connection errors, 429 (waiting at least ``Retry-After``) and 5xx, at
  most ``planner.max_retries`` retries and never past ``planner.round_deadline_s`` for the whole round.
  Exhausted retries → fallback planner. 401/403 are not retried: ``LLMAuthError`` names the setting.
* Accounting: one ``LLMCallRecord`` per HTTP attempt (tokens as reported by the server's ``usage``,
  latency, cost from the ``planner.price_*_per_mtok`` table), handed to ``on_call`` and summed in
  ``totals``.
* Untrusted text is quoted as data by ``agenticdb.planner.context`` (see there).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import openai
import structlog
from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential_jitter

from agenticdb.config.sections import PlannerConfig
from agenticdb.models import Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner, PlannerError
from agenticdb.planner.context import compute_hypotheses, load_prompt, render_context, render_prompt
from agenticdb.redaction import read_api_key

log = structlog.get_logger(__name__)

ResponseMode = Literal["json_schema", "json_object", "text"]
_DOWNGRADE: dict[str, ResponseMode] = {"json_schema": "json_object", "json_object": "text"}

#: Errors worth another attempt (OpenAI API error codes guide: 429 rate limit, 5xx server errors,
#: timeouts and connection failures are transient). APITimeoutError subclasses APIConnectionError.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)
_MAX_REPLY_ECHO = 4000


class LLMAuthError(PlannerError):
    """The endpoint refused the credentials (HTTP 401) or the model (HTTP 403); retrying cannot help."""


class LLMCallRecord(BaseModel):
    """Accounting for one HTTP attempt against the endpoint.

    Tokens are what the server reported in ``usage`` (0 when it reported nothing or the call failed);
    ``cached_tokens`` is ``usage.prompt_tokens_details.cached_tokens`` and is part of ``prompt_tokens``.
    ``latency_ms`` is wall time of the attempt; ``cost_usd`` uses the planner.price_* table (USD per 1M
    tokens); ``attempt`` counts from 1 within one request's retry loop.
    """

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    ok: bool = True
    error: str | None = None
    attempt: int = 1


class LLMTotals(BaseModel):
    """Sums over every call one ``LLMPlanner`` made (``fallbacks`` counts rounds handed to the fallback)."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    fallbacks: int = 0


class ReplyError(ValueError):
    """A reply that is not a valid Proposal; the message is what is sent back to the model."""


class _DeadlineExceeded(Exception):
    """The round deadline (planner.round_deadline_s) passed before a usable reply."""


def call_cost(cfg: PlannerConfig, prompt: int, completion: int, cached: int) -> float:
    """Cost in USD of one call: uncached prompt tokens at ``price_prompt_per_mtok``, cached prompt tokens
    at ``price_cached_per_mtok`` (at the prompt price when that is 0, so a missing entry never
    under-reports), completion tokens at ``price_completion_per_mtok``; all prices per 1M tokens."""
    cached = min(cached, prompt)
    cached_price = cfg.price_cached_per_mtok or cfg.price_prompt_per_mtok
    return (
        (prompt - cached) * cfg.price_prompt_per_mtok
        + cached * cached_price
        + completion * cfg.price_completion_per_mtok
    ) / 1_000_000


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Seconds to wait from an error response's ``retry-after-ms`` or ``Retry-After`` header (delta
    seconds or an HTTP date, RFC 9110 §10.2.3); None when absent or unparsable."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if ms := headers.get("retry-after-ms"):
            return max(float(ms) / 1000, 0.0)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


class _WaitRetryAfter(wait_base):
    """Exponential backoff with jitter, but never shorter than the server's Retry-After."""

    def __init__(self, backoff: wait_base) -> None:
        self.backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = self.backoff(retry_state)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        server = retry_after_seconds(exc)
        return max(wait, server) if server is not None else wait


class _StopAtDeadline(stop_base):
    """Stop when the next attempt would start after the round deadline (monotonic seconds)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        return time.monotonic() + retry_state.upcoming_sleep >= self.deadline


def proposal_schema() -> dict[str, Any]:
    """JSON schema of ``Proposal`` as sent to the model, without the internal ``planner``, ``stage`` and
    ``releases`` fields (releases rest on cache gauges only our trade moves read)."""
    schema = Proposal.model_json_schema()
    for internal in ("planner", "stage", "releases"):
        schema["properties"].pop(internal, None)
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r != internal]
    return schema


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: inside a fenced ```json block if there is one, else the first
    ``{`` onwards (decoded with ``json.JSONDecoder.raw_decode``, trailing prose ignored).

    Raises:
        ReplyError: no JSON object could be decoded (the message says why).
    """
    fenced = re.findall(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", text, flags=re.S)
    error = "the reply contains no JSON object"
    for candidate in [*fenced, text]:
        start = candidate.find("{")
        if start < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate, start)
        except json.JSONDecodeError as exc:
            error = f"the reply is not valid JSON: {exc}"
            continue
        if isinstance(value, dict):
            return value
        error = "the reply's JSON is not an object"
    raise ReplyError(error)


def parse_reply(text: str) -> Proposal:
    """Validate a model reply as a Proposal (``planner`` set to ``"llm"``).

    Raises:
        ReplyError: empty reply, no JSON object, or pydantic validation errors (one line each:
            field path, message, offending input).
    """
    if not text or not text.strip():
        raise ReplyError("the reply was empty")
    data = extract_json(text)
    data.pop("planner", None)
    data.pop("releases", None)
    try:
        proposal = Proposal.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors()[:20]:
            where = ".".join(str(p) for p in err["loc"]) or "(root)"
            shown = json.dumps(err.get("input"), default=str)[:120]
            lines.append(f"{where}: {err['msg']} (got {shown})")
        raise ReplyError("the reply does not match the Proposal schema: " + "; ".join(lines)) from None
    return proposal.model_copy(update={"planner": "llm"})


class LLMPlanner(Planner):
    """Planner backed by an OpenAI-compatible chat-completions endpoint, with a fallback planner.

    Args:
        cfg: planner section; ``base_url``/``api_key``/``model`` fall back to the environment variables
            ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``AGENTICDB_LLM_MODEL``.
        fallback: planner used for a round whose replies stay invalid or whose endpoint fails
            (normally the heuristic planner).
        on_call: receives one ``LLMCallRecord`` per HTTP attempt (the session stores it in the Memory
            Book and journal).
        on_event: receives ``(event, details)`` for ``planner.fallback``, ``llm.invalid_reply``,
            ``llm.retry`` and ``llm.response_format_downgraded``; ``details`` has a ``reason``.
        client: a ready ``openai.OpenAI`` client (its ``max_retries`` is forced to 0).
        backoff_initial_s: first retry wait (seconds) before jitter; doubles per retry.
        backoff_max_s: cap of one backoff wait (a longer Retry-After still wins, within the deadline).
        backoff_jitter_s: random extra wait, uniform in [0, jitter].

    Raises:
        PlannerError: no model configured, or no API key (the message names the variables).
    """

    name = "llm"

    def __init__(
        self,
        cfg: PlannerConfig,
        fallback: Planner,
        on_call: Callable[[LLMCallRecord], None] | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        client: openai.OpenAI | None = None,
        *,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 30.0,
        backoff_jitter_s: float = 1.0,
    ) -> None:
        self.cfg = cfg
        self.fallback = fallback
        self.on_call = on_call
        self.on_event = on_event
        self.model = cfg.model or os.environ.get("AGENTICDB_LLM_MODEL") or ""
        if not self.model:
            raise PlannerError(
                "planner.kind=llm needs a model: set planner.model in the config or the "
                "AGENTICDB_LLM_MODEL environment variable (e.g. gpt-4o-mini, deepseek-chat)"
            )
        self.base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None
        if client is None:
            try:
                api_key = read_api_key(cfg)
            except ValueError as exc:
                raise PlannerError(str(exc)) from None
            if not api_key:
                raise PlannerError(
                    "planner.kind=llm needs an API key: set planner.api_key_file, the systemd credential "
                    f"{cfg.api_key_credential!r} (LoadCredential=), OPENAI_API_KEY or planner.api_key "
                    "(servers without authentication such as Ollama accept any non-empty value)"
                )
            client = openai.OpenAI(base_url=self.base_url, api_key=api_key, timeout=cfg.timeout_s, max_retries=0)
        else:
            self.base_url = str(client.base_url)
        self._client = client.with_options(max_retries=0)
        self._mode: ResponseMode = cfg.response_format
        self._backoff = wait_exponential_jitter(
            multiplier=backoff_initial_s, max=backoff_max_s, jitter=backoff_jitter_s
        )
        self._totals = LLMTotals()

    # -- accounting ---------------------------------------------------------------------------------

    @property
    def totals(self) -> LLMTotals:
        """Sum of tokens, cost and latency over every call of this planner (a copy)."""
        return self._totals.model_copy()

    def usage(self) -> dict[str, float]:
        """:attr:`totals` as a plain mapping (the session's ``session.end`` event and summary line)."""
        return dict(self._totals.model_dump())

    @property
    def response_mode(self) -> ResponseMode:
        """The structured-output mode in use (may have been downgraded after a 400)."""
        return self._mode

    def _record(self, rec: LLMCallRecord) -> None:
        t = self._totals
        t.calls += 1
        t.failed_calls += 0 if rec.ok else 1
        t.prompt_tokens += rec.prompt_tokens
        t.completion_tokens += rec.completion_tokens
        t.cached_tokens += rec.cached_tokens
        t.cost_usd += rec.cost_usd
        t.latency_ms += rec.latency_ms
        log.info(
            "llm.call",
            model=rec.model,
            ok=rec.ok,
            attempt=rec.attempt,
            prompt_tokens=rec.prompt_tokens,
            completion_tokens=rec.completion_tokens,
            cached_tokens=rec.cached_tokens,
            latency_ms=round(rec.latency_ms, 1),
            cost_usd=rec.cost_usd,
            error=rec.error,
        )
        if self.on_call is not None:
            self.on_call(rec)

    def _event(self, name: str, **details: Any) -> None:
        if self.on_event is not None:
            self.on_event(name, details)

    # -- planning -----------------------------------------------------------------------------------

    def build_messages(self, ctx: PlanningContext) -> list[dict[str, str]]:
        """The conversation for ``ctx`` without the system message (added per request, see
        ``request_messages``): one user message with the assembled context."""
        return [{"role": "user", "content": render_context(ctx, compute_hypotheses(ctx))}]

    def propose(self, ctx: PlanningContext) -> Proposal:
        """Ask the endpoint for a Proposal for ``ctx``; fall back to ``self.fallback`` when the endpoint
        fails, the deadline passes, or two replies in a row are invalid.

        Raises:
            LLMAuthError: HTTP 401/403 (no retry, no fallback: the configuration must be fixed).
            PlannerError: raised by the fallback planner.
        """
        deadline = time.monotonic() + self.cfg.round_deadline_s
        messages = self.build_messages(ctx)
        try:
            for turn in (1, 2):
                reply = self._complete(messages, deadline)
                try:
                    proposal = parse_reply(reply)
                except ReplyError as exc:
                    self._event("llm.invalid_reply", reason="invalid_reply", error=str(exc), turn=turn)
                    log.warning("llm.invalid_reply", turn=turn, error=str(exc))
                    if turn == 2:
                        return self._fall_back(ctx, "invalid_reply", str(exc))
                    messages += [
                        {"role": "assistant", "content": reply[:_MAX_REPLY_ECHO]},
                        {"role": "user", "content": render_prompt("repair", error=str(exc))},
                    ]
                    continue
                log.info(
                    "planner.proposed",
                    planner=self.name,
                    bottleneck=proposal.bottleneck.value,
                    changes={c.name: c.value for c in proposal.changes},
                    plateau=proposal.plateau,
                )
                return proposal
        except LLMAuthError:
            raise
        except _DeadlineExceeded:
            return self._fall_back(
                ctx,
                "deadline",
                f"no usable reply within planner.round_deadline_s={self.cfg.round_deadline_s}",
            )
        except openai.OpenAIError as exc:
            reason = "deadline" if time.monotonic() >= deadline else "endpoint_error"
            return self._fall_back(ctx, reason, f"{type(exc).__name__}: {exc}")
        raise AssertionError("unreachable")  # pragma: no cover

    def propose_whole(self, ctx: PlanningContext, instruction: str) -> Proposal | None:
        """One whole configuration for ``ctx`` (the opening, issue 36): the round's context followed by
        ``instruction`` (``prompts/opening.txt`` rendered by the caller). Invalid replies get one repair turn
        like a round; no fallback planner: None when the endpoint fails, the deadline passes or both replies
        are invalid (the opening has its own sources).

        Raises:
            LLMAuthError: HTTP 401/403.
        """
        deadline = time.monotonic() + self.cfg.round_deadline_s
        messages = [*self.build_messages(ctx), {"role": "user", "content": instruction}]
        try:
            for turn in (1, 2):
                reply = self._complete(messages, deadline)
                try:
                    proposal = parse_reply(reply)
                except ReplyError as exc:
                    self._event("llm.invalid_reply", reason="invalid_reply", error=str(exc), turn=turn)
                    messages += [
                        {"role": "assistant", "content": reply[:_MAX_REPLY_ECHO]},
                        {"role": "user", "content": render_prompt("repair", error=str(exc))},
                    ]
                    continue
                log.info(
                    "planner.proposed_whole", planner=self.name, changes={c.name: c.value for c in proposal.changes}
                )
                return proposal
        except LLMAuthError:
            raise
        except (_DeadlineExceeded, openai.OpenAIError) as exc:
            log.warning("llm.whole_failed", reason=f"{type(exc).__name__}: {exc}")
            self._event("llm.whole_failed", reason=f"{type(exc).__name__}: {exc}")
            return None
        log.warning("llm.whole_failed", reason="two invalid replies")
        return None

    def _fall_back(self, ctx: PlanningContext, reason: str, detail: str) -> Proposal:
        self._totals.fallbacks += 1
        log.warning("planner.fallback", reason=reason, detail=detail, fallback=self.fallback.name)
        self._event("planner.fallback", reason=reason, detail=detail, fallback=self.fallback.name, model=self.model)
        return self.fallback.propose(ctx)

    # -- requests -----------------------------------------------------------------------------------

    def request_messages(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """``messages`` with the system prompt in front, as sent in the current response mode (the
        Proposal schema is appended to the system prompt unless it travels in ``response_format``)."""
        system = load_prompt("system")
        if self._mode != "json_schema":
            # Without schema-constrained decoding the model only knows the shape from the prompt.
            system += "\n" + render_prompt("schema_hint", schema=json.dumps(proposal_schema()))
        return [{"role": "system", "content": system}, *messages]

    def format_kwargs(self) -> dict[str, Any]:
        """The ``response_format`` argument of the current mode ({} in text mode)."""
        if self._mode == "json_schema":
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "proposal", "schema": proposal_schema(), "strict": False},
                }
            }
        if self._mode == "json_object":
            return {"response_format": {"type": "json_object"}}
        return {}

    def _complete(self, messages: list[dict[str, str]], deadline: float) -> str:
        """Reply text for ``messages``, retried per the policy; downgrades the response format once per
        400 that names it."""
        while True:
            try:
                return self._complete_with_retries(messages, deadline)
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                text = f"{exc.message} {exc.body}".lower()
                nxt = _DOWNGRADE.get(self._mode)
                if nxt is None or not ("response_format" in text or "json_schema" in text):
                    raise
                log.warning("llm.response_format_downgraded", old=self._mode, new=nxt, error=exc.message)
                self._event(
                    "llm.response_format_downgraded",
                    reason="endpoint rejected response_format",
                    old=self._mode,
                    new=nxt,
                    error=exc.message[:300],
                )
                self._mode = nxt

    def _complete_with_retries(self, messages: list[dict[str, str]], deadline: float) -> str:
        retrying = Retrying(
            retry=retry_if_exception_type(TRANSIENT_ERRORS),
            wait=_WaitRetryAfter(self._backoff),
            stop=stop_after_attempt(self.cfg.max_retries + 1) | _StopAtDeadline(deadline),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._call_once(messages, deadline, attempt.retry_state.attempt_number)
        raise AssertionError("unreachable")  # pragma: no cover

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "llm.retry",
            attempt=state.attempt_number,
            wait_s=round(state.upcoming_sleep, 2),
            error=f"{type(exc).__name__}: {exc}",
        )
        self._event(
            "llm.retry",
            reason=type(exc).__name__,
            error=str(exc)[:300],
            attempt=state.attempt_number,
            wait_s=state.upcoming_sleep,
        )

    def _call_once(self, messages: list[dict[str, str]], deadline: float, attempt: int) -> str:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _DeadlineExceeded()
        started = time.perf_counter()
        try:
            completion = self._client.chat.completions.create(
                model=self.model,
                messages=self.request_messages(messages),  # type: ignore[arg-type]
                temperature=self.cfg.temperature,
                timeout=min(self.cfg.timeout_s, remaining),
                **self.format_kwargs(),
            )
        except openai.APIError as exc:
            latency = (time.perf_counter() - started) * 1000
            self._record(
                LLMCallRecord(
                    model=self.model,
                    latency_ms=latency,
                    ok=False,
                    error=f"{type(exc).__name__}: {str(exc)[:300]}",
                    attempt=attempt,
                )
            )
            if isinstance(exc, openai.AuthenticationError):
                raise LLMAuthError(
                    f"the LLM endpoint {self.base_url or 'api.openai.com'} rejected the API key (HTTP 401): "
                    "set OPENAI_API_KEY or planner.api_key (AGENTICDB_PLANNER__API_KEY) to a valid key"
                ) from exc
            if isinstance(exc, openai.PermissionDeniedError):
                raise LLMAuthError(
                    f"the LLM endpoint {self.base_url or 'api.openai.com'} denied access to model "
                    f"{self.model!r} (HTTP 403): check that the key in OPENAI_API_KEY / planner.api_key "
                    "may use it, or choose another model with AGENTICDB_LLM_MODEL / planner.model"
                ) from exc
            raise
        latency = (time.perf_counter() - started) * 1000
        usage = completion.usage
        prompt = usage.prompt_tokens if usage else 0
        completion_tokens = usage.completion_tokens if usage else 0
        details = usage.prompt_tokens_details if usage else None
        cached = (details.cached_tokens or 0) if details else 0
        self._record(
            LLMCallRecord(
                model=completion.model or self.model,
                prompt_tokens=prompt,
                completion_tokens=completion_tokens,
                cached_tokens=cached,
                latency_ms=latency,
                cost_usd=call_cost(self.cfg, prompt, completion_tokens, cached),
                ok=True,
                attempt=attempt,
            )
        )
        if not completion.choices:
            return ""
        return completion.choices[0].message.content or ""
