"""The trace a client submits after each LLM call, and its wire form: the record the TypeScript
toolkit builds for the same call (same fields, same defaults, same key order), which the Berth API
validates on ingestion."""

from __future__ import annotations

import email.utils
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict

#: Traces per batch of POST /governance/traces: the API refuses a larger batch.
MAX_BATCH_SIZE = 500
#: Characters (UTF-16 code units, as the API counts) of a prompt or a response.
MAX_TRACE_TEXT = 1_048_576
#: Characters (UTF-16 code units) of a trace's ``error``.
MAX_TRACE_ERROR = 10_000

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_ISO = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})"
    r"(?:[T ](?P<h>[0-9]{2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]+))?)?"
    r"(?P<tz>Z|z|[+-][0-9]{2}:?[0-9]{2})?)?"
)


class TraceTokens(TypedDict, total=False):
    """Token counts of one call. ``total`` defaults to prompt + completion."""

    prompt: int
    completion: int
    total: int


class _TraceRequired(TypedDict):
    input: str
    output: str
    model: str
    latency: float
    tokens: TraceTokens


class Trace(_TraceRequired, total=False):
    """What a client submits after each LLM call (keys as on the wire; ``trace_id`` and ``session_id``
    are accepted for ``traceId`` and ``sessionId``)."""

    #: client-generated unique id (UUID form); generated when absent. Retries reuse it (idempotent).
    traceId: str
    #: time of the call; default now
    timestamp: datetime | str
    #: groups the traces of one conversation
    sessionId: str
    #: set when the call failed (counts towards the error rate); at most 10,000 characters
    error: str
    #: a small flat object: up to 32 keys, values str (up to 1,000 characters), int, float, bool or None
    metadata: Mapping[str, str | int | float | bool | None]
    #: scores the guards' model layers gave the input in the request path ({"promptInjection": 0-1,
    #: "toxicity": 0-1});
    #: the wrapper sets it from the guard check, and the API records them instead of scoring again
    classifierScores: Mapping[str, float]


_ALIASES = {"trace_id": "traceId", "session_id": "sessionId"}


def _normalise(trace: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    out = dict(trace)
    problems: list[str] = []
    for alias, key in _ALIASES.items():
        if alias in out:
            if key in out:
                problems.append(f"{key} and {alias} are the same field: give one")
            out[key] = out.pop(alias)
    return out, problems


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: object) -> bool:
    return _is_number(v) and math.isfinite(v) and float(v).is_integer()  # type: ignore[arg-type]


def utf16_len(s: str) -> int:
    """The length JavaScript (and the API's limits) give a string: UTF-16 code units."""
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def parse_timestamp(value: datetime | str) -> datetime | None:
    """A timestamp as Date.parse reads it: ISO 8601 (a date alone is UTC, a time without an offset
    is local time) or an RFC 2822 date; None when unreadable."""
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.astimezone()
    if not isinstance(value, str):
        return None
    m = _ISO.fullmatch(value.strip())
    if m:
        try:
            if m["h"] is None:
                return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), tzinfo=timezone.utc)
            micro = int((m["f"] or "0")[:6].ljust(6, "0"))
            dt = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"] or 0), micro)
        except ValueError:
            return None
        tz = m["tz"]
        if tz is None:
            return dt.astimezone()
        if tz in ("Z", "z"):
            return dt.replace(tzinfo=timezone.utc)
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        return dt.replace(tzinfo=timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))))
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def iso_timestamp(dt: datetime) -> str:
    """Date.prototype.toISOString: UTC, milliseconds, "Z"."""
    u = dt.astimezone(timezone.utc)
    return f"{u:%Y-%m-%dT%H:%M:%S}.{u.microsecond // 1000:03d}Z"


def trace_problems(trace: object) -> list[str]:
    """Why a trace cannot be sent (one message per problem), or [] when it can."""
    if not isinstance(trace, Mapping):
        return ["the trace is not a mapping"]
    t, problems = _normalise(trace)
    trace_id = t.get("traceId")
    if trace_id is not None and (not isinstance(trace_id, str) or not _UUID.fullmatch(trace_id)):
        problems.append("traceId must be a UUID")
    if not isinstance(t.get("input"), str):
        problems.append("input must be a string")
    if not isinstance(t.get("output"), str):
        problems.append("output must be a string")
    if not isinstance(t.get("model"), str) or t.get("model") == "":
        problems.append("model must be a non-empty string")
    latency = t.get("latency")
    if not _is_number(latency) or not math.isfinite(latency) or latency < 0:  # type: ignore[arg-type,operator]
        problems.append("latency must be a number of milliseconds >= 0")
    tokens = t.get("tokens")
    if not isinstance(tokens, Mapping):
        problems.append("tokens must be { prompt, completion, total }")
    else:
        for k in ("prompt", "completion", "total"):
            v = tokens.get(k)
            if v is None and k == "total":
                continue
            if v is None or not _is_int(v) or v < 0:
                problems.append(f"tokens.{k} must be an integer >= 0")
    if t.get("timestamp") is not None and parse_timestamp(t["timestamp"]) is None:
        problems.append("timestamp must be a datetime or an ISO 8601 string")
    if t.get("sessionId") is not None and not isinstance(t["sessionId"], str):
        problems.append("sessionId must be a string")
    if t.get("error") is not None and not isinstance(t["error"], str):
        problems.append("error must be a string")
    if t.get("metadata") is not None and not isinstance(t["metadata"], Mapping):
        problems.append("metadata must be a mapping")
    scores = t.get("classifierScores")
    if scores is not None:
        # not a mapping: one problem, as for a bad prompt-injection score
        for head in ("promptInjection", "toxicity") if isinstance(scores, Mapping) else ("promptInjection",):
            s = scores.get(head) if isinstance(scores, Mapping) else float("nan")
            if s is not None and not (_is_number(s) and 0 <= s <= 1):
                problems.append(f"classifierScores.{head} must be a number from 0 to 1")
    return problems


def _truncate_error(error: str) -> str:
    if utf16_len(error) <= MAX_TRACE_ERROR:
        return error
    out: list[str] = []
    units = 0
    for ch in error:
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > MAX_TRACE_ERROR - 1:
            break
        out.append(ch)
    return "".join(out) + "…"


def to_record(trace: Mapping[str, Any], project: str | None, now: Callable[[], float] = time.time) -> dict[str, Any]:
    """Applies the defaults (traceId, timestamp = now, tokens.total) and the project tag. The keys
    come in the TypeScript toolkit's order, so both serialise a trace alike."""
    t, _ = _normalise(trace)
    tokens = t["tokens"]
    prompt = int(tokens["prompt"])
    completion = int(tokens["completion"])
    total = tokens.get("total")
    timestamp = t.get("timestamp")
    when = datetime.fromtimestamp(now(), timezone.utc) if timestamp is None else parse_timestamp(timestamp)
    assert when is not None  # trace_problems checked it
    record: dict[str, Any] = {
        "traceId": t.get("traceId") or str(uuid.uuid4()),
        "input": t["input"],
        "output": t["output"],
        "model": t["model"],
        "latency": t["latency"],
        "tokens": {"prompt": prompt, "completion": completion, "total": int(total) if total is not None else prompt + completion},
        "timestamp": iso_timestamp(when),
    }
    if t.get("sessionId") is not None:
        record["sessionId"] = t["sessionId"]
    if t.get("error") is not None:
        record["error"] = _truncate_error(t["error"])
    if t.get("metadata") is not None:
        record["metadata"] = dict(t["metadata"])
    if t.get("classifierScores") is not None:
        record["classifierScores"] = dict(t["classifierScores"])
    if project is not None:
        record["project"] = project
    return record
