"""The ``_schemas`` topic: created compacted with one partition, followed from its start by a reader thread, and
written by the primary with acks=all.

librdkafka's clients block, so they run on threads of their own and hand what they read to the event loop with
``call_soon_threadsafe``; records are applied there, in offset order, one at a time. A write returns once the
reader has applied it, so the writer's next decision sees its own write (as Confluent's KafkaStore waits for its
reader to reach the offset it produced).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.schema_registry import errors
from odradek.schema_registry.records import Record, decode_key, decode_value

log = logging.getLogger(__name__)

TOPIC = "_schemas"
REFUSALS = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                      KafkaError.CLUSTER_AUTHORIZATION_FAILED})
"""What the cluster's authorizer answers when the registry's principal lacks an ACL it needs."""
Apply = Callable[[dict[str, Any], dict[str, Any] | None], None]


class NotAuthorized(Exception):
    """The cluster's authorizer refused the registry's principal access to the topic (or to create it)."""


def refusal(exc: KafkaException) -> str | None:
    """The broker's words when ``exc`` is an authorization refusal; None for any other failure."""
    error = exc.args[0] if exc.args else None
    return str(error.str()) if isinstance(error, KafkaError) and error.code() in REFUSALS else None


def create_topic(config: Mapping[str, Any], topic: str, timeout_s: float, replication_factor: int = 3,
                 brokers_wait_s: float = 0.0) -> None:
    """Create the topic compacted, one partition, with ``replication_factor`` replicas; an existing topic is kept as
    it is. Blocking.

    With fewer live brokers than that, Confluent's registry settles for as many as are live (and warns): a broker
    that starts a moment before its peers would then make a topic it alone holds, lost with it. So beside brokers
    (``brokers_wait_s`` > 0) the registry first waits that long for enough brokers to register, and only then
    settles, with the same warning."""
    admin = AdminClient(dict(config))
    deadline = time.monotonic() + brokers_wait_s
    said = False
    while True:
        metadata = admin.list_topics(timeout=timeout_s)
        if topic in metadata.topics:
            return
        live = len(metadata.brokers)
        if live >= replication_factor or time.monotonic() >= deadline:
            break
        if not said:
            log.info("creating %s: %d live broker(s), waiting up to %.0f s for %d", topic, live, brokers_wait_s,
                     replication_factor)
            said = True
        time.sleep(0.5)
    replicas = max(1, min(replication_factor, live))
    if replicas < replication_factor:
        log.warning("creating %s with replication factor %d, less than the desired %d: only %d broker(s) are live; "
                    "add brokers and raise the topic's replication factor before relying on it", topic, replicas,
                    replication_factor, live)
    future = admin.create_topics([NewTopic(topic, 1, replicas, config={"cleanup.policy": "compact"})],
                                 operation_timeout=timeout_s, request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    except concurrent.futures.TimeoutError:
        # created, but its leader not announced in time (a cluster still forming): high_watermark waits for it
        log.warning("creating %s: no answer in %.0f s; going on to read it", topic, timeout_s)


def high_watermark(consumer: Consumer, topic: str, timeout_s: float) -> int:
    """The partition's end offset, asked again until it has a leader that answers (or ``timeout_s`` is up).
    Blocking."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=min(5.0, timeout_s))
            return int(high)
        except KafkaException as exc:
            if time.monotonic() >= deadline or refusal(exc) is not None:
                raise
            log.info("reading %s's end offset: %s; asking again", topic, exc)
            time.sleep(0.5)


class KafkaStore:
    def __init__(self, config: Mapping[str, Any], apply: Apply, topic: str = TOPIC,
                 timeout_s: float = 30.0, replication_factor: int = 3, brokers_wait_s: float = 0.0) -> None:
        self.config = dict(config)
        self.topic = topic
        self.timeout_s = timeout_s
        self.replication_factor = replication_factor  # Confluent's kafkastore.topic.replication.factor
        self.brokers_wait_s = brokers_wait_s
        self._apply = apply
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self.applied = -1
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    async def start(self) -> None:
        """Create the topic if it is missing, start following it, and return once everything in it is applied.
        Raises :class:`NotAuthorized` when the authorizer refuses to describe, create or read the topic (nothing
        is left running then, so ``start`` can be called again once ACLs allow it)."""
        self._loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(create_topic, self.config, self.topic, self.timeout_s, self.replication_factor,
                                    self.brokers_wait_s)
        except KafkaException as exc:
            self._raise_if_refused(exc)
            raise
        # made once the topic exists: a consumer that first saw it missing reports it unknown for a long while
        consumer = Consumer({**self.config, "group.id": f"odradek-schema-registry-reader-{uuid.uuid4()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            high = await asyncio.to_thread(high_watermark, consumer, self.topic, self.timeout_s)
        except BaseException as exc:
            await asyncio.to_thread(consumer.close)
            if isinstance(exc, KafkaException):
                self._raise_if_refused(exc)
            raise
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._follow, args=(consumer,), name="schema-registry-reader",
                                        daemon=True)
        self._thread.start()
        self._producer = self._new_producer()
        await self.wait_for(high - 1)

    def _new_producer(self) -> Producer:
        return Producer({**self.config, "acks": "all", "enable.idempotence": True, "linger.ms": 0})

    def _raise_if_refused(self, exc: KafkaException) -> None:
        """:class:`NotAuthorized` in place of ``exc`` when it is the authorizer's refusal."""
        refused = refusal(exc)
        if refused is not None:
            raise NotAuthorized(f"{self.topic}: {refused}") from exc

    async def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5.0)
            self._producer = None  # librdkafka's handle goes with its last reference: no reconnects after a stop
        for _, future in self._waiters:
            future.cancel()

    def _follow(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    log.warning("reading %s: %s", self.topic, msg.error())
                    continue
                self._post(msg.offset() or 0, msg.key(), msg.value())
        finally:
            consumer.close()

    def _post(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._deliver, offset, key, value)
            except RuntimeError:  # the loop closed between the check and the call: we are stopping
                pass

    def _deliver(self, offset: int, raw_key: bytes | None, raw_value: bytes | None) -> None:
        key = decode_key(raw_key) if raw_key is not None else None
        if key is not None:
            try:
                self._apply(key, decode_value(raw_value))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("skipping the record at %s offset %d: %s", self.topic, offset, exc)
        self.applied = offset
        still = []
        for wanted, future in self._waiters:
            if wanted <= offset:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((wanted, future))
        self._waiters = still

    async def wait_for(self, offset: int) -> None:
        """Return once the record at ``offset`` has been applied (at once for -1 or an applied offset)."""
        if offset <= self.applied:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        try:
            await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            raise errors.RegistryError(500, errors.OPERATION_TIMEOUT,
                                       f"Timed out waiting for the Kafka store to reach offset {offset}") from None

    async def write(self, batch: Sequence[Record]) -> None:
        """Produce the records in order and wait until the reader has applied the last of them."""
        if not batch:
            return
        last = await asyncio.to_thread(self._produce, batch)
        await self.wait_for(last)

    def _produce(self, batch: Sequence[Record]) -> int:
        producer = self._producer
        assert producer is not None
        outcomes: list[Any] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            outcomes.append(err if err is not None else msg.offset())

        try:
            for record in batch:
                key, value = record.encode()
                producer.produce(self.topic, value=value, key=key, partition=0, on_delivery=delivered)
            producer.flush(self.timeout_s)
        except KafkaException as exc:  # an idempotent producer refused its producer id is fatally failed
            outcomes.append(exc.args[0])
        failures = [o for o in outcomes if isinstance(o, KafkaError)]
        if failures or len(outcomes) < len(batch):
            cause = failures[0].str() if failures else "timeout"
            log.warning("schema registry: writing to %s failed: %s", self.topic, cause)
            if any(f.fatal() or f.code() in REFUSALS for f in failures):
                self._producer = self._new_producer()  # a fresh producer id once ACLs allow the next write
            raise errors.RegistryError(500, errors.STORE_ERROR, f"Error while writing to the Kafka store: {cause}")
        return max(outcomes)
