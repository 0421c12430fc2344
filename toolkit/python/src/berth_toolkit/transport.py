"""HTTP to the governance API with the app key of GOVDB_CONNECTION: the boot-time configuration
(GET /api/v1/governance/config), guard checks (POST /api/v1/governance/guard-check) and trace
batches (POST /api/v1/governance/traces).

Standard library only: ``http.client`` with one persistent keep-alive connection per thread, TLS
through ``ssl.create_default_context()``. Error messages name the status and the problem code,
never the key.
"""

from __future__ import annotations

import email.utils
import errno
import http.client
import json
import re
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._version import __version__
from .connection import GovdbConnection
from .guards import GuardDecision, Phase
from .queue import ItemResult, SendOutcome

API_PREFIX = "/api/v1"
USER_AGENT = f"berth-toolkit-python/{__version__}"


@dataclass(frozen=True)
class ToolkitConfig:
    """GET /api/v1/governance/config"""

    #: the app id (GOVERNANCE_PROJECT) the key belongs to
    project: str
    #: the app's observability config, every default applied
    observability: Mapping[str, Any]
    #: the EngineConfig the API evaluates this app's traces with (templates resolved)
    engine: Mapping[str, Any]


@dataclass(frozen=True)
class ConfigOutcome:
    ok: bool
    config: ToolkitConfig | None = None
    error: str = ""
    status: int | None = None
    retryable: bool = False
    retry_after_ms: float | None = None


@dataclass(frozen=True)
class GuardCheckOutcome:
    ok: bool
    decision: GuardDecision | None = None
    error: str = ""
    status: int | None = None


def _retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After in milliseconds: delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None or value.strip() == "":
        return None
    v = value.strip()
    if re.fullmatch(r"[0-9]+", v):
        return int(v) * 1000
    try:
        at = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, (at.timestamp() - current) * 1000)


def describe_failure(status: int, text: str) -> str:
    """ "HTTP 422 validation_failed: The request is invalid..." from a problem document, else the status."""
    try:
        p = json.loads(text)
    except ValueError:
        return f"HTTP {status}"
    if not isinstance(p, dict):
        return f"HTTP {status}"
    parts = " ".join(x for x in (f"HTTP {status}", p.get("code") if isinstance(p.get("code"), str) else None) if x)
    detail = p.get("detail")
    return f"{parts}: {detail[:300]}" if isinstance(detail, str) else parts


def network_error(err: BaseException) -> str:
    """What went wrong on the wire, named as Node.js names it: "network error: ECONNREFUSED"."""
    if isinstance(err, (socket.timeout, TimeoutError)):
        return "the request timed out"
    if isinstance(err, socket.gaierror):
        return "network error: ENOTFOUND"
    if isinstance(err, (http.client.RemoteDisconnected, http.client.IncompleteRead)):
        return "network error: ECONNRESET"
    if isinstance(err, ssl.SSLError):
        return f"network error: {err.reason or type(err).__name__}"
    if isinstance(err, OSError) and err.errno is not None and err.errno in errno.errorcode:
        return f"network error: {errno.errorcode[err.errno]}"
    return f"network error: {type(err).__name__}"


class _Failure(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Response:
    status: int
    headers: http.client.HTTPMessage
    text: str


# a keep-alive connection the server closed while idle fails like this on its next request
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, http.client.CannotSendRequest)


class HttpTransport:
    """One HTTP client for the three endpoints. Thread-safe: each thread uses its own persistent
    connection."""

    def __init__(
        self,
        connection: GovdbConnection,
        *,
        timeout: float = 10.0,
        user_agent: str = USER_AGENT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._connection = connection
        self._timeout = timeout
        self._user_agent = user_agent
        self._ssl = ssl_context if ssl_context is not None or not connection.tls else ssl.create_default_context()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: weakref.WeakSet[http.client.HTTPConnection] = weakref.WeakSet()
        self._sending: set[http.client.HTTPConnection] = set()

    # -- plumbing --------------------------------------------------------------------------

    def _headers(self, body: bool) -> dict[str, str]:
        h = {
            "Authorization": f"Bearer {self._connection.key}",
            "Accept": "application/json",
            "User-Agent": self._user_agent,
        }
        if body:
            h["Content-Type"] = "application/json"
        return h

    def _new_connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._connection.tls:
            c: http.client.HTTPConnection = http.client.HTTPSConnection(self._connection.host, timeout=timeout, context=self._ssl)
        else:
            c = http.client.HTTPConnection(self._connection.host, timeout=timeout)
        with self._lock:
            self._all.add(c)
        return c

    def _request(self, method: str, path: str, body: bytes | None, timeout: float, *, cancellable: bool = False) -> _Response:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        for attempt in (0, 1):
            reused = conn is not None and conn.sock is not None
            if conn is None:
                conn = self._new_connection(timeout)
                self._local.conn = conn
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            if cancellable:
                with self._lock:
                    self._sending.add(conn)
            try:
                conn.request(method, API_PREFIX + path, body=body, headers=self._headers(body is not None))
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    conn.close()
                return _Response(resp.status, resp.headers, data.decode("utf-8", "replace"))
            except _STALE as err:
                conn.close()
                if not reused or attempt == 1:
                    raise _Failure(network_error(err)) from err
                # the server closed the idle connection: once more on a new one
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                raise _Failure(network_error(err)) from err
            finally:
                if cancellable:
                    with self._lock:
                        self._sending.discard(conn)
        raise _Failure("network error: ECONNRESET")  # not reached

    def cancel(self) -> None:
        """Aborts the trace sends in flight (the queue's shutdown): their sockets are shut down."""
        with self._lock:
            conns = list(self._sending)
        for c in conns:
            sock = c.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            conns = list(self._all)
        for c in conns:
            try:
                c.close()
            except OSError:
                pass

    def reset_after_fork(self) -> None:
        self._local = threading.local()

    # -- the endpoints ---------------------------------------------------------------------

    def send(self, body: bytes, count: int) -> SendOutcome:
        """POST /api/v1/governance/traces with one batch. Never raises."""
        try:
            res = self._request("POST", "/governance/traces", body, self._timeout, cancellable=True)
        except _Failure as f:
            return SendOutcome(kind="retry", error=f.message)
        if 200 <= res.status < 300:
            try:
                parsed = json.loads(res.text)
            except ValueError:
                # a 2xx we cannot read: the API took the batch
                return SendOutcome(kind="accepted")
            results: list[ItemResult] = []
            for r in (parsed.get("results") if isinstance(parsed, dict) else None) or []:
                if not isinstance(r, dict):
                    continue
                trace_id, status = r.get("traceId"), r.get("status")
                if not isinstance(trace_id, str) or status not in ("created", "duplicate", "rejected"):
                    continue
                errors = r.get("errors") or []
                reason = (
                    ", ".join(f"{e.get('field')}: {e.get('message')}" for e in errors if isinstance(e, dict))
                    if isinstance(errors, list) and errors
                    else None
                )
                results.append(ItemResult(trace_id=trace_id, status=status, reason=reason))
            return SendOutcome(kind="accepted", results=tuple(results))
        error = describe_failure(res.status, res.text)
        if _retryable(res.status):
            return SendOutcome(
                kind="retry", error=error, status=res.status, retry_after_ms=parse_retry_after(res.headers.get("retry-after"))
            )
        if res.status == 413:
            return SendOutcome(kind="too_large", error=error, status=413)
        return SendOutcome(kind="rejected", error=error, status=res.status)

    def config(self) -> ConfigOutcome:
        """GET /api/v1/governance/config. Never raises."""
        try:
            res = self._request("GET", "/governance/config", None, self._timeout)
        except _Failure as f:
            return ConfigOutcome(ok=False, error=f.message, retryable=True)
        if not 200 <= res.status < 300:
            return ConfigOutcome(
                ok=False,
                error=describe_failure(res.status, res.text),
                status=res.status,
                retryable=_retryable(res.status),
                retry_after_ms=parse_retry_after(res.headers.get("retry-after")),
            )
        try:
            body = json.loads(res.text)
            if not isinstance(body, dict) or not isinstance(body.get("project"), str) or not isinstance(body.get("engine"), dict):
                raise ValueError("not a toolkit config")
        except ValueError:
            return ConfigOutcome(ok=False, error=f"HTTP {res.status}: the answer is not a governance config", status=res.status)
        observability = body.get("observability")
        return ConfigOutcome(
            ok=True,
            config=ToolkitConfig(
                project=body["project"],
                observability=observability if isinstance(observability, dict) else {},
                engine=body["engine"],
            ),
        )

    def guard_check(self, text: str, phase: Phase, project: str | None, timeout: float) -> GuardCheckOutcome:
        """POST /api/v1/governance/guard-check: the app's guards on one text. Never raises."""
        payload: dict[str, Any] = {"phase": phase, "text": text}
        if project is not None:
            payload["project"] = project
        try:
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            body = json.dumps(payload, ensure_ascii=True).encode("utf-8")
        try:
            res = self._request("POST", "/governance/guard-check", body, timeout)
        except _Failure as f:
            return GuardCheckOutcome(ok=False, error=f.message)
        if not 200 <= res.status < 300:
            return GuardCheckOutcome(ok=False, error=describe_failure(res.status, res.text), status=res.status)
        try:
            parsed = json.loads(res.text)
            if not isinstance(parsed, dict):
                raise ValueError("not an object")
            return GuardCheckOutcome(ok=True, decision=GuardDecision.from_dict(parsed))
        except ValueError:
            return GuardCheckOutcome(ok=False, error=f"HTTP {res.status}: the answer is not a guard decision", status=res.status)
