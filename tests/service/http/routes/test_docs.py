"""The documentation pages work offline: their HTML names no external asset, and a real
headless Chromium that can resolve no host but loopback renders every operation of the
OpenAPI description in Swagger UI (and ReDoc's page loads)."""

from __future__ import annotations

import re

from service.config import Settings
from service.main import create_app
from tests.service.http.routes.test_status import chromium
from tests.service.test_end_to_end import ServerThread
from tests.system import require_program

OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"


def test_pages_name_no_external_asset(client):
    for path in ("/docs", "/redoc"):
        page = client.get(path).text
        assert not re.search(r"(src|href)=['\"]https?://", page), path
        for asset in re.findall(r"(?:src|href)=['\"](/docs/assets/[^'\"]+)", page):
            assert client.get(asset).status_code == 200, asset


def test_swagger_ui_renders_offline_in_headless_chromium(tmp_path):
    binary = require_program("chromium", "chromium")
    settings = Settings(snapshot_dir=tmp_path / "snapshots", snapshot_interval=3600)
    with ServerThread(create_app(settings)) as server:
        dom = chromium(
            binary, tmp_path / "profile", OFFLINE, "--dump-dom", server.url + "/docs"
        ).stdout
        redoc = chromium(
            binary, tmp_path / "profile", OFFLINE, "--dump-dom", server.url + "/redoc"
        ).stdout
    operations = set(re.findall(r'data-path="([^"]+)"', dom))
    assert {"/v1/models", "/v1/models/{name}/predict", "/v1/models/{name}/feedback"} <= operations
    assert len(re.findall(r'class="opblock opblock-', dom)) >= 10
    assert "lorentztron" in redoc and "/v1/models/{name}/feedback" in redoc
