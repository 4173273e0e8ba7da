"""Token gate of the console: a small TCP proxy in front of the viser server (which then listens on an
ephemeral loopback port). Each connection's first request head is checked with
:func:`~humanoid_bringup.console.access.authorize`: refused requests get ``403 Forbidden`` and the connection
closes, a request with the right ``?token=`` gets a redirect that sets the token cookie, and an authorized
connection is piped to viser both ways unchanged (HTTP keep-alive requests on it and the websocket included).
Runs an asyncio loop on a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from humanoid_bringup.console.access import COOKIE, authorize, parse_request_head

__all__ = ["TokenGate"]

_HEAD_TIMEOUT_S = 10.0


def _response(status: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


class TokenGate:
    """Listens on ``host:port``, forwards authorized connections to ``127.0.0.1:upstream_port``."""

    def __init__(self, host: str, port: int, upstream_port: int, token: str) -> None:
        self.host, self.port, self.upstream_port, self.token = host, port, upstream_port, token
        self.refused = 0
        self.forwarded = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="console_gate", daemon=True)

    def start(self, timeout: float = 10.0) -> TokenGate:
        """Bind and serve; OSError when the port cannot be bound (in use, no permission)."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise OSError(f"console gate: no listening socket on {self.host}:{self.port} after {timeout} s")
        if self._error is not None:
            raise OSError(f"console gate: cannot listen on {self.host}:{self.port}: {self._error}")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, self.host, self.port)
            )
        except OSError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                data = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
                head = parse_request_head(data[:-4])
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
                self.refused += 1
                writer.write(_response("400 Bad Request", {}, b"bad request\n"))
                await writer.drain()
                return
            decision = authorize(head, self.token)
            if decision.action == "refuse":
                self.refused += 1
                body = f"humanoid-console: refused: {decision.reason}\n".encode()
                writer.write(_response("403 Forbidden", {"Content-Type": "text/plain"}, body))
                await writer.drain()
                return
            if decision.action == "redirect":
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                writer.write(
                    _response("303 See Other", {"Location": decision.location, "Set-Cookie": cookie}, b"")
                )
                await writer.drain()
                return
            self.forwarded += 1
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            up_writer.write(data)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    def close(self) -> None:
        """Stop listening and the loop (idempotent)."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:  # open connections: their pipes end
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(5.0)
