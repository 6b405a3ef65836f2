"""What the scale-out tests share: models, feedback threads through the api replicas, and
the checks of the final state against the log (``test_sharding``, ``test_cluster_failover``).
"""

from __future__ import annotations

import random
import sys
import threading

import httpx
import numpy as np

from service.durability.feedback_log import decode_record
from service.durability.redis_store import read_blob
from service.durability.store import decode
from service.model.kinds import Limits, plan
from service.model.live import LiveModel
from service.model.spec import spec_from_json
from service.scale.keys import RedisKeys

N_FEATURES = 6


def spec(i: int) -> dict:
    return {
        "name": f"m{i:02d}",
        "kind": "dos",
        "params": {"rank": 2, "seed": i},
        "input": {"n_features": N_FEATURES},
        "averaging": {"interval": 4},
    }


class Feedback:
    """Threads posting small feedback batches to random models through random replicas;
    what was acknowledged (200) is kept per model."""

    def __init__(self, urls: list[str], n_models: int, threads: int = 4):
        self.urls = urls
        self.n_models = n_models
        self.acknowledged: dict[str, list] = {spec(i)["name"]: [] for i in range(n_models)}
        self.refused = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(seed,), daemon=True) for seed in range(threads)
        ]

    def start(self) -> Feedback:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    @property
    def count(self) -> int:
        return sum(len(examples) for examples in self.acknowledged.values())

    def _run(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        pick = random.Random(seed)
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                name = f"m{pick.randrange(self.n_models):02d}"
                X = np.round(rng.standard_normal((2, N_FEATURES)), 3)
                examples = [{"x": x.tolist(), "label": 1 if x[0] > 0 else -1} for x in X]
                try:
                    response = client.post(
                        f"{pick.choice(self.urls)}/v1/models/{name}/feedback",
                        json={"examples": examples},
                    )
                except httpx.HTTPError:
                    response = None
                with self._lock:
                    if response is not None and response.status_code == 200:
                        self.acknowledged[name].extend(
                            (tuple(e["x"]), e["label"]) for e in examples
                        )
                    else:
                        self.refused += 1


def published(client, keys: RedisKeys, names: list[str]) -> bool:
    """Whether every model's latest snapshot includes its whole log (one version per
    record: the log is kept whole in these tests)."""
    for name in names:
        latest = client.get(keys.latest(name))
        if latest is None or int(latest) != client.xlen(keys.log(name)):
            return False
    return True


def replayed(name: str, header: dict, records: list[bytes]) -> LiveModel:
    """The model rebuilt in this process from its create request and its whole log."""
    model_spec = spec_from_json(header["spec"])
    checked = plan(model_spec, Limits(sys.maxsize, sys.maxsize, 50_000))
    live = LiveModel(name, model_spec, checked, 1000)
    live.replay((str(i), record) for i, record in enumerate(records, start=1))
    return live


def check_models(client, keys: RedisKeys, acknowledged: dict[str, list]) -> None:
    """Every acknowledged example is in its model's log; the latest snapshot equals, array
    for array, the model rebuilt from the whole log; its fenced writes came from one lease
    after the other (tokens never go back)."""
    for name, examples in acknowledged.items():
        records = [fields[b"r"] for _, fields in client.xrange(keys.log(name))]
        logged = []
        for record in records:
            batch, targets, _ = decode_record(record)
            dense = np.zeros((batch.n_rows, N_FEATURES))
            for row in range(batch.n_rows):
                span = slice(batch.indptr[row], batch.indptr[row + 1])
                dense[row, batch.indices[span]] = batch.values[span]
            logged += [(tuple(x), 1 if t == 1 else -1) for x, t in zip(dense, targets, strict=True)]
        missing = set(examples) - set(logged)
        assert not missing, (name, len(missing))

        latest = int(client.get(keys.latest(name)))
        header, state = decode(read_blob(client, keys.snapshot(name, latest)))
        assert header["version"] == len(records)
        mine = replayed(name, header, records).estimator.get_state()["arrays"]
        assert set(mine) == set(state["arrays"])
        for array, values in mine.items():
            np.testing.assert_array_equal(state["arrays"][array], values, err_msg=array)

        tokens = []
        for _, fields in client.xrange(keys.writes(name)):
            learner, token = fields[b"lease"].decode().rsplit(" ", 1)
            tokens.append((int(token), learner))
        assert tokens == sorted(tokens), name
        assert len({t for t, _ in tokens}) == len(set(tokens)), name
