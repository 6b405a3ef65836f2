"""A run's options are checked before anything is sent, and an existing model's info sets
the options that must follow it."""

from __future__ import annotations

import pytest

from deploy.loadtest.loadgen.config import LoadConfig, model_options


def test_refuses_remote_urls_and_bad_options():
    LoadConfig(url="http://localhost:8000").check()
    LoadConfig(url="http://[::1]:8000", client="raw").check()
    LoadConfig(url="http://example.com:8000", allow_remote=True).check()
    with pytest.raises(ValueError, match="loopback"):
        LoadConfig(url="http://example.com:8000").check()
    with pytest.raises(ValueError, match="mode"):
        LoadConfig(mode="stream").check()
    with pytest.raises(ValueError, match="client"):
        LoadConfig(client="curl").check()
    with pytest.raises(ValueError, match="nnz"):
        LoadConfig(nnz=10, n_features=5).check()
    with pytest.raises(ValueError, match="rate"):
        LoadConfig(rate=0.0).check()


def test_https_needs_the_httpx_client():
    """raw, the default, speaks plain http: an https URL is refused before anything is sent."""
    assert LoadConfig().client == "raw"
    with pytest.raises(ValueError, match="--client httpx"):
        LoadConfig(url="https://localhost:8443").check()
    LoadConfig(url="https://localhost:8443", client="httpx").check()


def test_an_existing_models_input_labels_kind_and_rank():
    dos = {"kind": "dos", "input": {"hashed": 4096}, "params": {"rank": 3}, "classes": [0, 1]}
    assert model_options(dos) == {"n_features": 4096, "classes": [0, 1], "kind": "dos", "rank": 3}
    pqr = {"kind": "pqr", "task": "regression", "input": {"n_features": 7}, "params": {}}
    assert model_options(pqr) == {"n_features": 7, "classes": "regression"}  # kind kept
