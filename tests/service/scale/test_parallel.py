"""One model learned by two learners at once (``service.scale.parallel``), as separate
processes on loopback against one Redis: two learners and an api replica. The published
model is, array for array, an in-process reference of the same rounds (each share's records
replayed in a model of its own from the last merged state, merged by
``core.parallel.merge_to_reference``), also after the learner of a share was SIGKILLed in the
middle of a round; the shares show in ``GET /v1/models/{name}``; kinds that do not merge by
aligned averaging are refused."""

from __future__ import annotations

import os
import re
import signal
import sys
import time

import httpx
import numpy as np
import pytest
import redis

from benchmarks.servers import RedisServer, ServiceProcess, start_all, stop_all
from core.features import batch_from_rows
from core.parallel import merge_to_reference
from service.durability.capture import MEMBERS
from service.durability.feedback_log import after, decode_record
from service.durability.redis_store import read_blob
from service.durability.store import decode
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import ChallengerSpec, CreateModel, member_spec
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost, Leases, place
from service.scale.parallel import Rounds
from tests.service.cluster import RedisClusterNodes
from tests.service.conftest import wait_for

TTL = 2.0
K, INTERVAL = 3, 10
SPEC = {
    "name": "m",
    "kind": "dos",
    "params": {"rank": 2, "seed": 3},
    "input": {"n_features": 5},
    "averaging": {"interval": 4},
    "parallel": {"learners": K, "interval": INTERVAL},
}


def fleet(tmp_path, url: str, failpoints: str = "", cluster: bool = False, held: str = ""):
    """Two learners (the first with ``failpoints``, both with the ``hold`` failpoints
    ``held``, their files in ``tmp_path``) and an api replica."""
    common = {
        "LORENTZTRON_FAILPOINTS_DIR": str(tmp_path),
        "LORENTZTRON_REDIS_URL": url,
        "LORENTZTRON_REDIS_CLUSTER": "true" if cluster else "false",
        "LORENTZTRON_LEASE_TTL": str(TTL),
        "LORENTZTRON_PUBLISH_INTERVAL": "0.2",
        "LORENTZTRON_POLL_INTERVAL": "0.3",
        "LORENTZTRON_LOG_TRIM": "false",
        "LORENTZTRON_LOG_LEVEL": "info",
    }
    learners = [
        ServiceProcess(
            {
                **common,
                "LORENTZTRON_ROLE": "learner",
                "LORENTZTRON_FAILPOINTS": ",".join(filter(None, (failpoints * (i == 0), held))),
            },
            tmp_path / f"learner{i}.log",
        )
        for i in range(2)
    ]
    api = ServiceProcess({**common, "LORENTZTRON_ROLE": "api"}, tmp_path / "api.log")
    return learners, api


def post_feedback(url: str, n: int, seed: int, rows: int = 1) -> None:
    """``n`` requests of 1 to ``rows`` examples each, in order."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        X = rng.standard_normal((int(rng.integers(1, rows + 1)), 5))
        examples = [{"x": x.tolist(), "label": 1 if x[0] + 0.3 * x[1] > 0 else -1} for x in X]
        response = httpx.post(f"{url}/v1/models/m/feedback", json={"examples": examples})
        assert response.status_code == 200, response.text


def rounds_of(records: list, interval: int) -> list[list]:
    """The log's records cut into rounds: a round ends with the record at which its
    examples reach ``interval`` (the last, incomplete one left out)."""
    rounds, current, examples = [], [], 0
    for position, record in records:
        current.append((position, record))
        examples += decode_record(record)[0].n_rows
        if examples >= interval:
            rounds.append(current)
            current, examples = [], 0
    return rounds


def reference(
    client,
    keys: RedisKeys,
    k: int,
    interval: int,
    challenger: tuple[int, dict] | None = None,
    skipped: frozenset = frozenset(),
) -> tuple:
    """The model after the log's complete rounds, computed here from the model as created:
    example e of a round to share e mod k, learned in a copy per share from the round's
    start, each member's copies merged to its start (``core.parallel.merge_to_reference``);
    ``challenger``: (round, spec) of a challenger added before that round; ``skipped``: the
    positions of records discarded. Each member's merged state, and the position of the
    last round's end."""
    records = [(i.decode(), f[b"r"]) for i, f in client.xrange(keys.log("m"))]
    records = [(i, r) for i, r in records if i not in skipped]
    model = member_spec(CreateModel(**SPEC))
    limits = Limits(sys.maxsize, sys.maxsize, 50_000)
    checked = plan(model, limits)
    merged = {"original": LiveModel("m", model, checked, 1000).estimator.get_state()}
    rounds = rounds_of(records, interval)
    for r, part in enumerate(rounds):
        copies = [LiveModel("m", model, checked, 1000) for _ in range(k)]
        if challenger is not None and r >= challenger[0]:
            spec = ChallengerSpec(**challenger[1]).of(model)
            for copy in copies:
                copy.group.add(copy.new_member(spec, plan(spec, limits), challenger[1]["name"]))
            if r == challenger[0]:
                merged[challenger[1]["name"]] = (
                    copies[0].group.challengers()[0].estimator.get_state()
                )
        for copy in copies:
            for member in copy.group.members():
                member.estimator.set_state(merged[member.name])
        seen = 0
        for position, record in part:
            batch, targets, _ = decode_record(record)
            for row in range(batch.n_rows):
                one = batch_from_rows([batch.row(row)])
                copies[(seen + row) % k].learn_part(position, one, targets[row : row + 1])
            seen += batch.n_rows
        merged = {
            name: merge_to_reference(
                [c.group.member(name).estimator.get_state() for c in copies], merged[name]
            )
            for name in merged
        }
    return merged, rounds[-1][-1][0]


def latest(client, keys: RedisKeys) -> tuple[dict, dict] | None:
    version = client.get(keys.latest("m"))
    if version is None:
        return None
    return decode(read_blob(client, keys.snapshot("m", int(version))))


def merged_through(client, keys: RedisKeys, position: str) -> bool:
    found = latest(client, keys)
    return found is not None and found[0]["log_position"] == position


def pid_of(lease: bytes | None) -> str | None:
    """The process id in a lease's value, ``"<host>-<pid>-<hex> <token>"`` (host names may
    hold hyphens)."""
    return None if lease is None else lease.decode().split(" ")[0].rsplit("-", 2)[1]


def owner_url(client, keys: RedisKeys, learners: list[ServiceProcess]) -> str:
    """The URL of the learner holding the model's own lease (changes are made there)."""
    owner = pid_of(client.get(keys.lease("m")))
    return next(p.url for p in learners if str(p.process.pid) == owner)


def assert_members(client, keys: RedisKeys, expected: dict) -> dict:
    """The latest snapshot holds each member's ``expected`` state (the champion's, then each
    challenger's blob); its header."""
    header, state = latest(client, keys)
    assert_equal_states(state, expected.pop("original"))
    for name, members in expected.items():
        _, saved = decode(state["service"]["arrays"][MEMBERS + name].tobytes())
        assert_equal_states(saved, members)
    return header


def assert_equal_states(state: dict, expected: dict) -> None:
    assert set(state["arrays"]) == set(expected["arrays"])
    for name, values in expected["arrays"].items():
        np.testing.assert_array_equal(state["arrays"][name], values, err_msg=name)


@pytest.mark.parametrize("cluster", [False, True], ids=["redis", "cluster"])
def test_two_learners_learn_one_model_and_merge_it_as_the_reference_does(tmp_path, cluster):
    """Three shares on two learners (one holds two shares of the model), on one Redis and
    on a three-master Redis Cluster (a share's keys are in a slot of their own)."""
    if cluster:
        server = RedisClusterNodes(tmp_path / "cluster", masters=3).start()
        client = redis.RedisCluster.from_url(server.url)
    else:
        server = RedisServer(tmp_path)
        server.start()
        client = redis.Redis.from_url(server.url)
    learners, api = fleet(tmp_path, server.url, cluster=cluster)
    keys = RedisKeys()
    try:
        start_all((*learners, api))
        created = httpx.post(f"{api.url}/v1/models", json=SPEC)
        assert created.status_code == 201, created.text
        assert created.json()["parallel"]["learners"] == K
        post_feedback(api.url, 20, seed=0, rows=3)  # rounds cut inside requests
        # exactly once with a key: the retry is answered again, the log holds it once
        keyed = {"examples": [{"x": [0.5, -1.0, 2.0, 0.0, 1.0], "label": 1}] * 2}
        headers = {"Idempotency-Key": "once"}
        answers = [
            httpx.post(f"{api.url}/v1/models/m/feedback", json=keyed, headers=headers)
            for _ in range(2)
        ]
        assert [a.status_code for a in answers] == [200, 200]
        assert answers[1].headers.get("Idempotent-Replayed") == "true"
        assert answers[0].json() == answers[1].json()
        post_feedback(api.url, 20, seed=1, rows=3)
        assert client.xlen(keys.log("m")) == 41
        ends = [i.decode() for i, _ in client.xrange(keys.log("m"))]
        expected, end = reference(client, keys, K, INTERVAL)
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        header, state = latest(client, keys)
        assert_equal_states(state, expected["original"])

        info = httpx.get(f"{api.url}/v1/models/m").json()
        wait_for(lambda: version_at(api.url) == header["version"], timeout=30)
        info = httpx.get(f"{api.url}/v1/models/m").json()
        learned = sum(
            decode_record(f[b"r"])[0].n_rows for _, f in client.xrange(keys.log("m"), max=end)
        )
        assert info["examples_learned"] == learned
        shares = info["parallel"]["shares"]
        assert [s["share"] for s in shares] == list(range(K))
        ids = {m.decode() for m in client.zrange(keys.learners, 0, -1)}
        assert all(s["learner"] in ids for s in shares)
        assert len({s["learner"] for s in shares}) == 2  # (placed on both learners)
        assert all(s["position"] == ends[-1] for s in shares)  # (the last round read)

        refused = httpx.post(
            f"{api.url}/v1/models",
            json={**SPEC, "name": "q", "kind": "pqr", "params": {}, "averaging": None},
        )
        assert refused.status_code == 422, refused.text
        assert "cannot be learned in parallel" in refused.json()["error"]["message"]
    finally:
        stop_all((api, *learners))
        server.stop()


def test_a_parallel_model_of_one_share_merges_as_a_single_learner(tmp_path):
    """``learners: 1`` (the degenerate case): one share learns every example and the owner
    "merges" it alone, its aligned state (the same model under a symmetry), counted once."""
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url)
    client, keys = redis.Redis.from_url(server.url), RedisKeys()
    try:
        start_all((*learners, api))
        spec = {**SPEC, "parallel": {"learners": 1, "interval": INTERVAL}}
        assert httpx.post(f"{api.url}/v1/models", json=spec).status_code == 201
        post_feedback(api.url, 2 * INTERVAL + 3, seed=4)
        expected, end = reference(client, keys, 1, INTERVAL)
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        header, state = latest(client, keys)
        assert_equal_states(state, expected["original"])
        wait_for(lambda: version_at(api.url) == header["version"], timeout=30)
        learned = sum(
            decode_record(f[b"r"])[0].n_rows for _, f in client.xrange(keys.log("m"), max=end)
        )
        assert httpx.get(f"{api.url}/v1/models/m").json()["examples_learned"] == learned
    finally:
        stop_all((api, *learners))
        server.stop()


def version_at(url: str) -> int | None:
    response = httpx.get(f"{url}/v1/models/m", timeout=5)
    return response.json()["version"] if response.status_code == 200 else None


def stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("how", ["killed", "stalled"])
def test_a_share_whose_learner_dies_mid_round_is_taken_over_and_learned_again(tmp_path, how):
    """The learner of a share stops between learning its round and writing it (failpoint
    ``parallel.round``), then is SIGKILLed, or resumed once another learner took its
    leases: its write is then refused (fenced). Either way its leases are taken over within
    twice the TTL of its stop, and the published model is the reference's, bit for bit."""
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url, failpoints="parallel.round=stop*1")
    client, keys = redis.Redis.from_url(server.url), RedisKeys()
    victim = learners[0]
    try:
        start_all((*learners, api))
        assert httpx.post(f"{api.url}/v1/models", json=SPEC).status_code == 201
        post_feedback(api.url, INTERVAL, seed=1)
        pid = victim.process.pid
        wait_for(lambda: stopped(pid), timeout=60)  # its share learned, not yet written
        since = time.monotonic()
        held = [
            name
            for name in ("m", *(f"m/{share}" for share in range(K)))
            if pid_of(client.get(keys.lease(name))) == str(pid)
        ]
        assert any("/" in name for name in held)
        if how == "killed":
            os.kill(pid, signal.SIGKILL)
        survivor = next(
            m.decode() for m in client.zrange(keys.learners, 0, -1) if f"-{pid}-" not in m.decode()
        )
        wait_for(
            lambda: all(
                (client.get(keys.lease(name)) or b"").decode().startswith(survivor) for name in held
            ),
            timeout=4 * TTL,
            period=0.05,
        )
        assert time.monotonic() - since <= 2 * TTL
        if how == "stalled":
            os.kill(pid, signal.SIGCONT)
            refused = "the write of its round was refused"
            wait_for(lambda: refused in (tmp_path / "learner0.log").read_text(), timeout=30)
            assert fenced_writes(victim.url) >= 1
        post_feedback(api.url, 2 * INTERVAL, seed=2)
        expected, end = reference(client, keys, K, INTERVAL)
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        assert_equal_states(latest(client, keys)[1], expected["original"])
    finally:
        stop_all((api, *(learners if how == "stalled" else learners[1:])))
        server.stop()


def fenced_writes(url: str) -> float:
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    found = re.search(r"^lorentztron_fenced_writes_total (\S+)$", metrics, flags=re.M)
    return float(found.group(1)) if found else 0.0


def test_a_challenger_of_a_parallel_model_learns_the_same_way(tmp_path):
    """A challenger added on the model's owner between two rounds: from the next round on,
    every share learns it beside the champion and the merge averages each member apart."""
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url)
    client, keys = redis.Redis.from_url(server.url), RedisKeys()
    challenger = {"name": "c1", "kind": "linear-pa", "params": {"C": 0.5}}
    try:
        start_all((*learners, api))
        assert httpx.post(f"{api.url}/v1/models", json=SPEC).status_code == 201
        post_feedback(api.url, 2 * INTERVAL, seed=3)  # two rounds exactly
        _, end = reference(client, keys, K, INTERVAL)
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        at = owner_url(client, keys, learners)
        refused = httpx.post(f"{at}/v1/models/m/challengers", json={"name": "q", "kind": "pqr"})
        assert refused.status_code == 422, refused.text
        assert "would not merge" in refused.json()["error"]["message"]
        added = httpx.post(f"{at}/v1/models/m/challengers", json=challenger)
        assert added.status_code == 201, added.text
        post_feedback(api.url, 15, seed=4, rows=3)
        expected, end = reference(client, keys, K, INTERVAL, challenger=(2, challenger))
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        header = assert_members(client, keys, expected)

        wait_for(lambda: version_at(api.url) == header["version"], timeout=30)
        [listed] = httpx.get(f"{api.url}/v1/models/m/challengers").json()["challengers"]
        learned = sum(
            decode_record(f[b"r"])[0].n_rows
            for i, f in client.xrange(keys.log("m"))
            if after(i.decode(), header_of_round(client, keys, 2)) and not after(i.decode(), end)
        )
        assert listed["examples_learned"] == learned
    finally:
        stop_all((api, *learners))
        server.stop()


def header_of_round(client, keys: RedisKeys, rounds: int) -> str:
    """The position where the log's first ``rounds`` rounds end."""
    records = [(i.decode(), f[b"r"]) for i, f in client.xrange(keys.log("m"))]
    return rounds_of(records, INTERVAL)[rounds - 1][-1][0]


def test_a_paused_parallel_model_learns_its_backlog_on_resume_or_discards_it(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url)
    client, keys = redis.Redis.from_url(server.url), RedisKeys()

    def positions() -> list[str]:
        return [i.decode() for i, _ in client.xrange(keys.log("m"))]

    try:
        start_all((*learners, api))
        assert httpx.post(f"{api.url}/v1/models", json=SPEC).status_code == 201
        post_feedback(api.url, INTERVAL, seed=5)
        wait_for(lambda: merged_through(client, keys, positions()[-1]), timeout=60)
        at = owner_url(client, keys, learners)

        def learning(body: dict) -> None:
            response = httpx.post(f"{at}/v1/models/m/learning", json=body)
            assert response.status_code == 200, response.text

        def backlog() -> int:
            return httpx.get(f"{at}/v1/models/m").json()["learning"]["backlog"]

        # paused: logged, not learned; resumed: the shares learn the backlog
        learning({"paused": True})
        paused = int(client.get(keys.latest("m")))
        post_feedback(api.url, 7, seed=6)
        wait_for(lambda: backlog() == 7, timeout=30)
        assert int(client.get(keys.latest("m"))) == paused  # (nothing merged)
        learning({"paused": False})
        post_feedback(api.url, INTERVAL - 7, seed=7)
        expected, end = reference(client, keys, K, INTERVAL)
        assert end == positions()[-1]
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        assert_equal_states(latest(client, keys)[1], expected["original"])

        # paused again, and resumed discarding what was logged meanwhile
        learning({"paused": True})
        before = set(positions())
        post_feedback(api.url, 5, seed=8)
        wait_for(lambda: backlog() == 5, timeout=30)
        learning({"paused": False, "discard": True})
        skipped = frozenset(set(positions()) - before)
        post_feedback(api.url, INTERVAL, seed=9)
        expected, end = reference(client, keys, K, INTERVAL, skipped=skipped)
        assert end == positions()[-1]
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        assert_equal_states(latest(client, keys)[1], expected["original"])
    finally:
        stop_all((api, *learners))
        server.stop()


def test_a_shares_round_is_written_only_under_its_lease(tmp_path):
    """A learner that lost a share's lease (another took it) cannot write its round: the
    write is refused and the other's round stays."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        client, keys = redis.Redis.from_url(server.url), RedisKeys()
        rounds = Rounds(client, keys)
        first = Leases(client, keys, "learner-a", ttl=0.2).acquire("m/1")
        rounds.write("m", 1, first.value, {"meta": b"a"})
        wait_for(lambda: client.get(keys.lease("m/1")) is None, timeout=5)  # expired
        second = Leases(client, keys, "learner-b", ttl=10).acquire("m/1")
        rounds.write("m", 1, second.value, {"meta": b"b", "aligned:original": b"\0" * 8})
        with pytest.raises(LeaseLost):
            rounds.write("m", 1, first.value, {"meta": b"a"})
        assert client.hgetall(keys.model("m/1", "round")) == {
            b"meta": b"b",
            b"aligned:original": b"\0" * 8,
        }
        assert first.value != second.value
    finally:
        server.stop()


def test_a_change_made_while_the_owner_merges_is_kept_and_the_round_learned_again(tmp_path):
    """A challenger added on the owner after it read the shares' rounds and before it merged
    them: the merge of the rounds learned without it is dropped (the model is not at their
    version any more), the shares learn the round again with it, and that merge is kept."""
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url, held="parallel.merge=hold*1")
    client, keys = redis.Redis.from_url(server.url), RedisKeys()
    challenger = {"name": "c1", "kind": "dos", "params": {"rank": 1, "seed": 5}}
    try:
        start_all((*learners, api))
        assert httpx.post(f"{api.url}/v1/models", json=SPEC).status_code == 201
        post_feedback(api.url, INTERVAL, seed=10)  # one round
        held = tmp_path / "parallel.merge"
        wait_for(held.exists, timeout=60)
        at = owner_url(client, keys, learners)
        added = httpx.post(f"{at}/v1/models/m/challengers", json=challenger)
        assert added.status_code == 201, added.text
        held.unlink()
        expected, end = reference(client, keys, K, INTERVAL, challenger=(0, challenger))
        wait_for(lambda: merged_through(client, keys, end), timeout=60)
        assert_members(client, keys, expected)
    finally:
        stop_all((api, *learners))
        server.stop()


def test_a_learner_keeps_a_new_model_while_the_other_has_yet_to_take_its_share(tmp_path):
    """A parallel model placed on two learners: the model and share 1 on one (A), share 0 on
    the other (B). Both learners are held before they take what they placed (failpoint
    ``learner.placement``), A released round by round, B not: A takes its two and, seeing B
    still without its share, does not count itself two above B and hand the model over
    (share 0 counts for B, where it is placed). The model never changes hands and each
    share ends on its own learner."""
    server = RedisServer(tmp_path)
    server.start()
    learners, api = fleet(tmp_path, server.url)
    holds = []
    for i, process in enumerate((*learners, api)):
        process.env["LORENTZTRON_LEASE_TTL"] = "10"  # (no take of a model free for a TTL)
        if process is not api:
            holds.append(tmp_path / f"holds{i}")
            holds[-1].mkdir()
            process.env["LORENTZTRON_FAILPOINTS"] = "learner.placement=hold*4"
            process.env["LORENTZTRON_FAILPOINTS_DIR"] = str(holds[-1])
    client, keys = redis.Redis.from_url(server.url), RedisKeys()
    units = ["m", "m/0", "m/1"]

    def holder(unit: str) -> str | None:
        value = client.get(keys.lease(unit))
        return None if value is None else value.decode()

    def next_round(hold) -> None:
        """Release a learner held before it takes, and wait until it is held again (its
        next placement round; until then, it has decided its handovers)."""
        (hold / "learner.placement").unlink()
        wait_for((hold / "learner.placement").exists, timeout=30)

    try:
        start_all((*learners, api))
        for hold in holds:  # (each held in its first round)
            wait_for((hold / "learner.placement").exists, timeout=30)
        body = {**SPEC, "parallel": {"learners": 2, "interval": INTERVAL}}
        assert httpx.post(f"{api.url}/v1/models", json=body).status_code == 201
        ids = sorted(m.decode() for m in client.zrange(keys.learners, 0, -1))
        placed = place(units, dict.fromkeys(units), ids)
        assert placed["m"] == placed["m/1"] != placed["m/0"]
        a = next(i for i, p in enumerate(learners) if f"-{p.process.pid}-" in f"-{placed['m']}-")
        next_round(holds[a])  # (its first round placed nothing: the model was not there)
        next_round(holds[a])  # takes the model and share 1
        taken = holder("m")
        assert taken.startswith(placed["m"] + " ") and holder("m/1") is not None
        assert holder("m/0") is None  # (B is held)
        next_round(holds[a])  # decides its handovers with share 0 still free
        assert holder("m") == taken
        (holds[a] / "learner.placement").unlink()  # (its last hold)
        b = holds[1 - a] / "learner.placement"
        for _ in range(4):
            wait_for(b.exists, timeout=30)
            b.unlink()
        wait_for(lambda: None not in [holder(unit) for unit in units], timeout=30)
        assert holder("m") == taken  # never handed over
        owners = [holder(unit).rsplit(" ", 1)[0] for unit in units]
        assert owners == [placed[unit] for unit in units]
    finally:
        for hold in holds:
            (hold / "learner.placement").unlink(missing_ok=True)
        stop_all((api, *learners))
        server.stop()
