"""SaslAuthenticate (key 36), versions 0-2.

Carries one token of the mechanism chosen by SaslHandshake v1 and answers the server's token. A failure answers
SASL_AUTHENTICATION_FAILED with Kafka's message (for PLAIN and SCRAM, what Kafka's servers say; for a failure whose
detail could reveal whether a user exists, Kafka's generic "Authentication failed during authentication due to
invalid credentials with SASL mechanism X"), then the connection closes after
``connection.failed.authentication.delay.ms``. v1+ answers carry ``session_lifetime_ms``: ``connections.max.reauth.ms``
when set (KIP-368; the client re-authenticates before it runs out), else 0. Outside an exchange (a listener without
SASL, or after authentication completed) the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.broker.apis import RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.sasl is None or ctx.sasl.authenticated:
        return fit(ctx.response_class, error_code=ErrorCode.illegal_sasl_state,
                   error_message="SaslAuthenticate request received after successful authentication",
                   auth_bytes=b"", session_lifetime=datetime.timedelta(0))
    result = await ctx.sasl.authenticate(bytes(request.auth_bytes), ctx.api_version)
    lifetime = datetime.timedelta(milliseconds=result.session_lifetime_ms)
    return fit(ctx.response_class, error_code=result.error_code, error_message=result.error_message,
               auth_bytes=result.auth_bytes, session_lifetime=lifetime)
