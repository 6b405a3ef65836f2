"""Create, list, inspect and delete models."""

from fastapi import APIRouter, Request, Response

from service.deps import App, Read, Write
from service.idempotency import HEADER, answer_headers, key_of
from service.openapi import errors
from service.schemas import CreateModel, ModelInfo, ModelList

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post(
    "",
    status_code=201,
    response_model=ModelInfo,
    dependencies=[Write],
    responses=errors(401, 403, 409, 413, 422, 503),
)
def create_model(spec: CreateModel, app: App, request: Request, response: Response) -> dict:
    """Create a named model; it is durable (its first snapshot written) before the answer.
    With an `Idempotency-Key`, a retry gets the first answer again."""
    key = key_of(request.headers.get(HEADER), "create", "", spec.model_dump_json().encode())
    answer = app.models.create(spec, key)
    response.headers["Location"] = f"/v1/models/{spec.name}"
    response.headers.update(answer_headers(answer) or {})
    return answer


@router.get("", response_model=ModelList, dependencies=[Read], responses=errors(401, 403))
def list_models(app: App) -> dict:
    """Every live model with its counters and progressive metrics."""
    return {"models": [live.info() for live in app.models.serving()]}


@router.get(
    "/{name}", response_model=ModelInfo, dependencies=[Read], responses=errors(401, 403, 404)
)
def get_model(name: str, app: App) -> dict:
    """One model: config, counters, version and progressive metrics."""
    return app.models.get(name).info()


@router.delete(
    "/{name}", status_code=204, dependencies=[Write], responses=errors(401, 403, 404, 503)
)
def delete_model(name: str, app: App) -> Response:
    """Delete a model: 404 from now on; its snapshots and feedback log are removed."""
    app.models.delete(name)
    return Response(status_code=204)
