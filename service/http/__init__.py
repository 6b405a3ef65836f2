"""The HTTP edge: routes (one APIRouter per file), request and response schemas, body
parsing, the mapping of domain errors to HTTP answers, middleware, the fast path in front of
FastAPI, the OpenAPI description, and the grouping of feedback requests on the event loop.
Nothing below this package knows a status code."""
