"""The raw HTTP/1.1 client sends every kind of request the generator needs, and survives the
server closing its idle connections."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import uvicorn

from benchmarks.servers import free_port
from deploy.loadtest.loadgen.clients import RawClient
from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.generator import run
from tests.deploy.loadtest.loadgen.summaries import check_summary, small


@pytest.mark.parametrize("mode", ["predict", "mixed", "bulk"])
def test_raw_client(server_url, mode):
    config = small(server_url, mode=mode, client="raw", duration=0.4, warmup=0.0)
    summary = run(config)
    check_summary(summary, config)
    assert summary["client"] == "raw"


def test_the_default_client_is_the_cheapest():
    assert LoadConfig().client == "raw"


@pytest.mark.parametrize("client", ["raw", "httpx"])
def test_both_clients_send_the_same_requests(server_url, client):
    """The same bounded load through either client: the same requests, all answered, the
    same examples learned (the latency is timed around either client's ``post``)."""
    config = small(server_url, mode="bulk", client=client, warmup=0.0, max_requests=3)
    summary = run(config)
    check_summary(summary, config)
    assert summary["client"] == client
    assert (summary["requests"], summary["examples_learned"]) == (3, 3 * config.batch)


def test_raw_client_survives_the_server_closing_idle_connections():
    """uvicorn closes keep-alive connections after an idle timeout; a request that meets a
    just-closed connection is sent again on a new one."""

    async def echo(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    port = free_port()
    config = uvicorn.Config(
        echo, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=0.2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.02)

    async def exchange():
        client = RawClient(f"http://127.0.0.1:{port}", max_connections=1, timeout=5)
        client.max_idle = 60.0  # keep the connection past the server's keep-alive timeout
        answers = [await client.post("/", b"one", b"text/plain")]
        await asyncio.sleep(0.6)
        answers.append(await client.post("/", b"two", b"text/plain"))
        await client.aclose()
        return answers

    try:
        assert asyncio.run(exchange()) == [(200, b"one"), (200, b"two")]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
