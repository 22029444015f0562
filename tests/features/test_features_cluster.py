"""Finalized features on a two-broker cluster: ``/feature`` as Kafka writes it, every broker reporting it in
ApiVersions, and UpdateFeatures on the controller (and NOT_CONTROLLER elsewhere)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from brokers import wait_for
from odradek.client import KafkaConnection
from odradek.controller.features import FAILED_WHOLE
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode
from odradek.testing import ThreadedCluster

UPDATE_FEATURES, API_VERSIONS = 57, 18


def features_of(conn: KafkaConnection, version: int = 4) -> tuple[int, dict[str, tuple[int, int]], dict[str, int]]:
    request = load_request_schema(API_VERSIONS, version)(client_software_name="t", client_software_version="1")
    answer = conn.request(API_VERSIONS, request, version)
    return (int(answer.finalized_features_epoch),
            {f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features},
            {f.name: int(f.max_version_level) for f in answer.finalized_features})


def update(conn: KafkaConnection, *updates: tuple[str, int, int], validate_only: bool = False,
           version: int = 1) -> Any:
    cls = load_request_schema(UPDATE_FEATURES, version)
    key = __import__(cls.__module__, fromlist=["FeatureUpdateKey"]).FeatureUpdateKey
    return conn.request(UPDATE_FEATURES, cls(
        feature_updates=tuple(key(feature=f, max_version_level=level, upgrade_type=kind) for f, level, kind in updates),
        validate_only=validate_only), version)


def heartbeat(conn: KafkaConnection) -> Any:
    cls = load_request_schema(68, 0)
    return conn.request(68, cls(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                                rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("t",),
                                server_assignor=None, topic_partitions=()), 0)


def znode(cluster: ThreadedCluster, path: str) -> bytes:
    async def read() -> bytes:
        return (await cluster.cluster.brokers[cluster.broker_ids[0]].membership.current().get(path))[0]
    return cluster.call(read())


def test_finalized_features_across_the_cluster(tmp_path: Path) -> None:
    cluster = ThreadedCluster(2, tmp_path).start()
    try:
        controller = cluster.wait_for_controller()
        address = dict(zip(cluster.broker_ids, cluster.bootstrap.split(","), strict=True))
        other = next(b for b in cluster.broker_ids if b != controller)
        conns = {b: KafkaConnection(a) for b, a in address.items()}
        try:
            on_controller, elsewhere = conns[controller], conns[other]
            # The controller made /feature Enabled with every supported feature at its highest level, in Kafka's JSON.
            wait_for(lambda: all(features_of(c)[0] == 0 for c in conns.values()), what="every broker read /feature")
            assert json.loads(znode(cluster, zn.FEATURE)) == {
                "version": 2, "status": 1, "features": {"group.version": {"max_version_level": 1}}}
            registration = json.loads(znode(cluster, zn.broker_path(other)))
            assert registration["version"] == 5
            assert registration["features"] == {"group.version": {"min_version": 0, "max_version": 1}}
            assert features_of(elsewhere) == (0, {"group.version": (0, 1)}, {"group.version": 1})
            assert features_of(elsewhere, 3) == (0, {}, {"group.version": 1})  # a range from 0 is hidden below v4

            # Only the controller serves UpdateFeatures.
            refused = update(elsewhere, ("group.version", 0, 2))
            assert (refused.error_code, refused.results) == (ErrorCode.not_controller, ())

            def failed(*updates: tuple[str, int, int]) -> tuple[ErrorCode, str | None]:
                answer = update(on_controller, *updates)
                assert answer.results == ()
                return answer.error_code, answer.error_message

            bad, whole = ErrorCode.invalid_update_version, FAILED_WHOLE
            assert failed(("group.version", 2, 1)) == (
                bad, f"{whole}Invalid update version 2 for feature group.version. Local controller {controller} only "
                     "supports versions [0, 1]")
            assert failed(("share.version", 1, 1)) == (
                bad, f"{whole}Invalid update version 1 for feature share.version. Local controller {controller} "
                     "does not support this feature.")
            assert failed(("group.version", 0, 1)) == (
                bad, f"{whole}Invalid update version 0 for feature group.version. Can't downgrade the version of "
                     "this feature without setting the upgrade type to either safe or unsafe downgrade.")
            assert failed(("group.version", 0, 7)) == (
                bad, f"{whole}Invalid update version 0 for feature group.version. The controller does not support "
                     "the given upgrade type.")
            # one bad update fails the request whole
            assert failed(("group.version", 0, 2), ("transaction.version", 1, 1))[0] is bad
            checked = update(on_controller, ("group.version", 0, 2), validate_only=True)
            assert (checked.error_code, [(r.feature, r.error_code) for r in checked.results]) == (
                ErrorCode.none, [("group.version", ErrorCode.none)])
            assert features_of(on_controller)[0] == 0  # validate_only wrote nothing

            # A safe downgrade to 0 takes the feature out of /feature; every broker reports the new epoch.
            assert update(on_controller, ("group.version", 0, 2)).error_code is ErrorCode.none
            wait_for(lambda: all(features_of(c)[0] == 1 for c in conns.values()), what="epoch 1 everywhere")
            assert features_of(elsewhere) == (1, {"group.version": (0, 1)}, {})
            assert json.loads(znode(cluster, zn.FEATURE))["features"] == {}
            # the consumer group protocol is off on every broker, as Kafka 4.x turns it off
            for conn in conns.values():
                refused_heartbeat = heartbeat(conn)
                assert (refused_heartbeat.error_code, refused_heartbeat.error_message) == (
                    ErrorCode.unsupported_version, "The version of API is not supported.")
            assert update(on_controller, ("group.version", 1, 1), version=2).error_code is ErrorCode.none
            wait_for(lambda: all(features_of(c) == (2, {"group.version": (0, 1)}, {"group.version": 1})
                                 for c in conns.values()), what="epoch 2 everywhere")
            assert heartbeat(elsewhere).error_code is not ErrorCode.unsupported_version
        finally:
            for conn in conns.values():
                conn.close()
    finally:
        cluster.close()
