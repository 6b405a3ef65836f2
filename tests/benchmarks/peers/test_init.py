"""A missing peer is reported with its reason."""

from benchmarks.peers import available, import_problem


def test_import_problem_names_the_missing_module():
    assert import_problem("numpy") is None and available("numpy")
    problem = import_problem("no_such_peer_library")
    assert problem.startswith("cannot import no_such_peer_library: ModuleNotFoundError")
    assert not available("no_such_peer_library")
