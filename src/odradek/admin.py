"""Topic administration over the wire, shared by the CLI and tests; output shaped like kafka-topics.sh."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from kio.index import load_request_schema

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode, KafkaError

METADATA, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 3, 19, 20, 32


def request_schema(conn: KafkaConnection, api_key: int, highest: int) -> tuple[int, Any, Any]:
    """The version both sides speak, its request class, and the module holding its nested classes."""
    version = conn.version_for(api_key, highest)
    cls = load_request_schema(api_key, version)
    return version, cls, sys.modules[cls.__module__]


def metadata(conn: KafkaConnection, topics: list[str] | None) -> Any:
    version, cls, mod = request_schema(conn, METADATA, 12)
    kwargs: dict[str, Any] = {}
    fields = cls.__dataclass_fields__
    if topics is None:
        kwargs["topics"] = None if version >= 1 else ()
    else:
        topic_fields = mod.MetadataRequestTopic.__dataclass_fields__
        kwargs["topics"] = tuple(
            mod.MetadataRequestTopic(name=t, **({"topic_id": None} if "topic_id" in topic_fields else {}))
            for t in topics
        )
    if "allow_auto_topic_creation" in fields:
        kwargs["allow_auto_topic_creation"] = False
    if "include_topic_authorized_operations" in fields:
        kwargs["include_topic_authorized_operations"] = False
    if "include_cluster_authorized_operations" in fields:
        kwargs["include_cluster_authorized_operations"] = False
    return conn.request(METADATA, cls(**kwargs), version)


def list_topics(conn: KafkaConnection) -> list[str]:
    return sorted(t.name for t in metadata(conn, None).topics if t.error_code == ErrorCode.none)


def create_topic(
    conn: KafkaConnection, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
    timeout_s: float = 30.0,
) -> tuple[ErrorCode, str | None]:
    version, cls, mod = request_schema(conn, CREATE_TOPICS, 7)
    topic = mod.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=(),
        configs=tuple(mod.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
    )
    request = cls(topics=(topic,), timeout=datetime.timedelta(seconds=timeout_s), validate_only=False)
    result = conn.request(CREATE_TOPICS, request, version).topics[0]
    return ErrorCode(result.error_code), getattr(result, "error_message", None)


def delete_topic(conn: KafkaConnection, name: str, timeout_s: float = 30.0) -> tuple[ErrorCode, str | None]:
    version, cls, mod = request_schema(conn, DELETE_TOPICS, 6)
    timeout = datetime.timedelta(seconds=timeout_s)
    if version >= 6:
        request = cls(topics=(mod.DeleteTopicState(name=name, topic_id=None),), timeout=timeout)
    else:
        request = cls(topic_names=(name,), timeout=timeout)
    result = conn.request(DELETE_TOPICS, request, version).responses[0]
    return ErrorCode(result.error_code), getattr(result, "error_message", None)


def topic_configs(conn: KafkaConnection, name: str) -> dict[str, str]:
    version, cls, mod = request_schema(conn, DESCRIBE_CONFIGS, 4)
    resource = mod.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=None)
    response = conn.request(DESCRIBE_CONFIGS, cls(resources=(resource,), include_synonyms=False), version)
    return {
        c.name: c.value or ""
        for c in response.results[0].configs
        if getattr(c, "config_source", 1) == 1
    }


def describe_topics(
    conn: KafkaConnection, topic: str | None, under_replicated: bool = False, unavailable: bool = False
) -> Iterator[str]:
    response = metadata(conn, [topic] if topic else None)
    live = {b.node_id for b in response.brokers}
    for t in sorted(response.topics, key=lambda t: t.name or ""):
        if t.error_code != ErrorCode.none:
            yield f"Error for topic {t.name}: {ErrorCode(t.error_code).name}"
            continue
        rf = len(t.partitions[0].replica_nodes) if t.partitions else 0
        configs = ",".join(f"{k}={v}" for k, v in sorted(topic_configs(conn, t.name).items()))
        if not (under_replicated or unavailable):
            topic_id = getattr(t, "topic_id", None)
            yield (
                f"Topic: {t.name}\tTopicId: {topic_id}\tPartitionCount: {len(t.partitions)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {configs}"
            )
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            is_under = len(p.isr_nodes) < len(p.replica_nodes)
            is_unavailable = p.leader_id < 0 or p.leader_id not in live
            if under_replicated and not is_under:
                continue
            if unavailable and not is_unavailable:
                continue
            flags = []
            if is_unavailable:
                flags.append("Offline")
            elif is_under:
                flags.append("UnderReplicated")
            yield (
                f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: "
                f"{p.leader_id if p.leader_id >= 0 else 'none'}\tReplicas: {','.join(map(str, p.replica_nodes))}\t"
                f"Isr: {','.join(map(str, p.isr_nodes))}" + (f"\t{' '.join(flags)}" if flags else "")
            )


DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
QuotaEntityParts = list[tuple[str, str | None]]
"""A quota entity as (entity type, name) pairs: ``[("user", "alice"), ("client-id", None)]``; None is the default."""


def alter_client_quotas(
    conn: KafkaConnection, entity: QuotaEntityParts, changes: dict[str, float | None], validate_only: bool = False,
) -> tuple[ErrorCode, str | None]:
    """Set (a number) or remove (None) quota keys of one entity (KIP-546's AlterClientQuotas)."""
    version, cls, mod = request_schema(conn, ALTER_CLIENT_QUOTAS, 1)
    entry = mod.EntryData(
        entity=tuple(mod.EntityData(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(mod.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                  for k, v in changes.items()),
    )
    result = conn.request(ALTER_CLIENT_QUOTAS, cls(entries=(entry,), validate_only=validate_only), version).entries[0]
    return ErrorCode(result.error_code), result.error_message


def describe_client_quotas(
    conn: KafkaConnection, components: Sequence[tuple[str, int, str | None]], strict: bool = False,
) -> list[tuple[QuotaEntityParts, dict[str, float]]]:
    """The entities matching ``(entity type, match type, match)`` components (match type 0: exact name, 1: the
    default, 2: any) and their quotas; KafkaError for a refused filter."""
    version, cls, mod = request_schema(conn, DESCRIBE_CLIENT_QUOTAS, 1)
    request = cls(components=tuple(mod.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components),
                  strict=strict)
    response = conn.request(DESCRIBE_CLIENT_QUOTAS, request, version)
    if response.error_code != ErrorCode.none:
        raise KafkaError(ErrorCode(response.error_code), response.error_message)
    return [
        ([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: float(v.value) for v in entry.values})
        for entry in response.entries or ()
    ]
