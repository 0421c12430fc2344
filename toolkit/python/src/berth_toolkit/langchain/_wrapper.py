"""The zero-config path: ``with_governance(model)`` returns the chat model with the app's guards
before and after every call and one trace per call, submitted through the same queue as the plain
path (so both paths give the same traces, evals and guard blocks).

The governed model is a copy of the model whose class is a subclass of the model's own class,
created once per class, so that it stays that model in every other way: ``isinstance`` holds, and
its fields, ``bind_tools``, ``with_structured_output``, ``with_config``, callbacks and the Runnable
protocol work as on the model. What those build around ``self`` (the binding of ``bind_tools``, the
pipeline of ``with_structured_output``) calls back into the governed model. The subclass overrides
the four entry points every call goes through:

- ``invoke`` / ``ainvoke`` (``batch`` and ``abatch`` call them once per input, chains call them),
- ``stream`` / ``astream`` (``transform``, ``astream_events`` and streaming chains end there).

Each runs the input guards, then the model's own implementation of the same method (so nothing is
guarded or traced twice), then the output guards. The guards run in the Berth API (POST
/api/v1/governance/guard-check); the request is skipped when the app's config (fetched at boot)
has no check that can block or redact on that phase.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from typing import Any, TypeVar, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import RunnableBinding, RunnableConfig, ensure_config
from pydantic import PrivateAttr

from ..client import governance as process_governance
from ..errors import GuardBlockedError, GuardUnavailableError
from ..governance import Governance
from ..guards import ALLOW, GuardDecision, Phase, enforces_on, stream_strategy
from .messages import (
    ZERO_TOKENS,
    Tokens,
    apply_input_redactions,
    apply_output_redactions,
    concat,
    content_text,
    input_texts,
    model_name_of,
    output_text,
    output_texts,
    prompt_text,
    to_messages,
    tokens_of,
    with_text,
)
from .stream_guard import Release, StreamGuard, StreamGuardOptions, adrive, drive

M = TypeVar("M")

#: the metadata a trace carries when guards could not run for its call
UNAVAILABLE_KEY = "berth.guards"
UNAVAILABLE_PHASES_KEY = "berth.guards_unavailable"


@dataclass(frozen=True)
class _Context:
    governance: Governance
    project: str | None = None
    model_name: str | None = None
    session_id: str | None = None
    stream: StreamGuardOptions = field(default_factory=lambda: cast(StreamGuardOptions, {}))


def with_governance(
    model: M,
    *,
    governance: Governance | None = None,
    project: str | None = None,
    model_name: str | None = None,
    session_id: str | None = None,
    stream: StreamGuardOptions | None = None,
) -> M:
    """The chat model with Berth governance: input guards before each call (a block raises
    GuardBlockedError without calling the model; a redaction sends the redacted prompt), output
    guards on the response (block: GuardBlockedError; redact: the caller receives the redacted
    text), and one trace per call. Without ``governance``, uses the process's, configured from
    GOVDB_CONNECTION and GOVERNANCE_PROJECT on first use (GovdbConnectionError when missing or
    malformed, unless BERTH_GOVERNANCE=off). A RunnableBinding of a chat model (``bind_tools``,
    ``with_config``) is returned with its model governed."""
    if is_governed(model):
        return model
    if isinstance(model, RunnableBinding):
        if not _binds_model(model):
            raise TypeError("with_governance() takes a chat model (a BaseChatModel) or a binding of one")
        bound = with_governance(
            model.bound, governance=governance, project=project, model_name=model_name, session_id=session_id, stream=stream
        )
        return cast(M, model.model_copy(update={"bound": bound}))
    if not isinstance(model, BaseChatModel):
        raise TypeError("with_governance() takes a chat model (a BaseChatModel) or a binding of one")
    ctx = _Context(
        governance=governance if governance is not None else process_governance(),
        project=project,
        model_name=model_name,
        session_id=session_id,
        stream=stream or cast(StreamGuardOptions, {}),
    )
    governed = model.model_copy()
    governed.__class__ = _governed_class(type(model))
    private = dict(governed.__pydantic_private__ or {})
    private["_berth_governance"] = ctx
    object.__setattr__(governed, "__pydantic_private__", private)
    return cast(M, governed)


def is_governed(value: object) -> bool:
    """True for a model (or a binding of one) returned by with_governance."""
    if isinstance(value, _GovernedMixin):
        return True
    return isinstance(value, RunnableBinding) and is_governed(value.bound)


def _binds_model(binding: RunnableBinding[Any, Any]) -> bool:
    bound = binding.bound
    return isinstance(bound, BaseChatModel) or (isinstance(bound, RunnableBinding) and _binds_model(bound))


_classes: dict[type, type] = {}
_classes_lock = threading.Lock()


def _governed_class(cls: type) -> type:
    """The governed subclass of a chat model class (made once): same name and module, so that
    run names, LangSmith traces and serialisation see the model's own class."""
    with _classes_lock:
        sub = _classes.get(cls)
        if sub is None:
            namespace: dict[str, Any] = {
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__annotations__": {"_berth_governance": Any},
                "_berth_governance": PrivateAttr(default=None),
            }
            sub = type(cls.__name__, (_GovernedMixin, cls), namespace)
            _classes[cls] = sub
        return sub


def _error_text(err: BaseException) -> str:
    """ "<class name>: <message>", well-formed and without NUL (what the API stores)."""
    text = f"{type(err).__name__}: {err}"
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text if ch != "\x00")


def _ms(seconds: float) -> float:
    """Milliseconds, rounded to the microsecond (as the TypeScript wrapper records them)."""
    return math.floor(seconds * 1_000_000 + 0.5) / 1000


@dataclass
class _State:
    trace_id: str
    started_at: datetime
    #: the trace's input: the prompt as the caller wrote it
    input: str
    #: what the model is sent (redacted when the input guards redact)
    sent: LanguageModelInput
    messages: list[BaseMessage] | None
    session_id: str | None
    #: the phases whose guards could not run (on_guard_error="allow")
    unavailable: list[Phase] = field(default_factory=list)
    #: the classifier's scores of the input from the guard check that had a say (sent with the trace)
    classifier_scores: dict[str, float] = field(default_factory=dict)


class _GovernedMixin:
    """The entry points of a governed chat model (see the module's docstring)."""

    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> Any:
        return _Call(self).invoke(input, config, stop, kwargs)

    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> Any:
        return await _Call(self).ainvoke(input, config, stop, kwargs)

    def stream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        return _Call(self).stream(input, config, stop, kwargs)

    def astream(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, *, stop: list[str] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return _Call(self).astream(input, config, stop, kwargs)


def _context_of(model: object) -> _Context:
    private = getattr(model, "__pydantic_private__", None) or {}
    ctx = private.get("_berth_governance")
    if isinstance(ctx, _Context):
        return ctx
    # an instance the model's own code built anew (not a copy): the process's governance, default options
    return _Context(governance=process_governance())


class _Call:
    """One guarded, traced call of a governed model."""

    def __init__(self, model: _GovernedMixin) -> None:
        self.model = cast(BaseChatModel, model)
        self.ctx = _context_of(model)
        self.g = self.ctx.governance
        # the model's own implementation of the entry points
        self.base: Any = super(_GovernedMixin, model)

    # -- guards ----------------------------------------------------------------------------

    def _begin(self, value: LanguageModelInput, config: RunnableConfig | None) -> _State:
        messages = None if isinstance(value, str) else to_messages(value)
        text = value if isinstance(value, str) else prompt_text(cast(list[BaseMessage], messages))
        metadata = ensure_config(config).get("metadata") or {}
        session = metadata.get("sessionId")
        if session is None:
            session = metadata.get("session_id")
        if session is None:
            session = self.ctx.session_id
        return _State(
            trace_id=str(uuid.uuid4()),
            started_at=datetime.now(timezone.utc),
            input=text,
            sent=value,
            messages=messages,
            session_id=session if isinstance(session, str) and session != "" else None,
        )

    def _needed(self, phase: Phase) -> bool:
        # no check that can block or redact on this phase: the decision is allow without asking
        return enforces_on(self.g.checks, phase)

    def _mark(self, state: _State, phase: Phase, d: GuardDecision) -> GuardDecision:
        if d.unavailable is not None and phase not in state.unavailable:
            state.unavailable.append(phase)
        return d

    def _checker(self, state: _State, phase: Phase) -> Callable[[str], GuardDecision]:
        def check(text: str) -> GuardDecision:
            if not self._needed(phase):
                return ALLOW
            return self._mark(state, phase, self.g.check(text, phase, project=self.ctx.project))

        return check

    def _achecker(self, state: _State, phase: Phase) -> Callable[[str], Awaitable[GuardDecision]]:
        async def check(text: str) -> GuardDecision:
            if not self._needed(phase):
                return ALLOW
            return self._mark(state, phase, await self.g.acheck(text, phase, project=self.ctx.project))

        return check

    def _input_steps(self, state: _State) -> Generator[str, GuardDecision, GuardDecision]:
        """The input guards on the prompt; on redact, what the model is sent instead."""
        decision = yield state.input
        state.classifier_scores = decision.classifier_scores()
        if decision.decision != "redact":
            return decision
        if state.messages is None:
            state.sent = decision.redacted_text if decision.redacted_text is not None else state.sent
            return decision
        texts = list(dict.fromkeys(input_texts(state.messages)))
        if texts == [state.input]:
            redactions: dict[str, str | None] = {state.input: decision.redacted_text}
        else:
            redactions = yield from _redaction_steps(texts)
        state.sent = apply_input_redactions(state.messages, redactions)
        return decision

    def _output_steps(self, response: BaseMessage, output: str) -> Generator[str, GuardDecision, tuple[GuardDecision, BaseMessage]]:
        """The output guards on a complete response; on redact, the response the caller receives."""
        decision = yield output
        if decision.decision != "redact":
            return decision, response
        if not (getattr(response, "tool_calls", None) or []) and isinstance(response.content, str):
            return decision, apply_output_redactions(response, {}, whole=decision.redacted_text)
        redactions = yield from _redaction_steps(list(dict.fromkeys(output_texts(response))))
        return decision, apply_output_redactions(response, redactions)

    def _input_blocked(self, state: _State, decision: GuardDecision) -> None:
        if decision.decision == "block":
            self._submit(state, output="", latency=0, tokens=dict(ZERO_TOKENS))  # type: ignore[arg-type]
            raise GuardBlockedError("input", decision.blocks, state.trace_id)

    def _refused(self, state: _State, err: GuardUnavailableError, **rest: Any) -> GuardUnavailableError:
        """A call refused because its guards could not run (on_guard_error="block"): recorded as a failed call."""
        if err.phase not in state.unavailable:
            state.unavailable.append(err.phase)
        rest.setdefault("output", "")
        rest.setdefault("latency", 0)
        rest.setdefault("tokens", dict(ZERO_TOKENS))
        self._submit(state, error=_error_text(err), **rest)
        err.trace_id = state.trace_id
        return err

    def _submit(
        self,
        state: _State,
        *,
        output: str,
        latency: float,
        tokens: Tokens,
        response: BaseMessage | None = None,
        error: str | None = None,
    ) -> None:
        trace: dict[str, Any] = {
            "traceId": state.trace_id,
            "input": state.input,
            "output": output,
            "model": self.ctx.model_name or model_name_of(self.model, response),
            "latency": latency,
            "tokens": tokens,
            "timestamp": state.started_at,
        }
        if state.session_id is not None:
            trace["sessionId"] = state.session_id
        if error is not None:
            trace["error"] = error
        if state.unavailable:
            trace["metadata"] = {UNAVAILABLE_KEY: "unavailable", UNAVAILABLE_PHASES_KEY: ",".join(state.unavailable)}
        if state.classifier_scores:
            trace["classifierScores"] = dict(state.classifier_scores)
        self.g.submit(trace, project=self.ctx.project)

    def _start(self, value: LanguageModelInput, config: RunnableConfig | None) -> _State:
        # raises GovernanceConfigError only under require_config, when the config could not be loaded: fail closed
        self.g.start()
        return self._begin(value, config)

    # -- invoke ----------------------------------------------------------------------------

    def invoke(self, value: LanguageModelInput, config: RunnableConfig | None, stop: list[str] | None, kwargs: dict[str, Any]) -> Any:
        if self.g.mode == "noop":
            return self.base.invoke(value, config, stop=stop, **kwargs)
        state = self._start(value, config)
        try:
            decision = drive(self._input_steps(state), self._checker(state, "input"))
        except GuardUnavailableError as err:
            raise self._refused(state, err) from None
        self._input_blocked(state, decision)
        t0 = time.perf_counter()
        try:
            response = self.base.invoke(state.sent, config, stop=stop, **kwargs)
        except BaseException as err:
            self._submit(state, output="", latency=_ms(time.perf_counter() - t0), tokens=dict(ZERO_TOKENS), error=_error_text(err))  # type: ignore[arg-type]
            raise
        latency = _ms(time.perf_counter() - t0)
        output = output_text(response)
        try:
            out, message = drive(self._output_steps(response, output), self._checker(state, "output"))
        except GuardUnavailableError as err:
            raise self._refused(state, err, output=output, latency=latency, tokens=tokens_of(response), response=response) from None
        return self._answer(state, response, output, latency, out, message)

    async def ainvoke(
        self, value: LanguageModelInput, config: RunnableConfig | None, stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Any:
        if self.g.mode == "noop":
            return await self.base.ainvoke(value, config, stop=stop, **kwargs)
        await self.g.astart()
        state = self._begin(value, config)
        try:
            decision = await adrive(self._input_steps(state), self._achecker(state, "input"))
        except GuardUnavailableError as err:
            raise self._refused(state, err) from None
        self._input_blocked(state, decision)
        t0 = time.perf_counter()
        try:
            response = await self.base.ainvoke(state.sent, config, stop=stop, **kwargs)
        except BaseException as err:
            self._submit(state, output="", latency=_ms(time.perf_counter() - t0), tokens=dict(ZERO_TOKENS), error=_error_text(err))  # type: ignore[arg-type]
            raise
        latency = _ms(time.perf_counter() - t0)
        output = output_text(response)
        try:
            out, message = await adrive(self._output_steps(response, output), self._achecker(state, "output"))
        except GuardUnavailableError as err:
            raise self._refused(state, err, output=output, latency=latency, tokens=tokens_of(response), response=response) from None
        return self._answer(state, response, output, latency, out, message)

    def _answer(
        self, state: _State, response: BaseMessage, output: str, latency: float, decision: GuardDecision, message: BaseMessage
    ) -> Any:
        self._submit(state, output=output, latency=latency, tokens=tokens_of(response), response=response)
        if decision.decision == "block":
            raise GuardBlockedError("output", decision.blocks, state.trace_id)
        return message

    # -- stream ----------------------------------------------------------------------------

    def _streams(self, kwargs: dict[str, Any], async_api: bool) -> bool:
        should = getattr(self.model, "_should_stream", None)
        return bool(should(async_api=async_api, **{**kwargs, "stream": True})) if callable(should) else True

    def stream(
        self, value: LanguageModelInput, config: RunnableConfig | None, stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Iterator[Any]:
        if self.g.mode == "noop":
            yield from self.base.stream(value, config, stop=stop, **kwargs)
            return
        if not self._streams(kwargs, async_api=False):
            # a model that cannot stream answers in one chunk: the governed invoke
            yield self.model.invoke(value, config, stop=stop, **kwargs)
            return
        state = self._start(value, config)
        try:
            decision = drive(self._input_steps(state), self._checker(state, "input"))
        except GuardUnavailableError as err:
            raise self._refused(state, err) from None
        self._input_blocked(state, decision)
        flow = _StreamFlow(self, state)
        source = self.base.stream(state.sent, config, stop=stop, **kwargs)
        check = self._checker(state, "output")
        try:
            try:
                for chunk in source:
                    step = drive(flow.push(chunk), check)
                    if step.kind == "block":
                        flow.ended()
                        flow.record()
                        raise GuardBlockedError("output", cast(GuardDecision, step.decision).blocks, state.trace_id)
                    yield from flow.emit(step.release)
                flow.ended()
            finally:
                source.close()
            decision = check(flow.output())
            flow.record()
            yield from drive(flow.finish(decision), check)
        except GuardBlockedError:
            raise
        except GuardUnavailableError as err:
            flow.record(_error_text(err))
            err.trace_id = state.trace_id
            raise
        except GeneratorExit:
            # the consumer stopped early: record what came
            flow.record()
            raise
        except BaseException as err:
            flow.record(_error_text(err))
            raise

    async def astream(
        self, value: LanguageModelInput, config: RunnableConfig | None, stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[Any]:
        if self.g.mode == "noop":
            async for c in self.base.astream(value, config, stop=stop, **kwargs):
                yield c
            return
        if not self._streams(kwargs, async_api=True):
            yield await self.model.ainvoke(value, config, stop=stop, **kwargs)
            return
        await self.g.astart()
        state = self._begin(value, config)
        try:
            decision = await adrive(self._input_steps(state), self._achecker(state, "input"))
        except GuardUnavailableError as err:
            raise self._refused(state, err) from None
        self._input_blocked(state, decision)
        flow = _StreamFlow(self, state)
        source = self.base.astream(state.sent, config, stop=stop, **kwargs)
        check = self._achecker(state, "output")
        try:
            try:
                async for chunk in source:
                    step = await adrive(flow.push(chunk), check)
                    if step.kind == "block":
                        flow.ended()
                        flow.record()
                        raise GuardBlockedError("output", cast(GuardDecision, step.decision).blocks, state.trace_id)
                    for item in _emit_sync(flow, step.release):
                        yield item
                flow.ended()
            finally:
                await source.aclose()
            decision = await check(flow.output())
            flow.record()
            for item in await adrive(flow.finish(decision), check):
                yield item
        except GuardBlockedError:
            raise
        except GuardUnavailableError as err:
            flow.record(_error_text(err))
            err.trace_id = state.trace_id
            raise
        except GeneratorExit:
            flow.record()
            raise
        except BaseException as err:
            flow.record(_error_text(err))
            raise


def _emit_sync(flow: _StreamFlow, release: Release | None) -> list[Any]:
    return list(flow.emit(release))


def _redaction_steps(texts: list[str]) -> Generator[str, GuardDecision, dict[str, str | None]]:
    """Each text checked on its own: text -> its redaction (None: unchanged)."""
    out: dict[str, str | None] = {}
    for t in texts:
        d = yield t
        out[t] = d.redacted_text if d.decision == "redact" else None
    return out


class _StreamFlow:
    """The state of one guarded stream: the chunks held back, the answer so far, its trace."""

    def __init__(self, call: _Call, state: _State) -> None:
        self.call = call
        self.state = state
        self.guard = StreamGuard(stream_strategy(call.g.checks, call.ctx.stream.get("mode", "auto")), call.ctx.stream)
        self.held: list[Any] = []
        self.full: Any = None
        self.recorded = False
        self.t0 = time.perf_counter()
        self.t_end: float | None = None

    def push(self, chunk: Any) -> Generator[str, GuardDecision, Any]:
        self.full = concat(self.full, chunk)
        self.held.append(chunk)
        calls = getattr(chunk, "tool_call_chunks", None) or []
        return (yield from self.guard.push(content_text(chunk.content), len(calls) > 0))

    def ended(self) -> None:
        if self.t_end is None:
            self.t_end = time.perf_counter()

    def output(self) -> str:
        return output_text(self.full) if self.full is not None else ""

    def record(self, error: str | None = None) -> None:
        if self.recorded:
            return
        self.recorded = True
        end = self.t_end if self.t_end is not None else time.perf_counter()
        self.call._submit(  # noqa: SLF001
            self.state,
            output=self.output(),
            latency=_ms(end - self.t0),
            tokens=tokens_of(self.full),
            response=self.full,
            error=error,
        )

    def emit(self, release: Release | None) -> Iterator[Any]:
        if release is None:
            return
        out = self.held[: release.count]
        del self.held[: release.count]
        if not out:
            return
        if release.text is None:
            yield from out
            return
        yield with_text(reduce(concat, out), release.text)

    def finish(self, decision: GuardDecision) -> Generator[str, GuardDecision, list[Any]]:
        """The end of the answer: what is left to release (a list), or GuardBlockedError."""
        end = yield from self.guard.finish(decision)
        if end.kind == "block":
            raise GuardBlockedError("output", cast(GuardDecision, end.decision).blocks, self.state.trace_id)
        if end.release is None or not self.held:
            return []
        has_calls = self.full is not None and bool(getattr(self.full, "tool_calls", None))
        if decision.decision == "redact" and has_calls:
            # tool-call chunks were held to the end: their arguments go out redacted, merged
            merged = reduce(concat, self.held)
            self.held = []
            redactions = yield from _redaction_steps(list(dict.fromkeys(output_texts(merged))))
            redacted = apply_output_redactions(merged, redactions)
            return [redacted if end.release.text is None else with_text(cast(AIMessageChunk, redacted), end.release.text)]
        return list(self.emit(end.release))
