"""The stream guard, pure: strategies, release before the end, a redacted value never released in
part, blocks. Decisions come from a toy checker (an email is redacted, "BOOM" blocks)."""

from __future__ import annotations

import re

import pytest

from berth_toolkit import GuardDecision
from berth_toolkit.guards import GuardBlock
from berth_toolkit.langchain.stream_guard import StreamGuard, StreamGuardOptions, drive

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def check(text: str) -> GuardDecision:
    if "BOOM" in text:
        return GuardDecision("block", blocks=(GuardBlock("toxicity", "a bad word", 0.9, "block", "template:t"),))
    if EMAIL.search(text):
        return GuardDecision("redact", redacted_text=EMAIL.sub("[REDACTED:EMAIL]", text))
    return GuardDecision("allow")


def run(text: str, size: int, strategy: str = "window", **opts: int) -> tuple[list[str], int]:
    """Streams `text` in chunks of `size`; returns what went out, and how many pieces went out before the end."""
    g = StreamGuard(strategy, StreamGuardOptions(**opts))  # type: ignore[arg-type, typeddict-item]
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    held: list[str] = []
    out: list[str] = []
    for c in chunks:
        held.append(c)
        step = drive(g.push(c), check)
        assert step.kind == "release"
        if step.release:
            part = held[: step.release.count]
            del held[: step.release.count]
            out.append("".join(part) if step.release.text is None else step.release.text)
    early = len(out)
    end = drive(g.finish(check(text)), check)
    if end.kind == "block":
        raise RuntimeError("blocked")
    if end.release:
        part = held[: end.release.count]
        out.append("".join(part) if end.release.text is None else end.release.text)
    return out, early


LONG = (
    "We read every message carefully. " * 4
    + "Write to jane.doe@example.com and we will reply within a day. "
    + "Thanks for your patience. " * 4
)


@pytest.mark.parametrize("size", [1, 4, 17])
def test_window_streams_and_never_releases_a_value_in_part(size: int) -> None:
    out, early = run(LONG, size)
    assert "".join(out) == EMAIL.sub("[REDACTED:EMAIL]", LONG)
    assert early > 0, "text went out before the end"
    for piece in out:
        for partial in ("jane", "doe@", "example.com"):
            assert partial not in piece


def test_passthrough_and_buffer() -> None:
    out, early = run(LONG, 5, "passthrough")
    assert "".join(out) == LONG and early == len(out)
    out, early = run(LONG, 5, "buffer")
    assert early == 0 and out == [EMAIL.sub("[REDACTED:EMAIL]", LONG)]


def test_a_block_in_a_window_ends_the_stream_before_the_offending_text() -> None:
    text = "fine words " * 20 + "BOOM " + "more " * 40
    g = StreamGuard("window")
    released = ""
    pending = ""
    for i in range(0, len(text), 3):
        c = text[i : i + 3]
        pending += c
        step = drive(g.push(c), check)
        if step.kind == "block":
            assert "BOOM" not in released
            assert step.decision is not None and step.decision.blocks[0].guard_type == "toxicity"
            return
        if step.release:
            released += pending  # the toy test releases everything held (counts are checked elsewhere)
            pending = ""
    pytest.fail("never blocked")


def test_tool_call_chunks_are_held_to_the_end() -> None:
    g = StreamGuard("window")
    assert drive(g.push("x" * 200, hold=True), check).release is None
    assert drive(g.push("y" * 200), check).release is None
    end = drive(g.finish(GuardDecision("allow")), check)
    assert end.release is not None and end.release.count == 2


def test_a_long_token_is_held_until_complete_then_released() -> None:
    key = "sk_live_" + "a" * 150
    out, _ = run("Your key is " + key + " keep it safe. " * 10, 4)
    assert any(key in piece for piece in out), "the token went out whole"
