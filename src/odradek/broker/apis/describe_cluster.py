"""DescribeCluster (key 60), versions 0-2.

The live brokers, the cluster id and the controller, as the admin client's describeCluster shows them. Brokers
are never fenced here (fencing is KRaft's). Like Metadata, only brokers with an endpoint on the client's listener are
listed, at that endpoint's address. Authorized operations are computed only with an authorizer, when asked
(``include_cluster_authorized_operations``): the Cluster operations the principal has, 0 without DESCRIBE on it, as
Kafka; otherwise -2147483648.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.services.metadata
    broker_cls = nested(ctx, "DescribeClusterBroker")
    brokers = tuple(
        broker_cls(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
        for b in cache.brokers_on(ctx.listener)
    )
    return fit(
        ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        endpoint_type=1, cluster_id=cache.cluster_id, controller_id=cache.controller_id, brokers=brokers,
        cluster_authorized_operations=_operations(ctx, request),
    )


CLUSTER_OPERATIONS = (authz.Operation.CREATE, authz.Operation.CLUSTER_ACTION, authz.Operation.DESCRIBE_CONFIGS,
                      authz.Operation.ALTER_CONFIGS, authz.Operation.IDEMPOTENT_WRITE, authz.Operation.ALTER,
                      authz.Operation.DESCRIBE)


def _operations(ctx: RequestContext, request: Any) -> int:
    if not request.include_cluster_authorized_operations:
        return -2147483648  # without an authorizer every operation is allowed, as Kafka's AuthHelper answers
    if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return 0
    return authz.authorized_operations(ctx, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME, CLUSTER_OPERATIONS)
