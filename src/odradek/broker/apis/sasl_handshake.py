"""SaslHandshake (key 17), versions 0-1.

The client names its SASL mechanism; the answer lists the listener's enabled mechanisms (``sasl.enabled.mechanisms``,
or ``listener.name.<l>.sasl.enabled.mechanisms``) with NONE or UNSUPPORTED_SASL_MECHANISM, and after the latter the
connection closes. v1 means the tokens follow in SaslAuthenticate requests; v0 means they follow raw (each only
size-prefixed), as clients before Kafka 1.0 sent them. On a listener without SASL, or on an authenticated connection
whose client cannot re-authenticate, the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers. An
authenticated connection's handshake starts a re-authentication (KIP-368), which must keep the mechanism.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.sasl is None:
        return fit(ctx.response_class, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    error, mechanisms = ctx.sasl.handshake(request.mechanism, ctx.api_version)
    return fit(ctx.response_class, error_code=error, mechanisms=tuple(mechanisms))
