"""The built-in status page: its JSON history, and the page itself rendered by a real
headless Chromium against a real server (the DOM after its script ran, and a screenshot
saved in docs/)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import numpy as np

from service.config import Settings
from service.main import create_app
from service.ops.history import History
from tests.service import traffic
from tests.service.conftest import TestClient, create
from tests.service.test_end_to_end import ServerThread
from tests.system import require_program

DOCS = Path(__file__).resolve().parents[4] / "docs"


def test_page_is_self_contained(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    # no external assets: no links, sources or URLs other than the SVG namespace
    assert not re.search(r"<link|<img|<iframe|\bsrc=|@import|url\(", page)
    assert set(re.findall(r"https?://[^\s\"'`]+", page)) == {"http://www.w3.org/2000/svg"}
    assert 'fetch("v1/status/history"' in page


def test_history_lists_models_and_samples(settings):
    app = create_app(settings)
    app.state.history = History(app.state.metrics, interval=0.05, span=1.0)
    with TestClient(app) as client:
        create(client, "first")
        create(client, "second", kind="linear-pa")
        body = client.get("/v1/status/history").json()
    assert [m["name"] for m in body["models"]] == ["first", "second"]
    assert body["models"][0]["version"] == 0
    assert 0 <= body["models"][0]["snapshot_age_seconds"] < 60
    assert set(body["models"][0]["metrics"]) >= {"recent_accuracy", "recent_loss", "loss_kind"}
    assert body["interval"] == 0.05 and body["span"] == 1.0
    assert body["samples"] and all({"t", "models", "endpoints"} <= set(s) for s in body["samples"])


def product_examples(n: int, seed: int) -> list[dict]:
    """Examples of y = sign(x0 x1): a DoS challenger learns it, the linear champion cannot."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    return [{"x": x.round(4).tolist(), "label": int(label)} for x, label in zip(X, y, strict=True)]


def test_history_shows_members_side_by_side_with_drift_and_learning(settings):
    """Every member, the champion first, with its variants side by side (metrics, the
    comparison with what serves and which one serves), as the model's own answers show
    them; the drift detector's count and the paused learning's backlog."""
    app = create_app(settings)
    app.state.history = History(app.state.metrics, interval=0.05, span=1.0)
    with TestClient(app) as client:
        create(
            client,
            kind="linear-pa",
            n_features=4,
            averaging={"interval": 100},  # (one fold per batch below)
            drift={"detector": "page_hinkley"},
        )
        added = client.post("/v1/models/m/challengers", json={"name": "c1", "kind": "dos"})
        assert added.status_code == 201, added.text
        for k in range(6):
            answer = client.post(
                "/v1/models/m/feedback", json={"examples": product_examples(100, k)}
            )
            assert answer.status_code == 200, answer.text
        client.post("/v1/models/m/learning", json={"paused": True})
        client.post("/v1/models/m/feedback", json={"examples": product_examples(10, 9)})
        (model,) = client.get("/v1/status/history").json()["models"]
        info = client.get("/v1/models/m").json()
        (challenger,) = client.get("/v1/models/m/challengers").json()["challengers"]
    assert (model["member"], model["variant"]) == ("original", "live")
    assert model["learning"] == {"paused": True, "backlog": 1}
    assert model["drift"]["detector"] == "page_hinkley"
    assert model["drift"] == info["drift"] and model["promotions"] == 0
    assert model["promotion"] == info["promotion"] and model["serve"] == "fixed"
    original, c1 = model["members"]
    assert (original["name"], original["kind"], original["serving"]) == (
        "original",
        "linear-pa",
        True,
    )
    assert (c1["name"], c1["kind"], c1["serving"]) == ("c1", "dos", False)
    assert original["examples_learned"] == c1["examples_learned"] == 600
    for member in (original, c1):
        assert list(member["variants"]) == ["live", "averaged"]
    serving = {
        (m["name"], variant)
        for m in model["members"]
        for variant, shown in m["variants"].items()
        if shown["serving"]
    }
    assert serving == {("original", "live")}
    # the same figures as the model's and the challenger's own answers
    for variant in ("live", "averaged"):
        for field in ("metrics", "comparison"):
            assert original["variants"][variant][field] == info["variants"][variant][field]
            assert c1["variants"][variant][field] == challenger["variants"][variant][field]
    assert original["variants"]["live"]["comparison"] is None  # what serves
    compared = c1["variants"]["live"]["comparison"]
    assert compared["verdict"] == "better" and compared["examples"] == 600
    assert compared["against"] == {"member": "original", "variant": "live"}
    assert original["variants"]["averaged"]["comparison"]["examples"] == 600
    assert set(original["variants"]["live"]["metrics"]) >= {
        "accuracy",
        "recent_accuracy",
        "loss",
        "recent_loss",
        "loss_kind",
    }


def test_history_needs_a_read_key_when_reads_are_keyed(tmp_path):
    settings = Settings(snapshot_dir=tmp_path, snapshot_interval=3600, read_keys=["r"])
    with TestClient(create_app(settings)) as client:
        assert client.get("/").status_code == 200  # the page itself holds no data
        assert client.get("/v1/status/history").status_code == 401
        ok = client.get("/v1/status/history", headers={"Authorization": "Bearer r"})
        assert ok.status_code == 200


def chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",  # tests run as root
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--window-size=1280,1000",
            "--virtual-time-budget=5000",  # lets the page's fetch and drawing finish
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_status_page_in_headless_chromium(tmp_path):
    binary = require_program("chromium", "chromium")
    settings = Settings(
        snapshot_dir=tmp_path / "snapshots", log_dir=tmp_path / "log", snapshot_interval=2
    )
    app = create_app(settings)
    app.state.history = History(app.state.metrics, interval=0.25)
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        names = traffic.create_models(http)
        # a challenger beside spam's champion, a drift detector on churn
        added = http.post("/v1/models/spam/challengers", json={"name": "c1", "kind": "dos"})
        assert added.status_code == 201, added.text
        patched = http.patch("/v1/models/churn", json={"drift": {"detector": "page_hinkley"}})
        assert patched.status_code == 200, patched.text
        gone = {"name": "gone", "kind": "linear-pa", "input": {"n_features": 4}}
        assert http.post("/v1/models", json=gone).status_code == 201
        one = {"examples": [{"x": [0.1, 0.2, 0.3, 0.4], "label": 1}]}
        assert http.post("/v1/models/gone/feedback", json=one).status_code == 200
        traffic.drive(http, seconds=5)
        assert http.delete("/v1/models/gone").status_code == 204  # (sampled, then deleted)
        # demand's learning paused, one feedback request logged since
        assert http.post("/v1/models/demand/learning", json={"paused": True}).status_code == 200
        one = {"examples": [{"x": [0.1, 0.2, 0.3, 0.4], "label": 1.0}]}
        assert http.post("/v1/models/demand/feedback", json=one).status_code == 200
        dom = chromium(binary, tmp_path / "profile", "--dump-dom", server.url + "/").stdout
        screenshot = tmp_path / "status_page.png"
        chromium(binary, tmp_path / "profile", f"--screenshot={screenshot}", server.url + "/")
    assert 'data-ready="1"' in dom, dom[:2000]
    for name in names:  # one table row per model, with its version
        row = re.search(rf'<tr data-model="{name}">(.*?)</tr>', dom)
        assert row, f"{name} missing from the page"
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
        assert int(cells[3]) > 0  # version
        assert re.fullmatch(r"\d+ s", cells[9]), cells  # snapshot age
    members = {
        name: re.search(rf'<div data-members="{name}">(.*?)</div>', dom, re.S) for name in names
    }
    assert all(members.values()), "a model has no members table"
    rows = {
        (member, variant): (row, re.findall(r"<td[^>]*>(.*?)</td>", cells))
        for member, variant, row, cells in re.findall(
            r'<tr data-member="(\w+)" data-variant="(\w+)"([^>]*)>(.*?)</tr>',
            members["spam"].group(1),
        )
    }
    assert set(rows) == {(m, v) for m in ("original", "c1") for v in ("live", "averaged")}
    row, cells = rows["original", "live"]
    assert 'class="serving"' in row and cells[3] == "serves"
    for member, variant in (("c1", "live"), ("c1", "averaged"), ("original", "averaged")):
        row, cells = rows[member, variant]
        assert "serving" not in row and cells[3] == ""
        assert cells[9] in {"better", "worse", "undecided"}, cells  # the verdict
        assert int(cells[10]) > 0  # paired examples
        assert re.fullmatch(r"0\.\d{3}", cells[5]), cells  # recent accuracy
    assert "drift (page_hinkley): " in members["churn"].group(1)
    assert "no drift detector" in members["spam"].group(1)
    assert re.search(
        r'data-learning="paused"[^>]*>learning paused, backlog 1 record', members["demand"].group(1)
    )
    assert 'data-learning="on"' in members["spam"].group(1)
    for link in ("docs", "metrics"):
        assert f'<a href="{link}">' in dom
    for chart in ("accuracy", "loss", "latency", "rate"):
        section = re.search(rf'<div id="{chart}">(.*?)</div>\s*</section>', dom, re.S)
        assert section and "<path" in section.group(1), f"chart {chart} has no line"
    assert ">no data yet</text>" not in dom
    legends = re.findall(r'<div class="legend">(.*?)</div>', dom, re.S)
    assert legends and not any("gone" in legend for legend in legends)  # deleted: not shown
    assert any("POST predict" in legend for legend in legends)  # the method says which
    assert ">0.000</text>" not in dom  # a zero tick reads 0
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    if os.environ.get("LORENTZTRON_UPDATE_DOCS"):  # refresh the committed screenshot
        (DOCS / "status_page.png").write_bytes(png)
