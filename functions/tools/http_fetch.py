"""Fetch a web page or API response over HTTP(S) and return its status, content type and body.

Only public addresses are fetched: the host name is resolved first, and a name that resolves to a
private, loopback, link-local, unique-local, multicast, reserved or otherwise non-public address is
refused, on the first request and on every redirect. Numeric host spellings (2130706433, 0x7f.1,
0177.0.0.1) are read as the addresses they stand for, and an IPv6 address is judged by every IPv4
address it embeds (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo, ISATAP). The connection goes to the
address that was checked, so a name cannot change its answer between the check and the request.

Environment (set by the user, never by the model):
    HTTP_FETCH_ALLOW_HOSTS: comma-separated host names, addresses or networks (CIDR) that may be
        fetched even though they are not public, e.g. "localhost,127.0.0.1,10.0.0.0/8".
    HTTP_FETCH_HOSTS_FILE: for tests only: a hosts-style file ("ADDRESS NAME...") consulted before
        the system resolver, so a test can make a public-looking name resolve to a private address.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import ssl
import urllib.parse
from typing import Any, TypedDict

MAX_BODY = 50 * 1024
MAX_REDIRECTS = 5
CUT_MARKER = f"\n[… cut: the body is longer than {MAX_BODY} bytes]"
_REDIRECTS = {301, 302, 303, 307, 308}
_LABEL = re.compile(r"[A-Za-z0-9_-]+")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RESERVED_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "te", "upgrade"}
_URL_SAFE = "/%:@!$&'()*+,;=-._~"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Response(TypedDict):
    status: int
    content_type: str
    url: str
    body: str
    truncated: bool


class Refused(Exception):
    """A request this tool will not make; the message says why."""


def run(url: str, method: str = "GET", headers: dict[str, str] = {}, timeout: float = 15) -> Response:
    """Fetch a URL with GET or HEAD and return status, content type and body (cut past 50 KB).

    Redirects are followed (up to 5), each one checked like the first URL.

    Args:
        url: The http:// or https:// URL to fetch.
        method: GET (the default) or HEAD.
        headers: Extra request headers, e.g. {"Accept": "application/json"}.
        timeout: Seconds to wait for the connection and for each read.

    Title: Fetch a URL
    Summary: HTTP GET or HEAD of a public URL; returns status, content type and body.
    Tags: web, http, read
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: true
    Network: all
    Writes: none
    Env: HTTP_FETCH_ALLOW_HOSTS, HTTP_FETCH_HOSTS_FILE, SSL_CERT_FILE, SSL_CERT_DIR
    Timeout: 60
    Examples:
        {"url": "https://example.com/"}
        {"url": "https://api.github.com/repos/python/cpython", "headers": {"Accept": "application/json"}}
        {"url": "https://example.com/", "method": "HEAD"}
    Errors:
        refused: the host resolves to a non-public address (set HTTP_FETCH_ALLOW_HOSTS to trust it)
        unsupported scheme: only http and https URLs are fetched
        cannot resolve: the host name does not resolve
        timed out: no answer within the timeout
        too many redirects: more than 5 redirects
    """
    method = method.upper()
    if method not in ("GET", "HEAD"):
        return _failed(f"method {method!r} is not supported; use GET or HEAD")
    if not 0 < timeout <= 300:
        return _failed(f"timeout {timeout:g} is out of range; give 0 < timeout <= 300 seconds")
    try:
        return _fetch(url, method, _checked_headers(headers), timeout)
    except Refused as exc:
        return _failed(str(exc))
    except (ValueError, UnicodeError) as exc:  # anything malformed the checks above did not name
        return _failed(f"invalid request for {url!r}: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        what = "timed out" if isinstance(exc, socket.timeout) else str(exc) or type(exc).__name__
        return _failed(f"request to {url} failed: {what}")


def _failed(message: str) -> Any:
    """The {ok, error} shape toolexec reads as a failed call (no traceback for the model to wade through)."""
    return {"ok": False, "error": message}


def _fetch(url: str, method: str, headers: dict[str, str], timeout: float) -> Response:
    for _ in range(MAX_REDIRECTS + 1):
        parts, host, port = _parsed(url)
        address = _checked_address(host)
        connection = _connection(parts.scheme, host, port, address, timeout)
        try:
            target = _target(parts)
            connection.request(method, target, headers={"User-Agent": "toolexec-http_fetch", **headers})
            response = connection.getresponse()
            location = response.getheader("Location")
            if response.status in _REDIRECTS and location:
                url = urllib.parse.urljoin(url, location)
                continue
            raw = b"" if method == "HEAD" else response.read(MAX_BODY + 1)
            return _result(response, url, raw)
        finally:
            connection.close()
    raise Refused(f"too many redirects (more than {MAX_REDIRECTS}) starting from the given URL")


def _parsed(url: str) -> tuple[urllib.parse.SplitResult, str, int]:
    """The URL's parts, its host (IDNA-encoded) and port; Refused, naming the problem, for a malformed URL."""
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise Refused(f"invalid URL {url!r}: it holds a space or a control character (percent-encode them)")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise Refused(f"invalid URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"unsupported scheme {parts.scheme!r} in {url}: only http and https URLs are fetched")
    if not parts.hostname:
        raise Refused(f"{url} names no host")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rpartition(":")[2]
        raise Refused(f"invalid port {given!r} in {url}: give a number from 1 to 65535")
    return parts, _host_name(parts.hostname), port or (443 if parts.scheme == "https" else 80)


def _host_name(host: str) -> str:
    """``host`` as sent on the wire: an IP literal as given, a name IDNA-encoded with every label checked."""
    if _literal(host) is not None or ":" in host:
        return host
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_host = ""
    labels = ascii_host.rstrip(".").split(".")
    if not ascii_host or len(ascii_host.rstrip(".")) > 253 or not all(0 < len(label) <= 63 for label in labels):
        raise Refused(
            f"invalid host name {host!r}: each dot-separated label must have 1 to 63 characters, and the name at most 253"
        )
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise Refused(f"invalid host name {host!r}: a label may hold only letters, digits, '-' and '_'")
    return ascii_host


def _target(parts: urllib.parse.SplitResult) -> str:
    """The request target, with anything outside ASCII percent-encoded."""
    path = urllib.parse.quote(parts.path or "/", safe=_URL_SAFE)
    query = urllib.parse.quote(parts.query, safe=_URL_SAFE + "?")
    return f"{path}?{query}" if query else path


def _checked_headers(headers: dict[str, str]) -> dict[str, str]:
    """The extra headers, after refusing any that could break or re-frame the request."""
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise Refused(f"invalid header name {name!r}: use letters, digits and !#$%&'*+-.^_`|~ only")
        if name.lower() in _RESERVED_HEADERS:
            raise Refused(f"header {name!r} is set by http_fetch itself and cannot be given")
        if any(c in value for c in "\r\n\0"):
            raise Refused(f"invalid value for header {name!r}: it holds a line break or NUL")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise Refused(f"invalid value for header {name!r}: only Latin-1 text can be sent in a header") from None
    return headers


def _result(response: http.client.HTTPResponse, url: str, raw: bytes) -> Response:
    cut = len(raw) > MAX_BODY
    charset = response.headers.get_content_charset() or "utf-8"
    try:
        body = raw[:MAX_BODY].decode(charset, "replace")
    except LookupError:
        body = raw[:MAX_BODY].decode("utf-8", "replace")
    if cut:
        body += CUT_MARKER
    return {
        "status": response.status,
        "content_type": response.getheader("Content-Type", ""),
        "url": url,
        "body": body,
        "truncated": cut,
    }


# --- which addresses may be fetched ----------------------------------------------------------


def _checked_address(host: str) -> str:
    """The address to connect to for ``host``, after refusing every non-public one (unless allowed)."""
    allowed = _allow_list()
    addresses = _resolve(host)
    if host.lower().rstrip(".") in allowed.names:
        return str(addresses[0])
    for address in addresses:
        if not _public(address) and not any(address in net for net in allowed.networks if net.version == address.version):
            raise Refused(
                f"refused: {host} resolves to {address}, which is not a public address; "
                "add the host to HTTP_FETCH_ALLOW_HOSTS to trust it"
            )
    return str(addresses[0])


# IPv6 ranges that stand for (or reach) IPv4 addresses through a translator or tunnel; the IPv4 address
# sits in the last 32 bits (RFC 4291 2.5.5, RFC 2765, RFC 6052 well-known prefix, ISATAP RFC 5214).
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: local-use translators, never public
_LAST_32_BITS = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible ::a.b.c.d (deprecated)
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated ::ffff:0:a.b.c.d (SIIT)
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64 well-known prefix
)


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address this IPv6 address stands for or tunnels to."""
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo:
        found += address.teredo  # the server and the (de-obfuscated) client
    last = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _LAST_32_BITS):
        found.append(last)
    if (int(address) >> 32) & 0xFDFFFFFF == 0x00005EFE:  # ISATAP interface id 0000:5efe or 0200:5efe
        found.append(last)
    return found


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and (
        address in _NAT64_LOCAL or not all(_public(v4) for v4 in _embedded(address))
    ):
        return False
    return address.is_global and not address.is_multicast


class _Allowed:
    def __init__(self, names: set[str], networks: list[Network]) -> None:
        self.names, self.networks = names, networks


def _allow_list() -> _Allowed:
    names: set[str] = set()
    networks: list[Network] = []
    for item in os.environ.get("HTTP_FETCH_ALLOW_HOSTS", "").split(","):
        item = item.strip().lower().strip("[]")
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            names.add(item.rstrip("."))
    return _Allowed(names, networks)


def _resolve(host: str) -> list[Address]:
    """Every address ``host`` stands for: a literal in any spelling, the test hosts file, else DNS."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    mapped = _hosts_file().get(host.lower().rstrip("."))
    if mapped:
        return mapped
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Refused(f"cannot resolve host {host!r}: {exc.strerror}") from None
    found = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    return list(dict.fromkeys(found))


def _literal(host: str) -> Address | None:
    """An IP literal, including the inet_aton spellings browsers and libc accept (127.1, 0x7f.0.0.1, 2130706433)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        pass
    parts = host.rstrip(".").split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                numbers.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part, 10) if part.isdigit() else -1)
        except ValueError:
            return None
    if any(n < 0 for n in numbers):
        return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value)


def _hosts_file() -> dict[str, list[Address]]:
    path = os.environ.get("HTTP_FETCH_HOSTS_FILE")
    if not path:
        return {}
    table: dict[str, list[Address]] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            words = line.split("#", 1)[0].split()
            if len(words) >= 2:
                for name in words[1:]:
                    table.setdefault(name.lower(), []).append(ipaddress.ip_address(words[0]))
    return table


# --- connecting to the checked address ---------------------------------------------------------


def _connection(scheme: str, host: str, port: int, address: str, timeout: float) -> http.client.HTTPConnection:
    if scheme == "https":
        return _PinnedHTTPS(host, port, address=address, timeout=timeout, context=ssl.create_default_context())
    return _PinnedHTTP(host, port, address=address, timeout=timeout)


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address; the Host header still names the host."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = _connect(self._address, self.port, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """Connects to the checked address and verifies the certificate against the host name."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address

    def connect(self) -> None:
        self.sock = self._context.wrap_socket(_connect(self._address, self.port, self.timeout), server_hostname=self.host)


def _connect(address: str, port: int, timeout: float) -> socket.socket:
    """A connection to the checked address, and to no other: the peer is compared once connected."""
    sock = socket.create_connection((address, port), timeout)
    peer = sock.getpeername()[0]
    if ipaddress.ip_address(peer.split("%", 1)[0]) != ipaddress.ip_address(address.split("%", 1)[0]):
        sock.close()
        raise Refused(f"refused: the connection for {address} reached {peer} instead")
    return sock
