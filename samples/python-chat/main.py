# A user's Python service whose LLM calls Berth governs, built by Berth's stack detection from Git:
# the standard library's HTTP server and the Python toolkit's LangChain wrapper around a stand-in
# chat model (langchain_core's FakeListChatModel: a fixed answer, no provider, no network). The
# toolkit reads GOVDB_CONNECTION and GOVERNANCE_PROJECT, which Berth injects: each /chat call is
# guarded through the Berth API before and after the model and traced once. It listens on PORT.
#   GET  /healthz  ok
#   GET  /         Hello from python-chat, version <VERSION>
#   POST /chat     {"message": "...", "sessionId"?: "..."} -> {"answer", "traceId": null, "sessionId"};
#                  a guard block: 422 {"blocked": true, "phase", "guards", "traceId"}
#   GET  /calls    how many times the model was called (a blocked prompt never reaches it)
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from berth_toolkit import GovdbConnectionError, configure
from berth_toolkit.langchain import GuardBlockedError, GuardUnavailableError, content_text, with_governance
from langchain_core.language_models.fake_chat_models import FakeListChatModel

VERSION = (Path(__file__).parent / "VERSION").read_text().strip()
ANSWER = "This answer comes from the stand-in model of Berth's Python sample: no provider was called, but the call was guarded and traced."
MAX_BODY = 64 * 1024

_calls = 0
_calls_lock = threading.Lock()


def model_calls():
    with _calls_lock:
        return _calls


class StandInModel(FakeListChatModel):
    """FakeListChatModel that counts the calls that reach it."""

    def _call(self, *args, **kwargs):
        global _calls
        with _calls_lock:
            _calls += 1
        return super()._call(*args, **kwargs)

    def _stream(self, *args, **kwargs):
        global _calls
        with _calls_lock:
            _calls += 1
        return super()._stream(*args, **kwargs)


def governed_model():
    """The governed model and what governs it, or None and why there is none (GOVDB_CONNECTION missing or malformed)."""
    try:
        g = configure()  # once at boot: the app's guard config (on failure the defaults, retried in the background)
    except GovdbConnectionError as err:
        return None, str(err)
    return with_governance(StandInModel(responses=[ANSWER])), "governed" if g.mode == "on" else "not governed (BERTH_GOVERNANCE=off)"


MODEL, STATE = governed_model()


class Handler(BaseHTTPRequestHandler):
    def send_json(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_text(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self.send_text(200, "ok\n")
        elif self.path == "/":
            self.send_text(200, f"Hello from python-chat, version {VERSION}\n")
        elif self.path == "/calls":
            self.send_json(200, model_calls())
        else:
            self.send_error(404)

    def do_POST(self):
        if self.path != "/chat":
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_json(413, {"error": f"the body is larger than {MAX_BODY} bytes"})
            return
        try:
            request = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self.send_json(400, {"error": "the body is not JSON"})
            return
        message = request.get("message") if isinstance(request, dict) else None
        session = request.get("sessionId") if isinstance(request, dict) else None
        if not isinstance(message, str) or message.strip() == "":
            self.send_json(400, {"error": 'expected {"message": "...", "sessionId"?: "..."}'})
            return
        if session is not None and (not isinstance(session, str) or not 0 < len(session) <= 200):
            self.send_json(400, {"error": "sessionId must be a string of 1 to 200 characters"})
            return
        if MODEL is None:
            self.send_json(503, {"error": f"chat is not configured: {STATE}"})
            return
        try:
            answer = MODEL.invoke(message, config={"metadata": {"sessionId": session}} if session else None)
        except GuardBlockedError as err:
            self.send_json(422, {"blocked": True, "phase": err.phase, "guards": list(err.guards), "traceId": err.trace_id})
            return
        except GuardUnavailableError as err:
            self.send_json(503, {"error": "the guards could not run", "phase": err.phase, "traceId": err.trace_id})
            return
        # the wrapper records the call's trace without handing its id back: find it by sessionId
        self.send_json(200, {"answer": content_text(answer.content), "traceId": None, "sessionId": session})

    def log_message(self, format, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), format % args))


def main():
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    # SystemExit in the main thread: the toolkit's atexit handler delivers the queued traces
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"python-chat {VERSION} listening on {port}, chat {STATE if MODEL is not None else 'not configured: ' + STATE}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
