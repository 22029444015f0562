"""confluent-kafka clients closed when the test that opened them ends, before its brokers stop.

A client left to the garbage collector keeps librdkafka's threads, which reconnect to brokers that have stopped
and fill CI's log; one caught in a reference cycle (a frame kept by a traceback, a callback holding its owner)
lives until some later collection. Tests and their helpers wrap each client they open in :func:`opened`; the
``pytest_runtest_teardown`` hook in ``tests/conftest.py`` closes them all (as the CLI closes its own:
:func:`odradek.cli.clients.close`) before any fixture of the test is torn down, so while the brokers still answer.
"""

from __future__ import annotations

from typing import Any, TypeVar

from odradek.cli.clients import close

T = TypeVar("T")
_open: list[Any] = []


def opened(client: T) -> T:
    """``client`` (a Producer, Consumer or AdminClient), to be closed when the running test ends."""
    _open.append(client)
    return client


def close_opened() -> None:
    """Close every client :func:`opened` since the last call, newest first; one that fails to close (a consumer
    whose group coordinator refuses it, say) does not keep the others open, and the first failure is raised last."""
    failure: Exception | None = None
    while _open:
        try:
            close(_open.pop())
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
