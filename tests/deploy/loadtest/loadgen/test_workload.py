"""The synthetic workload: sparse rows as documented, labels of the model's kind, and bulk
bodies in the format the model's labels need."""

from __future__ import annotations

import json

from deploy.loadtest.loadgen.config import LoadConfig
from deploy.loadtest.loadgen.workload import NDJSON_TYPE, SVMLIGHT_TYPE, Workload


def test_rows_and_bodies_are_sparse_sorted_and_seeded():
    config = LoadConfig(pool=50, n_features=100, nnz=7, seed=3)
    workload = Workload(config)
    assert len(workload.rows) == len(workload.predict_bodies) == 50
    for indices, values, label in workload.rows:
        assert indices == sorted(set(indices)) and len(indices) == 7
        assert all(0 <= j < 100 for j in indices) and all(values) and label in (-1, 1)
    indices, values, label = workload.rows[0]
    assert json.loads(workload.feedback_bodies[0]) == {
        "examples": [{"indices": indices, "values": values, "label": label}]
    }
    assert Workload(config).rows == workload.rows  # the seed fixes the workload


def test_labels_follow_the_models_classes():
    classes = ["ham", "spam", "eggs"]
    config = LoadConfig(mode="bulk", pool=300, batch=5, n_features=64, nnz=4, classes=classes)
    workload = Workload(config)
    assert {label for *_, label in workload.rows} == set(classes)
    assert workload.bulk_type == NDJSON_TYPE  # svmlight labels are numbers
    first = json.loads(workload.bulk_bodies[0].splitlines()[0])
    assert first["label"] in classes and len(workload.bulk_bodies[0].splitlines()) == 5
    regression = Workload(LoadConfig(pool=20, n_features=64, nnz=4, classes="regression"))
    assert all(isinstance(label, float) for *_, label in regression.rows)


def test_bulk_svmlight_bodies_are_one_based():
    workload = Workload(LoadConfig(mode="bulk", batch=3, bulk_bodies=2, n_features=8, nnz=8))
    assert workload.bulk_type == SVMLIGHT_TYPE and len(workload.bulk_bodies) == 2
    for line in workload.bulk_bodies[0].decode().splitlines():
        label, *pairs = line.split()
        assert label in ("-1", "1")
        assert [int(pair.split(":")[0]) for pair in pairs] == list(range(1, 9))
