"""``odradek assign``: Kafka's placement algorithms from the command line.

``replicas`` proposes a replica assignment the way ``kafka-reassign-partitions.sh --generate`` does
(AdminUtils) and prints it in that tool's JSON format, so the output can be fed to any Kafka-compatible
reassignment tool. ``consumers`` shows how a consumer group would be split by one of Kafka's assignors, with a
balance summary.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from odradek.placement import (
    ASSIGNORS,
    BrokerMetadata,
    PlacementError,
    Subscription,
    TopicPartition,
    assign_replicas_to_brokers,
)

__all__ = ["assign", "parse_brokers", "parse_members", "parse_topics", "reassignment_json"]


def parse_brokers(spec: str) -> list[BrokerMetadata]:
    """``0:rackA,1:rackB,2`` -> brokers (a rack is optional, but Kafka requires all or none)."""
    brokers = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        broker_id, _, rack = item.partition(":")
        try:
            brokers.append(BrokerMetadata(int(broker_id), rack or None))
        except ValueError as exc:
            raise click.BadParameter(f"broker id must be an integer: {item!r}") from exc
    if not brokers:
        raise click.BadParameter("no brokers given")
    if len({b.id for b in brokers}) != len(brokers):
        raise click.BadParameter("duplicate broker id")
    return brokers


def parse_topics(spec: str) -> dict[str, int]:
    """``orders:12,audit:3`` -> partition counts, in the order given."""
    topics: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, count = item.rpartition(":")
        if not sep or not name:
            raise click.BadParameter(f"expected topic:partitions, got {item!r}")
        try:
            topics[name] = int(count)
        except ValueError as exc:
            raise click.BadParameter(f"partition count must be an integer: {item!r}") from exc
        if topics[name] < 0:
            raise click.BadParameter(f"negative partition count: {item!r}")
    if not topics:
        raise click.BadParameter("no topics given")
    return topics


def parse_members(spec: str, topics: Sequence[str]) -> dict[str, Subscription]:
    """``c1,c2@rackA,c3=orders+audit`` -> subscriptions (default every topic; ``@rack``: client rack)."""
    members: dict[str, Subscription] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        head, _, subscribed = item.partition("=")
        member, _, rack = head.partition("@")
        wanted = [t for t in subscribed.split("+") if t] if subscribed else list(topics)
        if not member:
            raise click.BadParameter(f"empty member id in {item!r}")
        members[member] = Subscription(wanted, rack=rack or None)
    if not members:
        raise click.BadParameter("no members given")
    return members


def reassignment_json(topic: str, assignment: dict[int, list[int]]) -> str:
    """The JSON ``kafka-reassign-partitions.sh`` reads and ``--generate`` prints."""
    partitions = [
        {"topic": topic, "partition": p, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for p, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


@click.group("assign")
def assign() -> None:
    """Kafka's replica placement and consumer assignment algorithms."""


@assign.command("replicas")
@click.option("--brokers", required=True, help="Brokers as id[:rack],... e.g. 0:rackA,1:rackB,2:rackA")
@click.option("--partitions", "n_partitions", type=int, required=True, help="Number of partitions.")
@click.option("--replication-factor", type=int, required=True, help="Replicas per partition.")
@click.option("--topic", default="topic", show_default=True, help="Topic name written into the JSON.")
@click.option("--start-index", type=int, default=-1, show_default=True,
              help="Kafka's fixedStartIndex; negative draws the start and shift at random as Kafka does.")
@click.option("--start-partition", type=int, default=-1, show_default=True, help="First partition id.")
@click.option("--seed", type=int, default=None, help="Seed for the random draws (reproducible output).")
def replicas_command(
    brokers: str,
    n_partitions: int,
    replication_factor: int,
    topic: str,
    start_index: int,
    start_partition: int,
    seed: int | None,
) -> None:
    """Propose a replica assignment (AdminUtils.assignReplicasToBrokers) as reassignment JSON."""
    rng = random.Random(seed) if seed is not None else None
    try:
        result = assign_replicas_to_brokers(n_partitions, replication_factor, parse_brokers(brokers),
                                            start_index, start_partition, rng=rng)
    except PlacementError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    click.echo(reassignment_json(topic, result))


@assign.command("consumers")
@click.option("--strategy", type=click.Choice(sorted(ASSIGNORS)), default="range", show_default=True)
@click.option("--members", required=True, help="Members as id[@rack][=topic+topic],... (default: all).")
@click.option("--topics", required=True, help="Topics as name:partitions,...")
@click.option("--json", "as_json", is_flag=True, help="Print the assignment as JSON instead of a table.")
def consumers_command(strategy: str, members: str, topics: str, as_json: bool) -> None:
    """Show how a consumer group would split the topics' partitions, and how balanced the split is."""
    counts = parse_topics(topics)
    subscriptions = parse_members(members, list(counts))
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    metadata = {t: n for t, n in counts.items() if t in subscribed and n > 0}
    result = ASSIGNORS[strategy]().assign(metadata, subscriptions)
    if as_json:
        click.echo(json.dumps({m: [str(tp) for tp in parts] for m, parts in result.items()}))
        return
    _print_table(strategy, result)


def _compact(parts: list[TopicPartition]) -> str:
    """``orders-0..3, audit-1`` style: consecutive partitions of a topic collapse into a range."""
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    pieces = []
    for topic, ps in by_topic.items():
        ps.sort()
        start = prev = ps[0]
        for p in [*ps[1:], None]:
            if p is not None and p == prev + 1:
                prev = p
                continue
            pieces.append(f"{topic}-{start}" if start == prev else f"{topic}-{start}..{prev}")
            if p is not None:
                start = prev = p
    return ", ".join(pieces)


def _print_table(strategy: str, result: dict[str, list[TopicPartition]]) -> None:
    console = Console()
    table = Table(title=f"{strategy} assignment")
    table.add_column("member")
    table.add_column("count", justify="right")
    table.add_column("partitions")
    for member in sorted(result):
        table.add_row(member, str(len(result[member])), _compact(result[member]))
    console.print(table)
    sizes = [len(p) for p in result.values()]
    spread = max(sizes) - min(sizes) if sizes else 0
    verdict = "balanced" if spread <= 1 else "unbalanced"
    console.print(f"{len(result)} members, {sum(sizes)} partitions, min {min(sizes, default=0)}, "
                  f"max {max(sizes, default=0)}: {verdict} (spread {spread})")
