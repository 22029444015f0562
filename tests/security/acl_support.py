"""Helpers of the ACL tests: the authorizer settings, and running a real handler as a given principal."""

from __future__ import annotations

import io
import time
import types
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader

from odradek.broker.apis import Encoded, RequestContext
from odradek.testing import ThreadedCluster

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
    "offsets.topic.replication.factor": "2",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "2",
    "transaction.state.log.num.partitions": "2",
    "transaction.state.log.min.isr": "1",
}


def call(cluster: ThreadedCluster, principal: str, key: int, version: int, request: Any, *, broker: int = 0,
         host: str = "127.0.0.1") -> Any:
    """Run the real handler of API ``key`` on a running broker for ``principal``; the answer as kio decodes it (a
    hand-encoded answer is decoded from its bytes)."""

    async def run() -> Any:
        b = cluster.cluster.brokers[broker]
        api = b.services.apis[key]
        ctx = RequestContext(b.services, key, version, 1, "acl-test", host, principal=principal)
        response = await api.handle(ctx, request)
        if isinstance(response, Encoded):
            body = b"".join(bytes(x) for x in response.buffers)
            decoded, _ = entity_reader(load_response_schema(key, version))(io.BytesIO(body).getvalue(), 0)
            return decoded
        return response

    return cluster.call(run())


def ns(**fields: Any) -> types.SimpleNamespace:
    """A request (or a part of one) with just the fields the handler reads."""
    return types.SimpleNamespace(**fields)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)



def znode(cluster: ThreadedCluster, path: str) -> bytes | None:
    """The data at ``path`` in the coordination store (None when absent), read through broker 0's session."""
    from odradek.coordination import NoNodeError

    async def read() -> bytes | None:
        try:
            data, _ = await cluster.cluster.brokers[0].membership.current().get(path)
        except NoNodeError:
            return None
        return data

    return cluster.call(read())
