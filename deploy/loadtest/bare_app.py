"""The baseline of the single-request benchmarks: a bare FastAPI app with the service's
predict and feedback endpoints and no model behind them.

Each endpoint is what a plain FastAPI application would write: an ``async def`` route
whose body parameter is a pydantic model of the request's shape (the same JSON is parsed
and validated: ``indices`` integers, ``values`` floats, a ``label``) and whose
``response_model`` has the shape of the service's answer (serialised by FastAPI). No
model, lock, log, metric, middleware or thread pool: the answer is made up from the
request (a score of the sum of the values). ``POST /v1/models`` and ``DELETE
/v1/models/{name}`` answer as the service does, so that :mod:`deploy.loadtest.loadgen` can
drive this app unchanged, and ``GET /readyz`` says it is up.

``python -m deploy.loadtest.bare_app --port N`` serves it with the uvicorn configuration of
``lorentztron serve`` (``service.ops.cli.uvicorn_options``: same event loop, HTTP parser, log
configuration, no access log) and the same process set-up (``configure_process``), so that
:mod:`deploy.loadtest.run_benchmarks` measures the service against it in the same run and
the ratio is the cost of the service's own work per request.
"""

from __future__ import annotations

import argparse
import itertools

import uvicorn
from fastapi import FastAPI, Response
from pydantic import BaseModel

from service.config import Settings
from service.ops import cli


# The bodies' shape as a plain FastAPI app would declare it: typed fields, no validators
# (the service's schemas also accept dense and named-feature instances and check that
# exactly one form is given, in Python validators that cost more).
class Instance(BaseModel):
    indices: list[int]
    values: list[float]


class PredictRequest(BaseModel):
    instances: list[Instance]


class Example(Instance):
    label: int | str


class FeedbackRequest(BaseModel):
    examples: list[Example]


class Prediction(BaseModel):
    label: int | str
    score: float
    probability: float | None
    prediction_id: str


class PredictResponse(BaseModel):
    model: str
    version: int
    member: str
    variant: str
    predictions: list[Prediction]


class FeedbackResult(BaseModel):
    predicted: int | str
    loss: float
    aggressive: bool


class FeedbackResponse(BaseModel):
    model: str
    version: int
    learned: int
    aggressive: int
    results: list[FeedbackResult]


def _score(instance) -> float:
    """A stand-in score (no model): the sum of the given values."""
    return float(sum(instance.values))


def create_app() -> FastAPI:
    app = FastAPI(title="bare baseline", docs_url=None, redoc_url=None, openapi_url=None)
    ids = itertools.count()
    versions = itertools.count(1)

    @app.get("/readyz")
    async def ready() -> dict:
        return {"status": "ready"}

    @app.post("/v1/models", status_code=201)
    async def create(spec: dict) -> dict:
        return {"name": spec.get("name"), "kind": spec.get("kind"), "version": 0}

    @app.delete("/v1/models/{name}", status_code=204)
    async def delete(name: str) -> Response:
        return Response(status_code=204)

    @app.post("/v1/models/{name}/predict", response_model=PredictResponse)
    async def predict(name: str, request: PredictRequest, variant: str = "live") -> dict:
        predictions = []
        for instance in request.instances:
            score = _score(instance)
            predictions.append(
                {
                    "label": 1 if score > 0 else -1,
                    "score": score,
                    "probability": None,
                    "prediction_id": f"{next(ids):032x}",
                }
            )
        return {
            "model": name,
            "version": 0,
            "member": "original",
            "variant": variant,
            "predictions": predictions,
        }

    @app.post("/v1/models/{name}/feedback", response_model=FeedbackResponse)
    async def feedback(name: str, request: FeedbackRequest) -> dict:
        results = []
        for example in request.examples:
            score = _score(example)
            predicted = 1 if score > 0 else -1
            loss = max(0.0, 1.0 - score * (1 if example.label == 1 else -1))  # hinge
            results.append({"predicted": predicted, "loss": loss, "aggressive": loss > 0})
        return {
            "model": name,
            "version": next(versions),
            "learned": len(results),
            "aggressive": sum(r["aggressive"] for r in results),
            "results": results,
        }

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deploy.loadtest.bare_app", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    settings = Settings()
    # through the module, as `lorentztron serve` calls it (tests replace it there)
    cli.configure_process(settings)
    uvicorn.run(
        "deploy.loadtest.bare_app:create_app",
        **cli.uvicorn_options(settings, args.host, args.port),
    )


if __name__ == "__main__":
    main()
