"""HTTP Basic authentication against the cluster's SCRAM users.

The registry holds no passwords: a username and password are good when they log in to the cluster with SCRAM
(SaslHandshake and SaslAuthenticate on a connection to the bootstrap broker, through the same client code brokers
use towards each other), trying SCRAM-SHA-512 and then SCRAM-SHA-256. A good pair is remembered, by a digest, for
``ttl_ms`` milliseconds, so a client's requests do not each cost a login; a refused one is not remembered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import ssl
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.security.broker_client import OutgoingSecurity, open_broker_connection
from odradek.security.sasl_client import AuthenticationFailed

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``Authorization: Basic base64(user:password)`` as (user, password); None when absent or malformed."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep and user else None


@dataclass
class ScramBasicAuth:
    host: str
    port: int
    protocol: str  # SASL_PLAINTEXT or SASL_SSL: the cluster's listener the logins go to
    clock: Clock
    ssl_context: ssl.SSLContext | None = None
    ttl_ms: int = 300_000
    timeout_s: float = 10.0
    _good: dict[bytes, int] = field(default_factory=dict)

    async def check(self, user: str, password: str) -> bool:
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        now = self.clock.monotonic_ms()
        if self._good.get(digest, -1) > now:
            return True
        for mechanism in SCRAM_MECHANISMS:
            security = OutgoingSecurity("", self.protocol, mechanism, user, password, self.ssl_context)
            try:
                conn = await open_broker_connection(self.host, self.port, "odradek-schema-registry-auth", security,
                                                    timeout=self.timeout_s)
            except AuthenticationFailed:
                continue
            except (OSError, TimeoutError) as exc:
                log.warning("schema registry: cannot check credentials at %s:%d: %s", self.host, self.port, exc)
                return False
            conn.close()
            self._good[digest] = now + self.ttl_ms
            return True
        return False
