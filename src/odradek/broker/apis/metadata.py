"""Metadata (key 3), versions 0-13.

Answers with every live broker, the cluster id, the controller and the requested topics (all of them for a null
list, or an empty list before v1). Unknown topics are auto-created with the broker defaults when the request allows
it (always before v4) and ``auto.create.topics.enable`` is true, otherwise UNKNOWN_TOPIC_OR_PARTITION; invalid
names get INVALID_TOPIC_EXCEPTION. v10+ topics can be named by id. The response is hand-encoded; the all-topics
answer is cached per metadata version so clients polling metadata cost one dictionary lookup.

With an authorizer (as Kafka's KafkaApis): topics the principal may not DESCRIBE are left out of an all-topics
answer and answered TOPIC_AUTHORIZATION_FAILED when named (without their id; by id, with the id but no name),
never disclosing whether they exist; auto-creating a topic needs CREATE on the Cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED. The all-topics cache is then not used (answers differ per principal), and the v8+
authorized-operations fields are computed when asked for (without an authorizer they stay "not computed").

The brokers are those with an endpoint on the listener the client came through, at that endpoint's address (Kafka
leaves the others out); a partition whose live leader has no such endpoint has no leader here and answers
LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE, as Kafka's metadata cache does.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.metadata import MetadataCache, TopicMeta
from odradek.broker.topics import validate_topic_name
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.encoders import MetadataPartition, MetadataTopic, encode_metadata_response

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

log = logging.getLogger(__name__)
_O = authz.Operation
TOPIC_OPERATIONS = (_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE, _O.DESCRIBE_CONFIGS,
                    _O.ALTER_CONFIGS)
"""What Kafka's AclEntry.supportedOperations lists for a topic (and, below, for the Cluster)."""
CLUSTER_OPERATIONS = (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                      _O.ALTER, _O.DESCRIBE)
# Encoded all-topics answers per metadata cache (weakly: a stopped broker's cache takes its answers with it; keyed by
# id() they could be served by a later broker whose cache was allocated at the same address), then per
# (request version, cache version, listener, and whether authorized operations were asked for).
_Key = tuple[int, int, str, bool, bool]
_answers: weakref.WeakKeyDictionary[MetadataCache, dict[_Key, Encoded]] = weakref.WeakKeyDictionary()


def topic_entry(meta: TopicMeta, live: set[int], reachable: set[int], version: int) -> MetadataTopic:
    """``live``: every live broker; ``reachable``: those with an endpoint on the client's listener."""
    parts = []
    for p in sorted(meta.partitions.values(), key=lambda p: p.partition):
        offline = [r for r in p.replicas if r not in live]
        # a leader that is no longer a live broker leads nothing: clients must wait and retry, not connect to it
        leader = p.leader if p.leader in reachable else -1
        error = ErrorCode.none
        if leader < 0:
            unlisted = p.leader in live and version >= 6
            error = ErrorCode.listener_not_found if unlisted else ErrorCode.leader_not_available
        parts.append(
            MetadataPartition(p.partition, leader, p.leader_epoch, p.replicas, p.isr, offline, int(error))
        )
    return MetadataTopic(meta.name, meta.topic_id, parts, meta.internal)


async def handle(ctx: RequestContext, request: Any) -> Encoded:
    services = ctx.services
    cache = services.metadata
    version = ctx.api_version
    requested = request.topics
    all_topics = requested is None or (version == 0 and not requested)
    key = (version, cache.version, ctx.listener, bool(getattr(request, "include_topic_authorized_operations", False)),
           bool(getattr(request, "include_cluster_authorized_operations", False)))
    checked = services.authorizer is not None
    answers = _answers.setdefault(cache, {}) if not checked else {}
    if all_topics and key in answers:
        return answers[key]
    live = set(cache.brokers)
    on_listener = cache.brokers_on(ctx.listener)
    reachable = {b.broker_id for b in on_listener}
    entries: list[MetadataTopic] = []
    if all_topics:
        metas = list(cache.topics.values())
        if checked:
            visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC,
                                             (t.name for t in metas), filtering=True)
            metas = [t for t in metas if t.name in visible]
        entries = [topic_entry(t, live, reachable, version) for t in metas]
    else:
        allow_create = (
            getattr(request, "allow_auto_topic_creation", True) and services.config["auto.create.topics.enable"]
        )
        for t in requested:
            name = t.name
            topic_id = getattr(t, "topic_id", None)
            if name is None and topic_id is not None:
                meta = cache.topic_by_id(topic_id)
                if meta is None:
                    entries.append(MetadataTopic(None, topic_id, [], error_code=int(ErrorCode.unknown_topic_id)))
                elif checked and not _describable(ctx, meta.name):
                    entries.append(MetadataTopic(None, topic_id, [],
                                                 error_code=int(ErrorCode.topic_authorization_failed)))
                else:
                    entries.append(topic_entry(meta, live, reachable, version))
                continue
            if checked and not _describable(ctx, name):
                entries.append(MetadataTopic(name, None, [], error_code=int(ErrorCode.topic_authorization_failed)))
                continue
            meta = cache.topics.get(name)
            if meta is None and allow_create and checked and not _may_create(ctx, name):
                entries.append(MetadataTopic(name, None, [], error_code=int(ErrorCode.topic_authorization_failed)))
                continue
            if meta is None and allow_create:
                meta = await _auto_create(ctx, name)
            if meta is None:
                error = ErrorCode.unknown_topic_or_partition
                try:
                    validate_topic_name(name)
                except KafkaError:
                    error = ErrorCode.invalid_topic_exception
                entries.append(MetadataTopic(name, None, [], error_code=int(error)))
            else:
                entries.append(topic_entry(meta, live, reachable, version))
    brokers = [(b.broker_id, b.host, b.port, b.rack) for b in on_listener]
    cluster_operations = -2147483648
    if version >= 8:  # without an authorizer every supported operation is allowed, as Kafka's AuthHelper says
        if getattr(request, "include_topic_authorized_operations", False):
            for entry in entries:
                if entry.error_code == ErrorCode.none and entry.name is not None:
                    entry.authorized_operations = authz.authorized_operations(
                        ctx, authz.ResourceType.TOPIC, entry.name, TOPIC_OPERATIONS)
        if getattr(request, "include_cluster_authorized_operations", False):
            cluster_operations = authz.authorized_operations(
                ctx, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME, CLUSTER_OPERATIONS) if authz.allowed(
                ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME) else 0
    encoded = Encoded(encode_metadata_response(version, brokers, cache.cluster_id, cache.controller_id, entries,
                                               cluster_authorized_operations=cluster_operations))
    if all_topics:
        if len(answers) > 16:
            answers.clear()
        answers[key] = encoded
    return encoded


def _describable(ctx: RequestContext, name: str) -> bool:
    return authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC, name)


def _may_create(ctx: RequestContext, name: str) -> bool:
    return (authz.allowed(ctx, authz.Operation.CREATE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME)
            or authz.allowed(ctx, authz.Operation.CREATE, authz.ResourceType.TOPIC, name))


async def _auto_create(ctx: RequestContext, name: str) -> TopicMeta | None:
    services = ctx.services
    try:
        assignment = await services.topics.check_new_topic(name, -1, -1, None, {})
        await services.topics.create_topic(name, assignment, {})
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            log.info("not auto-creating topic %r: %s", name, exc)
    return services.metadata.topics.get(name)
