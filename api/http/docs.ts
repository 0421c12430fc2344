// A small, self-contained API reference page: inline CSS and script only (the machine may have
// no internet; nothing is loaded from a CDN). The script fetches ./openapi.json and renders the
// operations by tag, with parameters, request body and responses, and the component schemas.
// It builds the DOM with textContent only, and the page ships a CSP that allows exactly its own
// inline script and style (by hash) and same-origin fetches.
import { createHash } from "node:crypto";

const STYLE = `
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f7f8fa}
header{background:#14213d;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;opacity:.8}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h2{margin:28px 0 8px;font-size:17px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
details.op{background:#fff;border:1px solid #d8dce3;border-radius:6px;margin:6px 0}
details.op>summary{cursor:pointer;padding:8px 10px;display:flex;gap:10px;align-items:baseline;list-style:none}
.m{font:600 12px ui-monospace,monospace;text-transform:uppercase;padding:2px 6px;border-radius:4px;color:#fff;min-width:52px;text-align:center}
.get{background:#2f7d32}.post{background:#1565c0}.put{background:#8e6b00}.patch{background:#6a1b9a}.delete{background:#b71c1c}
.p{font-family:ui-monospace,monospace}.s{color:#555}.auth{margin-left:auto;font-size:12px;color:#555}
.body{padding:4px 14px 12px}table{border-collapse:collapse;width:100%;margin:6px 0}td,th{border:1px solid #e3e6eb;padding:4px 6px;text-align:left;vertical-align:top}
pre{background:#f0f2f5;padding:8px;border-radius:4px;overflow:auto;font-size:12px;margin:4px 0}
a{color:#1565c0}
`;

const SCRIPT = `
(function () {
  "use strict";
  var root = document.getElementById("app");
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function schemaBlock(schema) { return el("pre", { text: JSON.stringify(schema, null, 2) }); }
  function refName(schema) { return schema && typeof schema.$ref === "string" ? schema.$ref.split("/").pop() : null; }
  function schemaView(schema) {
    var name = refName(schema);
    if (name) return el("p", {}, [el("span", { text: "Schema: " }), el("a", { href: "#schema-" + name, text: name })]);
    return schemaBlock(schema);
  }
  function render(doc) {
    document.title = doc.info.title + " reference";
    root.appendChild(el("header", {}, [el("h1", { text: doc.info.title + " " + doc.info.version }), el("p", { text: (doc.info.description || "") + " Base path: " + (doc.servers[0] ? doc.servers[0].url : "/") })]));
    var main = el("main");
    root.appendChild(main);
    var byTag = {};
    Object.keys(doc.paths).forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        (op.tags && op.tags.length ? op.tags : ["other"]).forEach(function (t) { (byTag[t] = byTag[t] || []).push({ path: path, method: method, op: op }); });
      });
    });
    Object.keys(byTag).sort().forEach(function (tag) {
      main.appendChild(el("h2", { text: tag }));
      byTag[tag].forEach(function (entry) {
        var op = entry.op;
        var auth = op.security && op.security.length ? op.security.map(function (req) { return Object.keys(req).join(" + "); }).join(" or ") : "public";
        var body = el("div", { class: "body" });
        if (op.description) body.appendChild(el("p", { text: op.description }));
        body.appendChild(el("p", { class: "s", text: "operationId: " + op.operationId }));
        if (op.parameters && op.parameters.length) {
          var rows = op.parameters.map(function (p) {
            return el("tr", {}, [el("td", { class: "p", text: p.name }), el("td", { text: p.in }), el("td", { text: p.required ? "required" : "optional" }), el("td", { class: "p", text: JSON.stringify(p.schema) }), el("td", { text: p.description || "" })]);
          });
          body.appendChild(el("h4", { text: "Parameters" }));
          body.appendChild(el("table", {}, [el("tr", {}, ["name", "in", "", "schema", "description"].map(function (h) { return el("th", { text: h }); }))].concat(rows)));
        }
        if (op.requestBody) {
          body.appendChild(el("h4", { text: "Request body (application/json)" }));
          body.appendChild(schemaView(op.requestBody.content["application/json"].schema));
        }
        body.appendChild(el("h4", { text: "Responses" }));
        Object.keys(op.responses).forEach(function (status) {
          var r = op.responses[status];
          var types = r.content ? Object.keys(r.content) : [];
          body.appendChild(el("p", {}, [el("strong", { text: status + " " }), el("span", { text: r.description + (types.length ? " — " + types.join(", ") : "") })]));
          if (types.length && Number(status) < 400) body.appendChild(schemaView(r.content[types[0]].schema));
        });
        main.appendChild(el("details", { class: "op" }, [
          el("summary", {}, [el("span", { class: "m " + entry.method, text: entry.method }), el("span", { class: "p", text: entry.path }), el("span", { class: "s", text: op.summary }), el("span", { class: "auth", text: auth })]),
          body,
        ]));
      });
    });
    main.appendChild(el("h2", { text: "Schemas" }));
    Object.keys(doc.components.schemas).forEach(function (name) {
      main.appendChild(el("details", { class: "op", id: "schema-" + name }, [el("summary", {}, [el("span", { class: "p", text: name })]), el("div", { class: "body" }, [schemaBlock(doc.components.schemas[name])])]));
    });
  }
  fetch(location.pathname.replace(new RegExp("/docs/?$"), "") + "/openapi.json", { headers: { Accept: "application/json" } })
    .then(function (r) { if (!r.ok) throw new Error("openapi.json: HTTP " + r.status); return r.json(); })
    .then(render)
    .catch(function (err) { root.appendChild(el("p", { text: "Could not load the API document: " + err.message })); });
})();
`;

const sha256 = (s: string) => `'sha256-${createHash("sha256").update(s, "utf8").digest("base64")}'`;

/** The page and its Content-Security-Policy. */
export function docsPage(): { html: string; csp: string } {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Berth API reference</title>
<style>${STYLE}</style>
</head>
<body>
<div id="app"></div>
<noscript>This page renders <a href="openapi.json">openapi.json</a> with JavaScript.</noscript>
<script>${SCRIPT}</script>
</body>
</html>
`;
  const csp = [
    "default-src 'none'",
    `script-src ${sha256(SCRIPT)}`,
    `style-src ${sha256(STYLE)}`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return { html, csp };
}

/** The inline script, for tests that check it parses. */
export const DOCS_SCRIPT = SCRIPT;
