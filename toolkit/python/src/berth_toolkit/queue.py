"""The background sender of traces: an in-memory queue, bounded, sent in batches by one daemon
thread, retried with exponential backoff and jitter, flushed on demand. It never raises into the
caller and never blocks it: enqueue() takes a lock for a few microseconds and returns; the network
is touched only by the sender thread.

The behaviour is the TypeScript toolkit's queue, rule for rule:

- a batch is the oldest queued traces, at most ``batch_size`` of them and at most
  ``max_batch_bytes`` of body; it goes when it is full, when the oldest trace has waited
  ``linger``, or at once while someone waits in flush();
- per-item results: created -> sent, duplicate -> duplicates (a retry of something the API had
  already stored: the API is idempotent on traceId), rejected -> rejected (with a warning);
- network error, timeout, 408, 429, 5xx: the batch goes back to the head of the queue and is sent
  again after a backoff (exponential with "equal jitter", or the server's Retry-After);
- 413: the batch is split in half (a single trace too large for the API is rejected);
- any other 4xx: the batch is not retried; its traces are counted as rejected, with a warning.

The bound counts every trace not yet settled; when a new trace would exceed it, the oldest trace
not in flight is dropped (counted, with a warning).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random as _random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from datetime import datetime, timezone

from .trace import MAX_BATCH_SIZE, iso_timestamp

_BODY_OVERHEAD = len('{"traces":[]}')


class GovernanceLogger(Protocol):
    """Where warnings go. Messages never contain prompts, responses or keys."""

    def warn(self, message: str, details: Mapping[str, Any]) -> None: ...


class LoggingLogger:
    """The default: the standard ``logging`` module, logger ``berth_toolkit``, level WARNING (shown on
    stderr by Python's last-resort handler when the application configured no logging). The
    details are on the record as ``berth_code`` and ``berth_details``."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("berth_toolkit")

    def warn(self, message: str, details: Mapping[str, Any]) -> None:
        code = details.get("code")
        self._logger.warning(
            message, extra={"berth_code": code if isinstance(code, str) else "BERTH_GOVERNANCE", "berth_details": dict(details)}
        )


default_logger: GovernanceLogger = LoggingLogger()

ItemStatus = Literal["created", "duplicate", "rejected"]


@dataclass(frozen=True)
class ItemResult:
    """The API's answer for one trace of a batch."""

    trace_id: str
    status: ItemStatus
    #: why a trace was rejected (free text from the API)
    reason: str | None = None


@dataclass(frozen=True)
class SendOutcome:
    """What became of one attempt to send a batch (a transport never raises).

    kind: "accepted" (results), "retry" (error, status?, retry_after_ms?), "rejected" (error,
    status), "too_large" (error)."""

    kind: Literal["accepted", "retry", "rejected", "too_large"]
    results: tuple[ItemResult, ...] = ()
    error: str = ""
    status: int | None = None
    retry_after_ms: float | None = None


class TraceTransport(Protocol):
    """Sends one batch body (``{"traces":[...]}``) to the API."""

    def send(self, body: bytes, count: int) -> SendOutcome: ...

    def cancel(self) -> None:
        """Aborts the sends in flight (shutdown)."""
        ...


@dataclass(frozen=True)
class LastError:
    message: str
    at: str
    status: int | None = None


@dataclass(frozen=True)
class QueueStats:
    #: traces waiting to be sent or in flight now
    queued: int = 0
    #: traces accepted into the queue since start
    submitted: int = 0
    #: traces the API stored (status created)
    sent: int = 0
    #: traces the API already had (status duplicate: a retry of a batch whose answer was lost)
    duplicates: int = 0
    #: traces the API refused (per-item rejected, a 4xx on the batch, too large), never retried
    rejected: int = 0
    #: traces dropped without being sent: the memory bound, or undelivered at shutdown
    dropped: int = 0
    #: failed attempts that were retried
    retries: int = 0
    last_error: LastError | None = None


def _round(x: float) -> int:
    """Math.round: halves go up."""
    return math.floor(x + 0.5)


def backoff_delay(attempt: int, initial_ms: float, max_ms: float, random: Callable[[], float]) -> int:
    """Milliseconds before retry number ``attempt`` (1-based): exponential, capped, with "equal
    jitter" (uniform between half and all of the exponential delay)."""
    ceiling = min(max_ms, initial_ms * 2 ** min(attempt - 1, 30))
    return _round(ceiling / 2 + random() * (ceiling / 2))


@dataclass
class _Entry:
    seq: int
    trace_id: str
    json: bytes
    at: float


@dataclass
class _Counters:
    submitted: int = 0
    sent: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0
    retries: int = 0


def _positive_int(n: int, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name} must be a positive integer")
    return n


_queues: weakref.WeakSet[TraceQueue] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for q in list(_queues):
        q._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class TraceQueue:
    """Times are in seconds (``linger``, ``initial_backoff``...), as everywhere in the Python API;
    the schedule is the TypeScript toolkit's, computed in milliseconds."""

    def __init__(
        self,
        transport: TraceTransport,
        *,
        max_queue: int = 10_000,
        batch_size: int = MAX_BATCH_SIZE,
        max_batch_bytes: int = 1_000_000,
        linger: float = 0.25,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_retry_after: float = 300.0,
        warn_interval: float = 30.0,
        logger: GovernanceLogger | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self._transport = transport
        self._max_queue = _positive_int(max_queue, "max_queue")
        self._batch_size = min(_positive_int(batch_size, "batch_size"), MAX_BATCH_SIZE, self._max_queue)
        self._max_batch_bytes = _positive_int(max_batch_bytes, "max_batch_bytes")
        self._linger = max(0.0, linger)
        self._initial_backoff_ms = max(1.0, initial_backoff * 1000)
        self._max_backoff_ms = max(self._initial_backoff_ms, max_backoff * 1000)
        self._max_retry_after_ms = max(0.0, max_retry_after * 1000)
        self._warn_interval = max(0.0, warn_interval)
        self._logger = logger or default_logger
        self._monotonic = monotonic
        self._wall = wall
        self._random = random

        self._cond = threading.Condition(threading.RLock())
        self._pending: deque[_Entry] = deque()
        self._inflight: list[_Entry] = []
        self._seq = 0
        self._attempt = 0
        self._split_limit: int | None = None
        self._flushing = 0
        self._closed = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._c = _Counters()
        self._last_error: LastError | None = None
        self._warned: dict[str, list[float]] = {}
        _queues.add(self)

    # -- the caller's side ------------------------------------------------------------------

    def enqueue(self, record: Mapping[str, Any]) -> bool:
        """Queues one trace record; False when it was refused (queue closed, larger than a request
        may be). Never raises for a JSON-serialisable record."""
        try:
            body = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:
            # lone surrogates: escaped as JSON.stringify escapes them (the API refuses such an item)
            body = json.dumps(record, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
        trace_id = str(record.get("traceId", ""))
        with self._cond:
            if self._closed:
                self._c.dropped += 1
                self._warn("closed", f"a trace was submitted after shutdown and dropped ({self._c.dropped} dropped in all)")
                return False
            if len(body) + _BODY_OVERHEAD > self._max_batch_bytes:
                self._c.rejected += 1
                self._warn(
                    "too_large",
                    f"trace {trace_id} is {len(body)} bytes, more than a request may carry ({self._max_batch_bytes}); rejected without sending",
                )
                return False
            self._seq += 1
            self._pending.append(_Entry(self._seq, trace_id, body, self._monotonic()))
            self._c.submitted += 1
            self._enforce_bound()
            # when no thread can start (the interpreter is exiting), the next flush() sends inline
            self._ensure_thread()
            self._cond.notify_all()
        return True

    def refuse(self, reason: str) -> None:
        """Counts a trace refused before it was queued (invalid), with a rate-limited warning."""
        with self._cond:
            self._c.rejected += 1
            self._warn("invalid_trace", f"a trace was not submitted: {reason} ({self._c.rejected} rejected in all)")

    def stats(self) -> QueueStats:
        with self._cond:
            return self._stats()

    def _stats(self) -> QueueStats:
        c = self._c
        return QueueStats(
            queued=len(self._pending) + len(self._inflight),
            submitted=c.submitted,
            sent=c.sent,
            duplicates=c.duplicates,
            rejected=c.rejected,
            dropped=c.dropped,
            retries=c.retries,
            last_error=self._last_error,
        )

    def flush(self, timeout: float = 10.0) -> bool:
        """True once every trace queued before the call is settled (sent, duplicate, rejected or
        dropped), False if that takes longer than ``timeout`` seconds. Sends at once, without
        waiting for a batch to fill; retries keep their backoff."""
        deadline = self._monotonic() + max(0.0, timeout)
        with self._cond:
            seq = self._seq
            if self._min_unsettled() > seq:
                return True
            if not self._ensure_thread():
                return self._drain_inline(seq, deadline)
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._min_unsettled() <= seq:
                    remaining = deadline - self._monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return True
            finally:
                self._flushing -= 1

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Stops taking traces, flushes for up to ``timeout`` seconds, then stops the sender: what
        is still queued is dropped (counted, with a warning). True when everything was delivered."""
        with self._cond:
            self._closed = True
        drained = self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        try:
            self._transport.cancel()
        except Exception:  # noqa: BLE001 - a transport that fails to cancel must not break shutdown
            pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
        with self._cond:
            left = self._inflight + list(self._pending)
            self._inflight = []
            self._pending.clear()
            if left:
                self._c.dropped += len(left)
                self._warn_now(
                    "undelivered",
                    f"{len(left)} traces were not delivered before shutdown and are lost ({self._c.dropped} dropped in all)",
                    {"count": len(left)},
                )
            self._cond.notify_all()
        return drained and not left

    # -- the sender ---------------------------------------------------------------------------

    def _ensure_thread(self) -> bool:
        """Starts the sender thread if it is not running (under the lock); False when none can start."""
        if self._stopped:
            return True
        if self._thread is not None and self._thread.is_alive():
            return True
        thread = threading.Thread(target=self._run, name="berth-governance-traces", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            return False
        self._thread = thread
        return True

    def _reset_after_fork(self) -> None:
        # the parent process delivers what it had queued; the child starts empty with its own lock
        self._cond = threading.Condition(threading.RLock())
        self._pending.clear()
        self._inflight = []
        self._thread = None
        self._flushing = 0

    def _min_unsettled(self) -> float:
        if self._inflight:
            return self._inflight[0].seq
        if self._pending:
            return self._pending[0].seq
        return math.inf

    def _urgent(self) -> bool:
        return len(self._pending) >= self._batch_size or self._flushing > 0 or self._closed

    def _run(self) -> None:
        while True:
            with self._cond:
                batch = self._next_batch()
                if batch is None:
                    return
                self._inflight = batch
            outcome = self._send(batch)
            with self._cond:
                if self._stopped:
                    return
                self._inflight = []
                try:
                    delay = self._settle(batch, outcome)
                except Exception:  # noqa: BLE001 - a fault in the bookkeeping must not stop the sender
                    delay = None
                self._cond.notify_all()
                if delay is not None:
                    # a backoff is not cut short by new traces or flush(): only shutdown ends it
                    deadline = self._monotonic() + delay / 1000
                    while not self._stopped:
                        remaining = deadline - self._monotonic()
                        if remaining <= 0:
                            break
                        self._cond.wait(remaining)

    def _next_batch(self) -> list[_Entry] | None:
        """Waits (under the lock) until a batch is due; None when stopped."""
        while True:
            if self._stopped:
                return None
            if not self._pending:
                self._cond.wait()
                continue
            if not self._urgent():
                wait = self._pending[0].at + self._linger - self._monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
            return self._take()

    def _drain_inline(self, seq: int, deadline: float) -> bool:
        """flush() without a sender thread (none can start at interpreter exit): sends from the
        calling thread, under the same rules, until ``seq`` is settled or the deadline passes."""
        while self._min_unsettled() <= seq and not self._stopped:
            if self._monotonic() >= deadline:
                return False
            batch = self._take()
            self._inflight = batch
            self._cond.release()
            try:
                outcome = self._send(batch)
            finally:
                self._cond.acquire()
            self._inflight = []
            delay = self._settle(batch, outcome)
            if delay is not None:
                if self._monotonic() + delay / 1000 >= deadline:
                    return False
                self._cond.wait(delay / 1000)
        return self._min_unsettled() > seq

    def _take(self) -> list[_Entry]:
        limit = min(self._batch_size, self._split_limit or self._batch_size)
        batch: list[_Entry] = []
        size = _BODY_OVERHEAD
        while len(batch) < limit and self._pending:
            nxt = self._pending[0]
            if batch and size + len(nxt.json) + 1 > self._max_batch_bytes:
                break
            size += len(nxt.json) + (1 if batch else 0)
            batch.append(self._pending.popleft())
        return batch

    def _send(self, batch: list[_Entry]) -> SendOutcome:
        body = b'{"traces":[' + b",".join(e.json for e in batch) + b"]}"
        try:
            return self._transport.send(body, len(batch))
        except Exception as err:  # noqa: BLE001 - a transport that raises is a failed attempt
            return SendOutcome(kind="retry", error=str(err) or type(err).__name__)

    def _enforce_bound(self) -> None:
        dropped = 0
        while len(self._pending) + len(self._inflight) > self._max_queue and self._pending:
            self._pending.popleft()
            dropped += 1
        if dropped:
            self._c.dropped += dropped
            self._warn(
                "dropped",
                f"the trace queue is full ({self._max_queue}): dropped the oldest trace ({self._c.dropped} dropped in all)",
            )
            self._cond.notify_all()

    def _settle(self, batch: list[_Entry], outcome: SendOutcome) -> float | None:
        """Counts an outcome; returns the delay (ms) before the next attempt when the batch is to be retried."""
        c = self._c
        if outcome.kind == "accepted":
            self._attempt = 0
            # a split (413) holds until the queue is drained
            if not self._pending:
                self._split_limit = None
            by_id = {r.trace_id: r for r in outcome.results}
            reasons: list[str] = []
            for e in batch:
                r = by_id.get(e.trace_id)
                # a 2xx without an item result for a trace: the API took the batch
                if r is None or r.status == "created":
                    c.sent += 1
                elif r.status == "duplicate":
                    c.duplicates += 1
                else:
                    c.rejected += 1
                    reasons.append(f"{e.trace_id}: {r.reason or 'rejected'}")
            if reasons:
                self._record_error(f"the API rejected {len(reasons)} trace(s): {'; '.join(reasons[:3])}")
                self._warn(
                    "rejected",
                    f"the API rejected {len(reasons)} trace(s) ({c.rejected} rejected in all): {'; '.join(reasons[:3])}",
                )
            return None
        if outcome.kind == "retry":
            c.retries += 1
            self._attempt += 1
            self._record_error(outcome.error, outcome.status)
            self._pending.extendleft(reversed(batch))
            self._enforce_bound()
            if outcome.retry_after_ms is not None:
                delay: float = min(outcome.retry_after_ms, self._max_retry_after_ms) + _round(
                    self._random() * min(1000, outcome.retry_after_ms * 0.1)
                )
            else:
                delay = backoff_delay(self._attempt, self._initial_backoff_ms, self._max_backoff_ms, self._random)
            self._warn(
                "retry",
                f"sending traces failed ({outcome.error}); {len(self._pending)} queued, retrying in {_round(delay)} ms (attempt {self._attempt})",
            )
            return delay
        if outcome.kind == "too_large":
            if len(batch) > 1:
                self._split_limit = math.ceil(len(batch) / 2)
                self._pending.extendleft(reversed(batch))
                return None
            c.rejected += 1
            self._record_error(outcome.error, 413)
            self._warn(
                "too_large", f"the API refused trace {batch[0].trace_id if batch else ''} as too large ({c.rejected} rejected in all)"
            )
            return None
        # rejected
        self._attempt = 0
        c.rejected += len(batch)
        self._record_error(outcome.error, outcome.status)
        self._warn(
            "rejected",
            f"the API refused a batch of {len(batch)} trace(s) with HTTP {outcome.status} ({outcome.error}); not retried ({c.rejected} rejected in all)",
        )
        return None

    def _record_error(self, message: str, status: int | None = None) -> None:
        self._last_error = LastError(message=message, at=iso_timestamp(datetime.fromtimestamp(self._wall(), timezone.utc)), status=status)

    def _warn(self, kind: str, message: str) -> None:
        """A warning, at most one per kind per interval; the others are counted into the next one."""
        now = self._monotonic()
        last = self._warned.get(kind)
        if last is not None and now - last[0] < self._warn_interval:
            last[1] += 1
            return
        suppressed = int(last[1]) if last is not None else 0
        self._warned[kind] = [now, 0]
        self._warn_now(kind, f"{message} [{suppressed} similar warning(s) since the last one]" if suppressed > 0 else message, {})

    def _warn_now(self, kind: str, message: str, details: Mapping[str, Any]) -> None:
        s = self._stats()
        info: dict[str, Any] = {
            "code": f"BERTH_GOVERNANCE_{kind.upper()}",
            "kind": kind,
            "queued": s.queued,
            "submitted": s.submitted,
            "sent": s.sent,
            "duplicates": s.duplicates,
            "rejected": s.rejected,
            "dropped": s.dropped,
            "retries": s.retries,
            **details,
        }
        try:
            self._logger.warn(f"berth governance: {message}", info)
        except Exception:  # noqa: BLE001 - a logger that raises must not break the sender
            pass
