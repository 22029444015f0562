"""The two ways a SASL exchange fails, as Kafka tells them apart.

:class:`SaslAuthenticationError` carries a message meant for the client (Kafka's SaslAuthenticationException: the
SaslAuthenticate response's error_message is exactly it). :class:`SaslExchangeError` is a failure whose detail must
not reach the client (it could say whether a user exists): the client gets Kafka's generic "Authentication failed
during authentication due to invalid credentials with SASL mechanism X" and the detail goes to the log.
"""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    pass


class SaslExchangeError(Exception):
    pass
