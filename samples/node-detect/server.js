// A user's Node.js app as Berth's detection builds it: no Dockerfile, no dependencies. GET /
// answers one line with the version in the file VERSION; it listens on PORT (Berth sets it).
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import process from "node:process";
import { URL } from "node:url";

const version = readFileSync(new URL("VERSION", import.meta.url), "utf8").trim();
// eslint-disable-next-line no-restricted-properties -- a user's app reads PORT from its environment
const port = Number(process.env.PORT || 8080);

const server = createServer((req, res) => {
  if (req.url === "/" || req.url === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    res.end(req.url === "/" ? `Hello from node-detect, version ${version}\n` : "ok\n");
    return;
  }
  res.writeHead(404).end();
});
server.listen(port, "0.0.0.0", () => process.stdout.write(`node-detect ${version} listening on ${port}\n`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
