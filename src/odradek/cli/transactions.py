"""``odradek transactions``: kafka-transactions.sh over the wire.

``--list`` asks every broker (each transaction coordinator knows only its own ids) with ListTransactions;
``--describe --transactional-id X`` finds X's coordinator (FindCoordinator key type 1) and asks it with
DescribeTransactions; ``--describe-producers --topic T --partition P`` asks the partition's leader with
DescribeProducers. ``--abort`` ends a hanging transaction on one partition the way Kafka's tool does: given
``--start-offset`` it looks the producer up with DescribeProducers (the one whose open transaction starts there),
or takes ``--producer-id/--producer-epoch/--coordinator-epoch`` as given, then sends WriteTxnMarkers (ABORT) to the
partition's leader. ``--find-hanging`` lists open transactions older than ``--max-transaction-timeout`` minutes
whose transactional id no coordinator reports as ongoing on that partition: the ones only ``--abort`` can end.
Output columns carry Kafka's names, as rich tables.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from odradek.admin import metadata, request_schema
from odradek.cli.security import command_config_option
from odradek.cli.security import connect as connect_to
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.wire import read_compact_string, read_uvarint, skip_tagged_fields

FIND_COORDINATOR, WRITE_TXN_MARKERS = 10, 27
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
TRANSACTION_KEY_TYPE = 1
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # Kafka's transaction.max.timeout.ms, as kafka-transactions.sh assumes

TP = tuple[str, int]


@dataclass(frozen=True)
class Listed:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class Described:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[TP, ...]


@dataclass(frozen=True)
class ProducerInfo:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int


class Cluster:
    """One bootstrap connection for metadata plus one connection per broker, opened when first needed."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str] | None = None) -> None:
        self.properties = dict(properties or {})
        self.bootstrap = connect_to(bootstrap, self.properties)
        self._conns: dict[int, KafkaConnection] = {}
        self.refresh()

    def refresh(self, topics: list[str] | None = None) -> Any:
        response = metadata(self.bootstrap, topics)
        self.brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in response.brokers}
        return response

    def broker(self, node_id: int) -> KafkaConnection:
        if node_id not in self._conns:
            if node_id not in self.brokers:
                raise click.ClickException(f"broker {node_id} is not in the cluster")
            self._conns[node_id] = connect_to(self.brokers[node_id], self.properties)
        return self._conns[node_id]

    def leader(self, tp: TP) -> int:
        response = self.refresh([tp[0]])
        for t in response.topics:
            if t.error_code != ErrorCode.none:
                raise click.ClickException(f"topic {t.name}: {ErrorCode(t.error_code).name.upper()}")
            for p in t.partitions:
                if p.partition_index == tp[1]:
                    if p.leader_id < 0:
                        raise click.ClickException(f"{tp[0]}-{tp[1]} has no leader")
                    return int(p.leader_id)
        raise click.ClickException(f"partition {tp[0]}-{tp[1]} does not exist")

    def partitions(self, topic: str | None) -> dict[TP, int]:
        """Leader of every partition of ``topic`` (every topic for None)."""
        response = self.refresh(None if topic is None else [topic])
        return {
            (t.name, int(p.partition_index)): int(p.leader_id)
            for t in response.topics if t.error_code == ErrorCode.none
            for p in t.partitions
        }

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self.bootstrap.close()


@contextmanager
def connect(bootstrap: str, properties: Mapping[str, str] | None = None) -> Iterator[Cluster]:
    cluster = Cluster(bootstrap, properties)
    try:
        yield cluster
    finally:
        cluster.close()


def list_transactions(cluster: Cluster) -> list[Listed]:
    out: list[Listed] = []
    for node_id in sorted(cluster.brokers):
        conn = cluster.broker(node_id)
        version, cls, _mod = request_schema(conn, LIST_TRANSACTIONS, 1)
        response = conn.request(LIST_TRANSACTIONS, cls(state_filters=(), producer_id_filters=()), version)
        if response.error_code != ErrorCode.none:
            raise click.ClickException(f"broker {node_id}: {ErrorCode(response.error_code).name.upper()}")
        out += [
            Listed(s.transactional_id, node_id, int(s.producer_id), s.transaction_state)
            for s in response.transaction_states
        ]
    return out


def find_coordinator(cluster: Cluster, transactional_id: str, timeout_s: float = 30.0) -> int:
    """The broker coordinating ``transactional_id``, retried while it is loading or moving."""
    deadline = time.monotonic() + timeout_s
    while True:
        version, cls, _mod = request_schema(cluster.bootstrap, FIND_COORDINATOR, 4)
        if version >= 4:
            response = cluster.bootstrap.request(
                FIND_COORDINATOR, cls(key_type=TRANSACTION_KEY_TYPE, coordinator_keys=(transactional_id,)), version
            )
            (answer,) = response.coordinators
        else:
            answer = cluster.bootstrap.request(
                FIND_COORDINATOR, cls(key=transactional_id, key_type=TRANSACTION_KEY_TYPE), version
            )
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.none:
            cluster.refresh()
            return int(answer.node_id)
        if not getattr(error, "retriable", False) or time.monotonic() > deadline:
            raise click.ClickException(f"finding the coordinator of {transactional_id}: {error.name.upper()}")
        time.sleep(0.2)


def describe_transactions(cluster: Cluster, transactional_ids: Iterable[str]) -> list[Described]:
    out: list[Described] = []
    for tid in transactional_ids:
        coordinator = find_coordinator(cluster, tid)
        conn = cluster.broker(coordinator)
        version, cls, _mod = request_schema(conn, DESCRIBE_TRANSACTIONS, 0)
        frame, offset = conn.request_frame(DESCRIBE_TRANSACTIONS, cls(transactional_ids=(tid,)), version)
        for error, described in _read_describe_transactions(frame, offset, coordinator):
            if error != ErrorCode.none:
                raise click.ClickException(f"transactional id {described.transactional_id}: {error.name.upper()}")
            out.append(described)
    return out


def _read_describe_transactions(frame: memoryview, pos: int, coordinator: int) -> list[tuple[ErrorCode, Described]]:
    """DescribeTransactions v0's response, read by hand: Kafka answers an Empty id with start time -1, which kio's
    timestamp reader refuses ("Cannot parse negative timestamp")."""
    buf = bytes(frame)
    pos += 4  # throttle_time_ms
    count, pos = read_uvarint(buf, pos)
    states: list[tuple[ErrorCode, Described]] = []
    for _ in range(count - 1):
        (error,) = struct.unpack_from(">h", buf, pos)
        tid, pos = read_compact_string(buf, pos + 2)
        state, pos = read_compact_string(buf, pos)
        timeout_ms, start_ms, producer_id, producer_epoch = struct.unpack_from(">iqqh", buf, pos)
        pos += 22
        partitions: list[TP] = []
        topics, pos = read_uvarint(buf, pos)
        for _t in range(topics - 1):
            topic, pos = read_compact_string(buf, pos)
            n, pos = read_uvarint(buf, pos)
            partitions += [(topic, p) for p in struct.unpack_from(f">{n - 1}i", buf, pos)]
            pos = skip_tagged_fields(buf, pos + 4 * (n - 1))
        pos = skip_tagged_fields(buf, pos)
        states.append((ErrorCode(error), Described(coordinator, tid, producer_id, producer_epoch, state, timeout_ms,
                                                   start_ms, tuple(sorted(partitions)))))
    return states


def describe_producers(cluster: Cluster, tps: Iterable[TP]) -> dict[TP, list[ProducerInfo]]:
    """Active producers of each partition, asked of its leader (grouped: one request per leader)."""
    by_leader: dict[int, list[TP]] = {}
    for tp in tps:
        by_leader.setdefault(cluster.leader(tp), []).append(tp)
    out: dict[TP, list[ProducerInfo]] = {}
    for leader, wanted in by_leader.items():
        conn = cluster.broker(leader)
        version, cls, mod = request_schema(conn, DESCRIBE_PRODUCERS, 0)
        topics: dict[str, list[int]] = {}
        for topic, partition in wanted:
            topics.setdefault(topic, []).append(partition)
        request = cls(topics=tuple(
            mod.TopicRequest(name=t, partition_indexes=tuple(ps)) for t, ps in sorted(topics.items())
        ))
        response = conn.request(DESCRIBE_PRODUCERS, request, version)
        for t in response.topics:
            for p in t.partitions:
                error = ErrorCode(p.error_code)
                if error != ErrorCode.none:
                    raise click.ClickException(
                        f"{t.name}-{p.partition_index}: {error.name.upper()} {p.error_message or ''}".rstrip()
                    )
                out[(t.name, int(p.partition_index))] = [
                    ProducerInfo(int(s.producer_id), int(s.producer_epoch), int(s.coordinator_epoch),
                                 int(s.last_sequence), int(s.last_timestamp), int(s.current_txn_start_offset))
                    for s in p.active_producers
                ]
    return out


def write_abort_marker(cluster: Cluster, tp: TP, producer_id: int, producer_epoch: int, coordinator_epoch: int
                       ) -> ErrorCode:
    """WriteTxnMarkers with one ABORT marker for ``tp``, sent to its leader (Kafka's Admin.abortTransaction)."""
    conn = cluster.broker(cluster.leader(tp))
    version, cls, mod = request_schema(conn, WRITE_TXN_MARKERS, 1)
    marker = mod.WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_result=False,
        topics=(mod.WritableTxnMarkerTopic(name=tp[0], partition_indexes=(tp[1],)),),
        coordinator_epoch=coordinator_epoch,
    )
    response = conn.request(WRITE_TXN_MARKERS, cls(markers=(marker,)), version)
    for m in response.markers:
        for t in m.topics:
            for p in t.partitions:
                return ErrorCode(p.error_code)
    return ErrorCode.unknown_server_error


def find_hanging(cluster: Cluster, topic: str | None, broker_id: int | None, max_timeout_min: int
                 ) -> list[tuple[TP, ProducerInfo, int]]:
    """Open transactions older than the maximum transaction timeout that no coordinator still tracks as
    ongoing on that partition (Kafka's FindHangingTransactionsCommand); with how many minutes they are open."""
    leaders = cluster.partitions(topic)
    tps = [tp for tp, leader in leaders.items() if leader >= 0 and (broker_id is None or leader == broker_id)]
    now_ms = int(time.time() * 1000)
    candidates = [
        (tp, p, (now_ms - p.last_timestamp) // 60_000)
        for tp, producers in describe_producers(cluster, tps).items()
        for p in producers
        if p.txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_min * 60_000
    ]
    if not candidates:
        return []
    by_producer = {t.producer_id: t.transactional_id for t in list_transactions(cluster)}
    described = {
        d.transactional_id: d
        for d in describe_transactions(cluster, sorted({by_producer[p.producer_id] for _, p, _ in candidates
                                                         if p.producer_id in by_producer}))
    }
    hanging = []
    for tp, producer, minutes in candidates:
        tid = by_producer.get(producer.producer_id)
        state = described.get(tid) if tid is not None else None
        still_open = (
            state is not None
            and state.producer_id == producer.producer_id
            and state.state in ("Ongoing", "PrepareCommit", "PrepareAbort")
            and tp in state.partitions
        )
        if not still_open:
            hanging.append((tp, producer, minutes))
    return hanging


def _print(title: str, columns: list[str], rows: Iterable[Iterable[object]]) -> None:
    table = Table(title=title)
    for name in columns:
        table.add_column(name)
    for row in rows:
        table.add_row(*(str(v) for v in row))
    console = Console()
    if not console.is_terminal:
        console = Console(width=1_000)  # piped or captured: whole values, never columns squeezed to 80 characters
    console.print(table)


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--list", "action", flag_value="list", help="every transactional id the coordinators know")
@click.option("--describe", "action", flag_value="describe", help="one transaction's state (--transactional-id)")
@click.option("--describe-producers", "action", flag_value="describe-producers",
              help="active producers of --topic --partition")
@click.option("--abort", "action", flag_value="abort", help="write an ABORT marker for a hanging transaction")
@click.option("--find-hanging", "action", flag_value="find-hanging",
              help="open transactions no coordinator tracks any more (--topic or --broker-id)")
@click.option("--transactional-id", default=None)
@click.option("--topic", default=None)
@click.option("--partition", type=int, default=None)
@click.option("--start-offset", type=int, default=None, help="--abort: the offset the hanging transaction starts at")
@click.option("--producer-id", type=int, default=None)
@click.option("--producer-epoch", type=int, default=None)
@click.option("--coordinator-epoch", type=int, default=None)
@click.option("--broker-id", type=int, default=None)
@click.option("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN, show_default=True,
              help="minutes; --find-hanging reports transactions open longer than this")
@command_config_option()
def transactions(
    bootstrap: str, action: str | None, transactional_id: str | None, topic: str | None, partition: int | None,
    start_offset: int | None, producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None,
    broker_id: int | None, max_transaction_timeout: int, command_config: dict[str, str],
) -> None:
    """List, describe and abort transactions, as kafka-transactions.sh does."""
    if action is None:
        raise click.UsageError("one of --list, --describe, --describe-producers, --abort, --find-hanging is required")
    with connect(bootstrap, command_config) as cluster:
        if action == "list":
            _print("transactions", ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                   ((t.transactional_id, t.coordinator, t.producer_id, t.state)
                    for t in sorted(list_transactions(cluster), key=lambda t: t.transactional_id)))
        elif action == "describe":
            if not transactional_id:
                raise click.UsageError("--describe needs --transactional-id")
            now_ms = int(time.time() * 1000)
            _print(
                f"transaction {transactional_id}",
                ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
                ((d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
                  d.start_time_ms if d.start_time_ms >= 0 else "None",
                  now_ms - d.start_time_ms if d.start_time_ms >= 0 else "None",
                  ",".join(f"{t}-{p}" for t, p in d.partitions))
                 for d in describe_transactions(cluster, [transactional_id])),
            )
        elif action == "describe-producers":
            tp = _partition(topic, partition, "--describe-producers")
            _print(
                f"producers of {tp[0]}-{tp[1]}",
                ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                 "CurrentTransactionStartOffset"],
                ((p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                  p.txn_start_offset if p.txn_start_offset >= 0 else "None")
                 for p in describe_producers(cluster, [tp]).get(tp, [])),
            )
        elif action == "abort":
            tp = _partition(topic, partition, "--abort")
            _abort(cluster, tp, start_offset, producer_id, producer_epoch, coordinator_epoch)
        else:
            if topic is None and broker_id is None:
                raise click.UsageError("--find-hanging needs --topic or --broker-id")
            rows = find_hanging(cluster, topic, broker_id, max_transaction_timeout)
            rows = [r for r in rows if partition is None or r[0][1] == partition]
            _print("hanging transactions",
                   ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                    "LastTimestamp", "Duration(min)"],
                   ((tp[0], tp[1], p.producer_id, p.producer_epoch, p.coordinator_epoch, p.txn_start_offset,
                     p.last_timestamp, minutes) for tp, p, minutes in rows))


def _partition(topic: str | None, partition: int | None, action: str) -> TP:
    if topic is None or partition is None:
        raise click.UsageError(f"{action} needs --topic and --partition")
    return (topic, partition)


def _abort(cluster: Cluster, tp: TP, start_offset: int | None, producer_id: int | None,
           producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    if start_offset is not None:
        if producer_id is not None or producer_epoch is not None or coordinator_epoch is not None:
            raise click.UsageError("give either --start-offset or --producer-id/--producer-epoch/--coordinator-epoch")
        matches = [p for p in describe_producers(cluster, [tp]).get(tp, []) if p.txn_start_offset == start_offset]
        if not matches:
            raise click.ClickException(
                f"Could not find any open transactions starting at offset {start_offset} on partition {tp[0]}-{tp[1]}"
            )
        found = matches[0]
        producer_id, producer_epoch = found.producer_id, found.producer_epoch
        coordinator_epoch = max(found.coordinator_epoch, 0)
    elif producer_id is None or producer_epoch is None or coordinator_epoch is None:
        raise click.UsageError("--abort needs --start-offset, or --producer-id, --producer-epoch and "
                               "--coordinator-epoch")
    error = write_abort_marker(cluster, tp, producer_id, producer_epoch, coordinator_epoch)
    if error != ErrorCode.none:
        raise click.ClickException(f"aborting the transaction of producer {producer_id} on {tp[0]}-{tp[1]}: "
                                   f"{error.name.upper()}")
    click.echo(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {tp[0]}-{tp[1]}.")
