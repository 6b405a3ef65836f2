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


#: what both pages are given
PAGE = {"openapi_url": "/openapi.json", "title": f"{TITLE} API"}


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    js, css = f"{ASSETS}/swagger-ui-bundle.js", f"{ASSETS}/swagger-ui.css"
    icon = f"{ASSETS}/favicon.png"
    return get_swagger_ui_html(
        **PAGE, swagger_js_url=js, swagger_css_url=css, swagger_favicon_url=icon
    )


@router.get("/redoc")
def redoc() -> HTMLResponse:
    js, icon = f"{ASSETS}/redoc.standalone.js", f"{ASSETS}/favicon.png"
    return get_redoc_html(**PAGE, redoc_js_url=js, redoc_favicon_url=icon, with_google_fonts=False)
