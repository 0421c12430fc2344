"""A stand-in for the Berth API, for the toolkit's unit tests only (the integration tests run
against the real API and PostgreSQL). A real HTTP server on 127.0.0.1 that implements the contracts
of the three endpoints the toolkit calls:

- GET  /api/v1/governance/config       -> {project, observability, engine}
- POST /api/v1/governance/guard-check  -> {decision, redactedText?, evaluations, blocks, classifierScore?, classifierScores?}
- POST /api/v1/governance/traces       -> {results: [{traceId, status}]}

Its guards are a toy, not the engine: an injection phrase blocks on input (prompt_injection), an
email address blocks (sensitive_data) or is redacted ("redact" mode, as a pii_detection template
with action redact would), a word list stands for toxicity. Faults are injected per test.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "gov_sk_" + "StandInKey0123456789abcdefghij"
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
INJECTION = "ignore all previous instructions"


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection the test dropped on purpose


class StandInApi:
    def __init__(self, *, pii: str = "block", project: str = "svc", engine: dict[str, Any] | None = None) -> None:
        #: "block": the built-in sensitive_data guard; "redact": a redacting pii template instead
        self.pii = pii
        self.project = project
        self.engine: dict[str, Any] = engine if engine is not None else self._engine_for(pii)
        self.traces: list[dict[str, Any]] = []
        self.guard_calls: list[dict[str, Any]] = []
        self.config_calls = 0
        self.trace_posts = 0
        #: statuses the next trace posts answer with (then 200)
        self.trace_failures: list[int] = []
        #: a status every guard check answers with (None: answer normally)
        self.guard_status: int | None = None
        self.guard_delay = 0.0
        #: the classifier's score every input check answers when the patterns did not block (None: no score)
        self.classifier_score: float | None = None
        #: the toxicity head's score a toxicity template with classifier would answer (None: no such template)
        self.toxicity_score: float | None = None
        self.config_status: int | None = None
        self.connections = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def _engine_for(pii: str) -> dict[str, Any]:
        if pii == "redact":
            return {
                "guards": {
                    "prompt_injection": {"enabled": True, "threshold": 0.7},
                    "sensitive_data": {"enabled": False, "threshold": 0.5},
                    "custom_templates": [{"template_id": "t1", "template_name": "Redact PII", "enabled": True, "threshold": 0.5}],
                },
                "templates": {"t1": {"name": "Redact PII", "guardType": "pii_detection", "config": {"action": "redact"}}},
            }
        return {"guards": {"prompt_injection": {"enabled": True}, "sensitive_data": {"enabled": True}, "custom_templates": []}}

    @property
    def connection(self) -> str:
        return f"govdb://{KEY}@127.0.0.1:{self.port}/gov_ws_{self.project}"

    def close(self) -> None:
        """Stops listening and drops the open keep-alive connections: connections are refused from now on."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def decide(self, phase: str, text: str) -> dict[str, Any]:
        evaluations: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        redacted: str | None = None
        if phase == "input":
            hit = INJECTION in text.lower()
            evaluations.append(
                {
                    "guardType": "prompt_injection",
                    "result": "block" if hit else "pass",
                    "confidence": 0.95 if hit else 0,
                    "source": "prompt_injection",
                }
            )
            if hit:
                blocks.append(
                    {
                        "guardType": "prompt_injection",
                        "blockedContent": "instruction override",
                        "confidence": 0.95,
                        "action": "block",
                        "source": "prompt_injection",
                    }
                )
        emails = EMAIL.findall(text)
        if self.pii == "block":
            evaluations.append(
                {
                    "guardType": "pii_detection",
                    "result": "block" if emails else "pass",
                    "confidence": 0.9 if emails else 0,
                    "source": "sensitive_data",
                }
            )
            if emails:
                blocks.append(
                    {
                        "guardType": "pii_detection",
                        "blockedContent": "email address",
                        "confidence": 0.9,
                        "action": "block",
                        "source": "sensitive_data",
                    }
                )
        else:
            evaluations.append(
                {
                    "guardType": "pii_detection",
                    "result": "redact" if emails else "pass",
                    "confidence": 0.9 if emails else 0,
                    "source": "template:t1",
                }
            )
            if emails:
                blocks.append(
                    {
                        "guardType": "pii_detection",
                        "blockedContent": "email address",
                        "confidence": 0.9,
                        "action": "redact",
                        "source": "template:t1",
                    }
                )
                redacted = EMAIL.sub("[REDACTED:EMAIL]", text)
        decision = "block" if any(b["action"] == "block" for b in blocks) else "redact" if redacted is not None else "allow"
        out: dict[str, Any] = {"decision": decision, "evaluations": evaluations, "blocks": blocks}
        if redacted is not None:
            out["redactedText"] = redacted
        scores: dict[str, float] = {}
        if phase == "input" and not hit and self.classifier_score is not None:
            out["classifierScore"] = scores["promptInjection"] = self.classifier_score
        if phase == "input" and not hit and self.toxicity_score is not None:
            scores["toxicity"] = self.toxicity_score
        if scores:
            out["classifierScores"] = scores
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with api._lock:
                    api.connections += 1
                    api._sockets.append(self.connection)

            def _answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    self._answer(401, {"code": "unauthorized"})
                    return
                if self.path == "/api/v1/governance/config":
                    with api._lock:
                        api.config_calls += 1
                    if api.config_status is not None:
                        self._answer(api.config_status, {"code": "unavailable", "detail": "down"})
                        return
                    self._answer(200, {"project": api.project, "observability": {}, "engine": api.engine})
                    return
                self._answer(404, {"code": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    self._answer(401, {"code": "unauthorized"})
                    return
                if self.path == "/api/v1/governance/guard-check":
                    with api._lock:
                        api.guard_calls.append(body)
                    if api.guard_delay:
                        time.sleep(api.guard_delay)
                    if api.guard_status is not None:
                        self._answer(api.guard_status, {"code": "unavailable", "detail": "the guards are down"})
                        return
                    self._answer(200, api.decide(body["phase"], body["text"]))
                    return
                if self.path == "/api/v1/governance/traces":
                    with api._lock:
                        api.trace_posts += 1
                        failure = api.trace_failures.pop(0) if api.trace_failures else None
                    if failure is not None:
                        self._answer(failure, {"code": "failure", "detail": f"injected {failure}"})
                        return
                    results = []
                    with api._lock:
                        known = {t["traceId"] for t in api.traces}
                        for t in body["traces"]:
                            results.append({"traceId": t["traceId"], "status": "duplicate" if t["traceId"] in known else "created"})
                            if t["traceId"] not in known:
                                api.traces.append(t)
                                known.add(t["traceId"])
                    self._answer(200, {"results": results})
                    return
                self._answer(404, {"code": "not_found"})

        return Handler
