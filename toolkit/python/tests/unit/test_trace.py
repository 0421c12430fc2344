"""The trace record: the TypeScript toolkit's defaults, key order and timestamp form."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from berth_toolkit import to_record, trace_problems
from berth_toolkit.trace import MAX_TRACE_ERROR, iso_timestamp, parse_timestamp, utf16_len

BASE = {"input": "a", "output": "b", "model": "m", "latency": 12.5, "tokens": {"prompt": 3, "completion": 4}}


def test_defaults_and_key_order() -> None:
    r = to_record(BASE, "shop", now=lambda: 1_767_225_600.1234)
    assert list(r) == ["traceId", "input", "output", "model", "latency", "tokens", "timestamp", "project"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", r["traceId"]), "a lower-case UUID v4"
    assert r["tokens"] == {"prompt": 3, "completion": 4, "total": 7}
    assert r["timestamp"] == "2026-01-01T00:00:00.123Z"
    assert json.dumps(r, separators=(",", ":")).startswith('{"traceId":')


def test_optional_fields_in_order() -> None:
    r = to_record(
        {
            **BASE,
            "traceId": "0190A1B2-C3D4-4E5F-8A9B-0C1D2E3F4A5B",
            "sessionId": "s",
            "error": "boom",
            "metadata": {"k": 1},
            "classifierScores": {"promptInjection": 0.5},
        },
        None,
    )
    assert list(r) == [
        "traceId",
        "input",
        "output",
        "model",
        "latency",
        "tokens",
        "timestamp",
        "sessionId",
        "error",
        "metadata",
        "classifierScores",
    ]
    assert r["traceId"] == "0190A1B2-C3D4-4E5F-8A9B-0C1D2E3F4A5B", "kept as given (the API lower-cases it)"
    assert to_record({**BASE, "trace_id": "0190a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b", "session_id": "x"}, None)["sessionId"] == "x"


def test_timestamps_as_date_parse_reads_them() -> None:
    utc = timezone.utc
    assert iso_timestamp(datetime(2026, 3, 4, 5, 6, 7, 891999, tzinfo=utc)) == "2026-03-04T05:06:07.891Z"
    assert to_record({**BASE, "timestamp": "2026-03-04T05:06:07+02:00"}, None)["timestamp"] == "2026-03-04T03:06:07.000Z"
    assert to_record({**BASE, "timestamp": "2026-03-04"}, None)["timestamp"] == "2026-03-04T00:00:00.000Z", "a date alone is UTC"
    assert to_record({**BASE, "timestamp": "2026-03-04T05:06:07.123456789Z"}, None)["timestamp"] == "2026-03-04T05:06:07.123Z"
    aware = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=-5)))
    assert to_record({**BASE, "timestamp": aware}, None)["timestamp"] == "2026-03-04T10:06:07.000Z"
    assert parse_timestamp("Wed, 04 Mar 2026 05:06:07 GMT") == datetime(2026, 3, 4, 5, 6, 7, tzinfo=utc)
    assert parse_timestamp("yesterday") is None


def test_problems() -> None:
    assert trace_problems(BASE) == []
    assert trace_problems("x") == ["the trace is not a mapping"]
    bad = {
        "traceId": "nope",
        "input": 1,
        "output": None,
        "model": "",
        "latency": -1,
        "tokens": {"prompt": 1.5, "completion": True},
        "timestamp": "soon",
        "sessionId": 3,
        "error": 4,
        "metadata": [1],
    }
    assert trace_problems(bad) == [
        "traceId must be a UUID",
        "input must be a string",
        "output must be a string",
        "model must be a non-empty string",
        "latency must be a number of milliseconds >= 0",
        "tokens.prompt must be an integer >= 0",
        "tokens.completion must be an integer >= 0",
        "timestamp must be a datetime or an ISO 8601 string",
        "sessionId must be a string",
        "error must be a string",
        "metadata must be a mapping",
    ]
    assert trace_problems({**BASE, "latency": float("nan")}) == ["latency must be a number of milliseconds >= 0"]
    for scores in ({"promptInjection": 1.5}, {"promptInjection": "0.5"}, [0.5]):
        assert trace_problems({**BASE, "classifierScores": scores}) == ["classifierScores.promptInjection must be a number from 0 to 1"]
    assert trace_problems({**BASE, "classifierScores": {"promptInjection": 0}}) == []
    assert trace_problems({**BASE, "classifierScores": {"toxicity": 1.5}}) == ["classifierScores.toxicity must be a number from 0 to 1"]
    assert trace_problems({**BASE, "classifierScores": {"promptInjection": 0.1, "toxicity": 0.9}}) == []
    assert trace_problems({**BASE, "tokens": {"prompt": 2.0, "completion": 0}}) == [], "an integral float is an integer"
    assert trace_problems({**BASE, "traceId": "0190a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b", "trace_id": "x"})[0].startswith(
        "traceId and trace_id"
    )


def test_long_errors_are_cut_like_the_typescript_toolkit_cuts_them() -> None:
    r = to_record({**BASE, "error": "x" * 20_000}, None)
    assert r["error"] == "x" * (MAX_TRACE_ERROR - 1) + "…"
    assert utf16_len(r["error"]) == MAX_TRACE_ERROR
    # counted in UTF-16 code units, and never cut inside a surrogate pair
    r = to_record({**BASE, "error": "😀" * 6_000}, None)
    assert utf16_len(r["error"]) <= MAX_TRACE_ERROR
    assert r["error"].endswith("😀…")
