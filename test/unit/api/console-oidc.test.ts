// Where a console sign-in with the identity provider may land (api/console/oidc.ts consoleNext):
// a console page of this origin, nothing else (no open redirect).
import test from "ava";
import { consoleNext, CONSOLE_HOME } from "../../../api/console/oidc.ts";
import { DomainError } from "../../../api/errors.ts";

test("console pages are kept as given, query and fragment included", (t) => {
  t.is(consoleNext(undefined), CONSOLE_HOME);
  t.is(consoleNext(""), CONSOLE_HOME);
  t.is(consoleNext("/console"), "/console");
  t.is(consoleNext("/console/"), "/console/");
  t.is(consoleNext("/console/services/shop?range=7d#top"), "/console/services/shop?range=7d#top");
  t.is(consoleNext("/console?x=1"), "/console?x=1");
  t.is(consoleNext("/console//evil.example/x"), "/console//evil.example/x", "a path on this origin, however odd");
});

test("anything that could leave the console or the site is refused", (t) => {
  for (const next of [
    "https://evil.example/",
    "https://evil.example/console/",
    "//evil.example/console/",
    "/\\evil.example/console/",
    "/console\\..\\..\\x",
    "/console/../api/v1/workspaces",
    "/console/%2e%2e/api",
    "/consolex",
    "/api/v1/console/session",
    "javascript:alert(1)",
    "console/services",
    "/console/\nSet-Cookie: x=1",
    " /console/",
  ]) {
    const err = t.throws(() => consoleNext(next), undefined, next);
    t.true(err instanceof DomainError && err.status === 400 && err.code === "invalid_return_url", next);
  }
});
