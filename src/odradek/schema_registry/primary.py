"""Who the primary is: the group coordinator's answer, asked through odradek's own client.

The primary is the election group's member assigned ``_schemas``, and its ``client.id`` is its URL
(:mod:`odradek.schema_registry.election`). Finding it takes FindCoordinator and DescribeGroups. These go through
:class:`odradek.client.KafkaConnection`, not librdkafka's admin client: a DescribeGroups that timed out there while
the coordinator's broker was dying hit an assertion that aborts the whole process (librdkafka issue 4605), and the
registry runs inside the brokers' own process.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.consumer_protocol import ConsumerProtocolError, decode_assignment
from odradek.protocol.entities import entity_schemas
from odradek.security.broker_client import OutgoingSecurity
from odradek.security.client_config import sasl_credentials
from odradek.security.sasl_client import AuthenticationFailed

FIND_COORDINATOR, DESCRIBE_GROUPS = 10, 15


class PrimaryUnknown(Exception):
    """The coordinator could not be asked, or answered an error."""


def outgoing_security(config: Mapping[str, Any]) -> OutgoingSecurity:
    """The librdkafka client settings the registry runs with, as odradek's own connections authenticate."""
    protocol = str(config.get("security.protocol", "plaintext")).upper()
    context: ssl.SSLContext | None = None
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
        if config.get("ssl.certificate.location"):
            context.load_cert_chain(config["ssl.certificate.location"], config.get("ssl.key.location"),
                                    config.get("ssl.key.password"))
        if str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
    if protocol.startswith("SASL"):
        mechanism, username, password = sasl_credentials({k: str(v) for k, v in config.items()})
        return OutgoingSecurity("", protocol, mechanism, username, password, context)
    return OutgoingSecurity("", protocol, ssl_context=context)


def describe_primary(
    bootstrap: str, security: OutgoingSecurity, group: str, topic: str, timeout_s: float
) -> str | None:
    """The ``client.id`` of the member of ``group`` assigned ``topic``; None while no member holds it."""
    try:
        with KafkaConnection(bootstrap, "odradek-schema-registry", timeout_s, security) as conn:
            version = conn.version_for(FIND_COORDINATOR, 3)
            found = conn.request(FIND_COORDINATOR, entity_schemas(FIND_COORDINATOR, version).request(
                key=group, key_type=0), version)
        if found.error_code != ErrorCode.none:
            raise PrimaryUnknown(f"FindCoordinator for group {group}: {ErrorCode(found.error_code).name}")
        with KafkaConnection(f"{found.host}:{found.port}", "odradek-schema-registry", timeout_s, security) as conn:
            version = conn.version_for(DESCRIBE_GROUPS, 5)
            described = conn.request(DESCRIBE_GROUPS, entity_schemas(DESCRIBE_GROUPS, version).request(
                groups=(group,), include_authorized_operations=False), version)
    except (OSError, EOFError, RuntimeError, AuthenticationFailed) as exc:
        raise PrimaryUnknown(f"describing group {group}: {exc}") from None
    (described_group,) = described.groups
    if described_group.error_code != ErrorCode.none:
        raise PrimaryUnknown(f"DescribeGroups {group}: {ErrorCode(described_group.error_code).name}")
    for member in described_group.members:
        try:
            assigned = decode_assignment(bytes(member.member_assignment))
        except ConsumerProtocolError:
            continue  # a member whose assignment cannot be read holds nothing the registry can see
        if topic in assigned:
            return str(member.client_id)
    return None
