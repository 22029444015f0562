"""The authorization checks request handlers make, as Kafka's ``AuthHelper`` makes them for ``KafkaApis``.

Each takes the request's context: its principal (``ctx.principal``) and client host (``ctx.client_host``) against
the broker's authorizer. With no authorizer configured everything is allowed and each check is one attribute test.
Inter-broker requests (follower fetches, the controller's requests, transaction markers, KIP-890 verification) are
checked like any other: the brokers' own principal must be a super user (or hold CLUSTER_ACTION on the cluster),
as in Kafka; on PLAINTEXT listeners that principal is ``User:ANONYMOUS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import CLUSTER_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.apis import RequestContext

__all__ = [
    "CLUSTER_NAME",
    "ERROR_OF",
    "REFUSAL_MESSAGE",
    "Operation",
    "ResourceType",
    "allowed",
    "allowed_any_of_type",
    "authorized_names",
    "authorized_operations",
    "config_refusal",
    "partition_by_authorized",
    "require_cluster",
]

T = TypeVar("T")

ERROR_OF: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}
"""Kafka's ``AclEntry.authorizationError``: what a refusal on each resource type is answered with."""

REFUSAL_MESSAGE: dict[ErrorCode, str] = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}
"""Kafka's ``Errors.message()`` of each refusal: what the APIs that answer ``error.message`` (FindCoordinator,
DescribeConfigs, DescribeProducers) say, and clients print."""


def allowed(ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def allowed_any_of_type(ctx: RequestContext, operation: Operation, resource_type: ResourceType) -> bool:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_any_of_type(ctx.principal, ctx.client_host, operation, resource_type)


def authorized_names(ctx: RequestContext, operation: Operation, resource_type: ResourceType,
                     names: Iterable[str], *, filtering: bool = False) -> set[str]:
    """The names (deduplicated, each checked once) the principal may do ``operation`` on. ``filtering``: the check
    only decides what an answer lists (all topics, all groups), so a denial is not logged, as in Kafka."""
    wanted = set(names)
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return wanted
    return {n for n in wanted
            if authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, n, not filtering)}


def partition_by_authorized(ctx: RequestContext, operation: Operation, resource_type: ResourceType,
                            items: Iterable[T], name: Callable[[T], str]) -> tuple[list[T], list[T]]:
    """(authorized, refused), each in request order."""
    items = list(items)
    if ctx.services.authorizer is None:
        return items, []
    ok = authorized_names(ctx, operation, resource_type, (name(i) for i in items))
    return [i for i in items if name(i) in ok], [i for i in items if name(i) not in ok]


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str,
                          supported: Iterable[Operation]) -> int:
    """Kafka's ``authorizedOperations`` bit field (bit = operation code) of the supported operations allowed."""
    return sum(1 << int(op) for op in supported if allowed(ctx, op, resource_type, name))


_CONFIG_RESOURCES: dict[int, tuple[ResourceType, bool]] = {
    2: (ResourceType.TOPIC, False),  # ConfigResource.Type TOPIC
    4: (ResourceType.CLUSTER, True),  # BROKER
    8: (ResourceType.CLUSTER, True),  # BROKER_LOGGER
    16: (ResourceType.CLUSTER, True),  # CLIENT_METRICS
    32: (ResourceType.GROUP, False),  # GROUP
}


def config_refusal(ctx: RequestContext, operation: Operation, config_type: int, name: str) -> KafkaError | None:
    """DescribeConfigs/AlterConfigs/IncrementalAlterConfigs: a topic's configs need ``operation`` on the topic, a
    group's on the group, a broker's (and broker loggers', client metrics') on the Cluster, as Kafka's ConfigHelper
    and KafkaApis check them; None when allowed (or the type is one the handler refuses anyway)."""
    if ctx.services.authorizer is None or config_type not in _CONFIG_RESOURCES:
        return None
    resource_type, on_cluster = _CONFIG_RESOURCES[config_type]
    if allowed(ctx, operation, resource_type, CLUSTER_NAME if on_cluster else name):
        return None
    return KafkaError(ERROR_OF[resource_type])


def require_cluster(ctx: RequestContext, operation: Operation) -> None:
    """Kafka's ``authorizeClusterOperation``: refuse the whole request with CLUSTER_AUTHORIZATION_FAILED."""
    if not allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise KafkaError(ErrorCode.cluster_authorization_failed,
                         f"Principal {ctx.principal} may not {operation.pascal} the cluster")
