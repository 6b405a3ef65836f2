"""The HTTP clients that send the load: httpx, or raw HTTP/1.1 over asyncio streams."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx


def auth_headers(key: str | None) -> dict[str, str]:
    """The bearer header of ``key`` (none without a key)."""
    return {"Authorization": f"Bearer {key}"} if key else {}


class HttpxClient:
    """Load requests through an ``httpx.AsyncClient`` (full HTTP semantics, https included)."""

    name = "httpx"
    errors: tuple[type[BaseException], ...] = (httpx.HTTPError,)

    def __init__(self, url: str, max_connections: int, timeout: float, key: str | None = None):
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self.client = httpx.AsyncClient(
            base_url=url, limits=limits, timeout=timeout, headers=auth_headers(key)
        )

    async def post(self, path: str, body: bytes, content_type: bytes) -> tuple[int, bytes]:
        response = await self.client.post(
            path, content=body, headers={"content-type": content_type.decode()}
        )
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self.client.aclose()


class RawClient:
    """Load requests over plain asyncio streams: HTTP/1.1 keep-alive connections, one
    request at a time on each, at most ``max_connections``.

    It speaks only what the benchmarks need (POST with a body; responses framed by
    Content-Length or chunked) and costs a small fraction of httpx's CPU per request, which
    matters when the generator shares a small machine with the server it measures. Idle
    connections are retired before the server's keep-alive timeout, and a request that
    meets a connection the server has just closed is sent again on a new one (the server
    never read it).
    """

    name = "raw"
    errors: tuple[type[BaseException], ...] = (
        OSError,
        TimeoutError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ValueError,
    )

    def __init__(self, url: str, max_connections: int, timeout: float, key: str | None = None):
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"the raw client speaks plain http only, not {parts.scheme!r}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.slots = asyncio.Semaphore(max_connections)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        # uvicorn closes keep-alive connections idle for 5 s: retire ours before that
        self.max_idle = 2.0
        self.host_header = f"{self.host}:{self.port}".encode()
        self.extra_headers = "".join(f"{k}: {v}\r\n" for k, v in auth_headers(key).items())

    async def post(self, path: str, body: bytes, content_type: bytes) -> tuple[int, bytes]:
        async with self.slots:
            connection = self._reusable()
            try:
                async with asyncio.timeout(self.timeout):
                    if connection is not None:
                        try:
                            return await self._send(connection, path, body, content_type)
                        except (ConnectionError, asyncio.IncompleteReadError) as error:
                            # the server closed the idle connection as we reused it; the
                            # request was not read, so it is safe to send it once more
                            connection[1].close()
                            if getattr(error, "partial", b""):
                                raise
                    connection = await asyncio.open_connection(self.host, self.port)
                    return await self._send(connection, path, body, content_type)
            except BaseException:
                if connection is not None:
                    connection[1].close()
                raise

    def _reusable(self):
        """An idle connection that the server has not closed and will not close soon."""
        now = time.monotonic()
        while self.idle:
            reader, writer, last_used = self.idle.pop()
            if now - last_used < self.max_idle and not reader.at_eof():
                return reader, writer
            writer.close()
        return None

    async def _send(self, connection, path: str, body: bytes, content_type: bytes):
        status, data, keep = await self._exchange(*connection, path, body, content_type)
        if keep:
            self.idle.append((*connection, time.monotonic()))
        else:
            connection[1].close()
        return status, data

    async def _exchange(self, reader, writer, path, body, content_type):
        head = (
            b"POST %s HTTP/1.1\r\nhost: %s\r\n%scontent-type: %s\r\ncontent-length: %d\r\n\r\n"
            % (
                (self.prefix + path).encode(),
                self.host_header,
                self.extra_headers.encode(),
                content_type,
                len(body),
            )
        )
        writer.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            writer.write(body)
        await writer.drain()
        lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, chunked, keep = None, False, True
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                keep = b"close" not in value.lower()
        if chunked:
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append(await reader.readexactly(size + 2))
                if size == 0:
                    break
            data = b"".join(chunk[:-2] for chunk in chunks)
        elif length is not None:
            data = await reader.readexactly(length)
        else:
            data, keep = await reader.read(), False
        return status, data, keep

    async def aclose(self) -> None:
        for _, writer, _ in self.idle:
            writer.close()
        self.idle.clear()


CLIENTS = {"httpx": HttpxClient, "raw": RawClient}
