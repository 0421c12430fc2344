// /chat's model: a stand-in chat model (@langchain/core's FakeListChatModel, canned answers, no
// network) wrapped by the toolkit's LangChain wrapper (@berth/toolkit/langchain), which reads GOVDB_CONNECTION and
// GOVERNANCE_PROJECT: the app's guards run before and after each call and one trace per call goes
// to the governance API, exactly as with a real provider's model.
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { GuardBlockedError, contentText, withGovernance } from "@berth/toolkit/langchain";
import type { Chat } from "./app.ts";

export const STAND_IN_ANSWERS = [
  "Hello! I am the stand-in model of Berth's sample service. Your message reached me through the governance layer.",
  "This answer comes from a stand-in model: no provider was called, but the call was guarded and traced like a real one.",
  "Thanks for your message. The sample service answers with canned text, one trace per call.",
];

/** The governed chat: throws GovdbConnectionError when GOVDB_CONNECTION is missing or malformed (and governance is not off). */
export function governedChat(): Chat {
  const model = withGovernance(new FakeListChatModel({ responses: STAND_IN_ANSWERS }));
  return async ({ message, sessionId }) => {
    try {
      const answer = await model.invoke(message, sessionId === undefined ? {} : { metadata: { sessionId } });
      return { kind: "answer", answer: contentText(answer.content) };
    } catch (err) {
      if (err instanceof GuardBlockedError) return { kind: "blocked", phase: err.phase, guards: [...err.guards], traceId: err.traceId };
      throw err;
    }
  };
}
