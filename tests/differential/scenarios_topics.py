"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37), DescribeConfigs (32),
AlterConfigs (33) and IncrementalAlterConfigs (44) on topics: every version, invalid names, partitions, replication
factors and configs, validate-only requests."""

from __future__ import annotations

from typing import Any

from differential_corpus import Call, Scenario, Topic

_TOPIC, _BROKER = 2, 4


def _create(version: int, name: str = "{topic}", *, partitions: int = 1, rf: int = 1,
            configs: dict[str, str] | None = None, validate_only: bool = False) -> Call:
    return Call(19, version, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                          "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                              "timeout": 30000, "validate_only": validate_only})


def _delete(version: int, name: str = "{topic}") -> Call:
    return Call(20, version, {"topic_names": [name], "topics": [{"name": name, "topic_id": None}],
                              "timeout": 30000})


def _partitions(version: int, count: int, *, validate_only: bool = False) -> Call:
    return Call(37, version, {"topics": [{"name": "{topic}", "count": count, "assignments": None}],
                              "timeout": 30000, "validate_only": validate_only})


def _describe(version: int, keys: list[str] | None, rtype: int = _TOPIC, name: str = "{topic}") -> Call:
    return Call(32, version, {"resources": [{"resource_type": rtype, "resource_name": name,
                                             "configuration_keys": keys}],
                              "include_synonyms": False, "include_documentation": False})


def _alter(version: int, configs: dict[str, str], *, validate_only: bool = False, name: str = "{topic}") -> Call:
    return Call(33, version, {"resources": [{"resource_type": _TOPIC, "resource_name": name, "configs": [
        {"name": k, "value": v} for k, v in configs.items()]}], "validate_only": validate_only})


def _incremental(version: int, ops: list[tuple[str, int, Any]], *, rtype: int = _TOPIC,
                 name: str = "{topic}", validate_only: bool = False) -> Call:
    return Call(44, version, {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate_only})


_T = (Topic(),)
_SET, _DELETE, _APPEND = 0, 1, 2

SCENARIOS = [
    *(Scenario(f"create-topics.v{v}.one-partition", _create(v)) for v in range(2, 8)),
    Scenario("create-topics.v7.three-partitions-with-config", _create(7, partitions=3,
                                                                      configs={"retention.ms": "1000"})),
    *(Scenario(f"create-topics.v{v}.already-exists", _create(v), topics=_T) for v in (2, 5, 7)),
    *(Scenario(f"create-topics.v{v}.invalid-name", _create(v, "bad name!")) for v in (2, 7)),
    Scenario("create-topics.v7.name-too-long", _create(7, "x" * 250)),
    Scenario("create-topics.v7.dot-name", _create(7, "..")),
    Scenario("create-topics.v7.zero-partitions", _create(7, partitions=0)),
    Scenario("create-topics.v7.replication-factor-too-big", _create(7, rf=3)),
    Scenario("create-topics.v7.zero-replication-factor", _create(7, rf=0)),
    Scenario("create-topics.v7.unknown-config", _create(7, configs={"no.such.config": "1"})),
    Scenario("create-topics.v7.invalid-config-value", _create(7, configs={"retention.ms": "soon"})),
    Scenario("create-topics.v7.invalid-cleanup-policy", _create(7, configs={"cleanup.policy": "shred"})),
    Scenario("create-topics.v7.min-isr-bigger-than-rf", _create(7, configs={"min.insync.replicas": "2"})),
    *(Scenario(f"create-topics.v{v}.validate-only", _create(v, validate_only=True)) for v in (2, 7)),
    Scenario("create-topics.v7.validate-only-invalid", _create(7, partitions=0, validate_only=True)),
    Scenario("create-topics.v5.default-partitions", _create(5, partitions=-1, rf=-1)),
    *(Scenario(f"delete-topics.v{v}.existing", _delete(v), topics=_T) for v in range(1, 7)),
    *(Scenario(f"delete-topics.v{v}.unknown", _delete(v)) for v in (1, 4, 6)),
    *(Scenario(f"create-partitions.v{v}.grow", _partitions(v, 3), topics=_T) for v in range(4)),
    Scenario("create-partitions.v3.same-count", _partitions(3, 1), topics=_T),
    Scenario("create-partitions.v3.shrink", _partitions(3, 1), topics=(Topic(2),)),
    Scenario("create-partitions.v3.unknown-topic", _partitions(3, 2)),
    Scenario("create-partitions.v3.validate-only", _partitions(3, 4, validate_only=True), topics=_T),
    *(Scenario(f"describe-configs.v{v}.topic-keys", _describe(v, ["retention.ms", "cleanup.policy",
                                                                  "min.insync.replicas"]),
               topics=(Topic(configs={"retention.ms": "60000"}),)) for v in range(1, 5)),
    Scenario("describe-configs.v4.topic-all", _describe(4, None), topics=(Topic(configs={"retention.ms": "60000"}),)),
    Scenario("describe-configs.v4.unknown-topic", _describe(4, None)),
    Scenario("describe-configs.v4.unknown-key", _describe(4, ["no.such.config"]), topics=_T),
    Scenario("describe-configs.v4.broker-min-isr", _describe(4, ["min.insync.replicas"], _BROKER, "{broker}")),
    Scenario("describe-configs.v4.broker-keys", _describe(4, ["num.partitions", "log.retention.hours",
                                                              "auto.create.topics.enable",
                                                              "default.replication.factor"], _BROKER,
                                                          "{broker}")),
    Scenario("describe-configs.v4.broker-default-resource", _describe(4, None, _BROKER, "")),
    Scenario("describe-configs.v4.broker-default-resource-keys", _describe(4, ["min.insync.replicas"], _BROKER, "")),
    Scenario("describe-configs.v4.other-broker", _describe(4, None, _BROKER, "77")),
    Scenario("describe-configs.v4.broker-logger", _describe(4, ["kafka.server.ReplicaManager"], 8, "{broker}")),
    Scenario("describe-configs.v4.invalid-resource-type", _describe(4, None, 9, "x")),
    *(Scenario(f"alter-configs.v{v}.topic", _alter(v, {"retention.ms": "5000"}), topics=_T) for v in range(3)),
    Scenario("alter-configs.v2.unknown-topic", _alter(2, {"retention.ms": "5000"})),
    Scenario("alter-configs.v2.invalid-value", _alter(2, {"retention.ms": "soon"}), topics=_T),
    Scenario("alter-configs.v2.unknown-config", _alter(2, {"no.such.config": "1"}), topics=_T),
    Scenario("alter-configs.v2.validate-only", _alter(2, {"retention.ms": "5000"}, validate_only=True),
             topics=_T),
    *(Scenario(f"incremental-alter-configs.v{v}.set", _incremental(v, [("retention.ms", _SET, "5000")]),
               topics=_T) for v in range(2)),
    Scenario("incremental-alter-configs.v1.delete", _incremental(1, [("retention.ms", _DELETE, None)]),
             topics=(Topic(configs={"retention.ms": "60000"}),)),
    Scenario("incremental-alter-configs.v1.append-list", _incremental(1, [("cleanup.policy", _APPEND, "compact")]),
             topics=_T),
    Scenario("incremental-alter-configs.v1.unknown-topic", _incremental(1, [("retention.ms", _SET, "5000")])),
    Scenario("incremental-alter-configs.v1.invalid-value", _incremental(1, [("retention.ms", _SET, "soon")]),
             topics=_T),
    Scenario("incremental-alter-configs.v1.invalid-operation", _incremental(1, [("retention.ms", 7, "5")]),
             topics=_T),
    Scenario("incremental-alter-configs.v1.broker-min-isr",
             _incremental(1, [("min.insync.replicas", _SET, "1")], rtype=_BROKER, name="", validate_only=True)),
]
