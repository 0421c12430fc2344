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

test("the internal TLS listener: its port, certificate and key together or not at all, on another port than BERTH_API_PORT", (t) => {
  const base = { DATABASE_URL: "postgres://u:p@localhost/db" };
  const tls = {
    BERTH_INTERNAL_TLS_PORT: "8443",
    BERTH_INTERNAL_TLS_CERT_FILE: "/var/run/secrets/berth/api-tls/tls.crt",
    BERTH_INTERNAL_TLS_KEY_FILE: "/var/run/secrets/berth/api-tls/tls.key",
  };
  t.like(loadConfig({ ...base, ...tls }), {
    BERTH_INTERNAL_TLS_PORT: 8443,
    BERTH_INTERNAL_TLS_CERT_FILE: tls.BERTH_INTERNAL_TLS_CERT_FILE,
  });
  t.is(loadConfig(base).BERTH_INTERNAL_TLS_PORT, undefined, "off by default");
  t.throws(() => loadConfig({ ...base, BERTH_INTERNAL_TLS_PORT: "8443" }), {
    message: /needs all of .* \(missing BERTH_INTERNAL_TLS_CERT_FILE, BERTH_INTERNAL_TLS_KEY_FILE\)/,
  });
  t.throws(() => loadConfig({ ...base, ...tls, BERTH_INTERNAL_TLS_KEY_FILE: undefined }), {
    message: /missing BERTH_INTERNAL_TLS_KEY_FILE/,
  });
  t.throws(() => loadConfig({ ...base, ...tls, BERTH_API_PORT: "8443" }), {
    message: /BERTH_INTERNAL_TLS_PORT must differ from BERTH_API_PORT/,
  });
  t.throws(() => loadConfig({ ...base, ...tls, BERTH_INTERNAL_TLS_PORT: "70000" }), { message: /BERTH_INTERNAL_TLS_PORT/ });
});
