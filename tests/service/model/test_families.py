"""The families (``service.model.families``): the label rule of the library through HTTP (the
table of ``tests/labels_table.py``), and the reduction family's bulk path: a batch is learned
by one ``learn_many`` (one-vs-one: progressive) and predicted from one scoring; both agree
with the library's ``learn_one`` loop and its predictions."""

import json
import math

import numpy as np
import pytest

from core.averaging import Averaged
from core.calibration import Calibrated
from core.dos import DoSClassifier
from core.linear import LinearPA
from core.one_vs_one import OneVsOne
from core.one_vs_rest import OneVsRest
from tests.labels_table import LABEL_RULE_CASES
from tests.service.conftest import create

CLASSES = [4, 0, 9, 2]


def blobs(n=150, d=5, seed=0, classes=CLASSES):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((len(classes), d)) * 2.0
    k = rng.integers(len(classes), size=n)
    return centres[k] + rng.standard_normal((n, d)), [classes[i] for i in k]


def svmlight(X, y) -> bytes:
    return "".join(
        f"{label} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(x) if v) + "\n"
        for x, label in zip(X.tolist(), y, strict=True)
    ).encode()


@pytest.mark.parametrize(
    "multiclass,kind,classes",
    [("ovo", "dos", CLASSES), ("ovr", "dos", CLASSES), ("ovo", "linear-pa", ["b", "a", "c"])],
)
def test_bulk_feedback_is_the_learn_one_loop(client, multiclass, kind, classes):
    """Bulk feedback (svmlight, one request) against the library's learn_one loop on the same
    model: the same predictions before each update, losses and progressive accuracy, and
    parameters equal to rounding; predictions of the learned model agree too."""
    X, y = blobs(classes=classes)
    params = {"rank": 2, "seed": 5} if kind == "dos" else {}
    create(
        client, kind=kind, n_features=5, classes=classes, multiclass=multiclass, params=params,
        averaging={"interval": 60},
    )  # fmt: skip
    if isinstance(classes[0], str):
        body = {
            "examples": [{"x": x, "label": label} for x, label in zip(X.tolist(), y, strict=True)]
        }
        response = client.post("/v1/models/m/feedback", json=body)
    else:
        response = client.post(
            "/v1/models/m/feedback", content=svmlight(X, y),
            headers={"content-type": "text/x-svmlight"},
        )  # fmt: skip
    assert response.status_code == 200, response.text
    base = DoSClassifier(n_features=5, **params) if kind == "dos" else LinearPA(n_features=5)
    reduction = OneVsOne if multiclass == "ovo" else OneVsRest
    reference = Averaged(model=reduction(base=Calibrated(model=base), classes=classes), interval=60)
    steps = [reference.learn_one(x, label) for x, label in zip(X, y, strict=True)]
    data = response.json()
    if data["results"] is not None:
        assert [r["predicted"] for r in data["results"]] == [s.predicted for s in steps]
        assert [r["loss"] for r in data["results"]] == pytest.approx([s.loss for s in steps])
    info = client.get("/v1/models/m").json()
    accuracy = np.mean([s.predicted == label for s, label in zip(steps, y, strict=True)])
    assert info["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert info["metrics"]["loss"] == pytest.approx(np.mean([s.loss for s in steps]), rel=1e-9)
    live = client.app.state.components.models.get("m").estimator
    expected, got = reference.get_state(), live.get_state()
    assert expected["scalars"] == got["scalars"]
    for name, array in expected["arrays"].items():
        np.testing.assert_allclose(got["arrays"][name], array, rtol=1e-9, atol=1e-12)
    predicted = client.post(
        "/v1/models/m/predict", json={"instances": [{"x": x} for x in X.tolist()]}
    )
    assert predicted.status_code == 200, predicted.text
    labels = [p["label"] for p in predicted.json()["predictions"]]
    assert labels == reference.predict_many(X, variant="live").tolist()  # the default


def test_the_label_rule_table_through_http(client):
    """Every case of the library's label table (``tests/core/test_labels.py`` runs it on
    ``core.labels``), posted as JSON feedback to a fresh model of those classes (int, str or
    bool): accepted as the same class (the model then predicts it: the one example moved it
    there), or refused with 422 and nothing learned."""
    for number, (classes, label, expected) in enumerate(LABEL_RULE_CASES):
        name = f"rule{number}"
        create(
            client, name=name, kind="linear-pa", n_features=1, classes=classes,
            multiclass="ovr", calibration="none",
        )  # fmt: skip
        body = {"examples": [{"x": [1.0], "label": label}]}
        response = client.post(  # (json.dumps writes NaN as the JSON parsers refuse it)
            f"/v1/models/{name}/feedback", content=json.dumps(body),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        case = (classes, label, expected)
        info = client.get(f"/v1/models/{name}").json()
        if expected is None:
            assert response.status_code == 422, (case, response.text)
            nan = isinstance(label, float) and math.isnan(label)
            assert nan or response.json()["error"]["code"] == "unknown_label", case
            assert info["examples_learned"] == 0, case
            continue
        assert response.status_code == 200, (case, response.text)
        assert info["examples_learned"] == 1, case
        predicted = client.post(
            f"/v1/models/{name}/predict", json={"instances": [{"x": [1.0]}]}
        ).json()["predictions"][0]["label"]
        assert predicted == classes[expected], case
        assert type(predicted) is type(classes[expected]), case  # true stays true, 1 stays 1


def test_boolean_classes_and_what_svmlight_cannot_carry(client):
    """A model of the booleans [false, true] learns JSON true / false; svmlight labels are
    numbers, refused with a reason; booleans are never mixed with other classes."""
    create(client, name="flag", kind="dos", classes=[False, True])
    examples = [{"x": [1, 0, 0], "label": True}, {"x": [0, 1, 0], "label": False}]
    learned = client.post("/v1/models/flag/feedback", json={"examples": examples})
    assert learned.status_code == 200, learned.text
    assert all(type(r["predicted"]) is bool for r in learned.json()["results"])
    info = client.get("/v1/models/flag").json()
    assert info["classes"] == [False, True] and info["examples_learned"] == 2
    svmlight = {"content-type": "text/x-svmlight"}
    response = client.post("/v1/models/flag/feedback", content=b"1 1:0.5\n", headers=svmlight)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unknown_label", error
    assert "a number is never a boolean class" in error["message"], error
    for mixed in ([False, True, 2], [True, "yes"], [0, False]):
        response = client.post(
            "/v1/models",
            json={"name": "mixed", "kind": "dos", "input": {"n_features": 3}, "classes": mixed},
        )
        assert response.status_code == 422, (mixed, response.text)
        assert "boolean classes cannot be mixed" in response.json()["error"]["message"], mixed
