"""benchmarks/parallel_service.py in its quick mode: a fleet of two learners and an api replica
per configuration, one model learned by one learner and by two (``parallel``); both learn
every example of the stream, the replica serves the merged model, which predicts the test
digits as the library's in-process ``DataParallel`` does on the same stream."""

import math

import pytest

from benchmarks import parallel_service


def test_quick_mode_measures_both_configurations_on_the_same_stream():
    result = parallel_service.run(["--quick"])
    settings = result["settings"]
    single, parallel = result["rows"]
    assert (single["learners"], parallel["learners"]) == (1, 2)
    for row in (single, parallel):
        # every example learned, and served by the replica (a merged version for k = 2)
        assert row["examples_learned"] == [settings["examples"]] * settings["repeats"]
        assert 0 < row["examples_per_s"] < math.inf and row["seconds"] > 0
        # the served model is the library's on the same examples (pixels sent exactly)
        assert row["test_error"] == row["library_error"]
        assert 0 < row["test_error"] < 0.5
        fresh = row["freshness"]
        assert fresh["examples_learned"] == settings["freshness_interval"] + fresh["examples"]
        assert fresh["versions_loaded"] >= 1 and fresh["mean_s"] > 0
        assert 0 < fresh["p99_le_s"] < math.inf
    assert single["share_learners"] == [[]]
    # the two shares were learned by the two learners
    [learners] = parallel["share_learners"]
    assert len(learners) == 2 and len(set(learners)) == 2
    # a merged version per round of the freshness phase, at most (one load may take two)
    rounds = parallel["freshness"]["examples"] // settings["freshness_interval"]
    assert parallel["freshness"]["versions_loaded"] <= rounds
    table = parallel_service.render(result)
    assert "| 1 | " in table and "| 2 | " in table


def test_rounds_that_would_leave_examples_unmerged_are_refused():
    with pytest.raises(SystemExit):
        parallel_service.run(["--examples", "1500", "--interval", "1000"])
    with pytest.raises(SystemExit):
        parallel_service.run(["--interval", "1000", "--batch", "300"])
