"""Error answers stay small whatever the request held: a message quotes a bounded prefix of
the input it refuses, and a validation error lists a bounded number of problems."""

from __future__ import annotations

from service.http.errors import ECHO_CHARS, MAX_DETAILS, shown
from tests.service.conftest import create


def test_a_huge_key_or_value_is_not_echoed(client):
    """A 100,000-character feature name, field name or value: an answer of a few hundred
    bytes that still names the problem."""
    create(client)
    huge = "k" * 100_000
    for path, body in (
        ("/v1/models/m/predict", {"instances": [{"features": {huge: [1]}}]}),
        ("/v1/models/m/predict", {"instances": [{"x": [1, 2, 3], huge: 1}]}),
        ("/v1/models/m/feedback", {"examples": [{"x": [1, 2, 3], "label": huge}]}),
        ("/v1/models", {"name": "n", "kind": huge, "input": {"n_features": 3}}),
    ):
        answer = client.post(path, json=body)
        assert answer.status_code == 422, answer.text[:300]
        assert len(answer.content) < 4 * ECHO_CHARS + 2000, (path, len(answer.content))
        assert answer.json()["error"]["code"] in ("invalid_input", "unknown_label")


def test_a_validation_error_lists_a_bounded_number_of_problems(client):
    create(client)
    body = {"instances": [{"x": ["a", "b", "c"]} for _ in range(1000)]}
    answer = client.post("/v1/models/m/predict", json=body)
    assert answer.status_code == 422
    details = answer.json()["error"]["details"]
    assert len(details) == MAX_DETAILS and details[0]["field"] == "body.instances.0.x.0"


def test_shown_cuts_long_values():
    assert shown("abc") == "'abc'" and shown([1, 2]) == "[1, 2]"
    assert len(shown("x" * 10**6)) < ECHO_CHARS + 40
    assert len(shown(list(range(10**5)))) < ECHO_CHARS + 40
    assert len(shown([["x" * 1000] * 100])) <= ECHO_CHARS + 3
