"""``odradek groups``: kafka-consumer-groups.sh over the wire (list, describe with lag, reset offsets, delete).

The lag an operator reads is the distance from a group's committed offset to the partition's log end offset (the
high watermark a read_uncommitted consumer stops at), per partition, with the member that owns it; partitions the
group committed but nobody owns print ``-`` for the member, as Kafka's tool does. Offsets can only be reset on a
group with no active members (the running members would overwrite them with their next commit), with the same
refusal Kafka prints; without ``--execute`` a reset is only shown.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from odradek.cli.output import MISSING, print_table, wait_result
from odradek.cli.security import admin as secured_admin
from odradek.cli.security import command_config_option

TP = tuple[str, int]
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset for the partition

# Kafka's names for the classic group states, as its tool prints them.
STATE_NAMES = {
    "STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead", "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown",
}


@dataclass(frozen=True)
class ResetSpec:
    """One of Kafka's reset scenarios: ``earliest``, ``latest``, ``current``, ``offset``, ``shift`` or ``datetime``
    (``value`` is the offset, the shift or the timestamp in ms)."""

    kind: str
    value: int = 0


def plan_reset(
    spec: ResetSpec, partitions: Iterable[TP], committed: Mapping[TP, int], earliest: Mapping[TP, int],
    latest: Mapping[TP, int], by_time: Mapping[TP, int] | None = None,
) -> tuple[dict[TP, int], list[str]]:
    """New offsets per partition, each kept within [earliest, latest] as Kafka's tool keeps them, and the
    warnings it prints when it had to move one."""
    out: dict[TP, int] = {}
    notes: list[str] = []
    for tp in sorted(partitions):
        low, high = earliest[tp], latest[tp]
        name = f"{tp[0]}-{tp[1]}"
        if spec.kind == "earliest":
            target = low
        elif spec.kind == "latest":
            target = high
        elif spec.kind == "current":
            target = committed.get(tp, high)
        elif spec.kind == "datetime":
            found = (by_time or {}).get(tp, -1)
            target = found if found >= 0 else high  # no record at or after that time: the log end
        elif spec.kind in ("offset", "shift"):
            if spec.kind == "offset":
                target = spec.value
            else:
                if tp not in committed:
                    raise click.ClickException(
                        f"Cannot shift offset for partition {name} since there is no current committed offset")
                target = committed[tp] + spec.value
            if target > high:
                notes.append(f"New offset ({target}) is higher than latest offset for topic partition {name}. "
                             f"Value will be set to {high}")
                target = high
            elif target < low:
                notes.append(f"New offset ({target}) is lower than earliest offset for topic partition {name}. "
                             f"Value will be set to {low}")
                target = low
        else:
            raise ValueError(f"unknown reset scenario {spec.kind}")
        out[tp] = target
    return out, notes


def parse_datetime(text: str) -> int:
    """Kafka's ``yyyy-MM-ddTHH:mm:SS.sss`` with an optional zone (``Z``, ``+hh:mm``); local time without one."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"Error parsing timestamp: {text!r} (expected yyyy-MM-ddTHH:mm:SS.sss)") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def parse_topic_scope(values: Iterable[str]) -> list[tuple[str, list[int] | None]]:
    """``--topic t`` (every partition) or ``--topic t:0,1`` (those partitions), as Kafka's tool reads them."""
    out: list[tuple[str, list[int] | None]] = []
    for value in values:
        topic, sep, parts = value.partition(":")
        try:
            out.append((topic, [int(p) for p in parts.split(",") if p.strip()] if sep else None))
        except ValueError:
            raise click.BadParameter(f"expected TOPIC or TOPIC:P1,P2 for --topic, got {value!r}") from None
    return out


# --- talking to the cluster ------------------------------------------------------------------------------------


def _state_name(description: Any) -> str:
    state = getattr(description, "state", None)
    return STATE_NAMES.get(getattr(state, "name", str(state)), str(state))


def _describe(admin: Any, group: str) -> Any:
    return wait_result(admin.describe_consumer_groups([group])[group])


def _committed(admin: Any, group: str) -> dict[TP, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = wait_result(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group])
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}


def _offsets(admin: Any, partitions: Iterable[TP], spec: Any) -> dict[TP, int]:
    from confluent_kafka import TopicPartition

    wanted = {TopicPartition(t, p): spec for t, p in partitions}
    if not wanted:
        return {}
    futures = admin.list_offsets(wanted, request_timeout=30)
    return {(tp.topic, tp.partition): wait_result(f).offset for tp, f in futures.items()}


def _topic_partitions(admin: Any, topic: str) -> list[int]:
    metadata = admin.list_topics(topic=topic, timeout=30)
    meta = metadata.topics.get(topic)
    if meta is None or meta.error is not None:
        raise click.ClickException(f"Topic {topic} does not exist" if meta is not None else f"no metadata for {topic}")
    return sorted(meta.partitions)


def _error(message: str) -> None:
    click.echo(f"\nError: {message}")


def describe_rows(admin: Any, group: str) -> tuple[str, list[list[object]]]:
    """The group's state and one row per partition it owns or committed, in kafka-consumer-groups.sh's columns."""
    from confluent_kafka.admin import OffsetSpec

    description = _describe(admin, group)
    committed = _committed(admin, group)
    owner: dict[TP, Any] = {}
    for member in description.members or []:
        assignment = getattr(member, "assignment", None)
        for tp in getattr(assignment, "topic_partitions", None) or []:
            owner[(tp.topic, tp.partition)] = member
    partitions = sorted(set(committed) | set(owner))
    ends = _offsets(admin, partitions, OffsetSpec.latest())
    rows: list[list[object]] = []
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        member = owner.get(tp)
        rows.append([
            group, tp[0], tp[1], current, end, lag,
            member.member_id if member else MISSING, member.host if member else MISSING,
            member.client_id if member else MISSING,
        ])
    # Members without partitions (more members than partitions) still show, as Kafka's tool shows them.
    owned = {id(m) for m in owner.values()}
    for member in description.members or []:
        if id(member) not in owned:
            rows.append([group, MISSING, MISSING, MISSING, MISSING, MISSING, member.member_id, member.host,
                         member.client_id])
    return _state_name(description), rows


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--list", "action", flag_value="list", help="list every consumer group")
@click.option("--describe", "action", flag_value="describe", help="offsets, log end offsets and lag per partition")
@click.option("--delete", "action", flag_value="delete", help="delete groups that have no active members")
@click.option("--reset-offsets", "action", flag_value="reset", help="move committed offsets (needs an inactive group)")
@click.option("--group", "groups", multiple=True, help="group id (repeatable)")
@click.option("--all-groups", is_flag=True, help="with --describe or --delete: every group")
@click.option("--topic", "topics", multiple=True, help="with --reset-offsets: TOPIC or TOPIC:P1,P2 (repeatable)")
@click.option("--all-topics", is_flag=True, help="with --reset-offsets: every partition the group committed")
@click.option("--to-earliest", "scenario", flag_value="earliest")
@click.option("--to-latest", "scenario", flag_value="latest")
@click.option("--to-current", "scenario", flag_value="current")
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option("--to-datetime", default=None, help="yyyy-MM-ddTHH:mm:SS.sss[zone]: the first offset at or after it")
@click.option("--dry-run", is_flag=True, help="with --reset-offsets: only show the new offsets (the default)")
@click.option("--execute", is_flag=True, help="with --reset-offsets: commit the new offsets")
@command_config_option()
def groups(
    bootstrap: str, action: str | None, groups: tuple[str, ...], all_groups: bool, topics: tuple[str, ...],
    all_topics: bool, scenario: str | None, to_offset: int | None, shift_by: int | None, to_datetime: str | None,
    dry_run: bool, execute: bool, command_config: dict[str, str],
) -> None:
    """List, describe, delete consumer groups and reset their offsets, as kafka-consumer-groups.sh does."""
    if action is None:
        raise click.UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets")
    admin = secured_admin(bootstrap, command_config)
    if action == "list":
        listed = wait_result(admin.list_consumer_groups())
        for listing in sorted(listed.valid, key=lambda g: g.group_id):
            click.echo(listing.group_id)
        return
    names = list(groups)
    if all_groups:
        names = sorted(g.group_id for g in wait_result(admin.list_consumer_groups()).valid)
    elif not names:
        raise click.UsageError(f"Option --{'reset-offsets' if action == 'reset' else action} takes --group or "
                               "--all-groups")
    if action == "describe":
        _describe_groups(admin, names)
    elif action == "delete":
        _delete_groups(admin, names)
    else:
        spec = _reset_spec(scenario, to_offset, shift_by, to_datetime)
        if bool(topics) == all_topics:
            raise click.UsageError("Option --reset-offsets takes exactly one of --topic, --all-topics")
        if dry_run and execute:
            raise click.UsageError("Option --reset-offsets takes only one of --dry-run, --execute")
        if not (dry_run or execute):
            click.echo("WARN: No action will be performed as the --execute option is missing. Add --execute to "
                       "reset the offsets, or --dry-run to say that only showing them is meant.", err=True)
        failed = False
        for group in names:
            failed |= not _reset_group(admin, group, spec, parse_topic_scope(topics), all_topics, execute)
        if failed:
            sys.exit(1)


def _reset_spec(
    scenario: str | None, to_offset: int | None, shift_by: int | None, to_datetime: str | None
) -> ResetSpec:
    chosen = [s for s in (scenario, to_offset, shift_by, to_datetime) if s is not None]
    if len(chosen) != 1:
        raise click.UsageError("Option --reset-offsets takes exactly one of --to-earliest, --to-latest, --to-current, "
                               "--to-offset, --shift-by, --to-datetime")
    if to_offset is not None:
        return ResetSpec("offset", to_offset)
    if shift_by is not None:
        return ResetSpec("shift", shift_by)
    if to_datetime is not None:
        return ResetSpec("datetime", parse_datetime(to_datetime))
    assert scenario is not None
    return ResetSpec(scenario)


def _describe_groups(admin: Any, names: list[str]) -> None:
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
               "CLIENT-ID"]
    missing = False
    for group in names:
        state, rows = describe_rows(admin, group)
        if state == "Dead" or (state == "Unknown" and not rows):
            _error(f"Consumer group '{group}' does not exist.")
            missing = True
            continue
        if state == "Empty":
            click.echo(f"\nConsumer group '{group}' has no active members.", err=True)
        elif state in ("PreparingRebalance", "CompletingRebalance"):
            click.echo(f"\nWarning: Consumer group '{group}' is rebalancing.", err=True)
        if rows:  # as Kafka's tool: an empty group with nothing committed prints no table
            click.echo("")
            print_table(headers, rows)
    if missing:
        sys.exit(1)


def _delete_groups(admin: Any, names: list[str]) -> None:
    futures = admin.delete_consumer_groups(names, request_timeout=30)
    done: list[str] = []
    failed: dict[str, str] = {}
    from confluent_kafka import KafkaException

    for group, future in futures.items():
        try:
            future.result(30)
            done.append(group)
        except KafkaException as exc:
            error = exc.args[0]
            failed[group] = f"{error.name()}: {error.str()}" if hasattr(error, "name") else str(error)
    if not failed:
        click.echo(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in names)}) was successful.")
        return
    _error("Deletion of some consumer groups failed:")
    for group, reason in failed.items():
        click.echo(f"* Group '{group}' could not be deleted due to: {reason}")
    if done:
        click.echo(f"\nThese consumer groups were deleted successfully: {', '.join(repr(g) for g in done)}")
    sys.exit(1)


def _reset_group(
    admin: Any, group: str, spec: ResetSpec, scope: list[tuple[str, list[int] | None]], all_topics: bool,
    execute: bool,
) -> bool:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    state = _state_name(_describe(admin, group))
    if state not in ("Empty", "Dead"):
        _error(f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")
        return False
    committed = _committed(admin, group)
    if all_topics:
        partitions = sorted(committed)
    else:
        partitions = sorted({
            (t, p) for t, ps in scope for p in (ps if ps is not None else _topic_partitions(admin, t))})
    earliest = _offsets(admin, partitions, OffsetSpec.earliest())
    latest = _offsets(admin, partitions, OffsetSpec.latest())
    by_time = _offsets(admin, partitions, OffsetSpec.for_timestamp(spec.value)) if spec.kind == "datetime" else None
    plan, notes = plan_reset(spec, partitions, committed, earliest, latest, by_time)
    for note in notes:
        click.echo(note)
    if execute and plan:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())])
        result = wait_result(admin.alter_consumer_group_offsets([request])[group])
        errors = [tp for tp in result.topic_partitions if tp.error is not None]
        if errors:
            for tp in errors:
                _error(f"Resetting {tp.topic}-{tp.partition} failed: {tp.error}")
            return False
    click.echo("")
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [[group, t, p, o] for (t, p), o in plan.items()])
    return True
