"""The toolkit's typed errors. None of them ever carries the key of GOVDB_CONNECTION."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .guards import GuardBlock, Phase


class GovernanceError(Exception):
    """The base of every error the toolkit raises on purpose."""


class GovdbConnectionError(GovernanceError):
    """GOVDB_CONNECTION is missing or is not ``govdb://<key>@<host>/<database>``."""

    reason: Literal["missing", "malformed"]

    def __init__(self, reason: Literal["missing", "malformed"], message: str) -> None:
        super().__init__(message)
        #: "missing" when the variable is not set, "malformed" when it cannot be parsed
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.reason, str(self)))


class GovernanceConfigError(GovernanceError):
    """``configure(require_config=True)`` could not fetch the app's guards and evals configuration."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        #: the HTTP status when the API answered, else None (network error, timeout)
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.status))


class GuardBlockedError(GovernanceError):
    """A guard blocked an LLM call: before the call (phase "input": the model was not called) or on
    its response (phase "output"). ``blocks`` are the guard block records; ``guards`` names the
    guards."""

    def __init__(self, phase: Phase, blocks: Sequence[GuardBlock], trace_id: str) -> None:
        blocking = [b for b in blocks if b.action == "block"]
        names = list(dict.fromkeys(b.source for b in blocking))
        what = "; ".join(f"{b.source} ({b.guard_type}): {b.blocked_content}" for b in blocking)
        super().__init__(f"{'prompt' if phase == 'input' else 'response'} blocked by {', '.join(names)}: {what}")
        self.phase: Phase = phase
        #: the guard block records of the decision (action "block" and "redact")
        self.blocks: tuple[GuardBlock, ...] = tuple(blocks)
        #: the sources of the blocking guards: "prompt_injection", "sensitive_data", "template:<id>"
        self.guards: tuple[str, ...] = tuple(names)
        #: the id of the trace recorded for the call
        self.trace_id = trace_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.phase, self.blocks, self.trace_id))


class GuardUnavailableError(GovernanceError):
    """The guards could not run (the API did not answer the guard check) and ``on_guard_error`` is
    ``"block"``: the call fails closed. For phase "input" the model was not called."""

    def __init__(self, phase: Phase, reason: str, status: int | None = None, trace_id: str | None = None) -> None:
        super().__init__(f"the {phase} guards could not run ({reason}); the call is refused (on_guard_error=block)")
        self.phase: Phase = phase
        #: why the guard check failed: "network error: ECONNREFUSED", "the request timed out", "HTTP 503 ..."
        self.reason = reason
        #: the HTTP status when the API answered, else None
        self.status = status
        #: the id of the trace recorded for the call (set by the LangChain wrapper)
        self.trace_id = trace_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.phase, self.reason, self.status, self.trace_id))
