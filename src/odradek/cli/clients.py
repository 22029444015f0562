"""The confluent-kafka clients a command opens, closed when the command ends, without waiting on gone brokers.

Left to the garbage collector, a client's librdkafka threads outlive the command that made it: a caller that runs
commands in-process (tests, through click's runner) sees them reconnect to brokers that have stopped. Each
command registers the clients it opens with :func:`closed_when_done`; click closes them as the command's context
ends, whether it returned, failed or exited.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

import click

T = TypeVar("T")

ABORT_TIMEOUT_S = 5.0


def closed_when_done(client: T) -> T:
    """``client`` (a Producer, Consumer or AdminClient), closed by :func:`close` when the running command ends."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(lambda: close(client))
    return client


def close(client: Any) -> None:
    """Close ``client`` without waiting on brokers that may be gone; closing a client twice is harmless.

    A producer's undelivered records are purged first (its ``close`` would wait ``message.timeout.ms`` for them),
    and an open transaction is aborted with a deadline, as its ``close`` aborts one without any and waits forever
    when no coordinator answers. A producer whose abort timed out is left to the garbage collector, as destroying it
    does not wait; one that cannot abort (fenced, or with no transaction) is closed, and an error its ``close``
    raises about that transaction is dropped. An AdminClient has no ``close``: leaving its context destroys its
    handle.
    """
    from confluent_kafka import KafkaError, KafkaException, Producer

    if isinstance(client, Producer):
        try:
            client.purge()
        except RuntimeError:  # closed already
            return
        try:
            client.flush(0)  # serves the purged records' delivery callbacks; raises a fatal error still pending
            client.abort_transaction(ABORT_TIMEOUT_S)
        except KafkaException as exc:  # no transaction, none configured, fenced: nothing to abort
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._TIMED_OUT:
                return
        with warnings.catch_warnings():  # its own abort failing again (fenced) is said as a RuntimeWarning...
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                client.close()
            except KafkaException:  # ...or raised, when the fencing came with a restart of its coordinator
                pass
    elif hasattr(client, "close"):
        client.close()
    else:
        client.__exit__(None, None, None)
