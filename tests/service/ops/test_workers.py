"""``lorentztron serve --workers N``: api processes on one port and a learner, supervised;
real processes on a real Redis."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis

from benchmarks.servers import SERVE, ServiceProcess
from service.durability.feedback_log import decode_keyed
from service.durability.store import decode
from service.ops import workers
from service.scale.keys import RedisKeys
from tests.service.conftest import wait_for

PREFIX = "w"
MODEL = {"name": "m", "kind": "linear-pa", "input": {"n_features": 3}}
EXAMPLE = {"examples": [{"indices": [0, 2], "values": [1.0, 1.0], "label": 1}]}


def children(pid: int) -> dict[int, str]:
    """The supervisor's children: pid -> ``api`` or ``learner``."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            found[int(child)] = "api" if b"--fd" in command else "learner"
    return found


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("variable", [False, True])
def test_more_than_one_worker_needs_redis(variable):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORENTZTRON_")}
    args = ["serve"] if variable else ["serve", "--workers", "2"]
    if variable:
        env["LORENTZTRON_WORKERS"] = "2"
    done = subprocess.run(
        [sys.executable, "-m", "service.ops.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "LORENTZTRON_REDIS_URL" in lines[0], done.stderr
    assert "--workers 2 (LORENTZTRON_WORKERS)" in lines[0]


def test_check_refuses_what_cannot_run():
    from service.config import Settings

    workers.check(Settings(workers=1))  # one process: anything goes
    with pytest.raises(ValueError, match="LORENTZTRON_FEEDBACK_LOG"):
        workers.check(Settings(workers=2, redis_url="redis://x", feedback_log=False))
    with pytest.raises(ValueError, match="learners"):
        workers.check(Settings(workers=2, redis_url="redis://x", role="learner"))


class Traffic:
    """A thread posting unkeyed feedback to the port, counting what was acknowledged and
    when (a refused connection or a reset one is not acknowledged, and is not retried)."""

    def __init__(self, url: str):
        self.url, self.acknowledged, self.failed = url, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                try:
                    answer = client.post(f"{self.url}/v1/models/m/feedback", json=EXAMPLE)
                except httpx.TransportError:
                    self.failed += 1
                    continue
                if answer.status_code == 200:
                    self.acknowledged.append(time.monotonic())
                else:
                    self.failed += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def test_sigkill_of_a_worker_and_sigterm_of_all(redis_server, tmp_path):
    """Two api processes and a learner on one port. The api process that takes the first
    keyed feedback is stopped by a failpoint after Redis ran its append and before the
    reply is read, then SIGKILLed: the request is retried with the same key (answered as
    the first, logged once), the port answers throughout (the other process) and the
    killed one is replaced. Then a request is held the same way in the other api process
    and the supervisor SIGTERMed: the held request is answered (the process is told to
    stop while it is stopped, then continued), every process stops, the learner releases
    its lease, and its last snapshot holds every logged example."""
    env = {
        "LORENTZTRON_REDIS_URL": redis_server.url,
        "LORENTZTRON_REDIS_PREFIX": PREFIX,
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.5",
        "LORENTZTRON_LOG_LEVEL": "warning",
        "LORENTZTRON_LOG_TRIM": "false",  # the whole log, to count its records
        "LORENTZTRON_FAILPOINTS": "redis_log.keyed_appended=stop*1",
    }
    server = ServiceProcess(env, tmp_path / "serve.log", command=(*SERVE, "--workers", "2"))
    client = redis.Redis.from_url(redis_server.url)
    keys = RedisKeys(PREFIX)
    traffic = None
    try:
        server.start()
        supervisor = server.process.pid
        assert sorted(children(supervisor).values()) == ["api", "api", "learner"]
        created = httpx.post(f"{server.url}/v1/models", json=MODEL, timeout=30)
        assert created.status_code == 201, created.text
        # created through one api process, used at once through any
        for _ in range(4):
            answer = httpx.post(f"{server.url}/v1/models/m/predict", json={"instances": [
                {"indices": [0], "values": [1.0]}]}, timeout=10)  # fmt: skip
            assert answer.status_code == 200, answer.text

        first: dict = {}

        def keyed() -> None:
            try:
                first["answer"] = httpx.post(
                    f"{server.url}/v1/models/m/feedback",
                    json=EXAMPLE,
                    headers={"Idempotency-Key": "k1"},
                    timeout=30,
                )
            except httpx.TransportError as error:
                first["error"] = error

        request = threading.Thread(target=keyed)
        request.start()
        wait_for(lambda: any(stopped(p) for p in children(supervisor)), timeout=20)
        (victim,) = [p for p in children(supervisor) if stopped(p)]
        traffic = Traffic(server.url)  # while one api process hangs, the other answers
        wait_for(lambda: len(traffic.acknowledged) >= 5, timeout=20)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        request.join(timeout=30)
        assert "error" in first, first  # its connection was reset: no answer

        # the retry with the same key, through the port: answered as the first request
        # (which Redis ran), not logged again
        answer = httpx.post(
            f"{server.url}/v1/models/m/feedback",
            json=EXAMPLE,
            headers={"Idempotency-Key": "k1"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["idempotent-replayed"] == "true" and answer.json()["logged"] == 1

        # the killed process is replaced, and the port answered meanwhile
        wait_for(
            lambda: (
                victim not in children(supervisor)
                and sorted(children(supervisor).values()) == ["api", "api", "learner"]
            ),
            timeout=30,
        )
        wait_for(lambda: any(t > killed_at for t in traffic.acknowledged), timeout=20)
        traffic.stop()
        acknowledged = len(traffic.acknowledged) + 1

        metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
        sent = re.findall(
            r'^lorentztron_http_requests_total\{endpoint="/v1/models/\{name\}/feedback",'
            r'method="POST",process="api",status="200"\} (\S+)$',
            metrics,
            re.M,
        )
        assert sent and float(sent[0]) >= len(traffic.acknowledged)  # every process's
        wait_for(  # (the learner refreshes its gauges once a second: the worker's tick)
            lambda: re.search(
                r'^lorentztron_model_version\{model="m",process="learner"\}',
                httpx.get(f"{server.url}/metrics", timeout=10).text,
                re.M,
            ),
            timeout=10,
        )

        # SIGTERM while an api process holds a request: the other original one still has
        # its failpoint, so keyed feedback goes on until a request stops in it
        answers: dict[str, httpx.Response] = {}
        for i in range(2, 40):
            inside = threading.Thread(target=post_keyed, args=(server.url, f"k{i}", answers))
            inside.start()
            wait_for(
                lambda t=inside: not t.is_alive() or any(stopped(p) for p in children(supervisor)),
                timeout=20,
            )
            if inside.is_alive():
                break
        (holding,) = [p for p in children(supervisor) if stopped(p)]
        server.process.send_signal(signal.SIGTERM)
        wait_for(lambda: pending(holding, signal.SIGTERM), timeout=20)  # told to stop
        os.kill(holding, signal.SIGCONT)
        inside.join(timeout=30)
        assert answers[f"k{i}"].status_code == 200  # answered before its process stopped
        assert server.process.wait(timeout=60) == 0
        assert not Path(f"/proc/{supervisor}/task").exists()
        server._forget()
        assert client.get(keys.lease("m")) is None  # the learner let its model go

        records = [decode_keyed(f[b"r"]) for _, f in client.xrange(keys.log("m"))]
        logged = [r[3].key for r in records if r[3] is not None]
        assert sorted(logged) == sorted(f"k{n}" for n in range(1, i + 1))  # each once
        assert len(records) >= acknowledged + i - 1  # nothing acknowledged lost
        latest = int(client.get(keys.latest("m")))
        header, _ = decode(client.get(keys.snapshot("m", latest)))
        assert header["version"] == len(records)  # the learner's last snapshot: all of it
    finally:
        if traffic is not None:
            traffic.stop()
        if server.process is not None:
            server.kill()
        client.close()


def post_keyed(url: str, key: str, answers: dict) -> None:
    answers[key] = httpx.post(
        f"{url}/v1/models/m/feedback", json=EXAMPLE, headers={"Idempotency-Key": key}, timeout=60
    )


def pending(pid: int, signum: int) -> bool:
    """``signum`` is pending for the process (``/proc``: sent, not yet handled)."""
    status = Path(f"/proc/{pid}/status")
    assert status.exists(), f"process {pid} was killed, not told to stop"
    for line in status.read_text().splitlines():
        if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) >> (signum - 1) & 1:
            return True
    return False
