"""``odradek produce`` and ``odradek consume``: Kafka's console producer and consumer, line by line on stdin/stdout.

The properties are the console tools' own (``parse.key``, ``key.separator``, ``print.key``, ``print.timestamp``,
``print.partition``, ``print.offset``, ``print.value``), so shell pipelines written for kafka-console-producer.sh
and kafka-console-consumer.sh work unchanged. Both run on librdkafka (confluent-kafka), a real client.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from odradek.cli.clients import closed_when_done
from odradek.cli.security import command_config_option, rdkafka_config

TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def _properties(values: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected name=value for --property, got {item!r}")
        out[name.strip()] = value
    return out


def _flag(props: dict[str, str], name: str, default: bool = False) -> bool:
    return props.get(name, str(default)).strip().lower() == "true"


def split_line(line: str, number: int, parse_key: bool, separator: str) -> tuple[bytes | None, bytes]:
    """A producer input line as (key, value); with parse.key a line without the separator is an error, as in Kafka."""
    if not parse_key:
        return None, line.encode()
    key, sep, value = line.partition(separator)
    if not sep:
        raise click.ClickException(f"No key separator found on line number {number}: '{line}'")
    return key.encode(), value.encode()


def format_message(message: Any, props: dict[str, str]) -> bytes:
    """One record as Kafka's DefaultMessageFormatter prints it: the chosen fields joined by ``key.separator``."""
    separator = props.get("key.separator", "\t").encode()
    fields: list[bytes] = []
    if _flag(props, "print.timestamp"):
        kind, ts = message.timestamp()
        fields.append(f"{TIMESTAMP_TYPES.get(kind, 'NoTimestampType')}:{ts}".encode())
    if _flag(props, "print.partition"):
        fields.append(f"Partition:{message.partition()}".encode())
    if _flag(props, "print.offset"):
        fields.append(f"Offset:{message.offset()}".encode())
    if _flag(props, "print.headers"):
        headers = message.headers() or []
        fields.append(b",".join(k.encode() + b":" + (v if v is not None else b"null") for k, v in headers)
                      or b"NO_HEADERS")
    if _flag(props, "print.key"):
        key = message.key()
        fields.append(key if key is not None else b"null")
    if _flag(props, "print.value", True):
        value = message.value()
        fields.append(value if value is not None else b"null")
    return separator.join(fields) + props.get("line.separator", "\n").encode()


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--topic", required=True)
@click.option("--property", "properties", multiple=True, help="parse.key=true, key.separator=: (name=value)")
@click.option("--producer-property", "producer_properties", multiple=True, help="librdkafka producer config")
@click.option("--request-required-acks", default="-1", show_default=True, help="acks: 0, 1 or -1 (all)")
@click.option("--compression-codec", default="none", show_default=True,
              type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]))
@click.option("--sync", is_flag=True, help="wait for each record's acknowledgement before sending the next")
@command_config_option("--producer.config")
def produce(
    bootstrap: str, topic: str, properties: tuple[str, ...], producer_properties: tuple[str, ...],
    request_required_acks: str, compression_codec: str, sync: bool, command_config: dict[str, str],
) -> None:
    """Send each line of stdin as one record, as kafka-console-producer.sh does."""
    from confluent_kafka import Producer

    props = _properties(properties)
    parse_key = _flag(props, "parse.key")
    separator = props.get("key.separator", "\t")
    config = rdkafka_config(bootstrap, command_config, producer_properties)
    config.setdefault("acks", request_required_acks)
    config.setdefault("compression.type", compression_codec)
    config.setdefault("linger.ms", 5)
    producer = closed_when_done(Producer(config))
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(f"Error when sending message to topic {topic} with key: "
                            f"{len(message.key() or b'')} bytes, value: {len(message.value() or b'')} bytes "
                            f"with error: {error.str()}")

    try:
        for number, raw in enumerate(sys.stdin, 1):
            line = raw.rstrip("\n").rstrip("\r")
            key, value = split_line(line, number, parse_key, separator)
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: let deliveries drain it
            producer.poll(0)
            if sync:
                producer.flush(30)
    finally:
        remaining = producer.flush(30)  # what was read before a bad line is still sent
    for line in failures:
        click.echo(line, err=True)
    if failures or remaining:
        if remaining:
            click.echo(f"{remaining} records were not acknowledged within 30 s", err=True)
        sys.exit(1)


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--topic", required=True)
@click.option("--group", default=None, help="consumer group (a fresh console-consumer-N group without it)")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset when there is no committed one")
@click.option("--partition", type=int, default=None, help="read only this partition (no group membership)")
@click.option("--offset", default=None, help="with --partition: earliest, latest or an offset (default latest)")
@click.option("--max-messages", type=int, default=None, help="exit after this many records")
@click.option("--timeout-ms", type=int, default=None, help="exit when no record arrives for this long")
@click.option("--property", "properties", multiple=True,
              help="print.key=true, key.separator=:, print.timestamp/partition/offset/headers/value")
@click.option("--consumer-property", "consumer_properties", multiple=True, help="librdkafka consumer config")
@command_config_option("--consumer.config")
def consume(
    bootstrap: str, topic: str, group: str | None, from_beginning: bool, partition: int | None, offset: str | None,
    max_messages: int | None, timeout_ms: int | None, properties: tuple[str, ...],
    consumer_properties: tuple[str, ...], command_config: dict[str, str],
) -> None:
    """Print the topic's records to stdout, one per line, as kafka-console-consumer.sh does."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

    if offset is not None and partition is None:
        raise click.UsageError("The partition is required when offset is specified.")
    if offset is not None and from_beginning:
        raise click.UsageError("Options from-beginning and offset cannot be specified together.")
    props = _properties(properties)
    config = rdkafka_config(bootstrap, command_config, consumer_properties)
    config.setdefault("group.id", group or f"console-consumer-{random.randrange(100000)}")
    config.setdefault("enable.auto.commit", group is not None)
    config.setdefault("auto.offset.reset", "earliest" if from_beginning else "latest")
    consumer = closed_when_done(Consumer(config))
    if partition is not None:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        if offset is not None and offset not in ("earliest", "latest"):
            try:
                start = int(offset)
            except ValueError:
                raise click.UsageError(f"--offset takes earliest, latest or a number, not {offset!r}") from None
        elif offset == "earliest":
            start = OFFSET_BEGINNING
        consumer.assign([TopicPartition(topic, partition, start)])
    else:
        consumer.subscribe([topic])
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while max_messages is None or count < max_messages:
            message = consumer.poll(0.2)
            if message is None:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    click.echo("[ERROR] Error processing message, terminating consumer process: TimeoutException",
                               err=True)
                    break
                continue
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                continue  # informational (partition EOF and the like)
            last = time.monotonic()
            out.write(format_message(message, props))
            out.flush()
            count += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        click.echo(f"Processed a total of {count} messages", err=True)
