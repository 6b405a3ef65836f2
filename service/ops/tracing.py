"""OpenTelemetry tracing, opt-in by the standard variables.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
is set (OTLP over HTTP; the SDK reads these, ``OTEL_SERVICE_NAME`` (default
``lorentztron``), ``OTEL_BSP_*`` and the exporter's other variables itself) and the extra
``otel`` is installed. Otherwise it is off and free: nothing of opentelemetry is imported,
``TRACER`` stays None and every instrumentation point is one function call that returns a
shared null context manager (``span``, ``server``, ``attached``, ``linked``) or None
(``context``, ``traceparent``).

Spans: a server span per predict, feedback and V2 infer request (the route and the fast
path alike: both run the routes' ``serve``), child of the client's span when the request
carries a W3C ``traceparent``; under feedback, ``feedback.parse`` (per request),
``feedback.append``, ``feedback.learn`` and ``feedback.fsync`` (per group of requests:
children of the group's first request); ``snapshot.write`` and ``snapshot.publish``.
Spans go through a ``BatchSpanProcessor`` to the OTLP/HTTP exporter; ``shutdown`` flushes
them (the app's lifespan calls it).

In roles mode a feedback request is logged by an api process and learned by a learner,
later and elsewhere: the request's context travels with its record (``traceparent``: the
W3C header of its server span, kept in the Redis stream entry's field ``t`` beside the
record, and written only while tracing is on), and the learner learns the records it reads
in ``feedback.learned`` spans (``linked``: kind consumer, roots of their own traces, at most
``LINKS`` records each) with one Link per record to the request that logged it. Entries
without ``t`` (logged with tracing off, or before the field existed) are learned all the
same, unlinked.
"""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext

log = logging.getLogger("lorentztron")

#: the variables that turn tracing on (either)
VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

#: the tracer while tracing is on (None: off)
TRACER = None
_provider = None
_propagator = None
_server_kind = None
_consumer_kind = None
_otel_context = None
_link = None
_span_of = None
_NULL = nullcontext()

#: at most this many links per ``linked`` span (the SDK's default limit, 128, above
#: which it drops links): a caller spans longer runs of records with several
LINKS = 128


def enabled_by(environ=os.environ) -> bool:
    """Whether the environment asks for tracing."""
    return any(environ.get(name) for name in VARIABLES)


def setup() -> bool:
    """Turn tracing on if the environment asks for it (idempotent): whether it is on. A
    missing extra is one warning, and tracing stays off."""
    global TRACER, _provider, _propagator, _server_kind, _consumer_kind, _otel_context
    global _link, _span_of
    if TRACER is not None:
        return True
    if not enabled_by():
        return False
    try:
        from opentelemetry import context as otel_context
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import Link, SpanKind, get_current_span
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError as error:
        log.warning(
            "tracing off: %s is set but the OpenTelemetry packages are not installed "
            "(pip install 'lorentztron[otel]'): %s",
            " or ".join(name for name in VARIABLES if os.environ.get(name)),
            error,
        )
        return False
    name = os.environ.get("OTEL_SERVICE_NAME") or "lorentztron"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider = provider
    _propagator = TraceContextTextMapPropagator()
    _server_kind, _consumer_kind, _otel_context = SpanKind.SERVER, SpanKind.CONSUMER, otel_context
    _link, _span_of = Link, get_current_span
    TRACER = provider.get_tracer("lorentztron")
    log.info("tracing on: spans exported by OTLP/HTTP as service %s", name)
    return True


def shutdown() -> None:
    """Flush the spans not yet exported and stop the exporter (tracing is off after it)."""
    global TRACER, _provider, _propagator
    provider = _provider
    TRACER = _provider = _propagator = None
    if provider is not None:
        provider.shutdown()


def span(name: str, **attributes):
    """A span ``name`` as the current span, child of the current one (a null context
    manager when tracing is off)."""
    if TRACER is None:
        return _NULL
    return TRACER.start_as_current_span(name, attributes=attributes or None)


def server(name: str, headers, **attributes):
    """The server span of a request, child of the client's span if ``headers`` carry a W3C
    ``traceparent`` (a null context manager when tracing is off)."""
    if TRACER is None:
        return _NULL
    return TRACER.start_as_current_span(
        name,
        context=_propagator.extract(headers),
        kind=_server_kind,
        attributes=attributes or None,
    )


def linked(name: str, traceparents, **attributes):
    """A span ``name`` (kind consumer, a root: the work of other requests) with a Link to
    each W3C ``traceparent`` of ``traceparents`` (bytes or str; None and malformed ones
    skipped; at most ``LINKS`` are kept), as the current span (a null context manager when
    tracing is off)."""
    if TRACER is None:
        return _NULL
    links = []
    for header in traceparents:
        if header is None:
            continue
        if isinstance(header, bytes):
            header = header.decode("ascii", "replace")
        linked_span = _span_of(_propagator.extract({"traceparent": header})).get_span_context()
        if linked_span.is_valid:
            links.append(_link(linked_span))
    return TRACER.start_as_current_span(
        name,
        context=_otel_context.Context(),
        kind=_consumer_kind,
        links=links,
        attributes=attributes or None,
    )


def traceparent(ctx) -> str | None:
    """The W3C ``traceparent`` of trace context ``ctx`` (from ``context``), to carry it in a
    log record: None when tracing is off, ``ctx`` is None or holds no span."""
    if TRACER is None or ctx is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=ctx)
    return carrier.get("traceparent")


def context():
    """The current trace context, to carry to another thread (None when tracing is off)."""
    if TRACER is None:
        return None
    return _otel_context.get_current()


class _Attached:
    def __init__(self, ctx):
        self.ctx = ctx
        self.token = None

    def __enter__(self):
        self.token = _otel_context.attach(self.ctx)

    def __exit__(self, *exc):
        _otel_context.detach(self.token)


def attached(ctx):
    """``ctx`` (from ``context``) as the current trace context inside the ``with`` (a null
    context manager when it is None)."""
    if ctx is None:
        return _NULL
    return _Attached(ctx)
