"""``odradek reassign`` and ``odradek elect``: kafka-reassign-partitions.sh and kafka-leader-election.sh over the wire.

Both tools speak to the active controller only (the brokers answer NOT_CONTROLLER otherwise), so every command
first asks any broker's Metadata which broker is the controller and opens a connection to it. The JSON files are
the ones Kafka's tools read and write, so existing plans and rollback files work unchanged.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from odradek.admin import metadata, request_schema
from odradek.cli.security import command_config_option, connect
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.placement import BrokerMetadata
from odradek.placement.replicas import assign_replicas_to_brokers

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
PREFERRED, UNCLEAN = 0, 1
ELECTION_NAMES = {PREFERRED: "PREFERRED", UNCLEAN: "UNCLEAN"}

TP = tuple[str, int]
Outcome = tuple[ErrorCode, str | None]


def controller_connection(bootstrap: str, properties: Mapping[str, str] | None = None,
                          timeout_s: float = 30.0) -> KafkaConnection:
    """A connection to the broker Metadata names as controller, retried while a controller election runs."""
    deadline = time.monotonic() + timeout_s
    while True:
        with connect(bootstrap, properties or {}) as conn:
            response = metadata(conn, [])
        brokers = {b.node_id: b for b in response.brokers}
        controller = brokers.get(response.controller_id)
        if controller is not None:
            return connect(f"{controller.host}:{controller.port}", properties or {})
        if time.monotonic() > deadline:
            raise click.ClickException("the cluster has no controller")
        time.sleep(0.2)


def partition_assignment(conn: KafkaConnection, topics: Iterable[str] | None) -> dict[TP, list[int]]:
    """Replicas of every partition of ``topics`` (all topics for None) as the brokers' metadata has them."""
    response = metadata(conn, None if topics is None else list(topics))
    out: dict[TP, list[int]] = {}
    for t in response.topics:
        if t.error_code != ErrorCode.none:
            raise click.ClickException(f"topic {t.name}: {ErrorCode(t.error_code).name.upper()}")
        for p in t.partitions:
            out[(t.name, p.partition_index)] = [int(r) for r in p.replica_nodes]
    return out


def elect_leaders(conn: KafkaConnection, election_type: int, partitions: Iterable[TP] | None) -> dict[TP, Outcome]:
    """ElectLeaders; ``None`` elects every partition. Raises on a top-level error (CLUSTER_AUTHORIZATION_FAILED,
    ...); a broker that is no longer the controller refuses each partition with NOT_CONTROLLER instead."""
    version, cls, mod = request_schema(conn, ELECT_LEADERS, 2)
    wanted: dict[str, list[int]] | None = None
    if partitions is not None:
        wanted = {}
        for topic, index in partitions:
            wanted.setdefault(topic, []).append(index)
    kwargs: dict[str, Any] = {
        "topic_partitions": None if wanted is None else tuple(
            mod.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in sorted(wanted.items())
        ),
        "timeout": datetime.timedelta(seconds=60),
    }
    if "election_type" in cls.__dataclass_fields__:
        kwargs["election_type"] = election_type
    response = conn.request(ELECT_LEADERS, cls(**kwargs), version)
    top = ErrorCode(getattr(response, "error_code", 0))
    if top != ErrorCode.none:
        raise click.ClickException(f"leader election failed: {top.name.upper()}")
    return {
        (t.topic, int(p.partition_id)): (ErrorCode(p.error_code), p.error_message)
        for t in response.replica_election_results for p in t.partition_result
    }


def alter_reassignments(conn: KafkaConnection, targets: Mapping[TP, list[int] | None]) -> dict[TP, Outcome]:
    """AlterPartitionReassignments: a replica list starts (or redirects) a move, None cancels it."""
    version, cls, mod = request_schema(conn, ALTER_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(mod.ReassignablePartition(
            partition_index=index, replicas=None if replicas is None else tuple(replicas)))
    request = cls(
        timeout=datetime.timedelta(seconds=60),
        topics=tuple(mod.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )
    response = conn.request(ALTER_REASSIGNMENTS, request, version)
    top = ErrorCode(response.error_code)
    if top != ErrorCode.none:
        raise click.ClickException(f"reassignment failed: {top.name.upper()}: {response.error_message or ''}")
    return {
        (t.name, int(p.partition_index)): (ErrorCode(p.error_code), p.error_message)
        for t in response.responses for p in t.partitions
    }


def list_reassignments(conn: KafkaConnection) -> dict[TP, tuple[list[int], list[int], list[int]]]:
    """Ongoing reassignments: partition -> (replicas, adding, removing)."""
    version, cls, _mod = request_schema(conn, LIST_REASSIGNMENTS, 0)
    response = conn.request(LIST_REASSIGNMENTS, cls(timeout=datetime.timedelta(seconds=30), topics=None), version)
    top = ErrorCode(response.error_code)
    if top != ErrorCode.none:
        raise click.ClickException(f"listing reassignments failed: {top.name.upper()}")
    return {
        (t.name, int(p.partition_index)): (
            [int(r) for r in p.replicas], [int(r) for r in p.adding_replicas], [int(r) for r in p.removing_replicas])
        for t in response.topics for p in t.partitions
    }


# --- the JSON of Kafka's tools --------------------------------------------------------------------------------


def assignment_json(assignment: Mapping[TP, list[int]]) -> str:
    """The reassignment JSON kafka-reassign-partitions.sh prints (and reads back), in partition order."""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_reassignment_json(text: str) -> dict[TP, list[int]]:
    try:
        doc = json.loads(text)
        entries = doc["partitions"]
        out = {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]] for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"not a partition reassignment JSON: {exc}") from None
    for (topic, index), replicas in out.items():
        if not replicas or len(set(replicas)) != len(replicas):
            raise click.ClickException(f"partition {topic}-{index}: replica list {replicas} is empty or repeats")
    return out


def parse_topics_to_move_json(text: str) -> list[str]:
    try:
        return [str(t["topic"]) for t in json.loads(text)["topics"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"not a topics-to-move JSON: {exc}") from None


def propose_assignment(
    current: Mapping[TP, list[int]], brokers: list[BrokerMetadata], seed_start: int = -1
) -> dict[TP, list[int]]:
    """Kafka's --generate: each topic placed afresh over the given brokers with its own partition count and RF."""
    topics: dict[str, list[int]] = {}
    for (topic, _index), replicas in current.items():
        topics.setdefault(topic, []).append(len(replicas))
    proposed: dict[TP, list[int]] = {}
    for topic, rfs in sorted(topics.items()):
        rf = rfs[0]
        if rf > len(brokers):
            raise click.ClickException(f"topic {topic} has replication factor {rf} but only {len(brokers)} brokers")
        placed = assign_replicas_to_brokers(len(rfs), rf, brokers, fixed_start_index=seed_start)
        proposed.update({(topic, p): list(r) for p, r in placed.items()})
    return proposed


def _names(tps: Iterable[TP]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


# --- click commands --------------------------------------------------------------------------------------------


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--generate", "action", flag_value="generate")
@click.option("--execute", "action", flag_value="execute")
@click.option("--verify", "action", flag_value="verify")
@click.option("--topics-to-move-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--reassignment-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--broker-list", default=None, help="with --generate: comma-separated target broker ids")
@click.option("--disable-rack-aware", is_flag=True, help="with --generate: ignore racks")
@click.option("--watch", is_flag=True, help="with --verify: poll until every reassignment is done, with a progress bar")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float,
              help="with --verify --watch: give up after this many seconds")
@command_config_option()
def reassign(
    bootstrap: str, action: str | None, topics_to_move_json_file: Path | None, reassignment_json_file: Path | None,
    broker_list: str | None, disable_rack_aware: bool, watch: bool, timeout_s: float, command_config: dict[str, str],
) -> None:
    """Move partition replicas between brokers, as kafka-reassign-partitions.sh does."""
    if action is None:
        raise click.UsageError("one of --generate, --execute, --verify is required")
    if action == "generate":
        if topics_to_move_json_file is None or not broker_list:
            raise click.UsageError("--generate needs --topics-to-move-json-file and --broker-list")
        topics = parse_topics_to_move_json(topics_to_move_json_file.read_text())
        wanted = [int(b) for b in broker_list.split(",") if b.strip()]
        with connect(bootstrap, command_config) as conn:
            response = metadata(conn, topics)
            racks = {b.node_id: b.rack for b in response.brokers}
            current = partition_assignment(conn, topics)
        unknown = [b for b in wanted if b not in racks]
        if unknown:
            raise click.ClickException(f"brokers {unknown} are not in the cluster")
        rack_aware = not disable_rack_aware and all(racks[b] for b in wanted)
        metas = [BrokerMetadata(b, racks[b] if rack_aware else None) for b in sorted(wanted)]
        click.echo("Current partition replica assignment")
        click.echo(assignment_json(current))
        click.echo("")
        click.echo("Proposed partition reassignment configuration")
        click.echo(assignment_json(propose_assignment(current, metas)))
        return
    if reassignment_json_file is None:
        raise click.UsageError(f"--{action} needs --reassignment-json-file")
    targets = parse_reassignment_json(reassignment_json_file.read_text())
    with controller_connection(bootstrap, command_config) as conn:
        current = partition_assignment(conn, sorted({t for t, _p in targets}))
        missing = [tp for tp in targets if tp not in current]
        if missing:
            raise click.ClickException(f"partitions {_names(missing)} do not exist")
        if action == "execute":
            click.echo("Current partition replica assignment")
            click.echo("")
            click.echo(assignment_json({tp: current[tp] for tp in targets}))
            click.echo("")
            click.echo("Save this to use as the --reassignment-json-file option during rollback")
            outcomes = alter_reassignments(conn, dict(targets))
            failed = {tp: o for tp, o in outcomes.items() if o[0] != ErrorCode.none}
            if failed:
                for (t, p), (error, message) in sorted(failed.items()):
                    click.echo(f"Error reassigning partition(s) {t}-{p}: {error.name.upper()} {message or ''}".rstrip())
                raise click.ClickException("some reassignments could not be started")
            click.echo(f"Successfully started partition reassignments for {_names(targets)}")
            return
        if watch:
            _watch(conn, targets, timeout_s)
        ongoing = list_reassignments(conn)
        current = partition_assignment(conn, sorted({t for t, _p in targets}))
        click.echo("Status of partition reassignment:")
        unfinished = False
        for tp, replicas in sorted(targets.items()):
            name = f"{tp[0]}-{tp[1]}"
            if tp in ongoing:
                unfinished = True
                click.echo(f"Reassignment of partition {name} is still in progress.")
            elif current[tp] == replicas:
                click.echo(f"Reassignment of partition {name} is completed.")
            else:
                unfinished = True
                click.echo(f"There is no active reassignment of partition {name}, but replica set is "
                           f"{current[tp]} rather than {replicas}.")
        if unfinished:
            sys.exit(1)


def _watch(conn: KafkaConnection, targets: Mapping[TP, list[int]], timeout_s: float) -> None:
    """Poll until every target partition has its new replicas and no reassignment runs, showing a progress bar."""
    from odradek.cli.output import progress

    topics = sorted({t for t, _p in targets})
    deadline = time.monotonic() + timeout_s
    with progress(transient=False) as bar:
        task = bar.add_task("reassigning partitions", total=len(targets))
        while True:
            ongoing = list_reassignments(conn)
            current = partition_assignment(conn, topics)
            done = sum(1 for tp, r in targets.items() if tp not in ongoing and current.get(tp) == r)
            bar.update(task, completed=done)
            if done == len(targets) or time.monotonic() > deadline:
                return
            time.sleep(0.5)  # the controller has no push channel for this: poll as Kafka's tool users do


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--preferred", "election", flag_value=PREFERRED, type=int, help="elect each partition's first replica")
@click.option("--unclean", "election", flag_value=UNCLEAN, type=int,
              help="elect any live replica of a leaderless partition, even outside the ISR (may lose data)")
@click.option("--election-type", "election_name", type=click.Choice(["PREFERRED", "UNCLEAN"], case_sensitive=False),
              default=None, help="as kafka-leader-election.sh")
@click.option("--topic", default=None)
@click.option("--partition", type=int, default=None)
@click.option("--all-topic-partitions", is_flag=True)
@click.option("--path-to-json-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help='{"partitions":[{"topic":...,"partition":...}]}')
@command_config_option("--admin.config")
def elect(
    bootstrap: str, election: int | None, election_name: str | None, topic: str | None, partition: int | None,
    all_topic_partitions: bool, path_to_json_file: Path | None, command_config: dict[str, str],
) -> None:
    """Run a preferred or unclean leader election, as kafka-leader-election.sh does."""
    if election_name is not None:
        election = PREFERRED if election_name.upper() == "PREFERRED" else UNCLEAN
    if election is None:
        raise click.UsageError("one of --preferred, --unclean (or --election-type) is required")
    sources = sum([all_topic_partitions, topic is not None, path_to_json_file is not None])
    if sources != 1:
        raise click.UsageError("give exactly one of --all-topic-partitions, --topic/--partition, --path-to-json-file")
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    with controller_connection(bootstrap, command_config) as conn:
        wanted: list[TP] | None = None
        if path_to_json_file is not None:
            try:
                doc = json.loads(path_to_json_file.read_text())
                wanted = [(str(e["topic"]), int(e["partition"])) for e in doc["partitions"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise click.ClickException(f"not a partitions JSON: {exc}") from None
        elif topic is not None:
            wanted = [(topic, partition)] if partition is not None else sorted(partition_assignment(conn, [topic]))
        outcomes = elect_leaders(conn, election, wanted)
    name = ELECTION_NAMES[election]
    done = [tp for tp, (e, _m) in outcomes.items() if e == ErrorCode.none]
    not_needed = [tp for tp, (e, _m) in outcomes.items() if e == ErrorCode.election_not_needed]
    failed = {tp: o for tp, o in outcomes.items() if o[0] not in (ErrorCode.none, ErrorCode.election_not_needed)}
    if done:
        click.echo(f"Successfully completed leader election ({name}) for partitions {_names(done)}")
    if not_needed:
        click.echo(f"Valid replica already elected for partitions {_names(not_needed)}")
    if failed:
        click.echo(f"Error completing leader election ({name}) for partitions {_names(failed)}")
        for (t, p), (error, message) in sorted(failed.items()):
            click.echo(f"Error completing leader election ({name}) for partition: {t}-{p}: "
                       f"{error.name.upper()}{': ' + message if message else ''}")
        raise click.ClickException(f"{len(failed)} replica(s) could not be elected")
