"""Create, list, inspect and delete models."""

import logging

from fastapi import APIRouter, Request, Response

from service.durability.idempotency import HEADER, answer_headers, key_of
from service.durability.interchange import MEDIA_TYPE
from service.http.deps import App, Read, Write
from service.http.openapi import errors
from service.http.schemas import CreateModel, ModelInfo, ModelList
from service.http.threads import run_sync
from service.http.views import model_info

router = APIRouter(prefix="/v1/models", tags=["models"])
log = logging.getLogger("lorentztron")


#: the route options of what creates a model (a create, an import)
CREATES = {
    "status_code": 201,
    "response_model": ModelInfo,
    "dependencies": [Write],
    "responses": errors(401, 403, 409, 413, 422, 503),
}


@router.post("", **CREATES)
def create_model(spec: CreateModel, app: App, request: Request, response: Response) -> dict:
    """Create a named model; it is durable (its first snapshot written) before the answer.
    With an `Idempotency-Key`, a retry gets the first answer again."""
    key = key_of(request.headers.get(HEADER), "create", "", spec.model_dump_json().encode())
    answer = app.models.create(spec, model_info, key)
    response.headers["Location"] = f"/v1/models/{spec.name}"
    response.headers.update(answer_headers(answer) or {})
    return answer


@router.get("", response_model=ModelList, dependencies=[Read], responses=errors(401, 403))
def list_models(app: App) -> dict:
    """Every live model with its counters and progressive metrics. A model whose info cannot
    be built (a bug) is left out of the list, and logged with its error."""
    return {"models": [info for info in map(_info, app.models.serving()) if info is not None]}


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


@router.delete(
    "/{name}", status_code=204, dependencies=[Write], responses=errors(401, 403, 404, 503)
)
def delete_model(name: str, app: App) -> Response:
    """Delete a model: 404 from now on; its snapshots and feedback log are removed."""
    app.models.delete(name)
    return Response(status_code=204)


@router.get(
    "/{name}/export",
    dependencies=[Read],
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
    in its metadata): `PUT /v1/models/{name}` and `lorentztron eval` read it."""
    return Response(
        app.models.export(name),
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{name}.safetensors"'},
    )


@router.put(
    "/{name}",
    **CREATES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "A model file (`GET /v1/models/{name}/export`, `lorentztron learn`)",
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def import_model(name: str, request: Request, app: App, response: Response) -> dict:
    """Create the model `name` from a safetensors model file (an import); durable before
    the answer, like a create (409 if the name is taken). The whole file is checked first:
    a bad one is a 422 and nothing is created. Takes an `Idempotency-Key`."""
    data = await request.body()
    key = key_of(request.headers.get(HEADER), "import", name, data)
    answer = await run_sync(app.executor, app.models.import_model, data, name, model_info, key)
    response.headers["Location"] = f"/v1/models/{name}"
    response.headers.update(answer_headers(answer) or {})
    return answer
