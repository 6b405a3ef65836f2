"""The client (lorentztron_client, re-exported as service.client) against a real server
(uvicorn on a loopback port): every endpoint from lists, numpy and scipy inputs, predictions
split into requests of at most MAX_BATCH rows, bulk uploads as svmlight and NDJSON, one
exception class per stable error code, bearer keys, retries of a 503 while the service
starts, and a bulk part whose answer was lost to a SIGKILL learned once when the client sends
it again. Its installation on its own: test_client_distribution.py."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks.servers import ServiceProcess, free_port
from core.datasets import data_dir, load_svmlight
from service import client as lz
from service import main
from service.config import Settings
from service.exceptions import CODES
from service.http.errors import status_of
from service.main import create_app
from tests.service.durability.test_idempotency import whole_frames
from tests.service.test_end_to_end import ServerThread


@pytest.mark.parametrize(
    ("module", "refused"),
    [("lorentztron_client", ', "service"'), ("service.client", "")],
)
def test_importing_the_client_loads_none_of_the_server(module, refused):
    """Run with the server's packages (and numpy) made unimportable: the client imports all
    the same; lorentztron_client imports nothing of ``service`` either."""
    code = f"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {{"fastapi", "starlette", "numba", "numpy", "pydantic",
                                  "uvicorn", "redis", "prometheus_client", "scipy", "core"
                                  {refused}}}:
            raise ImportError(f"{{name}} must not be imported")
sys.meta_path.insert(0, Refuse())
import {module} as client
print(len(client.ERRORS))
"""
    # lorentztron_client from its own folder (clients/python), wherever this one was found
    folder = Path(sys.modules["lorentztron_client"].__file__).parents[1]
    where = folder if module == "lorentztron_client" else None
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=where)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(CODES)


def test_the_clients_copy_of_the_codes_is_the_servers():
    import lorentztron_client.codes  # (found once service.client is: see there)

    declared = {code: (kind.__name__, meaning) for code, (kind, meaning) in CODES.items()}
    assert lorentztron_client.codes.CODES == declared


def test_service_client_is_the_distributions_client():
    import lorentztron_client

    assert lz.Client is lorentztron_client.Client and lz.ERRORS is lorentztron_client.ERRORS
    assert lz.__all__ == lorentztron_client.__all__
    assert {"Client", "LorentztronError"} <= set(dir(lz))  # what the CLI imports


def test_one_exception_class_per_code_with_the_servers_status():
    for code in CODES:
        cls = lz.ERRORS[code]
        assert issubclass(cls, lz.LorentztronError) and cls.status == status_of(code), code
        assert getattr(lz, cls.__name__) is cls and cls.__name__ in lz.__all__
    assert issubclass(lz.ModelNotFound, lz.NotFound) and lz.ERRORS["not_found"] is lz.NotFound
    assert issubclass(lz.LogUnavailable, lz.Unavailable)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("client")
    settings = Settings(
        snapshot_dir=directory / "snapshots", snapshot_interval=3600, write_keys=["w"]
    )
    with ServerThread(create_app(settings)) as running:
        yield running.url


def test_every_endpoint_with_lists_numpy_and_scipy(server):
    with lz.Client(server, key="w") as client:
        info = client.create("c", kind="dos", n_features=3, params={"rank": 2}, classes=["a", "b"])
        assert info["name"] == "c" and info["version"] == 0
        assert [m["name"] for m in client.models()] == ["c"]
        rows = [[0.5, 1.0, -2.0], [1.0, 0.0, 0.0]]
        for X in (rows, np.array(rows), sp.csr_matrix(np.array(rows)), [{"x": r} for r in rows]):
            answer = client.predict("c", X)
            assert len(answer["predictions"]) == 2 and answer["version"] == 0
        one = client.predict("c", np.array([0.0, 1.0, 0.0]))
        assert len(one["predictions"]) == 1
        learned = client.feedback("c", rows, ["b", "a"])
        assert learned["learned"] == 2 and len(learned["results"]) == 2
        ids = [p["prediction_id"] for p in client.predict("c", rows)["predictions"]]
        assert client.feedback("c", labels=["a", "b"], prediction_ids=ids)["version"] == 2
        with pytest.raises(lz.UnknownLabel) as error:
            client.feedback("c", rows[:1], ["zebra"])
        assert error.value.status == 422 and error.value.details == {"field": "examples.0.label"}
        assert error.value.request_id
        snapshot = client.snapshot("c")
        assert snapshot["version"] == 2 and client.snapshots("c")[-1]["version"] == 2
        assert client.restore("c", 0)["version"] == 3
        assert client.health() == {"status": "ok"}
        client.delete("c")
        with pytest.raises(lz.ModelNotFound) as missing:
            client.model("c")
        assert missing.value.code == "model_not_found" and missing.value.status == 404


def test_challengers_promotion_policies_and_learning(server):
    """The members' calls against the real app: a challenger that learns the product rule
    better than the linear champion, scored in the shadow, promoted (once, though sent
    again with its key), policies patched field by field (drift None removes the
    detector), learning paused and resumed, each refusal its code's class."""
    from tests.service.http.routes.test_members import examples

    stream = examples(600)
    X = np.array([e["x"] for e in stream])
    y = [e["label"] for e in stream]
    with lz.Client(server, key="w") as client:
        client.create("members", kind="linear-pa", n_features=4)
        added = client.add_challenger(
            "members", "c1", kind="dos", params={"rank": 2}, averaging={"interval": 50}
        )
        assert added["name"] == "c1" and added["averaging"]["interval"] == 50
        client.add_challenger("members", "c2", kind="linear-pa", calibration="platt")
        with pytest.raises(lz.MemberExists) as exists:
            client.add_challenger("members", "c1", kind="dos")
        assert exists.value.status == 409 and isinstance(exists.value, lz.Conflict)
        client.feedback("members", X, y)
        listed = client.challengers("members")
        assert [c["name"] for c in listed] == ["c1", "c2"]
        assert listed[0]["examples_learned"] == 600
        assert listed[0]["comparison"]["verdict"] == "better"
        query = X[:5]
        shadow = client.predict("members", query, member="c1", variant="averaged")
        assert (shadow["member"], shadow["variant"]) == ("c1", "averaged")
        served = client.predict("members", query)
        assert (served["member"], served["variant"]) == ("original", "live")
        with pytest.raises(lz.MemberNotFound):
            client.predict("members", query, member="nope")

        call = client._promote("members", "c1")  # one request, sent twice: promoted once
        first, again = client.send(call), client.send(call)
        assert first == again and first["member"] == "c1" and first["promotions"] == 1
        assert sorted(first["challengers"]) == ["c2", "original"]
        assert client.predict("members", query)["member"] == "c1"
        with pytest.raises(lz.MemberServes):
            client.remove_challenger("members", "c1")
        assert client.remove_challenger("members", "c2") is None
        assert [c["name"] for c in client.challengers("members")] == ["original"]
        with pytest.raises(lz.MemberNotFound):
            client.remove_challenger("members", "c2")

        patched = client.set_policy(
            "members", serve="best", drift={"detector": "adwin", "on_drift": "challenger"}
        )
        assert patched["serve"] == "best" and patched["drift"]["detector"] == "adwin"
        promotion = {"auto": True, "confidence": 0.95, "min_examples": 10}
        patched = client.set_policy("members", promotion=promotion)
        assert patched["promotion"] == promotion and patched["drift"]["detector"] == "adwin"
        patched = client.set_policy("members", drift=None)
        assert patched["drift"] is None and patched["serve"] == "best"
        with pytest.raises(ValueError):
            client.set_policy("members")

        assert client.pause("members")["learning"] == {"paused": True, "backlog": 0}
        assert client.feedback("members", X[:10], y[:10])["learned"] == 0
        assert client.model("members")["learning"]["backlog"] == 1
        resumed = client.resume("members")
        assert resumed["learning"] == {"paused": False, "backlog": 0}
        assert resumed["examples_learned"] == 610
        client.pause("members")
        client.feedback("members", X[:10], y[:10])
        dropped = client.set_learning("members", paused=False, discard=True)
        assert dropped["learning"]["backlog"] == 0 and dropped["examples_learned"] == 610

    async def run():
        async with lz.AsyncClient(server, key="w") as client:
            await client.add_challenger("members", "a1", kind="linear-pa")
            names = [c["name"] for c in await client.challengers("members")]
            promoted = await client.promote("members", "original", variant="live")
            await client.remove_challenger("members", "a1")
            return names, promoted

    names, promoted = asyncio.run(run())
    assert names == ["original", "a1"] and promoted["member"] == "original"


def test_predict_splits_rows_into_requests_of_at_most_max_batch(tmp_path):
    """A service whose MAX_BATCH is 7: the client's default (10000) is refused once, the
    service's limit read from the refusal, and 40 rows sent as 6 requests whose answers are
    joined in order; a client told ``max_batch=5`` sends 8 and is never refused; the async
    client alike; other refusals still raise."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, max_batch=7)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 3))
    sent = []

    def counted(client):
        client.http.event_hooks["request"] = [lambda request: sent.append(request.url.path)]
        return client

    with ServerThread(create_app(settings)) as running:
        with lz.Client(running.url) as client:
            client.create("b", kind="linear-pa", n_features=3)
            client.feedback("b", X[:7], np.where(X[:7, 0] > 0, 1, -1))
            one_by_one = [client.predict("b", X[i : i + 1])["predictions"][0] for i in range(40)]
        with counted(lz.Client(running.url)) as client:
            answer = client.predict("b", X)
            assert len(sent) == 7 and client.max_batch == 7  # one refused, six answered
            assert answer["versions"] == [1] * 6 and answer["version"] == 1
            assert (answer["model"], answer["member"], answer["variant"]) == (
                "b",
                "original",
                "live",
            )
            scores = [p["score"] for p in answer["predictions"]]
            assert scores == [p["score"] for p in one_by_one]
            ids = [p["prediction_id"] for p in answer["predictions"]]
            assert len(set(ids)) == 40
            sent.clear()
            single = client.predict("b", X[:7])  # MAX_BATCH rows: one request, its answer
            assert len(sent) == 1 and "versions" not in single and len(single["predictions"]) == 7
            with pytest.raises(lz.ModelNotFound):
                client.predict("nope", X)
        sent.clear()
        with counted(lz.Client(running.url, max_batch=5)) as client:
            listed = client.predict("b", X.tolist(), variant="live")
            assert len(sent) == 8
            assert [p["score"] for p in listed["predictions"]] == scores

        async def run():
            async with lz.AsyncClient(running.url) as client:
                return await client.predict("b", X), client.max_batch

        answer, learned_limit = asyncio.run(run())
        assert learned_limit == 7 and [p["score"] for p in answer["predictions"]] == scores
        with pytest.raises(ValueError):
            lz.Client(running.url, max_batch=0)


def test_feedback_splits_examples_into_requests_of_at_most_max_batch(tmp_path):
    """JSON feedback as predict: a service whose MAX_BATCH is 7 refuses the client's default
    once (nothing learned), and 40 examples go as 6 requests, learned in order (the model
    equals one fed one example at a time), their answers joined; a client told
    ``max_batch=5`` sends 8; prediction ids and the async client alike."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, max_batch=7)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 3))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, 1, -1)
    probe = rng.standard_normal((5, 3))
    sent = []

    def counted(client):
        client.http.event_hooks["request"] = [lambda request: sent.append(request.url.path)]
        return client

    def scores(client, name):
        return [p["score"] for p in client.predict(name, probe)["predictions"]]

    with ServerThread(create_app(settings)) as running:
        with lz.Client(running.url) as client:
            for name in ("one", "split", "five", "ids", "async"):
                client.create(name, kind="linear-pa", n_features=3)
            alone = [client.feedback("one", X[i : i + 1], y[i : i + 1]) for i in range(40)]
        with counted(lz.Client(running.url)) as client:
            answer = client.feedback("split", X, y)
            assert len(sent) == 7 and client.max_batch == 7  # one refused, six answered
            assert answer["model"] == "split" and answer["learned"] == 40
            assert answer["versions"] == [1, 2, 3, 4, 5, 6] and answer["version"] == 6
            assert answer["aggressive"] == sum(a["aggressive"] for a in alone)
            assert answer["results"] == [a["results"][0] for a in alone]
            assert scores(client, "split") == scores(client, "one")
            sent.clear()
            single = client.feedback("split", X[:7], y[:7])  # MAX_BATCH: one request
            assert len(sent) == 1 and "versions" not in single and single["learned"] == 7
            with pytest.raises(lz.ModelNotFound):
                client.feedback("nope", X, y)
            ids = [p["prediction_id"] for p in client.predict("ids", X)["predictions"]]
            by_id = client.feedback("ids", labels=y, prediction_ids=ids)
            assert by_id["learned"] == 40 and scores(client, "ids") == scores(client, "one")
        sent.clear()
        with counted(lz.Client(running.url, max_batch=5)) as client:
            five = client.feedback("five", X.tolist(), y.tolist())
            assert len(sent) == 8 and five["versions"] == list(range(1, 9))
            assert scores(client, "five") == scores(client, "one")

        async def run():
            async with lz.AsyncClient(running.url) as client:
                return await client.feedback("async", X, y), client.max_batch

        answer, learned_limit = asyncio.run(run())
        assert learned_limit == 7 and answer["learned"] == 40
        with lz.Client(running.url) as client:
            assert scores(client, "async") == scores(client, "one")


def test_models_follows_the_pages_of_the_list(tmp_path):
    """``models()`` reads every page of ``GET /v1/models`` (at most 1,000 models a page),
    following ``next``: here pages of 2 over 5 models."""
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    with ServerThread(create_app(settings)) as running:
        names = [f"m{i}" for i in range(5)]
        with lz.Client(running.url) as client:
            for name in reversed(names):
                client.create(name, kind="linear-pa", n_features=2)
            assert [m["name"] for m in client.models(page=2)] == names
            assert [m["name"] for m in client.models()] == names

        async def listed():
            async with lz.AsyncClient(running.url) as client:
                return [m["name"] for m in await client.models(page=2)]

        assert asyncio.run(listed()) == names


def test_keys_are_sent_as_bearer_tokens(server):
    with lz.Client(server) as anonymous, pytest.raises(lz.Unauthorized):
        anonymous.create("k", kind="linear-pa", n_features=2)
    with lz.Client(server, key="wrong") as client, pytest.raises(lz.Forbidden):
        client.create("k", kind="linear-pa", n_features=2)


def test_bulk_upload_of_a9a_as_svmlight_matches_one_request(server):
    X, y = load_svmlight(data_dir() / "a9a" / "a9a", n_features=123)
    X, y = X[:6000], y[:6000]
    with lz.Client(server, key="w") as client:
        for name in ("parts", "whole"):
            client.create(name, kind="linear-pa", n_features=123)
        seen = []
        summary = client.upload(
            "parts", X, y, max_bytes=100_000, progress=lambda d, t: seen.append(d)
        )
        assert summary["requests"] > 3 and summary["learned"] == 6000
        assert seen[-1] == 6000 and seen == sorted(seen)
        client.upload("whole", X, y)
        parts, whole = client.model("parts"), client.model("whole")
        # the same examples in the same order: the same model (the summed loss may differ
        # in its last digit: it is added up per request)
        assert parts["metrics"]["accuracy"] == whole["metrics"]["accuracy"]
        assert parts["metrics"]["loss"] == pytest.approx(whole["metrics"]["loss"], rel=1e-12)
        scores = [client.predict(name, X[:50])["predictions"] for name in ("parts", "whole")]
        assert [p["score"] for p in scores[0]] == [p["score"] for p in scores[1]]
        assert parts["examples_learned"] == 6000


def test_ndjson_upload_with_string_labels_from_an_async_client(server):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    y = np.where(X[:, 0] > 0, "yes", "no")

    async def run():
        async with lz.AsyncClient(server, key="w") as client:
            await client.create("s", kind="linear-pa", n_features=4, classes=["no", "yes"])
            summary = await client.upload("s", X, y, max_bytes=20_000)
            info = await client.model("s")
            predicted = await client.predict("s", X[:3])
            return summary, info, predicted

    summary, info, predicted = asyncio.run(run())
    assert summary["requests"] > 1 and summary["learned"] == 500
    assert info["examples_learned"] == 500 and info["metrics"]["accuracy"] > 0.8
    assert {p["label"] for p in predicted["predictions"]} <= {"no", "yes"}


def test_a_503_while_the_service_starts_is_retried(tmp_path, monkeypatch):
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    with ServerThread(create_app(settings)) as running, lz.Client(running.url) as client:
        client.create("m", kind="linear-pa", n_features=2)
    restored = threading.Event()
    original = main.SnapshotWorker.restore_all
    monkeypatch.setattr(
        main.SnapshotWorker, "restore_all", lambda w: (restored.wait(60), original(w))
    )
    settings = Settings(
        snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600, startup_wait=0.05
    )
    with ServerThread(create_app(settings)) as running:
        threading.Timer(0.5, restored.set).start()
        seen = []
        with lz.Client(running.url, backoff=0.1, on_retry=seen.append) as client:
            assert client.feedback("m", [[1.0, 2.0]], [1])["learned"] == 1
            assert seen and [r.attempt for r in seen] == list(range(1, len(seen) + 1))
            assert {r.response.status_code for r in seen} == {503}
            assert str(seen[0]).startswith("POST /v1/models/m/feedback: 503 ")
            assert client.model("m")["examples_learned"] == 1
        with lz.Client(running.url, retries=0) as client:
            assert client.model("m")["version"] == 1
    restored.set()


def test_a_part_whose_answer_a_sigkill_lost_is_learned_once(tmp_path):
    """The server is stopped between the append of an upload's part and its answer, then
    SIGKILLed and started again on the same port: the client's retry of that part (same
    idempotency key) gets the answer, and the model learned the part once."""
    port = free_port()
    service = ServiceProcess(
        {
            "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
            "LORENTZTRON_SNAPSHOT_INTERVAL": "3600",
            "LORENTZTRON_LOG_LEVEL": "warning",
        },
        tmp_path / "service.log",
    )
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40_000, 20))
    y = np.where(X[:, 0] > 0, 1, -1)
    folder = tmp_path / "snapshots" / ".log" / "m"
    try:
        service.start(port=port)
        with lz.Client(service.url) as client:
            client.create("m", kind="dos", n_features=20, params={"rank": 16, "seed": 3})
        outcome = {}
        uploader = lz.Client(service.url, timeout=120, backoff=0.5, retries=20)
        thread = threading.Thread(target=lambda: outcome.update(s=uploader.upload("m", X, y)))
        thread.start()
        deadline = time.monotonic() + 120
        while whole_frames(folder) == 0:
            assert time.monotonic() < deadline and thread.is_alive(), outcome
            time.sleep(0.001)
        os.kill(service.process.pid, signal.SIGSTOP)
        service.kill()  # the part is in the log, its answer never sent
        service.start(port=port)
        thread.join(timeout=300)
        uploader.close()
        assert outcome["s"]["learned"] == 40_000, outcome
        info = httpx.get(f"{service.url}/v1/models/m").json()
        assert info["examples_learned"] == 40_000
    finally:
        service.kill()
