"""A LangChain callback handler for those who prefer callbacks to the wrapper (as Langfuse offers
one): one trace per chat model or LLM run, submitted through the same queue as the other paths.
It observes only: the API still runs the app's guards and evals on the traces it receives, but
nothing is blocked or redacted before the model, which only with_governance can do."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from ..client import governance as process_governance
from ..governance import Governance
from .messages import ZERO_TOKENS, Tokens, content_text, prompt_text, tokens_of

#: Runs whose end never comes (a crashed callback manager) are forgotten past this many.
MAX_OPEN_RUNS = 10_000


@dataclass(frozen=True)
class _Run:
    input: str
    model: str
    started_at: datetime
    started: float
    session_id: str | None


class GovernanceCallbackHandler(BaseCallbackHandler):
    """Records every chat model and LLM run it is given as a trace (its run id as the trace id, so a
    retried delivery is one trace): ``callbacks=[GovernanceCallbackHandler()]`` on a model, a
    chain or a single call's config.

    Options: ``governance`` (default: the process's, configured from GOVDB_CONNECTION and
    GOVERNANCE_PROJECT on first use), ``project``, ``model_name`` (default: the run's
    ``ls_model_name`` metadata or invocation params ``model`` / ``modelName`` / ``model_name``,
    else the model's class), ``session_id`` (a run's ``metadata.sessionId`` or
    ``metadata.session_id`` wins)."""

    name = "berth_governance"

    def __init__(
        self,
        *,
        governance: Governance | None = None,
        project: str | None = None,
        model_name: str | None = None,
        session_id: str | None = None,
    ) -> None:
        super().__init__()
        self._governance = governance
        self._project = project
        self._model_name = model_name
        self._session_id = session_id
        self._runs: OrderedDict[UUID, _Run] = OrderedDict()
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, prompt_text(messages[0] if messages else []), serialized, kwargs, metadata)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, "\n\n".join(prompts), serialized, kwargs, metadata)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._take(run_id)
        if run is None:
            return
        first = response.generations[0][0] if response.generations and response.generations[0] else None
        message: BaseMessage | None = getattr(first, "message", None)
        text = content_text(message.content) if message is not None else (first.text if first is not None else "")
        self._submit(run_id, run, output=text, tokens=tokens_of(message) if message is not None else _usage_of(response))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._take(run_id)
        if run is None:
            return
        self._submit(run_id, run, output="", tokens=dict(ZERO_TOKENS), error=str(error) or type(error).__name__)  # type: ignore[arg-type]

    def _start(
        self,
        run_id: UUID,
        text: str,
        serialized: Mapping[str, Any] | None,
        extra: Mapping[str, Any],
        metadata: Mapping[str, Any] | None,
    ) -> None:
        params = extra.get("invocation_params") or {}
        md = metadata or {}
        named = next(
            (
                v
                for v in (md.get("ls_model_name"), params.get("model"), params.get("modelName"), params.get("model_name"))
                if isinstance(v, str) and v != ""
            ),
            None,
        )
        ident: Sequence[Any] = (serialized or {}).get("id") or []
        session = md.get("sessionId")
        if session is None:
            session = md.get("session_id")
        if session is None:
            session = self._session_id
        run = _Run(
            input=text,
            model=self._model_name or named or (str(ident[-1]) if ident else "unknown"),
            started_at=datetime.now(timezone.utc),
            started=time.perf_counter(),
            session_id=session if isinstance(session, str) and session != "" else None,
        )
        with self._lock:
            if len(self._runs) >= MAX_OPEN_RUNS:
                self._runs.popitem(last=False)
            self._runs[run_id] = run

    def _take(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def _submit(self, run_id: UUID, run: _Run, *, output: str, tokens: Tokens, error: str | None = None) -> None:
        trace: dict[str, Any] = {
            "traceId": str(run_id),
            "input": run.input,
            "output": output,
            "model": run.model,
            "latency": math.floor((time.perf_counter() - run.started) * 1_000_000 + 0.5) / 1000,
            "tokens": tokens,
            "timestamp": run.started_at,
        }
        if run.session_id is not None:
            trace["sessionId"] = run.session_id
        if error is not None:
            trace["error"] = error
        g = self._governance
        if g is None:
            try:
                g = self._governance = process_governance()
            except Exception:  # noqa: BLE001 - an observer never breaks the call; submit() warns about it
                from ..client import submit

                submit(trace, project=self._project)
                return
        # the app's project comes with its config (start() fetches it once; a failure leaves the defaults)
        try:
            g.start()
        except Exception:  # noqa: BLE001 - require_config failures are the wrapper's to raise
            pass
        g.submit(trace, project=self._project)


def _usage_of(result: LLMResult) -> Tokens:
    """Token counts an LLM (not chat) run reports in llm_output (token_usage / tokenUsage), when it does."""
    out = result.llm_output or {}
    u = out.get("token_usage") or out.get("tokenUsage") or {}

    def num(*keys: str) -> int | None:
        for k in keys:
            v = u.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                return int(v)
        return None

    prompt = num("prompt_tokens", "promptTokens") or 0
    completion = num("completion_tokens", "completionTokens") or 0
    total = num("total_tokens", "totalTokens")
    return {"prompt": prompt, "completion": completion, "total": total if total is not None else prompt + completion}
