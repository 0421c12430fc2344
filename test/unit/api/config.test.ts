// The API's configuration (api/config.ts): what each variable accepts and refuses.
import test from "ava";
import { loadConfig } from "../../../api/config.ts";

test("BERTH_PUBLIC_URL: an http(s) URL, with a path prefix or not, without a trailing slash; a query, credentials or another scheme is refused", (t) => {
  const base = { DATABASE_URL: "postgres://u:p@localhost/db" };
  t.is(loadConfig({ ...base, BERTH_PUBLIC_URL: "https://api.example.com/" }).BERTH_PUBLIC_URL, "https://api.example.com");
  t.is(loadConfig({ ...base, BERTH_PUBLIC_URL: "http://127.0.0.1:8080" }).BERTH_PUBLIC_URL, "http://127.0.0.1:8080");
  t.is(loadConfig({ ...base, BERTH_PUBLIC_URL: "https://example.com/berth/" }).BERTH_PUBLIC_URL, "https://example.com/berth");
  t.is(loadConfig(base).BERTH_PUBLIC_URL, undefined);
  for (const bad of [
    "https://api.example.com/#x",
    "https://api.example.com/?x=1",
    "ftp://api.example.com",
    "api.example.com",
    "https://u:p@api.example.com",
  ]) {
    t.throws(() => loadConfig({ ...base, BERTH_PUBLIC_URL: bad }), { message: /BERTH_PUBLIC_URL/ }, bad);
  }
});
