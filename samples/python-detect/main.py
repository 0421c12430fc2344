# A user's Python app as Berth's detection builds it: no Dockerfile, standard library only. GET /
# answers one line with the version in the file VERSION; it listens on PORT (Berth sets it).
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VERSION = (Path(__file__).parent / "VERSION").read_text().strip()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path not in ("/", "/healthz"):
            self.send_error(404)
            return
        body = (f"Hello from python-detect, version {VERSION}\n" if self.path == "/" else "ok\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        sys.stdout.write("%s %s\n" % (self.address_string(), format % args))


def main():
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"python-detect {VERSION} listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
