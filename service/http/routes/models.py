"""Create, list, inspect, export, import and delete models."""

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from service.durability.idempotency import HEADER, answer_headers, key_of
from service.durability.interchange import MEDIA_TYPE
from service.exceptions import TooLarge, UnsupportedMediaType
from service.http import bodies
from service.http.deps import App, Components, Export, Read, Write
from service.http.errors import shown
from service.http.openapi import errors, json_body
from service.http.schemas import ModelInfo, ModelList
from service.http.threads import run_sync
from service.http.views import model_info
from service.model.spec import CreateModel, PolicyPatch

router = APIRouter(prefix="/v1/models", tags=["models"])
log = logging.getLogger("lorentztron")

#: the media types of a model file that an import reads
MODEL_FILE_TYPES = (MEDIA_TYPE, "application/octet-stream")
#: the largest create body (a spec is a few hundred bytes; a thousand long class names fit):
#: pydantic parses a body in one call that holds the GIL, so a body of megabytes would hold
#: the event loop even from a handler thread
CREATE_BODY_BYTES = 1 << 20
#: the most models a page of the list holds (and the default page)
PAGE = 1000

#: the route options of what creates a model (a create, an import)
CREATES = {
    "status_code": 201,
    "response_model": ModelInfo,
    "dependencies": [Write],
    "responses": errors(401, 403, 408, 409, 413, 415, 422, 503),
}


@router.post("", **CREATES, openapi_extra=json_body(CreateModel))
async def create_model(app: App, request: Request, response: Response) -> dict:
    """Create a named model; it is durable (its first snapshot written) before the answer.
    With an `Idempotency-Key`, a retry gets the first answer again."""
    data = await request.body()
    if len(data) > CREATE_BODY_BYTES:
        raise TooLarge(
            "payload_too_large",
            f"a create request is at most {CREATE_BODY_BYTES} bytes",
            {"limit": CREATE_BODY_BYTES},
        )
    content_type, header = request.headers.get("content-type"), request.headers.get(HEADER)
    # parsed in a handler thread (the create blocks there anyway), not on the event loop
    name, answer = await run_sync(app.executor, _create, app, content_type, header, data)
    response.headers["Location"] = f"/v1/models/{name}"
    response.headers.update(answer_headers(answer) or {})
    return answer


def _create(app: Components, content_type: str | None, header: str | None, data: bytes):
    """The name and answer of a create request's body (in a handler thread)."""
    spec = bodies.create_request(content_type, data)
    key = key_of(header, "create", "", spec.model_dump_json().encode())
    return spec.name, app.models.create(spec, model_info, key)


@router.get("", response_model=ModelList, dependencies=[Read], responses=errors(401, 403, 422))
def list_models(
    app: App,
    limit: Annotated[int, Query(ge=1, le=PAGE, description="Models in the page.")] = PAGE,
    after: Annotated[
        str | None, Query(description="The cursor: the page starts after this name.")
    ] = None,
) -> dict:
    """The live models by name, a page at a time, with their counters and progressive
    metrics; `next` is the cursor of the next page (null: the last). A model whose info
    cannot be built (a bug) is left out of the page, and logged with its error."""
    lives, cursor = app.models.page(after, limit)
    return {"models": [info for info in map(_info, lives) if info is not None], "next": cursor}


def _info(live) -> dict | None:
    """A model's info for the list; None (logged with its traceback) if it cannot be built:
    one broken model never takes the list down."""
    try:
        return live.describe(model_info)
    except Exception:
        log.exception("could not describe model %s", live.name)
        return None


@router.get(
    "/{name}", response_model=ModelInfo, dependencies=[Read], responses=errors(401, 403, 404)
)
def get_model(name: str, app: App) -> dict:
    """One model: config, counters, version and progressive metrics."""
    return app.models.get(name).describe(model_info)


@router.patch(
    "/{name}",
    response_model=ModelInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 422, 503),
)
def set_policy(
    name: str, patch: PolicyPatch, app: App, request: Request, response: Response
) -> dict:
    """New policies: `promotion` (automatic promotion of a challenger better at a
    confidence), `serve` (fixed, or the champion's better variant) and `drift` (a detector on
    the serving variant's errors; null removes it). Durable before the answer; takes an
    `Idempotency-Key`."""
    body = patch.model_dump_json(exclude_unset=True).encode()
    key = key_of(request.headers.get(HEADER), f"policy {name}", "", body)
    answer = app.models.set_policy(name, patch, model_info, key)
    response.headers.update(answer_headers(answer) or {})
    return answer


@router.delete(
    "/{name}", status_code=204, dependencies=[Write], responses=errors(401, 403, 404, 503)
)
def delete_model(name: str, app: App) -> Response:
    """Delete a model: 404 from now on; its snapshots and feedback log are removed."""
    app.models.delete(name)
    return Response(status_code=204)


@router.get(
    "/{name}/export",
    dependencies=[Export],
    response_class=Response,
    responses={
        200: {
            "description": "The model as a safetensors file (`service.durability.interchange`)",
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        },
        **errors(401, 403, 404),
    },
)
def export_model(name: str, app: App) -> Response:
    """The model as it is now, as a safetensors file (arrays as tensors, spec and counters
    in its metadata): `PUT /v1/models/{name}` and `lorentztron eval` read it. It needs a
    write key when write keys are set (the weights are worth as much as the right to replace
    them); otherwise a read key when read keys are set. The file is written once, then
    streamed: a slow reader holds no copy of the model in memory."""
    file, size = app.models.export(name)
    return StreamingResponse(
        _chunks(file),
        media_type=MEDIA_TYPE,
        headers={
            "Content-Disposition": f'attachment; filename="{name}.safetensors"',
            "Content-Length": str(size),
        },
    )


def _chunks(file, size: int = 1 << 20):
    """The file's bytes in chunks (read in a thread by Starlette), then the file closed (a
    client gone away: when the generator is collected)."""
    try:
        while chunk := file.read(size):
            yield chunk
    finally:
        file.close()


@router.put(
    "/{name}",
    **CREATES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A model file (`GET /v1/models/{name}/export`, `lorentztron learn`), "
            f"sent as `{MEDIA_TYPE}` or `application/octet-stream` (any other type: 415)",
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in MODEL_FILE_TYPES
            },
        }
    },
)
async def import_model(name: str, request: Request, app: App, response: Response) -> dict:
    """Create the model `name` from a safetensors model file (an import); durable before
    the answer, like a create (409 if the name is taken). The whole file is checked first:
    a bad one is a 422 and nothing is created. Takes an `Idempotency-Key`."""
    media = bodies.media_type(request.headers.get("content-type"))
    if media not in MODEL_FILE_TYPES:  # refused before the body is read
        raise UnsupportedMediaType(
            "unsupported_media_type",
            f"unsupported Content-Type {shown(media)}; send a model file as "
            f"{' or '.join(MODEL_FILE_TYPES)}",
        )
    data = await request.body()
    header = request.headers.get(HEADER)
    answer = await run_sync(app.executor, _import, app, name, header, data)
    response.headers["Location"] = f"/v1/models/{name}"
    response.headers.update(answer_headers(answer) or {})
    return answer


def _import(app: Components, name: str, header: str | None, data: bytes) -> dict:
    """The answer of an import (in a handler thread: the key's digest of the file too)."""
    return app.models.import_model(data, name, model_info, key_of(header, "import", name, data))
