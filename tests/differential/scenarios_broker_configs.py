"""Dynamic broker configs (KIP-226) on BROKER resources: IncrementalAlterConfigs (44), AlterConfigs (33) and
DescribeConfigs (32) on "" (the cluster default) and on the broker's own id. Kafka applies a change when its
config-change watch fires, after it has answered, so the changes that succeed here are validate-only (nothing is
left behind for later scenarios, and no answer depends on how fast the watch fires); every refusal is compared."""

from __future__ import annotations

from typing import Any

from differential_corpus import Call, Scenario

_BROKER = 4
_SET, _DELETE, _APPEND = 0, 1, 2


def _incremental(name: str, ops: list[tuple[str, int, Any]], *, validate_only: bool = False,
                 extra: list[dict[str, Any]] | None = None) -> Call:
    return Call(44, 1, {"resources": [{"resource_type": _BROKER, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}, *(extra or [])],
        "validate_only": validate_only})


def _legacy(name: str, configs: dict[str, str], *, validate_only: bool = False) -> Call:
    return Call(33, 2, {"resources": [{"resource_type": _BROKER, "resource_name": name, "configs": [
        {"name": k, "value": v} for k, v in configs.items()]}], "validate_only": validate_only})


def _describe(name: str, keys: list[str]) -> Call:
    return Call(32, 4, {"resources": [{"resource_type": _BROKER, "resource_name": name, "configuration_keys": keys}],
                        "include_synonyms": True, "include_documentation": False})


_ME = "{broker}"

SCENARIOS = [
    Scenario("incremental-alter-configs.v1.broker-validate-only",
             _incremental(_ME, [("message.max.bytes", _SET, "2000000"), ("log.cleaner.threads", _SET, "2")],
                          validate_only=True)),
    Scenario("incremental-alter-configs.v1.broker-default-validate-only",
             _incremental("", [("log.retention.ms", _SET, "3600000"), ("min.insync.replicas", _DELETE, None),
                               ("log.cleanup.policy", _APPEND, "compact")], validate_only=True)),
    Scenario("incremental-alter-configs.v1.broker-custom-name-validate-only",
             _incremental("", [("no.such.config", _SET, "1")], validate_only=True)),
    Scenario("incremental-alter-configs.v1.broker-not-dynamic",
             _incremental("", [("broker.id", _SET, "3"), ("num.partitions", _SET, "3")])),
    Scenario("incremental-alter-configs.v1.broker-per-broker-name-at-default",
             _incremental("", [("advertised.listeners", _SET, "PLAINTEXT://localhost:1")])),
    Scenario("incremental-alter-configs.v1.broker-invalid-value",
             _incremental(_ME, [("log.retention.ms", _SET, "soon")])),
    Scenario("incremental-alter-configs.v1.broker-out-of-range",
             _incremental("", [("min.insync.replicas", _SET, "0")])),
    Scenario("incremental-alter-configs.v1.broker-other-id", _incremental("77", [("message.max.bytes", _SET, "1")])),
    Scenario("incremental-alter-configs.v1.broker-not-an-id", _incremental("x", [("message.max.bytes", _SET, "1")])),
    Scenario("incremental-alter-configs.v1.broker-security-without-listener",
             _incremental(_ME, [("ssl.keystore.location", _SET, "/nowhere")])),
    Scenario("incremental-alter-configs.v1.broker-append-to-a-number",
             _incremental("", [("message.max.bytes", _APPEND, "1")])),
    Scenario("incremental-alter-configs.v1.broker-duplicate-keys",
             _incremental("", [("message.max.bytes", _SET, "1"), ("message.max.bytes", _SET, "2")])),
    Scenario("incremental-alter-configs.v1.broker-null-value", _incremental("", [("message.max.bytes", _SET, None)])),
    Scenario("incremental-alter-configs.v1.broker-thread-count-tripled",
             _incremental("", [("num.io.threads", _SET, "100")])),
    Scenario("incremental-alter-configs.v1.broker-twice",
             _incremental("", [("log.cleaner.threads", _SET, "2")], validate_only=True, extra=[
                 {"resource_type": _BROKER, "resource_name": "", "configs": []}])),
    Scenario("alter-configs.v2.broker-validate-only", _legacy(_ME, {"log.cleaner.threads": "2"}, validate_only=True)),
    Scenario("alter-configs.v2.broker-not-dynamic", _legacy("", {"broker.id": "2"})),
    Scenario("alter-configs.v2.broker-invalid-value", _legacy("", {"log.retention.ms": "x"})),
    Scenario("describe-configs.v4.broker-log-retention",
             _describe(_ME, ["log.retention.hours", "log.retention.minutes", "log.retention.ms"])),
    Scenario("describe-configs.v4.broker-dynamic-and-static-names",
             _describe(_ME, ["message.max.bytes", "log.cleaner.threads", "num.io.threads", "min.insync.replicas",
                             "log.cleanup.policy", "default.replication.factor"])),
]
