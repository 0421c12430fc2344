"""GOVDB_CONNECTION: ``govdb://<key>@<host>/<database>[?tls=true|false]``.

The key is an app key (``gov_sk_...``). The toolkit speaks HTTP to a loopback host (127.0.0.0/8,
localhost, [::1]) or a cluster Service address (``<svc>.<ns>.svc[...]``) and HTTPS to any other;
``tls`` overrides. Pure; never echoes the key.

The value is read as a WHATWG URL, as the TypeScript toolkit reads it with ``new URL()``, so that a
value one toolkit accepts the other accepts too, with the same error for the same mistake.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote_to_bytes

from .errors import GovdbConnectionError

APP_KEY_PREFIX = "gov_sk_"
_KEY = re.compile(r"gov_sk_[A-Za-z0-9_-]+")
_DATABASE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_SHAPE = f"expected govdb://<key>@<host>/<database> with a {APP_KEY_PREFIX} key"
_PORT_SUFFIX = re.compile(r":[0-9]+\Z")
_LOOPBACK_V4 = re.compile(r"127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# String.prototype.trim's whitespace (WhiteSpace and LineTerminator), not Python's str.strip set
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# the WHATWG URL standard's forbidden host code points (an opaque host may not contain them)
_FORBIDDEN_HOST = set("\x00\t\n\r #/:<>?@[\\]^|")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


class GovdbConnection:
    """A parsed GOVDB_CONNECTION. The key is readable (``key``) but never printed, logged or
    serialised: ``str()``, ``repr()`` and f-strings show only its display prefix."""

    __slots__ = ("_key", "_host", "_database", "_tls")

    def __init__(self, *, key: str, host: str, database: str, tls: bool) -> None:
        self._key = key
        self._host = host
        self._database = database
        self._tls = tls

    @property
    def key(self) -> str:
        return self._key

    @property
    def host(self) -> str:
        """host with its port when given: "127.0.0.1:8080", "[::1]:8080", "governance.example.com" """
        return self._host

    @property
    def database(self) -> str:
        return self._database

    @property
    def tls(self) -> bool:
        return self._tls

    @property
    def base_url(self) -> str:
        """http(s)://<host>: the server root; the API is under /api/v1"""
        return f"{'https' if self._tls else 'http'}://{self._host}"

    @property
    def key_prefix(self) -> str:
        """The key's display form: its prefix and first characters, as the API shows keys."""
        return self._key[: len(APP_KEY_PREFIX) + 6]

    def __str__(self) -> str:
        local = is_loopback(self._host) or is_cluster_local(self._host)
        # the tls parameter only when it says something other than the default for this host
        tls = ("?tls=true" if self._tls else "?tls=false") if self._tls == local else ""
        return f"govdb://{self.key_prefix}…@{self._host}/{self._database}{tls}"

    def __repr__(self) -> str:
        return f"GovdbConnection <{self}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GovdbConnection):
            return NotImplemented
        return (self._key, self._host, self._database, self._tls) == (other._key, other._host, other._database, other._tls)

    def __hash__(self) -> int:
        return hash((self._host, self._database, self._tls))


def is_cluster_local(host: str) -> bool:
    """A Kubernetes Service address, ``<service>.<namespace>.svc[.<cluster domain>]`` (with or without
    its port): inside the cluster the API Service speaks plain HTTP, so these hosts default to HTTP
    like loopback ones."""
    if host.startswith("["):
        return False
    labels = _PORT_SUFFIX.sub("", host).lower().split(".")
    if "svc" not in labels:
        return False
    svc = labels.index("svc")
    return svc >= 2 and all(_LABEL.fullmatch(label) for label in labels[:svc])


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, localhost and [::1] (a host with or without its port)."""
    name = host[: host.find("]") + 1] if host.startswith("[") else _PORT_SUFFIX.sub("", host)
    if name in ("localhost", "[::1]"):
        return True
    return _LOOPBACK_V4.fullmatch(name) is not None


class _NotAUrl(Exception):
    pass


def _decode_component(raw: str) -> str:
    """decodeURIComponent: strict about % escapes and UTF-8 (ValueError otherwise)."""
    if _PERCENT.search(raw):
        raise ValueError("a % that starts no escape")
    return unquote_to_bytes(raw).decode("utf-8", "strict")


def _form_decode(raw: str) -> str:
    """application/x-www-form-urlencoded decoding of one name or value (lenient, as URLSearchParams)."""
    return unquote_to_bytes(raw.replace("+", " ")).decode("utf-8", "replace")


def _split_url(raw: str) -> tuple[str, str, str, str | None, str, str | None, str | None]:
    """The parts of a govdb: URL as the WHATWG URL parser reads a non-special URL:
    (username, password, host, port, path, query, fragment); _NotAUrl where it fails."""
    s = raw.strip("".join(chr(c) for c in range(0x21)))
    s = s.replace("\t", "").replace("\n", "").replace("\r", "")
    rest = s[len("govdb://") :]
    end = len(rest)
    for i, ch in enumerate(rest):
        if ch in "/?#":
            end = i
            break
    authority, rest = rest[:end], rest[end:]
    username = password = ""
    hostport = authority
    if "@" in authority:
        at = authority.rfind("@")
        userinfo, hostport = authority[:at], authority[at + 1 :]
        username, _, password = userinfo.partition(":")
        if hostport == "":
            raise _NotAUrl("credentials without a host")
    port: str | None = None
    if hostport.startswith("["):
        close = hostport.find("]")
        if close == -1:
            raise _NotAUrl("unclosed IPv6 address")
        literal = hostport[1:close]
        try:
            address = ipaddress.IPv6Address(literal)
        except ValueError as err:
            raise _NotAUrl("invalid IPv6 address") from err
        host = f"[{address.compressed}]"
        after = hostport[close + 1 :]
        if after != "":
            if not after.startswith(":"):
                raise _NotAUrl("garbage after the IPv6 address")
            port = after[1:]
    else:
        host, colon, port_text = hostport.partition(":")
        if colon:
            if host == "":
                raise _NotAUrl("a port without a host")
            port = port_text
        if any(ch in _FORBIDDEN_HOST for ch in host):
            raise _NotAUrl("a forbidden host code point")
        # an opaque host: C0 controls and non-ASCII characters are percent-encoded
        host = "".join(ch if 0x20 <= ord(ch) <= 0x7E else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in host)
    if port is not None:
        if not port.isascii() or (port != "" and not port.isdigit()):
            raise _NotAUrl("the port is not a number")
        if port == "":
            port = None
        elif int(port) > 65535:
            raise _NotAUrl("the port is out of range")
        else:
            port = str(int(port))
    if host == "" and (username or password or port is not None):
        raise _NotAUrl("no host")
    fragment: str | None = None
    if "#" in rest:
        rest, _, fragment = rest.partition("#")
    query: str | None = None
    if "?" in rest:
        rest, _, query = rest.partition("?")
    path = _normalise_path(rest)
    return username, password, host, port, path, query, fragment


def _normalise_path(path: str) -> str:
    """The pathname of a non-special URL with a host: "." and ".." segments resolved."""
    if path == "":
        return ""
    out: list[str] = []
    segments = path[1:].split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        low = seg.lower()
        if low in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if last:
                out.append("")
        elif low in (".", "%2e"):
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def parse_connection(value: str) -> GovdbConnection:
    """Parses a GOVDB_CONNECTION value. Raises GovdbConnectionError ("malformed") with a message that
    says what is wrong without repeating the value."""

    def bad(what: str) -> GovdbConnectionError:
        return GovdbConnectionError("malformed", f"GOVDB_CONNECTION is malformed: {what} ({_SHAPE})")

    raw = value.strip(_JS_WHITESPACE)
    if not raw.lower().startswith("govdb://"):
        raise bad("the scheme is not govdb://")
    try:
        username, password, hostname, port, path, query, fragment = _split_url(raw)
    except _NotAUrl:
        raise bad("not a URL") from None
    if password != "":
        raise bad("a password is not expected after the key")
    try:
        key = _decode_component(username)
    except ValueError:
        raise bad("the key is not valid") from None
    if key == "":
        raise bad("no key before @")
    if not _KEY.fullmatch(key):
        raise bad(
            "the key has characters other than A-Z a-z 0-9 _ -"
            if key.startswith(APP_KEY_PREFIX)
            else f"the key does not start with {APP_KEY_PREFIX}"
        )
    if hostname == "":
        raise bad("no host")
    database = path[1:] if path.startswith("/") else path
    if database == "" or not _DATABASE.fullmatch(database):
        raise bad("no database after the host" if database == "" else "the database name is not a plain name")
    if fragment:
        raise bad("a fragment is not expected")
    hostname = hostname.lower()
    host = f"{hostname}:{port}" if port is not None else hostname
    tls = not is_loopback(host) and not is_cluster_local(host)
    tls_param = _search_param(query, "tls")
    if tls_param is not None:
        if tls_param not in ("true", "false"):
            raise bad("tls must be true or false")
        tls = tls_param == "true"
    return GovdbConnection(key=key, host=host, database=database, tls=tls)


def _search_param(query: str | None, name: str) -> str | None:
    """URLSearchParams.get: the first value of `name`, or None."""
    if not query:
        return None
    for pair in query.split("&"):
        if pair == "":
            continue
        k, _, v = pair.partition("=")
        if _form_decode(k) == name:
            return _form_decode(v)
    return None
