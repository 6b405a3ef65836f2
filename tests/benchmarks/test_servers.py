"""The server subprocesses every test and benchmark starts: a stand-in server (a few lines of
http.server, started in milliseconds) shows what ServiceProcess does with any server command;
Redis is the real one."""

from __future__ import annotations

import os
import socket
import sys

import httpx
import pytest
import redis

from benchmarks.servers import RedisServer, ServiceProcess, free_port, start_all, stop_all

#: answers ``/readyz`` with the value of $ANSWER, prints a line when it listens
STAND_IN = """
import http.server, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ.get("ANSWER", "none").encode()
        self.send_response(200 if self.path == "/readyz" else 404)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Handler)
print("listening on", port, flush=True)
server.serve_forever()
"""
COMMAND = (sys.executable, "-c", STAND_IN)


def test_free_port_is_free():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_environment_log_pause_restart_on_the_same_port_and_stop_on_exit(tmp_path, monkeypatch):
    monkeypatch.setenv("INHERITED", "yes")
    log = tmp_path / "server.log"
    env = {"ANSWER": "hello", "INHERITED": None}
    with ServiceProcess(env, log, command=COMMAND).start() as server:
        assert httpx.get(f"{server.url}/readyz").text == "hello"
        assert server.env["OPENBLAS_NUM_THREADS"] == "1" and "INHERITED" not in server.env
        assert server.cpu_seconds() >= 0.0
        pid = server.process.pid
        server.pause()  # SIGSTOP, then SIGCONT: the waits return once the state changed
        assert os.WIFSTOPPED(os.waitpid(pid, os.WUNTRACED)[1])
        server.resume()
        assert os.WIFCONTINUED(os.waitpid(pid, os.WCONTINUED)[1])
        port = server.url.rsplit(":", 1)[1]
        server.kill()  # SIGKILL
        assert server.process is None
        server.start(port=int(port))  # a restart on the same port
        assert server.url.endswith(f":{port}")
        process = server.process
    assert process.poll() is not None and server.process is None  # stopped on exit
    assert log.read_text().count(f"listening on {port}") == 2  # appended across restarts


def test_several_at_once_and_a_server_that_exits_before_it_is_ready(tmp_path):
    servers = [ServiceProcess({"ANSWER": str(i)}, command=COMMAND) for i in range(2)]
    start_all(servers)
    assert [httpx.get(f"{s.url}/readyz").text for s in servers] == ["0", "1"]
    stop_all(servers)
    assert all(s.process is None for s in servers)
    failing = ServiceProcess(
        log_path=tmp_path / "failing.log", command=(sys.executable, "-c", "raise SystemExit(3)")
    )
    with pytest.raises(RuntimeError, match=r"exited with code 3 .*failing\.log"):
        failing.start()
    assert failing.process is None


def test_redis_restarts_on_its_port_with_what_its_append_only_file_holds(tmp_path):
    with RedisServer(tmp_path, appendfsync="always").start() as server:
        redis.Redis.from_url(server.url).set("k", "v")
        server.kill()
        server.start()
        assert redis.Redis.from_url(server.url).get("k") == b"v"
        process = server.process
    assert process.poll() is not None and server.process is None
