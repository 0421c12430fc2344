// Berth's sample service (docs/images.md): node server.ts. Listens on PORT (default 8080); /chat
// calls a stand-in chat model through the toolkit's LangChain wrapper, configured only from
// GOVDB_CONNECTION and GOVERNANCE_PROJECT. On SIGTERM it stops accepting requests, delivers the
// traces still queued and exits 0. It uses the toolkit as any service does, through the entry
// points of its npm package (@berth/toolkit, @berth/toolkit/langchain), installed in node_modules.
import { createServer } from "node:http";
import { GovdbConnectionError, shutdown } from "@berth/toolkit";
import type { Chat } from "./app.ts";
import { helloHandler } from "./app.ts";
import { governedChat } from "./chat.ts";
import { loadConfig } from "./config.ts";

function log(level: "info" | "warn" | "error", msg: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields }) + "\n");
}

const config = loadConfig();
let chat: Chat | { unavailable: string };
try {
  chat = governedChat();
} catch (err) {
  if (!(err instanceof GovdbConnectionError)) throw err;
  log("warn", "/chat is disabled: no governance connection", { reason: err.message });
  chat = { unavailable: err.message };
}

const server = createServer(helloHandler({ version: config.version, chat, shown: config.shown, log }));
server.listen(config.port, config.host, () => {
  const address = server.address();
  log("info", "listening", {
    host: config.host,
    port: typeof address === "object" && address ? address.port : config.port,
    version: config.version,
  });
});

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log("info", "stopping", { signal });
  server.close();
  server.closeIdleConnections();
  const delivered = await shutdown(5000);
  log(delivered ? "info" : "warn", delivered ? "stopped" : "stopped with traces undelivered");
  process.exit(0);
}
process.once("SIGTERM", () => void stop("SIGTERM"));
process.once("SIGINT", () => void stop("SIGINT"));
