"""Output guards on a streamed answer, without buffering the whole answer where the guards allow
it: the TypeScript toolkit's stream guard (same strategies, same window, same points at which it
checks, same behaviour on a block), with the guard decisions coming from the API.

Pure and sans-I/O: ``push()`` and ``finish()`` are generators that yield each text to check (on
the output phase) and receive its GuardDecision, so the sync and the async wrapper drive the same
logic (``drive`` / ``adrive``).

Strategy:
- passthrough: no output guard enforces anything (none enabled, or all only flag): every chunk goes
  out at once.
- buffer: an output guard judges the text as a whole (off_topic, prompt_injection), or mode
  "buffer": nothing goes out before the whole answer is checked.
- window (pii_detection, toxicity, custom act on spans): the chunks go out as the text grows,
  holding back the last ``holdback`` characters. Once ``step`` new characters have come (and at
  least ``holdback + step`` are unreleased), the output guards run on a window (the unreleased text
  plus ``lookbehind`` characters of context) and the chunks that end before the cut go out, where
  the cut lies ``holdback`` characters before the end of the text received so far, moves back out
  of a token (a run of the characters secrets are made of), falls outside every span the window's
  redaction changed, and falls on a chunk boundary. When the window's decision redacts, the
  released chunks go out merged into one chunk whose text is redacted; when it blocks (confirmed
  on the whole text so far), the stream ends with GuardBlockedError. At the end, the whole answer is
  checked exactly as a non-streamed call would be (the definitive decision) and the rest is
  released, redacted, or the stream ends with GuardBlockedError.

One difference from the TypeScript guard: the API's decision carries no match offsets, so the cut
cannot move back to the start of a match the window allowed; it moves back out of the span a
redaction changed (found by aligning the window with its redacted text), which is what keeps a
redacted value from being released in part.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Literal, TypedDict, TypeVar

from ..guards import GuardDecision, StreamStrategy

#: Characters of the tokens secrets are made of (emails, URLs, keys, JWTs, base64, card and account numbers).
_TOKEN = re.compile(r"[A-Za-z0-9._%+\-@/=:~]")


def _in_token(ch: str | None) -> bool:
    return ch is not None and _TOKEN.fullmatch(ch) is not None


class StreamGuardOptions(TypedDict, total=False):
    #: characters held back behind the end of the received text; default 64
    holdback: int
    #: characters of released text re-read as context by each step; default 64
    lookbehind: int
    #: new characters to wait for between two steps; default 64
    step: int
    #: longest token held back while waiting for its end; default 2048
    max_token: int
    #: "auto" (default): the strategy the guards allow; "buffer": always hold the whole answer
    mode: Literal["auto", "buffer"]


@dataclass(frozen=True)
class Release:
    """Chunks that may go out: the next ``count`` held chunks, as they are or merged with this text."""

    count: int
    #: set when the released text differs from the chunks' text (redacted): merge them into one chunk with this text
    text: str | None = None


@dataclass(frozen=True)
class StepResult:
    kind: Literal["release", "block"]
    release: Release | None = None
    decision: GuardDecision | None = None


_NOTHING = StepResult("release")

#: yields a text to check on the output phase, receives its decision, returns the step's result
Steps = Generator[str, GuardDecision, StepResult]
T = TypeVar("T")


def drive(steps: Generator[str, GuardDecision, T], check: Callable[[str], GuardDecision]) -> T:
    """Runs a step generator with a synchronous check."""
    try:
        text = next(steps)
        while True:
            text = steps.send(check(text))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[str, GuardDecision, T], check: Callable[[str], Awaitable[GuardDecision]]) -> T:
    """Runs a step generator with an asynchronous check."""
    try:
        text = next(steps)
        while True:
            text = steps.send(await check(text))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str, limit: int) -> int:
    i = 0
    while i < limit and a[len(a) - 1 - i] == b[len(b) - 1 - i]:
        i += 1
    return i


class StreamGuard:
    def __init__(self, strategy: StreamStrategy, options: StreamGuardOptions | None = None) -> None:
        o = options or {}
        self.strategy: StreamStrategy = "buffer" if o.get("mode") == "buffer" and strategy != "passthrough" else strategy
        self._holdback = max(0, o.get("holdback", 64))
        self._lookbehind = max(0, o.get("lookbehind", 64))
        self._step = max(1, o.get("step", 64))
        self._max_token = max(self._holdback, o.get("max_token", 2048))
        self._text = ""
        #: end offset (in _text) of each held chunk, oldest first; None: held to the end
        self._ends: list[float] = []
        #: offset up to which the text has been released
        self._released = 0
        #: text length at the last step
        self._checked_at = 0

    @property
    def text(self) -> str:
        """All the text received so far."""
        return self._text

    def push(self, text: str, hold: bool = False) -> Steps:
        """One more chunk, with its text ("" for a chunk without text). ``hold`` keeps it (and
        everything after it) until the end: tool-call chunks, whose arguments are checked as a whole."""
        self._text += text
        self._ends.append(float("inf") if hold and self.strategy != "passthrough" else len(self._text))
        if self.strategy == "passthrough":
            return StepResult("release", self._release_up_to(len(self._text)))
        # buffer; or a held chunk comes next, so nothing could go out before the end
        if self.strategy == "buffer" or self._ends[0] == float("inf"):
            return _NOTHING
        n = len(self._text)
        if n - self._checked_at < self._step or n - self._released < self._holdback + self._step:
            return _NOTHING
        self._checked_at = n
        return (yield from self._window_step())

    def finish(self, decision: GuardDecision) -> Steps:
        """The end of the stream. ``decision`` is the definitive output decision (the whole answer,
        as a non-streamed call checks it); returns what is left to release, or the block."""
        if decision.decision == "block":
            return StepResult("block", decision=decision)
        count = len(self._ends)
        start = self._released
        end = len(self._text)
        self._ends = []
        self._released = end
        if count == 0:
            return _NOTHING
        text = None
        if decision.decision == "redact" and start < end:
            text = yield from self._redact_region(start, end, whole=decision)
        return StepResult("release", Release(count) if text is None else Release(count, text))

    def _window_step(self) -> Steps:
        n = len(self._text)
        ws = max(0, self._released - self._lookbehind)
        window = self._text[ws:n]
        d = yield window
        if d.decision == "block":
            whole = d if ws == 0 else (yield self._text)
            if whole.decision == "block":
                return StepResult("block", decision=whole)
            # blocked only without its context: release nothing, wait for more text or the end
            return _NOTHING
        cut = self._token_cut(n - self._holdback)
        red = d.redacted_text if d.decision == "redact" else None
        p = s = 0
        if red is not None:
            p = _common_prefix(window, red)
            s = _common_suffix(window, red, min(len(window), len(red)) - p)
            if cut < n - s:
                # the cut would fall in or before a redacted span: only the text before the first goes
                cut = min(cut, ws + p)
        cut = self._chunk_boundary(cut)
        if red is not None and ws + p < cut < n - s:
            # the chunk boundary fell inside the changed spans
            cut = self._chunk_boundary(ws + p)
        if cut <= self._released:
            return _NOTHING
        start = self._released
        release = self._release_up_to(cut)
        if release is None or red is None or self._released <= ws + p:
            return StepResult("release", release)
        end = self._released
        if start - ws <= p:
            # the tail after the cut is unchanged (common suffix): the region maps onto the redaction
            text: str | None = red[start - ws : len(red) - (n - end)]
            if text == self._text[start:end]:
                text = None
        else:
            # the context itself was redacted (an earlier release): read the region alone
            alone = yield self._text[start:end]
            text = alone.redacted_text if alone.decision == "redact" else None
        return StepResult("release", release if text is None else Release(release.count, text))

    def _token_cut(self, target: int) -> int:
        """The cut at or before ``target``, not inside a token."""
        cut = max(self._released, target)
        if cut <= self._released or cut >= len(self._text):
            return cut
        if not _in_token(self._text[cut - 1]) or not _in_token(self._text[cut]):
            return cut
        i = cut - 1
        while i > self._released and _in_token(self._text[i - 1]):
            i -= 1
        if i > self._released:
            return i
        # one token since the last release: a very long one is released anyway
        return cut if len(self._text) - self._released > self._max_token else self._released

    def _chunk_boundary(self, cut: int) -> int:
        """The largest chunk end at or before ``cut``."""
        best = self._released
        for end in self._ends:
            if end > cut:
                break
            best = int(end)
        return best

    def _release_up_to(self, cut: float) -> Release | None:
        n = next((i for i, end in enumerate(self._ends) if end > cut), len(self._ends))
        if n == 0:
            return None
        self._released = int(self._ends[n - 1])
        del self._ends[:n]
        return Release(n)

    def _redact_region(self, start: int, end: int, whole: GuardDecision) -> Generator[str, GuardDecision, str | None]:
        """The redacted form of text[start:end] (``end`` is the end of the text), from the whole
        answer's redaction when the text before ``start`` is unchanged by it, else read with
        ``lookbehind`` characters of context (or alone). None when nothing in it is redacted."""
        red = whole.redacted_text
        if red is not None and _common_prefix(self._text, red) >= start:
            r = red[start:]
            return None if r == self._text[start:end] else r
        ws = max(0, start - self._lookbehind)
        prefix = self._text[ws:start]
        with_context = yield self._text[ws:end]
        if with_context.decision != "redact" or with_context.redacted_text is None:
            return None
        if with_context.redacted_text.startswith(prefix):
            r = with_context.redacted_text[len(prefix) :]
            return None if r == self._text[start:end] else r
        alone = yield self._text[start:end]
        return alone.redacted_text if alone.decision == "redact" else None
