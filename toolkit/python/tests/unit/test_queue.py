"""The delivery queue: the TypeScript toolkit's schedule and rules, against an injected transport."""

from __future__ import annotations

import threading
import time
from typing import Any

import json

from berth_toolkit import TraceQueue, backoff_delay, to_record
from berth_toolkit.queue import ItemResult, SendOutcome


def test_backoff_schedule_is_the_typescript_one() -> None:
    # exponential from 500 ms, capped at 30 s, "equal jitter": between half and all of it
    assert [backoff_delay(n, 500, 30_000, lambda: 0.0) for n in range(1, 10)] == [250, 500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]
    assert [backoff_delay(n, 500, 30_000, lambda: 0.999999) for n in range(1, 9)] == [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
    assert backoff_delay(3, 500, 30_000, lambda: 0.5) == 1500
    assert backoff_delay(1, 1, 10, lambda: 0.5) == 1, "Math.round: halves go up (0.75 -> 1)"
    assert backoff_delay(1000, 1000, 30_000, lambda: 0.0) == 15000, "the exponent is capped"
    # the config fetch's schedule: 1 s doubling to 30 s
    assert [backoff_delay(n, 1000, 30_000, lambda: 1.0) for n in range(1, 7)] == [1000, 2000, 4000, 8000, 16000, 30000]


class FakeTransport:
    """Answers each send with the next scripted outcome (default: every trace created)."""

    def __init__(self, script: list[Any] | None = None) -> None:
        self.script = list(script or [])
        self.bodies: list[list[dict[str, Any]]] = []
        self.cancelled = 0
        self.gate: threading.Event | None = None

    def send(self, body: bytes, count: int) -> SendOutcome:
        traces = json.loads(body)["traces"]
        assert len(traces) == count
        self.bodies.append(traces)
        if self.gate is not None:
            self.gate.wait(5)
        step = self.script.pop(0) if self.script else None
        if callable(step):
            return step(traces)
        if step is not None:
            return step
        return SendOutcome(kind="accepted", results=tuple(ItemResult(t["traceId"], "created") for t in traces))

    def cancel(self) -> None:
        self.cancelled += 1


def record(i: int) -> dict[str, Any]:
    return to_record({"input": f"q{i}", "output": "a", "model": "m", "latency": 1, "tokens": {"prompt": 1, "completion": 1}}, None)


def make(t: FakeTransport, warnings_: Any, **kw: Any) -> TraceQueue:
    # a long linger: flush() sends at once, so a burst is one batch however slow the host (a
    # test of the linger itself sets it)
    kw.setdefault("linger", 60.0)
    kw.setdefault("initial_backoff", 0.01)
    kw.setdefault("max_backoff", 0.02)
    return TraceQueue(t, logger=warnings_, **kw)


def test_batches_and_per_item_results(warnings_: Any) -> None:
    t = FakeTransport(
        [
            lambda traces: SendOutcome(
                "accepted",
                results=(ItemResult(traces[0]["traceId"], "duplicate"), ItemResult(traces[1]["traceId"], "rejected", "input: too long")),
            )
        ]
    )
    q = make(t, warnings_)
    for i in range(3):
        assert q.enqueue(record(i))
    assert q.flush(5)
    s = q.stats()
    assert (s.sent, s.duplicates, s.rejected, s.queued) == (1, 1, 1, 0)
    assert len(t.bodies) == 1 and len(t.bodies[0]) == 3, "a burst shares a batch"
    assert "BERTH_GOVERNANCE_REJECTED" in warnings_.codes()
    q.shutdown(1)


def test_batch_size_and_bytes(warnings_: Any) -> None:
    t = FakeTransport()
    q = make(t, warnings_, batch_size=2)
    for i in range(5):
        q.enqueue(record(i))
    assert q.flush(5)
    assert [len(b) for b in t.bodies] == [2, 2, 1]
    one = len(json.dumps(record(0), separators=(",", ":")))
    t2 = FakeTransport()
    q2 = make(t2, warnings_, max_batch_bytes=len('{"traces":[]}') + 2 * one + 1)
    for i in range(5):
        q2.enqueue(record(i))
    assert q2.flush(5)
    assert all(len(b) <= 2 for b in t2.bodies) and sum(len(b) for b in t2.bodies) == 5
    assert not q2.enqueue({**record(9), "input": "x" * 10_000}), "larger than a request may be: rejected locally"
    assert q2.stats().rejected == 1
    q.shutdown(1)
    q2.shutdown(1)


def test_retries_keep_order_and_never_duplicate(warnings_: Any) -> None:
    t = FakeTransport([SendOutcome("retry", error="network error: ECONNREFUSED"), SendOutcome("retry", error="HTTP 503", status=503)])
    q = make(t, warnings_)
    ids = [r["traceId"] for r in (record(i) for i in range(3)) if q.enqueue(r) or True]
    assert q.flush(5)
    s = q.stats()
    assert (s.sent, s.retries, s.queued) == (3, 2, 0)
    assert s.last_error is not None and s.last_error.status == 503
    assert len(t.bodies) == 3 and all([x["traceId"] for x in b] == [x["traceId"] for x in t.bodies[0]] for b in t.bodies)
    assert len(set(ids)) == 3
    assert any("retrying in" in m for m, _ in warnings_.lines)
    q.shutdown(1)


def test_retry_after_is_honoured(warnings_: Any) -> None:
    t = FakeTransport([SendOutcome("retry", error="HTTP 429", status=429, retry_after_ms=50)])
    q = make(t, warnings_, random=lambda: 0.0)
    q.enqueue(record(0))
    assert q.flush(5)
    assert any("retrying in 50 ms" in m for m, _ in warnings_.lines)
    q.shutdown(1)


def test_other_4xx_is_not_retried_and_413_splits(warnings_: Any) -> None:
    t = FakeTransport([SendOutcome("rejected", error="HTTP 403 project_mismatch", status=403)])
    q = make(t, warnings_)
    for i in range(2):
        q.enqueue(record(i))
    assert q.flush(5)
    assert (q.stats().rejected, q.stats().retries, len(t.bodies)) == (2, 0, 1)
    t2 = FakeTransport([SendOutcome("too_large", error="HTTP 413"), SendOutcome("too_large", error="HTTP 413")])
    q2 = make(t2, warnings_)
    for i in range(4):
        q2.enqueue(record(i))
    assert q2.flush(5)
    assert [len(b) for b in t2.bodies] == [4, 2, 1, 1, 1, 1], "halved until it fits; the split holds until the queue drains"
    assert q2.stats().sent == 4
    q.shutdown(1)
    q2.shutdown(1)


def test_memory_bound_drops_the_oldest_with_one_warning(warnings_: Any) -> None:
    t = FakeTransport()
    t.gate = threading.Event()
    q = make(t, warnings_, max_queue=3, batch_size=1, linger=0)
    first = record(0)
    q.enqueue(first)
    for _ in range(100):
        if t.bodies:
            break
        time.sleep(0.01)
    ids = [first["traceId"]]
    for i in range(1, 6):
        r = record(i)
        ids.append(r["traceId"])
        q.enqueue(r)
    s = q.stats()
    assert (s.queued, s.dropped) == (3, 3), "the one in flight is kept; the oldest waiting ones go"
    assert warnings_.codes().count("BERTH_GOVERNANCE_DROPPED") == 1
    t.gate.set()
    assert q.flush(5)
    sent = [b[0]["traceId"] for b in t.bodies]
    assert sent == [ids[0], ids[4], ids[5]]
    q.shutdown(1)


def test_shutdown_drops_what_is_left_and_refuses_later_traces(warnings_: Any) -> None:
    t = FakeTransport([SendOutcome("retry", error="down")] * 100)
    q = make(t, warnings_, initial_backoff=0.05, max_backoff=0.05)
    q.enqueue(record(0))
    assert q.flush(0.1) is False, "the API is down: flush gives up at its deadline"
    assert q.shutdown(0.1) is False
    s = q.stats()
    assert (s.dropped, s.queued) == (1, 0)
    assert "BERTH_GOVERNANCE_UNDELIVERED" in warnings_.codes()
    assert t.cancelled == 1
    assert not q.enqueue(record(1))
    assert "BERTH_GOVERNANCE_CLOSED" in warnings_.codes()


def test_warnings_are_rate_limited_and_counted(warnings_: Any) -> None:
    q = make(FakeTransport(), warnings_)
    for i in range(5):
        q.refuse(f"bad {i}")
    assert warnings_.codes().count("BERTH_GOVERNANCE_INVALID_TRACE") == 1
    q2 = make(FakeTransport(), warnings_, warn_interval=0)
    q2.refuse("a")
    q2.refuse("b")
    assert warnings_.codes().count("BERTH_GOVERNANCE_INVALID_TRACE") == 3
    assert q.stats().rejected == 5


def test_enqueue_never_waits_for_the_network(warnings_: Any) -> None:
    t = FakeTransport()
    t.gate = threading.Event()
    q = make(t, warnings_, linger=0)
    q.enqueue(record(0))
    for _ in range(100):
        if t.bodies:
            break
        time.sleep(0.01)
    # the sender is stuck in the network; enqueue still returns (ordering, not timing)
    returned = [q.enqueue(record(i)) for i in range(1, 50)]
    assert all(returned) and q.stats().queued == 50
    t.gate.set()
    assert q.flush(5)
    q.shutdown(1)
