"""One module per Kafka API, as franz-go's kfake lays them out.

Each module opens with a docstring naming the versions it serves and how it behaves, and defines:

``API_KEY: int``
``MIN_VERSION: int`` and ``MAX_VERSION: int``, the range ApiVersions advertises (only what ``handle`` implements)
``async def handle(ctx: RequestContext, request: Any) -> Any``

``request`` is the kio dataclass decoded for ``ctx.api_version``. ``handle`` returns either a kio response entity of
that same version (``ctx.response_class`` / nested classes from ``ctx.response_module``; :func:`fit` drops fields
the version lacks, so one code path serves every version, and refuses a name no version has), or an
:class:`Encoded` body for hand-written hot-path encoders. Raising :class:`odradek.errors.KafkaError` is for
request-wide failures; per-partition errors belong in the response. Any other exception is logged and the
connection is closed, never the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import importlib
import pkgutil
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema

from odradek.broker.services import Services

NO_THROTTLE = datetime.timedelta(0)


@dataclass(slots=True)
class Encoded:
    """A response body already encoded (without header); buffers are written as-is, never joined."""

    buffers: Sequence[bytes | bytearray | memoryview]


@dataclass(slots=True)
class RequestContext:
    services: Services
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    # Who sent the request, as Kafka's KafkaPrincipal string ("User:alice"): set by the connection once the listener
    # has authenticated it (TLS certificate or SASL); ANONYMOUS on a PLAINTEXT listener, as in Kafka.
    principal: str = "User:ANONYMOUS"
    # The listener the request came through (Kafka's listener name), which decides what Metadata advertises.
    listener: str = "PLAINTEXT"
    # The connection's SASL exchange (odradek.security.sasl.SaslConnection) on a SASL listener, else None: what
    # SaslHandshake and SaslAuthenticate drive.
    sasl: Any = None
    # The request's size in bytes (header and body), what a produce quota counts.
    size: int = 0
    # Set by a handler whose client went over its quota (KIP-219): the response carries it, and the connection reads
    # nothing more from the client until that many milliseconds have passed.
    throttle_ms: int = 0

    @property
    def response_class(self) -> type[Any]:
        return _response_schema(self.api_key, self.api_version)

    @property
    def response_module(self) -> types.ModuleType:
        return _module_of(self.response_class)


@functools.cache
def _response_schema(api_key: int, api_version: int) -> type[Any]:
    """kio resolves the class by module name on every call: cached, as every response asks for it."""
    return load_response_schema(api_key, api_version)


def deadline_of(timeout: datetime.timedelta) -> float | None:
    """When an admin request's ``timeout_ms`` runs out (event-loop time); None when it asks not to wait at all."""
    seconds = timeout.total_seconds()
    return asyncio.get_running_loop().time() + seconds if seconds > 0 else None


def remaining_s(deadline: float | None) -> float:
    """What is left of a request's timeout for the next step: 0 means do not wait; an expired positive timeout
    still waits an instant, so the step can answer REQUEST_TIMED_OUT rather than success."""
    if deadline is None:
        return 0.0
    return max(0.001, deadline - asyncio.get_running_loop().time())


def _module_of(cls: type[Any]) -> types.ModuleType:
    import sys

    return sys.modules[cls.__module__]


_FIELDS: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def fit(cls: type[Any], **values: Any) -> Any:
    """Build ``cls`` from ``values``, leaving out the fields this version of the message lacks.

    One handler serves every version, so it names fields some versions carry and others do not (``throttle_time``
    from v1, ``error_message`` from v5): those are dropped where absent. A name that no version of the message has
    for this entity is a misspelt field and raises :class:`TypeError` (a handler bug, logged as one), rather than
    vanishing from every response.
    """
    names = _field_names(cls)
    if values.keys() <= names:
        return cls(**values)
    foreign = values.keys() - _fields_in_any_version(cls)
    if foreign:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no field {', '.join(sorted(foreign))} in any version")
    return cls(**{k: v for k, v in values.items() if k in names})


_FIELDS_IN_ANY_VERSION: dict[type[Any], frozenset[str]] = {}


def _fields_in_any_version(cls: type[Any]) -> frozenset[str]:
    """The fields of ``cls``'s entity across the versions of its message (kio: ``kio.schema.<api>.v<N>.<kind>``)."""
    known = _FIELDS_IN_ANY_VERSION.get(cls)
    if known is not None:
        return known
    version_package, _, kind = cls.__module__.rpartition(".")
    api_package = importlib.import_module(version_package.rpartition(".")[0])
    names = set(_field_names(cls))
    for info in pkgutil.iter_modules(api_package.__path__):
        try:
            module = importlib.import_module(f"{api_package.__name__}.{info.name}.{kind}")
        except ImportError:
            continue
        other = getattr(module, cls.__name__, None)
        if dataclasses.is_dataclass(other) and isinstance(other, type):
            names |= _field_names(other)
    known = _FIELDS_IN_ANY_VERSION[cls] = frozenset(names)
    return known


def nested(ctx: RequestContext, name: str) -> Callable[..., Any]:
    """A constructor for the nested response entity ``name`` of this request's version, via :func:`fit`."""
    cls = getattr(ctx.response_module, name)
    return functools.partial(fit, cls)
