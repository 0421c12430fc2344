// A stand-in chat model for the toolkit's tests: @langchain/core's FakeListChatModel that reports
// token usage as a provider does (usage_metadata on the answer; on a stream's last chunk) and
// counts the calls that reached it. The Python toolkit's tests use the same figures
// (toolkit/python/tests), so that the records of both toolkits compare equal.
import { AIMessage, AIMessageChunk } from "@langchain/core/messages";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { FakeListChatModel } from "@langchain/core/utils/testing";

export class UsageChatModel extends FakeListChatModel {
  calls = 0;
  override _formatGeneration(text: string) {
    this.calls++;
    return { message: new AIMessage({ content: text, usage_metadata: { input_tokens: 12, output_tokens: 30, total_tokens: 42 } }), text };
  }
  override _createResponseChunk(text: string, generationInfo?: Record<string, unknown>): ChatGenerationChunk {
    const last = generationInfo !== undefined;
    if (last) this.calls++;
    return new ChatGenerationChunk({
      message: new AIMessageChunk({
        content: text,
        ...(last ? { usage_metadata: { input_tokens: 9, output_tokens: 8, total_tokens: 17 } } : {}),
      }),
      text,
      ...(generationInfo ? { generationInfo } : {}),
    });
  }
}
