"""From LangChain messages to the trace's fields: the TypeScript wrapper's rules."""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompt_values import ChatPromptValue

from berth_toolkit.langchain.messages import (
    apply_input_redactions,
    apply_output_redactions,
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


def test_prompt_text_skips_system_messages_and_joins_with_a_blank_line() -> None:
    messages = [
        SystemMessage("You are a bank assistant."),
        HumanMessage("What is my balance?"),
        AIMessage("Which account?"),
        HumanMessage(
            [{"type": "text", "text": "The "}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "savings one"}]
        ),
        HumanMessage(""),
    ]
    assert prompt_text(messages) == "What is my balance?\n\nWhich account?\n\nThe savings one"
    assert prompt_text(to_messages("plain")) == "plain"
    assert prompt_text(to_messages([("system", "s"), ("human", "h")])) == "h"
    assert prompt_text(to_messages(ChatPromptValue(messages=[HumanMessage("pv")]))) == "pv"
    assert content_text(["a", {"type": "text", "text": "b"}, {"type": "other"}]) == "ab"


def test_output_text_appends_tool_calls_as_compact_json() -> None:
    assert output_text(AIMessage("Paris.")) == "Paris."
    m = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Zürich", "days": 2}, "id": "c1"}])
    assert output_text(m) == '[{"name":"weather","args":{"city":"Zürich","days":2}}]'
    m2 = AIMessage("Let me check.", tool_calls=[{"name": "w", "args": {}, "id": "c1"}])
    assert output_text(m2) == 'Let me check.\n\n[{"name":"w","args":{}}]'


def test_tokens() -> None:
    assert tokens_of(None) == {"prompt": 0, "completion": 0, "total": 0}
    m = AIMessage("x", usage_metadata={"input_tokens": 12, "output_tokens": 30, "total_tokens": 42})
    assert tokens_of(m) == {"prompt": 12, "completion": 30, "total": 42}
    summed = AIMessageChunk("a", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}) + AIMessageChunk(
        "b", usage_metadata={"input_tokens": 8, "output_tokens": 6, "total_tokens": 14}
    )
    assert tokens_of(summed) == {"prompt": 9, "completion": 8, "total": 17}
    assert tokens_of(AIMessage("x", response_metadata={"token_usage": {"prompt_tokens": 5, "completion_tokens": 7}})) == {
        "prompt": 5,
        "completion": 7,
        "total": 12,
    }
    assert tokens_of(
        AIMessage("x", response_metadata={"tokenUsage": {"promptTokens": 2.4, "completionTokens": 2.5, "totalTokens": 5}})
    ) == {
        "prompt": 2,
        "completion": 3,
        "total": 5,
    }
    assert tokens_of(AIMessage("x", response_metadata={"usage": {"foo": 1}})) == {"prompt": 0, "completion": 0, "total": 0}


def test_model_name() -> None:
    class Named(FakeListChatModel):
        model_name: str = "gpt-4o-mini"

    assert model_name_of(Named(responses=["x"])) == "gpt-4o-mini"
    fake = FakeListChatModel(responses=["x"])
    assert model_name_of(fake, AIMessage("x", response_metadata={"model_name": "from-response"})) == "from-response"
    assert model_name_of(fake) == "fake-list-chat-model"


def test_redaction_helpers() -> None:
    messages = [SystemMessage("keep a@b.co"), HumanMessage("mail a@b.co"), ToolMessage("x", tool_call_id="1")]
    assert input_texts(messages) == ["mail a@b.co", "x"]
    out = apply_input_redactions(messages, {"mail a@b.co": "mail [REDACTED:EMAIL]", "x": None})
    assert [m.content for m in out] == ["keep a@b.co", "mail [REDACTED:EMAIL]", "x"]
    assert out[0] is messages[0] and out[2] is messages[2] and out[1] is not messages[1]
    assert messages[1].content == "mail a@b.co", "the caller's messages are not changed"

    m = AIMessage("see a@b.co", tool_calls=[{"name": "send", "args": {"to": "a@b.co", "n": 1, "cc": ["a@b.co"]}, "id": "c1"}])
    assert output_texts(m) == ["see a@b.co", "a@b.co", "a@b.co"]
    r = apply_output_redactions(m, {"see a@b.co": "see [R]", "a@b.co": "[R]"})
    assert r.content == "see [R]"
    assert r.tool_calls[0]["args"] == {"to": "[R]", "n": 1, "cc": ["[R]"]}
    assert apply_output_redactions(AIMessage("x"), {}, whole="y").content == "y"
    chunk = AIMessageChunk([{"type": "text", "text": "a"}, {"type": "reasoning", "reasoning": "r"}])
    assert with_text(chunk, "b").content == [{"type": "text", "text": "b"}, {"type": "reasoning", "reasoning": "r"}]
