"""Idempotency keys: a retried feedback, create or restore request gets its first answer
again and is not applied again, in one process, across restarts (the key in the log record
and in the snapshot), across a SIGKILL between the append and the answer, and across api
replicas (the answer kept in Redis beside the log)."""

from __future__ import annotations

import signal
import struct
import threading
import time
import zlib

import httpx
import numpy as np
import pytest
import redis

from benchmarks.servers import RedisServer, ServiceProcess, start_all
from service.config import Settings
from service.durability.feedback_log import RecordKey, decode_keyed, encode_record
from service.durability.idempotency import Answers, Key, key_of
from service.durability.redis_log import RedisLog
from service.exceptions import Conflict, InvalidRequest
from service.main import create_app
from tests.service.conftest import TestClient, create, wait_for
from tests.service.server import roles


def key(name="k1", body=b"{}", endpoint="feedback") -> Key:
    return key_of(name, endpoint, "application/json", body)


# -- the pieces ------------------------------------------------------------------------------
def test_key_of_checks_the_header_and_fingerprints_the_request():
    assert key_of(None, "feedback", "", b"") is None
    for bad in ("", "has space", "x" * 256, "naïve"):
        with pytest.raises(InvalidRequest) as error:
            key_of(bad, "feedback", "", b"")
        assert error.value.code == "invalid_input"
    first = key("k", b"a")
    assert first.key == "k" and len(first.fingerprint) == 32
    assert key("k", b"a") == first
    assert key("k", b"b") != first and key("k", b"a", endpoint="create") != first


def test_answers_claim_record_replay_and_refuse():
    answers = Answers(ttl=60, max_bytes=1 << 20)
    k = key()
    assert answers.claim(k) is None
    with pytest.raises(Conflict) as busy:
        answers.claim(k)  # held by the first request until it is answered
    assert busy.value.code == "idempotency_key_in_use"
    answers.record(k, time.time(), body={"version": 3})
    answers.release(k)
    assert answers.claim(k).replay(k) == {"version": 3}
    with pytest.raises(InvalidRequest) as reused:
        answers.claim(k).replay(key(body=b"another body"))
    assert reused.value.code == "idempotency_key_reused"


def test_an_applied_refusal_is_raised_again():
    answers = Answers(ttl=60, max_bytes=1 << 20)
    k = key()
    refusal = InvalidRequest("unlearnable_example", "overflow", None, applied=True)
    answers.record(k, time.time(), error=refusal)
    with pytest.raises(InvalidRequest) as again:
        answers.get(k).replay(k)
    assert again.value.code == "unlearnable_example" and again.value.applied


def test_answers_expire_and_the_oldest_go_first_past_the_memory_bound():
    now = [1000.0]
    answers = Answers(ttl=10, max_bytes=2000, clock=lambda: now[0])
    for i in range(3):
        answers.record(key(f"k{i}"), now[0] + i, body={"i": i})
    assert len(answers) == 3
    now[0] += 10.5  # k0 (recorded at 1000) is older than ttl now
    assert answers.get(key("k0")) is None and answers.get(key("k1")) is not None
    for i in range(3, 20):
        answers.record(key(f"k{i}"), now[0], body={"i": i, "pad": "x" * 100})
    assert answers.nbytes <= 2000 and answers.evicted > 0
    assert answers.get(key("k19")) is not None


def test_answers_state_round_trips():
    answers = Answers(ttl=3600, max_bytes=1 << 20)
    at = time.time()
    answers.record(key("a"), at, body={"version": 1, "results": [{"loss": 0.5}]})
    answers.record(key("b"), at, error=InvalidRequest("unlearnable_example", "m", {"row": 2}))
    copy = Answers(ttl=3600, max_bytes=1 << 20)
    copy.set_state(answers.get_state())
    assert copy.get(key("a")) == answers.get(key("a"))
    assert copy.get(key("b")).error == {
        "code": "unlearnable_example",
        "message": "m",
        "details": {"row": 2},
    }


def test_a_keyed_record_round_trips_and_plain_records_still_read():
    from core.features import batch_from_rows

    batch = batch_from_rows([(np.array([0, 2]), np.array([1.0, -2.0]))])
    targets = np.array([1], dtype=np.int64)
    record_key = RecordKey("retry-1", "0f" * 16, True)
    decoded, decoded_targets, at, found = decode_keyed(
        encode_record(batch, targets, at=5.0, key=record_key)
    )
    assert found == record_key and at == 5.0 and decoded_targets.tolist() == [1]
    assert np.array_equal(decoded.values, batch.values)
    assert decode_keyed(encode_record(batch, targets))[3] is None


# -- one process -------------------------------------------------------------------------------
@pytest.fixture(params=[True, False], ids=["fast-path", "routes"])
def keyed(request, tmp_path):
    settings = Settings(
        snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, fast_path=request.param
    )
    with TestClient(create_app(settings)) as client:
        yield client


def feedback(client, body, key=None, name="m"):
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(f"/v1/models/{name}/feedback", json=body, headers=headers)


BODY = {"examples": [{"x": [1.0, 0.0, 2.0], "label": 1}, {"x": [0.0, 1.0, -1.0], "label": -1}]}


def test_a_retried_feedback_is_answered_again_and_learned_once(keyed):
    create(keyed)
    first = feedback(keyed, BODY, "retry-1")
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    again = feedback(keyed, BODY, "retry-1")
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    info = keyed.get("/v1/models/m").json()
    assert info["examples_learned"] == 2 and info["version"] == first.json()["version"]
    reused = feedback(keyed, {"examples": BODY["examples"][:1]}, "retry-1")
    assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"
    bad = feedback(keyed, BODY, "with space")
    assert bad.status_code == 422 and bad.json()["error"]["details"] == {"field": "Idempotency-Key"}
    assert feedback(keyed, BODY, "retry-2").json()["version"] == first.json()["version"] + 1


def test_a_retry_naming_prediction_ids_gets_its_answer_though_the_ids_are_used(keyed):
    create(keyed)
    predicted = keyed.post("/v1/models/m/predict", json={"instances": [{"x": [1.0, 2.0, 3.0]}]})
    body = {
        "examples": [
            {"prediction_id": predicted.json()["predictions"][0]["prediction_id"], "label": 1}
        ]
    }
    first = feedback(keyed, body, "by-id")
    assert first.status_code == 200
    assert feedback(keyed, body, "by-id").json() == first.json()
    assert feedback(keyed, body).json()["error"]["code"] == "unknown_prediction_id"


def test_bulk_bodies_take_keys_too(keyed):
    create(keyed)
    body = b"".join(b"%+d 1:%.3f 3:1\n" % (1 if i % 2 else -1, i / 7) for i in range(3000))
    headers = {"content-type": "text/x-svmlight", "Idempotency-Key": "bulk"}
    first = keyed.post("/v1/models/m/feedback", content=body, headers=headers)
    again = keyed.post("/v1/models/m/feedback", content=body, headers=headers)
    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    assert keyed.get("/v1/models/m").json()["examples_learned"] == 3000


def test_create_and_restore_take_keys(keyed):
    spec = {"name": "m", "kind": "dos", "params": {"rank": 2}, "input": {"n_features": 3}}
    headers = {"Idempotency-Key": "create-m"}
    first = keyed.post("/v1/models", json=spec, headers=headers)
    assert first.status_code == 201
    again = keyed.post("/v1/models", json=spec, headers=headers)
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert keyed.post("/v1/models", json=spec).json()["error"]["code"] == "model_exists"
    other = keyed.post("/v1/models", json={**spec, "params": {"rank": 3}}, headers=headers)
    assert other.json()["error"]["code"] == "idempotency_key_reused"

    feedback(keyed, BODY)
    headers = {"Idempotency-Key": "restore-0"}
    restored = keyed.post("/v1/models/m/snapshots/0/restore", headers=headers)
    assert restored.status_code == 200 and restored.json()["version"] == 2
    feedback(keyed, BODY)  # version 3: a second restore would move it to 4
    again = keyed.post("/v1/models/m/snapshots/0/restore", headers=headers)
    assert again.json() == restored.json() and again.headers["idempotent-replayed"] == "true"
    assert keyed.get("/v1/models/m").json()["version"] == 3


def test_answers_survive_a_restart_from_the_log_and_from_a_snapshot(tmp_path):
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    with TestClient(create_app(settings)) as client:
        create(client, classes=["a", "b"])
        body = {"examples": [{"x": [1.0, 0.0, 2.0], "label": "b"}]}
        first = feedback(client, body, "in-log").json()
    with TestClient(create_app(settings)) as client:  # the shutdown snapshot trims the log
        assert feedback(client, body, "in-log").json() == first
        second = feedback(client, body, "after-snapshot").json()
        assert client.post("/v1/models/m/snapshots").status_code == 201
        third = feedback(client, body, "only-in-log").json()
    with TestClient(create_app(settings)) as client:
        for name, answer in (("in-log", first), ("after-snapshot", second), ("only-in-log", third)):
            again = feedback(client, body, name)
            assert again.json() == answer and again.headers["idempotent-replayed"] == "true"
        assert client.get("/v1/models/m").json()["examples_learned"] == 3


# -- SIGKILL between the append and the answer -----------------------------------------------
N_FEATURES = 20
SPEC = dict(name="m", kind="dos", params={"rank": 16, "seed": 3}, averaging={"interval": 1000})
SPEC["input"] = {"n_features": N_FEATURES}


def svmlight(n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N_FEATURES))
    lines = [
        ("+1" if x[0] > 0 else "-1") + "".join(f" {j + 1}:{v:.6f}" for j, v in enumerate(x))
        for x in X
    ]
    return ("\n".join(lines) + "\n").encode()


def post_in_background(url: str, body: bytes, key: str) -> dict:
    """Send the request from a thread; ``outcome`` gets its answer or its error."""
    outcome: dict = {}

    def send():
        try:
            outcome["response"] = httpx.post(
                f"{url}/v1/models/m/feedback",
                content=body,
                headers={"content-type": "text/x-svmlight", "Idempotency-Key": key},
                timeout=60,
            )
        except httpx.HTTPError as error:
            outcome["error"] = error

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def whole_frames(folder) -> int:
    """The whole records in a model's file log, read without opening it as a log (which
    would cut off a frame being written)."""
    count = 0
    for path in sorted(folder.glob("*.log")):
        data, offset = path.read_bytes(), 0
        while offset + 16 <= len(data):
            length, crc, _ = struct.unpack_from("<IIQ", data, offset)
            end = offset + 16 + length
            if end > len(data) or zlib.crc32(data[offset + 8 : end]) != crc:
                break
            count, offset = count + 1, end
    return count


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): its state in ``/proc``."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def kill_between_append_and_answer(service: ServiceProcess, logged, body: bytes, key: str):
    """Post a large keyed body to a service whose failpoint ``feedback.answer`` stops it once
    the request is learned and durable, before it answers; check that its record is in the
    log and no answer was sent, and SIGKILL it. Returns the model as it was before."""
    before = httpx.get(f"{service.url}/v1/models/m").json()
    records = logged()
    outcome = post_in_background(service.url, body, key)
    wait_for(lambda: stopped(service.process.pid), timeout=60)
    assert logged() == records + 1, "the record is not in the log"
    service.kill()
    outcome["thread"].join(timeout=10)
    assert "error" in outcome and "response" not in outcome
    return before


def check_retry_learns_once(service: ServiceProcess, body: bytes, key: str, before: dict):
    service.start()
    headers = {"content-type": "text/x-svmlight"}
    url = f"{service.url}/v1/models/m/feedback"
    again = httpx.post(url, content=body, headers={**headers, "Idempotency-Key": key}, timeout=60)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    n = body.count(b"\n")
    answer = again.json()
    assert answer["learned"] == n and answer["version"] == before["version"] + 1
    info = httpx.get(f"{service.url}/v1/models/m").json()
    assert info["examples_learned"] == before["examples_learned"] + n
    assert info["version"] == answer["version"]
    # the same examples without the key are learned (again): the key made the difference
    plain = httpx.post(url, content=body, headers=headers, timeout=60)
    assert plain.json()["version"] == answer["version"] + 1


@pytest.mark.parametrize("store", ["file", "redis"])
def test_sigkill_between_append_and_answer(tmp_path, store):
    env = {
        "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
        "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
        "LORENTZTRON_LOG_LEVEL": "warning",
        "LORENTZTRON_FAILPOINTS": "feedback.answer=stop",
    }
    redis_server = None
    if store == "redis":
        redis_server = RedisServer(tmp_path, appendfsync="always")
        redis_server.start()
        env["LORENTZTRON_REDIS_URL"] = redis_server.url
        client = redis.Redis.from_url(redis_server.url)

        def logged() -> int:
            return int(client.xlen(RedisLog(client).key("m")))
    else:
        folder = tmp_path / "snapshots" / ".log" / "m"

        def logged() -> int:
            return whole_frames(folder)

    service = ServiceProcess(env, tmp_path / "service.log")
    try:
        service.start()
        assert httpx.post(f"{service.url}/v1/models", json=SPEC).status_code == 201
        body = svmlight(2_000, seed=1)
        before = kill_between_append_and_answer(service, logged, body, "bulk-1")
        service.env.pop("LORENTZTRON_FAILPOINTS")  # restarted without it
        check_retry_learns_once(service, body, "bulk-1", before)
    finally:
        service.kill()
        if redis_server is not None:
            client.close()
            redis_server.stop()


# -- api replicas --------------------------------------------------------------------------------
def test_api_replicas_answer_a_retry_from_redis(tmp_path):
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    learner, replicas = roles(redis_server.url, tmp_path)
    client = redis.Redis.from_url(redis_server.url)

    def version(url: str) -> int | None:
        response = httpx.get(f"{url}/v1/models/m", timeout=5)
        return response.json()["version"] if response.status_code == 200 else None

    def post(url: str, body: dict, key: str) -> httpx.Response:
        headers = {"Idempotency-Key": key}
        return httpx.post(f"{url}/v1/models/m/feedback", json=body, headers=headers, timeout=10)

    try:
        start_all((learner, *replicas))
        spec = {**SPEC, "params": {"rank": 2, "seed": 1}}
        assert httpx.post(f"{replicas[0].url}/v1/models", json=spec).status_code == 201
        wait_for(lambda: all(version(p.url) == 0 for p in (learner, *replicas)), timeout=30)
        body = {"examples": [{"x": [0.5] * N_FEATURES, "label": 1}]}
        first = post(replicas[0].url, body, "replica-1")
        assert first.status_code == 200 and first.json()["logged"] == 1
        for url in (replicas[1].url, replicas[0].url, learner.url):
            again = post(url, body, "replica-1")
            assert again.json() == first.json(), url
            assert again.headers["idempotent-replayed"] == "true"
        replicas[0].kill()
        replicas[0].start()
        assert post(replicas[0].url, body, "replica-1").json() == first.json()
        other = post(replicas[1].url, {"examples": body["examples"] * 2}, "replica-1")
        assert other.json()["error"]["code"] == "idempotency_key_reused"
        assert client.xlen(RedisLog(client).key("m")) <= 1  # (trimmed once learned)
        wait_for(lambda: version(learner.url) == 1, timeout=30)
        info = httpx.get(f"{learner.url}/v1/models/m").json()
        assert info["examples_learned"] == 1
    finally:
        client.close()
        for process in (*replicas, learner):
            process.kill()
        redis_server.stop()


# -- a lost Redis reply ----------------------------------------------------------------------
@pytest.mark.parametrize("role", ["all", "api"])
def test_a_keyed_retry_after_a_lost_redis_reply_is_applied_once(tmp_path, role):
    """A keyed feedback whose Redis append lands but whose reply is lost answers 503
    ``log_unavailable`` saying the examples may have been logged. A retry with the key gets
    the first outcome (``Idempotent-Replayed``) and the examples are learned once, whether the
    retry comes first (``once-1``) or another request comes between (``once-2``). Role
    ``all``: Redis paused (SIGSTOP) during the append, as an outage does it; api role: the
    failpoint ``redis_log.appended`` (its first Redis call is the key's look-up, which a pause
    would fail before anything is appended)."""
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    stream = RedisLog(client).key("m")
    env = {"LORENTZTRON_REDIS_URL": redis_server.url, "LORENTZTRON_LOG_LEVEL": "warning"}
    if role == "all":
        learner = target = ServiceProcess(env, tmp_path / "service.log")
        processes = [target]
    else:
        learner, [target] = roles(redis_server.url, tmp_path, replicas=1)
        target.env["LORENTZTRON_FAILPOINTS"] = "redis_log.appended=raise*2"
        processes = [learner, target]

    def post(body: dict, key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        url = f"{target.url}/v1/models/m/feedback"
        return httpx.post(url, json=body, headers=headers, timeout=30)

    def lose_reply(body: dict, key: str) -> httpx.Response:
        if role != "all":
            return post(body, key)
        redis_server.process.send_signal(signal.SIGSTOP)
        try:
            return post(body, key)
        finally:
            redis_server.process.send_signal(signal.SIGCONT)

    def appended() -> int:  # every entry ever added (a snapshot trims the stream)
        if not client.exists(stream):
            return 0
        return client.xinfo_stream(stream)["entries-added"]

    def learned() -> int:
        return httpx.get(f"{learner.url}/v1/models/m", timeout=5).json()["examples_learned"]

    body = {"examples": [{"x": [0.5] * N_FEATURES, "label": 1}]}
    try:
        start_all(processes)
        assert httpx.post(f"{target.url}/v1/models", json=SPEC).status_code == 201
        wait_for(lambda: httpx.get(f"{learner.url}/v1/models/m").status_code == 200, timeout=30)
        # (the log's scripts loaded in Redis; the api's failpoint is for the keyed requests)
        warm = httpx.post(f"{learner.url}/v1/models/m/feedback", json=body, timeout=30)
        assert warm.status_code == 200
        wait_for(lambda: learned() == 1, timeout=30)
        for key in ("once-1", "once-2"):
            before, count = appended(), learned()
            lost = lose_reply(body, key)
            assert lost.status_code == 503, lost.text
            error = lost.json()["error"]
            assert error["code"] == "log_unavailable" and "may have been logged" in error["message"]
            wait_for(lambda before=before: appended() == before + 1, timeout=10)  # it landed
            between = key == "once-2"
            if between:  # another request between: it learns the lost record first
                assert post({"examples": body["examples"] * 2}).status_code == 200
            for _ in range(2):
                again = post(body, key)
                assert again.status_code == 200, again.text
                assert again.headers["idempotent-replayed"] == "true"
            expected = count + 1 + 2 * between
            wait_for(lambda expected=expected: learned() == expected, timeout=30)
            assert appended() == before + 1 + between
    finally:
        client.close()
        for process in processes:
            process.kill()
        redis_server.stop()
