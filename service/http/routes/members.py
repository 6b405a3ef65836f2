"""A model's members and learning: challengers that learn the same feedback as the champion,
their promotion, and the pause of learning (``service.model.group``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.durability.idempotency import HEADER, answer_headers, key_of
from service.http.deps import App, Read, Write
from service.http.openapi import errors
from service.http.schemas import ChallengerInfo, ChallengerList, ModelInfo
from service.http.threads import run_sync
from service.http.views import challenger_info, challengers, model_info
from service.model.spec import ChallengerSpec, Learning, Promote

router = APIRouter(prefix="/v1/models", tags=["members"])


def _key(request: Request, endpoint: str, body) -> object:
    return key_of(request.headers.get(HEADER), endpoint, "", body.model_dump_json().encode())


@router.post(
    "/{name}/challengers",
    status_code=201,
    response_model=ChallengerInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 413, 422, 503),
)
async def add_challenger(
    name: str, challenger: ChallengerSpec, app: App, request: Request, response: Response
) -> dict:
    """A challenger: another kind or other parameters learning the model's feedback beside
    its champion, from the next example on, each example scored by both before either
    learns it; counted as a model by the limits; durable before the answer. With an
    `Idempotency-Key`, a retry gets the first answer again."""
    key = _key(request, f"challenger {name}", challenger)

    def add() -> dict:
        def view(live) -> dict:
            return challenger_info(live, live.group.member(challenger.name))

        return app.models.add_challenger(name, challenger, view, key)

    answer = await run_sync(app.executor, add)
    response.headers["Location"] = f"/v1/models/{name}/challengers/{challenger.name}"
    response.headers.update(answer_headers(answer) or {})
    return answer


@router.get(
    "/{name}/challengers",
    response_model=ChallengerList,
    dependencies=[Read],
    responses=errors(401, 403, 404),
)
def list_challengers(name: str, app: App) -> dict:
    """The challengers, each with its progressive metrics (per variant) and its comparison
    with what serves on the same examples: the paired mean difference of the errors, its
    anytime-valid confidence interval and the verdict."""
    return app.models.get(name).describe(challengers)


@router.delete(
    "/{name}/challengers/{member}",
    status_code=204,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 503),
)
def remove_challenger(name: str, member: str, app: App) -> Response:
    """Take a challenger out (its learning, metrics and comparisons go); 409 for the
    member that serves."""
    app.models.remove_challenger(name, member)
    return Response(status_code=204)


@router.post(
    "/{name}/promote",
    response_model=ModelInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 422, 503),
)
def promote(name: str, promotion: Promote, app: App, request: Request, response: Response) -> dict:
    """The challenger (and its `variant`, default live) serves from now on: predictions
    answered after this come from it, prediction ids given before stay answerable, and the
    champion stays as a challenger (promote it back to undo). Durable before the answer;
    takes an `Idempotency-Key`."""
    key = _key(request, f"promote {name}", promotion)
    answer = app.models.promote(name, promotion, model_info, key)
    response.headers.update(answer_headers(answer) or {})
    return answer


@router.post(
    "/{name}/learning",
    response_model=ModelInfo,
    dependencies=[Write],
    responses=errors(401, 403, 404, 409, 422, 503),
)
def learning(name: str, learning: Learning, app: App, request: Request, response: Response) -> dict:
    """Pause learning (`{"paused": true}`: feedback is still logged and acknowledged, with
    `learned` 0 and `logged` its examples, and predictions go on) or resume it (`{"paused":
    false}`: the backlog is learned in order first; with `"discard": true` it is dropped,
    durably). Takes an `Idempotency-Key`."""
    key = _key(request, f"learning {name}", learning)
    answer = app.models.set_learning(name, learning, model_info, key)
    response.headers.update(answer_headers(answer) or {})
    return answer
