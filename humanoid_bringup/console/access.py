"""Who may open the console (pure: no sockets, no rclpy).

- Bound to a loopback address (``127.0.0.1``, ``::1``, ``localhost``) the console needs no token: only this
  machine's users reach it.
- Bound to any other address it requires a token (``console_token``, at least :data:`MIN_TOKEN_LENGTH`
  characters of ``[A-Za-z0-9._~-]``): without one it refuses to start (:func:`check_binding`).
- With a token every HTTP request and the websocket are checked by
  :class:`~humanoid_bringup.console.gate.TokenGate` through :func:`authorize`: a page opened as
  ``http://HOST:PORT/?token=TOKEN`` is redirected to ``/`` with the token in a cookie (``HttpOnly``,
  ``SameSite=Strict``), so the page's own requests and its websocket (which carries no query string) are let
  through by the cookie; anything else gets ``403 Forbidden``.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "COOKIE",
    "MIN_TOKEN_LENGTH",
    "Decision",
    "authorize",
    "check_binding",
    "is_loopback",
    "parse_request_head",
]

#: the cookie that carries the token after the first page load
COOKIE = "humanoid_console_token"
MIN_TOKEN_LENGTH = 8
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._~-]+$")
_MAX_HEAD = 16384


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str) -> bool:
    """Validate the console's ``host`` and ``token`` parameters; whether the token gate is needed (a token
    was given). ValueError: a non-loopback host without a token, or a malformed token."""
    if not host.strip():
        raise ValueError("console_host is empty")
    if token:
        if len(token) < MIN_TOKEN_LENGTH or not _TOKEN_CHARS.match(token):
            raise ValueError(
                f"console_token must be at least {MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 . _ ~ - "
                f"(got {len(token)} characters)"
            )
        return True
    if not is_loopback(host):
        raise ValueError(
            f"console_host {host!r} is not a loopback address: the console would be open to the network; "
            "give a console_token (the page is then opened as http://HOST:PORT/?token=TOKEN)"
        )
    return False


@dataclass(frozen=True)
class RequestHead:
    """The first line and headers of an HTTP request (header names lower-case)."""

    method: str
    target: str
    headers: dict[str, str]

    @property
    def websocket(self) -> bool:
        """An upgrade to a websocket."""
        return self.headers.get("upgrade", "").lower() == "websocket"


def parse_request_head(data: bytes) -> RequestHead:
    """Parse an HTTP/1.x request head (up to and without the blank line). ValueError when malformed."""
    if len(data) > _MAX_HEAD:
        raise ValueError("request head too large")
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as exc:  # latin-1 decodes everything; kept for clarity
        raise ValueError("undecodable request head") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"malformed request line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return RequestHead(parts[0], parts[1], headers)


@dataclass(frozen=True)
class Decision:
    """What the gate does with a request: ``forward`` it, ``redirect`` (to ``location``, setting the token
    cookie) or ``refuse`` it (403, with ``reason``)."""

    action: str
    location: str = ""
    reason: str = ""


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _cookie_token(headers: dict[str, str]) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE:
            return value
    return None


def authorize(head: RequestHead, token: str) -> Decision:
    """The gate's decision for one request (module docstring). The token is compared in constant time."""
    url = urlsplit(head.target)
    given = parse_qs(url.query).get("token", [])
    if given:
        if not _same(given[0], token):
            return Decision("refuse", reason="wrong token")
        if head.websocket:
            return Decision("forward")
        return Decision("redirect", location=url.path or "/")
    cookie = _cookie_token(head.headers)
    if cookie is not None and _same(cookie, token):
        return Decision("forward")
    return Decision("refuse", reason="this console needs its token: open it as http://HOST:PORT/?token=TOKEN")
