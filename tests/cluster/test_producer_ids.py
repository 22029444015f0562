"""Producer ids are unique across the cluster (found by the unclean-election test): every broker hands out ids
from blocks reserved in the store, so producers that initialise through different brokers, or after a restart,
never share an id (sharing one makes their sequence numbers collide on the partitions they both write)."""

from __future__ import annotations

import datetime
import json

from kio.index import load_request_schema

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode


def _init_producer_id(address: str) -> int:
    with KafkaConnection(address) as conn:
        version = conn.version_for(22, 4)
        cls = load_request_schema(22, version)
        fields = cls.__dataclass_fields__
        kwargs = {"transactional_id": None, "transaction_timeout": datetime.timedelta(seconds=60)}
        if "producer_id" in fields:
            kwargs.update(producer_id=-1, producer_epoch=-1)
        response = conn.request(22, cls(**kwargs), version)
    assert response.error_code == ErrorCode.none
    return int(response.producer_id)


def test_producer_ids_are_unique_across_brokers_and_restarts(cluster_factory) -> None:
    c = cluster_factory(3)
    addresses = c.bootstrap.split(",")
    ids = [_init_producer_id(a) for a in addresses for _ in range(3)]
    c.stop_broker(1, controlled=False)
    c.start_broker(1)
    ids += [_init_producer_id(a) for a in c.bootstrap.split(",")]
    assert len(ids) == len(set(ids)), ids
    block = json.loads(c.znode("/latest_producer_id_block") or b"{}")
    assert int(block["block_end"]) >= max(ids), block
