"""The API's documentation pages, with no external assets: Swagger UI at ``/docs`` and ReDoc
at ``/redoc``, their scripts and styles served from the ``fastapi-offline`` package (FastAPI's
own pages load them from a CDN, so they are blank without internet access)."""

from importlib.resources import files

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

router = APIRouter(include_in_schema=False)

ASSETS = "/docs/assets"
TITLE = "lorentztron"


def assets() -> StaticFiles:
    """The pages' scripts, styles and icon (mounted at ``ASSETS``)."""
    return StaticFiles(directory=str(files("fastapi_offline") / "static"))


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{TITLE} API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon.png",
    )


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title=f"{TITLE} API",
        redoc_js_url=f"{ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/favicon.png",
        with_google_fonts=False,
    )
