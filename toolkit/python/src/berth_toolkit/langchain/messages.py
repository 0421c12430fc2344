"""From LangChain messages to the trace's text and back (redaction), and what a response says about
itself (tokens, model). The same functions serve invoke, stream and batch, so a call gives the same
trace whichever way it was made, and the same trace as the TypeScript wrapper gives for that call.

Redaction needs the guards, which run in the API: the functions here list the texts to check
(``*_texts``) and apply the answers (``apply_*``), so that sync and async callers share them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypedDict

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue


class Tokens(TypedDict):
    prompt: int
    completion: int
    total: int


ZERO_TOKENS: Tokens = {"prompt": 0, "completion": 0, "total": 0}

#: text -> its redacted form (None: nothing to redact)
Redactions = Mapping[str, "str | None"]


def to_messages(value: LanguageModelInput) -> list[BaseMessage]:
    """The messages a chat model receives for an input (what BaseChatModel does with it)."""
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    return convert_to_messages(value)


def _is_text_block(b: object) -> bool:
    return isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)


def content_text(content: object) -> str:
    """The text of a message's content: a string as is; of a list, its text blocks (and plain string
    parts) concatenated."""
    if isinstance(content, str):
        return content
    out = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                out.append(b)
            elif _is_text_block(b):
                out.append(b["text"])
    return "".join(out)


def _is_system(m: BaseMessage) -> bool:
    return m.type == "system"


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """The trace's ``input`` for a call: the text of every message but the system messages (the
    service's own instructions), in order, separated by a blank line."""
    parts = []
    for m in messages:
        if _is_system(m):
            continue
        t = content_text(m.content)
        if t != "":
            parts.append(t)
    return "\n\n".join(parts)


def _json(value: object) -> str:
    """JSON.stringify's form: compact, non-ASCII as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def output_text(message: BaseMessage) -> str:
    """The trace's ``output`` for a response: its text, then (when it calls tools) the tool calls as
    JSON ``[{"name":...,"args":{...}}]``, separated by a blank line."""
    text = content_text(message.content)
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return text
    rendered = _json([{"name": c["name"], "args": c["args"]} for c in calls])
    return rendered if text == "" else f"{text}\n\n{rendered}"


# -- redaction ---------------------------------------------------------------------------------


def _content_texts(content: object) -> Iterator[str]:
    if isinstance(content, str):
        if content != "":
            yield content
        return
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str) and b != "":
                yield b
            elif _is_text_block(b) and b["text"] != "":
                yield b["text"]


def _redact_content(content: Any, redactions: Redactions) -> Any | None:
    """The content with each text replaced by its redaction; None when nothing changed."""
    if isinstance(content, str):
        return redactions.get(content)
    if not isinstance(content, list):
        return None
    changed = False
    out: list[Any] = []
    for b in content:
        if isinstance(b, str) and redactions.get(b) is not None:
            out.append(redactions[b])
            changed = True
        elif _is_text_block(b) and redactions.get(b["text"]) is not None:
            out.append({**b, "text": redactions[b["text"]]})
            changed = True
        else:
            out.append(b)
    return out if changed else None


def input_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """The texts the input guards redact one by one: each text of each non-system message."""
    return [t for m in messages if not _is_system(m) for t in _content_texts(m.content)]


def apply_input_redactions(messages: Sequence[BaseMessage], redactions: Redactions) -> list[BaseMessage]:
    """The messages with the text of each non-system message redacted (copies; the others as they are)."""
    out: list[BaseMessage] = []
    for m in messages:
        content = None if _is_system(m) else _redact_content(m.content, redactions)
        out.append(m if content is None else m.model_copy(update={"content": content}))
    return out


def _value_texts(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _value_texts(v)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _value_texts(v)


def _redact_value(value: Any, redactions: Redactions) -> Any:
    if isinstance(value, str):
        r = redactions.get(value)
        return value if r is None else r
    if isinstance(value, list):
        return [_redact_value(v, redactions) for v in value]
    if isinstance(value, Mapping):
        return {k: _redact_value(v, redactions) for k, v in value.items()}
    return value


def output_texts(message: BaseMessage) -> list[str]:
    """The texts the output guards redact one by one: each text of the content, each string in
    the arguments of each tool call."""
    texts = list(_content_texts(message.content))
    for c in getattr(message, "tool_calls", None) or []:
        texts.extend(_value_texts(c.get("args")))
    return texts


def apply_output_redactions(message: BaseMessage, redactions: Redactions, whole: str | None = None) -> BaseMessage:
    """The response as the caller receives it when the output guards redact: its text redacted,
    and the string arguments of its tool calls. ``whole`` is the redacted text when the decision
    was taken on the text alone (a string content, no tool calls)."""
    calls = getattr(message, "tool_calls", None) or []
    update: dict[str, Any] = {}
    if not calls and whole is not None and isinstance(message.content, str):
        content: Any = whole
    else:
        content = _redact_content(message.content, redactions)
    if content is not None:
        update["content"] = content
    if calls:
        redacted = [{**c, "args": _redact_value(c["args"], redactions)} for c in calls]
        update["tool_calls"] = redacted
        chunks = getattr(message, "tool_call_chunks", None) or []
        if chunks:
            fixed = []
            for i, tc in enumerate(chunks):
                call = next((c for c in redacted if c.get("id") is not None and c.get("id") == tc.get("id")), None)
                if call is None and i < len(redacted):
                    call = redacted[i]
                fixed.append({**tc, "args": _json(call["args"])} if call is not None else tc)
            update["tool_call_chunks"] = fixed
    return message.model_copy(update=update)


def with_text(message: AIMessageChunk, text: str) -> AIMessageChunk:
    """The chunk with this text as its only text content (tool calls and metadata kept)."""
    if isinstance(message.content, str):
        return message.model_copy(update={"content": text})
    others = [b for b in message.content if not (isinstance(b, str) or _is_text_block(b))]
    return message.model_copy(update={"content": text if not others else [{"type": "text", "text": text}, *others]})


# -- what a response says about itself ---------------------------------------------------------


def _int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return math.floor(v + 0.5)


def tokens_of(message: BaseMessage | None) -> Tokens:
    """Token usage of a response: usage_metadata (LangChain's standard field, also summed over
    stream chunks), else what the provider put in response_metadata (tokenUsage, usage,
    token_usage); zeros when the provider reports nothing."""
    if message is None:
        return dict(ZERO_TOKENS)  # type: ignore[return-value]
    u = getattr(message, "usage_metadata", None)
    if isinstance(u, Mapping) and (_int(u.get("input_tokens")) is not None or _int(u.get("output_tokens")) is not None):
        prompt = _int(u.get("input_tokens")) or 0
        completion = _int(u.get("output_tokens")) or 0
        total = _int(u.get("total_tokens"))
        return {"prompt": prompt, "completion": completion, "total": total if total is not None else prompt + completion}
    meta = message.response_metadata or {}
    for key in ("tokenUsage", "usage", "token_usage"):
        r = meta.get(key)
        if not isinstance(r, Mapping):
            continue
        p = _first(r, "promptTokens", "prompt_tokens", "input_tokens")
        c = _first(r, "completionTokens", "completion_tokens", "output_tokens")
        if p is None and c is None:
            continue
        t = _first(r, "totalTokens", "total_tokens")
        return {"prompt": p or 0, "completion": c or 0, "total": t if t is not None else (p or 0) + (c or 0)}
    return dict(ZERO_TOKENS)  # type: ignore[return-value]


def _first(r: Mapping[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = _int(r.get(k))
        if v is not None:
            return v
    return None


def model_name_of(model: object, response: BaseMessage | None = None) -> str:
    """The model name recorded on a trace: the model the service configured (``model`` or
    ``model_name`` of the chat model), else the one the response names, else the chat model's type.
    The configured name comes first so that a blocked call (no response) and an answered one are
    recorded alike."""
    for attr in ("model", "model_name"):
        v = getattr(model, attr, None)
        if isinstance(v, str) and v.strip() != "":
            return v
    meta = (response.response_metadata if response is not None else None) or {}
    for key in ("model_name", "model"):
        v = meta.get(key)
        if isinstance(v, str) and v.strip() != "":
            return v
    try:
        t = getattr(model, "_llm_type", None)
        if isinstance(t, str) and t != "":
            return t
    except Exception:  # noqa: BLE001 - a model without a type
        pass
    get_name: Callable[[], str] | None = getattr(model, "get_name", None)
    return get_name() if callable(get_name) else "unknown"


def concat(a: AIMessageChunk | None, b: AIMessageChunk) -> AIMessageChunk:
    """Two stream chunks as one (usage summed); a complete AIMessage (a model without streaming) replaces."""
    if a is None:
        return b
    if isinstance(a, AIMessageChunk) and isinstance(b, AIMessageChunk):
        return a + b
    return b


__all__ = [
    "AIMessage",
    "Tokens",
    "apply_input_redactions",
    "apply_output_redactions",
    "concat",
    "content_text",
    "input_texts",
    "model_name_of",
    "output_text",
    "output_texts",
    "prompt_text",
    "to_messages",
    "tokens_of",
    "with_text",
]
