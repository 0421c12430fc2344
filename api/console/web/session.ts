// The signed-in session, for the pages: its workspace id names the API's paths.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Session } from "./api.ts";

export const SessionContext = createContext<Session | undefined>(undefined);

/** The signed-in session (the pages past the sign-in render only with one). */
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error("no console session");
  return s;
}

/** The workspace the session acts in. */
export function useWorkspace(): string {
  return useSession().workspaceId;
}
