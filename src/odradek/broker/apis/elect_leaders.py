"""ElectLeaders (key 43), versions 0-2.

Preferred (0) or unclean (1) leader election for the named partitions (all partitions for a null list), answered by
the active controller; any other broker answers NOT_CONTROLLER for each named partition (none for a null list) with
no top-level error, as Kafka's ZooKeeper-mode controller does, and clients retry against the controller their
metadata names. Per partition: ELECTION_NOT_NEEDED when the preferred
replica already leads (left out of the answer to a null list, as Kafka leaves it), PREFERRED_LEADER_NOT_AVAILABLE /
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualifies, UNKNOWN_TOPIC_OR_PARTITION ("The partition does not
exist.") for partitions that do not exist. With an authorizer the request needs ALTER on the
Cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition (every known one for a null
list), as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode, KafkaError

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "PartitionResult")
    topic_cls = nested(ctx, "ReplicaElectionResult")
    election_type = getattr(request, "election_type", 0)
    wanted = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    top_error = ErrorCode.none
    outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    controller = ctx.services.controller
    if not authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        top_error = ErrorCode.cluster_authorization_failed
        if wanted is None:
            wanted = [(t.name, p) for t in ctx.services.metadata.topics.values() for p in t.partitions]
        for tp in wanted:
            outcomes[tp] = (top_error, None)
    elif not controller.is_active:  # Kafka's ZooKeeper-mode controller: each partition refused, not the request
        for tp in wanted or []:
            outcomes[tp] = (ErrorCode.not_controller, None)
    else:
        try:
            results = await controller.elect_leaders(wanted, election_type)
            for tp, outcome in results.items():
                if wanted is None and outcome.error is ErrorCode.election_not_needed:
                    continue  # KafkaApis: an election over all partitions answers only those it tried or failed
                outcomes[(tp[0], tp[1])] = (outcome.error, outcome.message)
        except KafkaError as exc:
            top_error = exc.code
            for tp in wanted or []:
                outcomes[tp] = (exc.code, exc.message)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (error, message) in sorted(outcomes.items()):
        by_topic.setdefault(topic, []).append(
            result_cls(partition_id=partition, error_code=error, error_message=message)
        )
    return fit(
        ctx.response_class, throttle_time=NO_THROTTLE, error_code=top_error,
        replica_election_results=tuple(topic_cls(topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()),
    )
