"""Tracing (service.ops.tracing): spans exported to a real OTLP/HTTP receiver by the service
running as a process, the client's ``traceparent`` honoured; in roles mode, the learner's
span linked to the api request that logged the record; off and import-free when the
variables are unset."""

from __future__ import annotations

import ast
import gzip
import logging
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis

import service
from benchmarks.servers import RedisServer, ServiceProcess, start_all, stop_all
from core.features import CSRBatch
from service.durability.feedback_log import encode_record
from service.durability.redis_log import RedisLog
from service.main import create_app
from service.ops import tracing
from service.scale.keys import RedisKeys
from tests.service.conftest import TestClient, create, wait_for
from tests.service.scale.test_roles import version
from tests.service.server import roles

PREDICT = "POST /v1/models/{name}/predict"
FEEDBACK = "POST /v1/models/{name}/feedback"
INFER = "POST /v2/models/{name}/infer"
SERVER = 2  # opentelemetry.proto.trace.v1.Span.SPAN_KIND_SERVER
CONSUMER = 5  # ... SPAN_KIND_CONSUMER


class Receiver:
    """An OTLP/HTTP trace receiver on a free port: every span POSTed to /v1/traces, as
    dicts (trace_id, span_id and parent as hex, name, kind)."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list[dict] = []
        self.paths: list[str] = []
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans = [
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "attributes": {
                            a.key: getattr(a.value, a.value.WhichOneof("value"))
                            for a in span.attributes
                        },
                        "service": {
                            a.key: a.value.string_value for a in resource.resource.attributes
                        }.get("service.name"),
                        "links": [
                            {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                            for link in span.links
                        ],
                    }
                    for resource in request.resource_spans
                    for scope in resource.scope_spans
                    for span in scope.spans
                ]
                with lock:
                    receiver.paths.append(self.path)
                    receiver.spans.extend(spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, found, timeout: float = 20.0):
        """The first truthy ``found(spans)`` (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            result = found(list(self.spans))
            if result or time.monotonic() > deadline:
                assert result, f"not exported in {timeout} s: {self.spans}"
                return result
            time.sleep(0.05)


def traceparent() -> tuple[str, str, str]:
    """A W3C traceparent of a fresh trace: (header, trace id, the client's span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def test_spans_reach_an_otlp_receiver_as_children_of_the_client_span(tmp_path):
    with Receiver() as receiver:
        env = {
            "LORENTZTRON_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
            "LORENTZTRON_LOG_LEVEL": "warning",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": None,
            "OTEL_SERVICE_NAME": None,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with ServiceProcess(env, tmp_path / "service.log").start() as server:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                spec = {"name": "m", "kind": "dos", "input": {"n_features": 3}}
                assert http.post("/v1/models", json={**spec, "params": {"rank": 2}}).is_success
                header, predict_trace, predict_parent = traceparent()
                predicted = http.post(
                    "/v1/models/m/predict",
                    json={"instances": [{"x": [1, 0, 0]}]},
                    headers={"traceparent": header},
                )
                assert predicted.status_code == 200, predicted.text
                header, feedback_trace, feedback_parent = traceparent()
                learned = http.post(
                    "/v1/models/m/feedback",
                    json={"examples": [{"x": [0, 1, 0], "label": 1}]},
                    headers={"traceparent": header},
                )
                assert learned.status_code == 200, learned.text
                header, infer_trace, infer_parent = traceparent()
                inferred = http.post(
                    "/v2/models/m/infer",
                    json={
                        "inputs": [
                            {"name": "x", "shape": [1, 3], "datatype": "FP64", "data": [1, 0, 0]}
                        ]
                    },
                    headers={"traceparent": header},
                )
                assert inferred.status_code == 200, inferred.text

            def named(spans, name, trace_id=None):
                return [s for s in spans if s["name"] == name and trace_id in (None, s["trace_id"])]

            def feedback_done(spans):
                children = [s for s in spans if s["trace_id"] == feedback_trace]
                names = {s["name"] for s in children}
                wanted = {FEEDBACK, "feedback.parse", "feedback.append"}
                wanted |= {"feedback.learn", "feedback.fsync"}
                return children if wanted <= names else None

            receiver.wait_for(lambda spans: named(spans, PREDICT, predict_trace))
            receiver.wait_for(lambda spans: named(spans, INFER, infer_trace))
            feedback = receiver.wait_for(feedback_done)
            receiver.wait_for(lambda spans: named(spans, "snapshot.write"))

    spans = receiver.spans
    assert set(receiver.paths) == {"/v1/traces"}
    assert {s["service"] for s in spans} == {"lorentztron"}
    [predict] = named(spans, PREDICT, predict_trace)
    assert predict["parent"] == predict_parent and predict["kind"] == SERVER
    [infer] = named(spans, INFER, infer_trace)
    assert infer["parent"] == infer_parent and infer["kind"] == SERVER
    [server_span] = named(feedback, FEEDBACK)
    assert server_span["parent"] == feedback_parent and server_span["kind"] == SERVER
    # (an append tried on the event loop that the log would have made wait is marked
    # deferred, and done again in a handler thread)
    feedback = [s for s in feedback if not s["attributes"].get("deferred")]
    for name in ("feedback.parse", "feedback.append", "feedback.learn", "feedback.fsync"):
        [child] = named(feedback, name)
        assert child["parent"] == server_span["span_id"], (name, feedback)
    # the request span of another trace never adopts these children
    assert all(s["trace_id"] != feedback_trace for s in named(spans, "snapshot.write"))


def test_the_learners_span_links_to_the_api_request_that_logged_the_record(tmp_path):
    """Roles mode, an api and a learner process over a real Redis: the api logs a feedback
    request (its client's ``traceparent``) with its trace context in the stream entry, and
    the learner's ``feedback.learned`` span, in a trace of its own, links to that request's
    server span; an entry without a traceparent (as an api without tracing, or before the
    field existed, writes it) is learned all the same."""
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    with Receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": None,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "LORENTZTRON_LOG_TRIM": "false",  # (the entries read at the end)
        }
        learner, [api] = roles(redis_server.url, tmp_path, replicas=1, env=env)
        learner.env["OTEL_SERVICE_NAME"], api.env["OTEL_SERVICE_NAME"] = "learner", "api"
        store = redis.Redis.from_url(redis_server.url)
        keys = RedisKeys()
        try:
            start_all((learner, api))
            spec = {"name": "m", "kind": "dos", "input": {"n_features": 3}}
            assert httpx.post(f"{api.url}/v1/models", json=spec).status_code == 201
            wait_for(lambda: version(learner.url) == 0, timeout=30)
            traces = []  # (trace id, client span id) of a plain and of a keyed request
            for headers in ({}, {"Idempotency-Key": "k1"}):
                header, trace_id, client_span = traceparent()
                logged = httpx.post(
                    f"{api.url}/v1/models/m/feedback",
                    json={"examples": [{"x": [0, 1, 0], "label": 1}]},
                    headers={"traceparent": header, **headers},
                )
                assert logged.status_code == 200 and logged.json()["logged"] == 1, logged.text
                traces.append((trace_id, client_span))
            untraced = (CSRBatch(np.array([0, 1]), np.array([2]), np.array([1.0])), np.array([0]))
            incarnation = store.get(keys.incarnation("m")).decode()
            RedisLog(store).append_many("m", [encode_record(*untraced)], incarnation)
            wait_for(lambda: version(learner.url) == 3, timeout=30)  # all three learned
            entries = [fields for _, fields in store.xrange(keys.log("m"))]
            assert [sorted(fields) for fields in entries] == [[b"r", b"t"]] * 2 + [[b"r"]]
            assert [e[b"t"].decode().split("-")[1] for e in entries[:2]] == [t for t, _ in traces]

            def learned_spans(spans):
                found = [s for s in spans if s["name"] == "feedback.learned"]
                linked = {link["trace_id"] for s in found for link in s["links"]}
                return found if {t for t, _ in traces} <= linked else None

            requests = [
                receiver.wait_for(lambda spans, t=t: named(spans, FEEDBACK, t)) for t, _ in traces
            ]
            learned = receiver.wait_for(learned_spans)
        finally:
            stop_all((api, learner))
            redis_server.stop()
    links = []
    for span in learned:
        assert span["service"] == "learner" and span["kind"] == CONSUMER
        assert span["parent"] == "" and span["attributes"]["model"] == "m"  # traces of their own
        assert span["attributes"]["records"] >= len(span["links"])
        links += span["links"]
    assert sum(span["attributes"]["records"] for span in learned) == 3
    for [request], (trace_id, client_span) in zip(requests, traces, strict=True):
        assert request["service"] == "api" and request["parent"] == client_span
        [append] = named(receiver.spans, "feedback.append", trace_id)  # (logged, not learned)
        assert append["service"] == "api" and append["parent"] == request["span_id"]
        assert all(span["trace_id"] != trace_id for span in learned)
    # each request's server span (in the api's process) is linked from the learner's span
    assert links == [{"trace_id": r["trace_id"], "span_id": r["span_id"]} for [r] in requests]


def named(spans, name, trace_id=None):
    return [s for s in spans if s["name"] == name and trace_id in (None, s["trace_id"])]


#: the packages of the extra ``otel`` (FastAPI 0.165 itself depends on opentelemetry-api and
#: imports the API in its lifespan, whatever the service does: that part is not ours)
EXTRA = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.proto")


def _extra(name: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in EXTRA)


class _Refuse:
    """A meta path finder that records and refuses every import of the extra's packages."""

    def __init__(self):
        self.asked: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if _extra(name):
            self.asked.append(name)
            raise ImportError(f"refused by the test: {name}")
        return None


@pytest.fixture
def no_opentelemetry(monkeypatch):
    """The SDK and exporter unimported (for the test's duration) and any import of them
    refused and recorded; the variables unset."""
    for name in tracing.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in sys.modules if _extra(n)]:
        monkeypatch.delitem(sys.modules, name)
    refuse = _Refuse()
    monkeypatch.setattr(sys, "meta_path", [refuse, *sys.meta_path])
    yield refuse
    tracing.shutdown()


def test_without_the_variables_the_sdk_is_not_imported(settings, no_opentelemetry):
    with TestClient(create_app(settings)) as client:
        create(client)
        predicted = client.post("/v1/models/m/predict", json={"instances": [{"x": [1, 0, 0]}]})
        assert predicted.status_code == 200
        learned = client.post(
            "/v1/models/m/feedback", json={"examples": [{"x": [0, 1, 0], "label": 1}]}
        )
        assert learned.status_code == 200
        assert tracing.TRACER is None
    assert no_opentelemetry.asked == []
    assert not [n for n in sys.modules if _extra(n)]


def test_only_the_tracing_setup_imports_opentelemetry():
    """No module of the service imports opentelemetry (API or SDK) but ``tracing.setup``,
    run only when a variable asks for tracing."""
    root = Path(service.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                if name.split(".")[0] == "opentelemetry":
                    found.append((path.relative_to(root).as_posix(), node.lineno, name))
    setup = {
        (n.lineno, n.end_lineno)
        for n in ast.walk(ast.parse((root / "ops/tracing.py").read_text()))
        if isinstance(n, ast.FunctionDef) and n.name == "setup"
    }
    [(first, last)] = setup
    outside = [f for f in found if not (f[0] == "ops/tracing.py" and first <= f[1] <= last)]
    assert outside == []
    assert found  # (the setup's own imports are seen)


def test_variable_set_without_the_packages_is_one_warning_and_off(
    monkeypatch, no_opentelemetry, caplog
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    with caplog.at_level(logging.WARNING, logger="lorentztron"):
        assert tracing.setup() is False
    assert tracing.TRACER is None
    [record] = [r for r in caplog.records if "tracing off" in r.getMessage()]
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in record.getMessage()
    assert tracing.span("x") is tracing.server("y", {}) is tracing.attached(tracing.context())
