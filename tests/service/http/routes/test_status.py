"""The built-in status page: its JSON history, and the page itself rendered by a real
headless Chromium against a real server (the DOM after its script ran, and a screenshot
saved in docs/)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx

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
        traffic.drive(http, seconds=5)
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
    for link in ("docs", "metrics"):
        assert f'<a href="{link}">' in dom
    for chart in ("accuracy", "loss", "latency", "rate"):
        section = re.search(rf'<div id="{chart}">(.*?)</div>\s*</section>', dom, re.S)
        assert section and "<path" in section.group(1), f"chart {chart} has no line"
    assert ">no data yet</text>" not in dom
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    if os.environ.get("LORENTZTRON_UPDATE_DOCS"):  # refresh the committed screenshot
        (DOCS / "status_page.png").write_bytes(png)
