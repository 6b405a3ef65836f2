"""Locust users for the lorentztron service: predictions, feedback and mixed traffic.

The same workload as :mod:`deploy.loadtest.loadgen` (synthetic sparse rows with ``--nnz``
non-zeros, binary labels from a fixed random teacher), as locust users for dashboards, ramps
and distributed runs. One model is created when the test starts and deleted when it stops.
Run it from the repository root: locust puts the working directory on the import path, where
this file finds ``deploy.loadtest``. Headless::

    locust -f deploy/loadtest/locustfile.py --headless -u 50 -r 10 -t 30s \\
        --host http://127.0.0.1:8000

    # one kind of user only, a smaller model, CSV output:
    locust -f deploy/loadtest/locustfile.py --headless -u 20 -r 20 -t 20s \\
        --host http://127.0.0.1:8000 --rank 4 --n-features 65536 --csv /tmp/lt PredictUser

The same options as the load generator: ``--key`` (or ``LORENTZTRON_KEY``) for a service with
keys, ``--model-name`` for an existing model (its input size and classes read from the
service); ``--csv PREFIX`` (locust's own) writes the results where you say. For the highest
rate under a latency bound, use ``python -m deploy.loadtest.loadgen --sweep`` (an open loop;
locust's users are a closed one).

User classes (all run, by weight, unless named on the command line):

- ``PredictUser`` (weight 4): one instance per ``POST /v1/models/{name}/predict``;
- ``FeedbackUser`` (weight 1): one labelled example per JSON ``POST .../feedback``;
- ``MixedUser`` (weight 2): 80% predictions, 20% feedback answering one of this user's
  earlier predictions by ``prediction_id`` (``--feedback-fraction``);
- ``BulkUser`` (only when named on the command line): svmlight bodies of ``--batch``
  examples.

Users send the next request as soon as the previous one is answered (no wait time), so the
request rate is set by ``-u``: this is closed-loop load, whose latencies understate what
users would see under an open arrival rate when the server saturates; the load generator's
``--rate`` measures the open-loop case. Needs ``pip install locust`` (the ``loadtest``
extra).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import sys
import uuid

from locust import FastHttpUser, events, task

from deploy.loadtest.loadgen.clients import auth_headers
from deploy.loadtest.loadgen.config import KINDS, LoadConfig, model_options
from deploy.loadtest.loadgen.workload import JSON_TYPE, Workload


class Shared:
    """The model and pre-encoded bodies of this test run (set when the test starts)."""

    workload: Workload | None = None
    model: str | None = None
    created = False
    headers: dict[str, str] = {}


@events.init_command_line_parser.add_listener
def _arguments(parser):
    defaults = LoadConfig()
    parser.add_argument("--model-kind", choices=KINDS, default=defaults.kind)
    parser.add_argument("--rank", type=int, default=defaults.rank)
    parser.add_argument("--n-features", type=int, default=defaults.n_features)
    parser.add_argument("--nnz", type=int, default=defaults.nnz)
    parser.add_argument("--batch", type=int, default=2000, help="BulkUser: examples per body")
    parser.add_argument("--feedback-fraction", type=float, default=defaults.feedback_fraction)
    parser.add_argument(
        "--model-name",
        default="",
        help="use this existing model (its input size and classes are read from the service)",
    )
    parser.add_argument(
        "--key",
        default=os.environ.get("LORENTZTRON_KEY", ""),
        help="bearer key sent with every request ($LORENTZTRON_KEY)",
    )
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback host")


@events.test_start.add_listener
def _create_model(environment, **kwargs):
    options = environment.parsed_options
    bulk = any(user.__name__ == "BulkUser" for user in environment.user_classes)
    config = LoadConfig(
        url=environment.host or "http://127.0.0.1:8000",
        mode="bulk" if bulk else "mixed",
        kind=options.model_kind,
        rank=options.rank,
        n_features=options.n_features,
        nnz=options.nnz,
        batch=options.batch,
        bulk_bodies=2,
        feedback_fraction=options.feedback_fraction,
        allow_remote=options.allow_remote,
    )
    config.check()
    import httpx

    Shared.headers = auth_headers(options.key or None)
    if options.model_name:  # rows and labels that fit the existing model
        response = httpx.get(
            f"{config.url}/v1/models/{options.model_name}", headers=Shared.headers, timeout=60
        )
        if response.status_code != 200:
            raise RuntimeError(f"model {options.model_name!r}: {response.text}")
        extra = model_options(response.json())
        config = dataclasses.replace(config, **extra, nnz=min(config.nnz, extra["n_features"]))
        Shared.workload = Workload(config)
        Shared.model = options.model_name
        return
    Shared.workload = Workload(config)
    Shared.model = f"locust-{uuid.uuid4().hex[:8]}"
    response = httpx.post(
        f"{config.url}/v1/models",
        json=Shared.workload.model_spec(Shared.model),
        headers=Shared.headers,
        timeout=60,
    )
    if response.status_code != 201:
        raise RuntimeError(f"could not create the model: {response.text}")
    Shared.created = True


@events.test_stop.add_listener
def _delete_model(environment, **kwargs):
    if Shared.created:
        import httpx

        httpx.delete(
            f"{environment.host}/v1/models/{Shared.model}", headers=Shared.headers, timeout=60
        )
        Shared.created = False


class _ServiceUser(FastHttpUser):
    abstract = True

    def on_start(self):
        self.random = random.Random()
        self.pending: collections.deque[tuple[str, int]] = collections.deque(maxlen=1000)

    def _headers(self, content_type: bytes) -> dict[str, str]:
        return {"content-type": content_type.decode(), **Shared.headers}

    def _row(self) -> int:
        return self.random.randrange(len(Shared.workload.rows))

    def predict(self, keep_id: bool = False) -> None:
        k = self._row()
        with self.client.post(
            f"/v1/models/{Shared.model}/predict",
            data=Shared.workload.predict_bodies[k],
            headers=self._headers(JSON_TYPE),
            name="predict",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
            elif keep_id:
                prediction_id = response.json()["predictions"][0]["prediction_id"]
                self.pending.append((prediction_id, Shared.workload.labels[k]))

    def feedback(self) -> None:
        if self.pending:
            prediction_id, label = self.pending.popleft()
            body = b'{"examples":[{"prediction_id":"%s","label":%s}]}' % (
                prediction_id.encode(),
                json.dumps(label).encode(),
            )
            name = "feedback (prediction id)"
        else:
            body = Shared.workload.feedback_bodies[self._row()]
            name = "feedback"
        with self.client.post(
            f"/v1/models/{Shared.model}/feedback",
            data=body,
            headers=self._headers(JSON_TYPE),
            name=name,
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")


class PredictUser(_ServiceUser):
    """Single-instance predictions."""

    weight = 4

    @task
    def predict_one(self):
        self.predict()


class FeedbackUser(_ServiceUser):
    """Single-example JSON feedback (features and label)."""

    weight = 1

    @task
    def feedback_one(self):
        self.feedback()


class MixedUser(_ServiceUser):
    """Predictions, and feedback by prediction id for a fraction of them."""

    weight = 2

    @task
    def mixed(self):
        if self.random.random() < self.environment.parsed_options.feedback_fraction:
            self.feedback()
        else:
            self.predict(keep_id=True)


class BulkUser(_ServiceUser):
    """svmlight bodies of ``--batch`` examples (run it by naming it)."""

    # weight 0 keeps it out of the default mix; locust refuses a run whose only class has
    # weight 0, so it counts when named on the command line
    weight = 1 if "BulkUser" in sys.argv else 0

    @task
    def bulk(self):
        bodies = Shared.workload.bulk_bodies
        with self.client.post(
            f"/v1/models/{Shared.model}/feedback",
            data=bodies[self.random.randrange(len(bodies))],
            headers=self._headers(Shared.workload.bulk_type),
            name=f"bulk svmlight ({len(bodies[0].splitlines())} examples)",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
