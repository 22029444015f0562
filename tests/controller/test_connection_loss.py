"""Every controller event, cut from the store at each of its requests in turn, converges (issue 23).

For each event type a scenario brings a cluster of simulated brokers to rest, arms :class:`ConnectionLosses` to cut
the controller's session at its Nth store request, triggers the event and lets the cluster do what it would next
(a leader adding caught-up replicas to the ISR). The run is repeated for N = 1, 2, ... until the event completes
without reaching an Nth request, once with the cut before the request reaches the store and once after it was
applied (the reply lost). After each run, once the session is back:

- the controller's context equals the store (topics, assignments, leader and ISR with their versions);
- every partition is online (a live leader in its ISR, which that leader was told of);
- no deletion, reassignment, preferred election or notification is left pending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from controller_support import ConnectionLosses, SimCluster, wait_for

from odradek.clock import ManualClock
from odradek.controller import Controller, LeaderIsr, ReplicaAssignment
from odradek.controller.events import AutoRebalance, EpochCheck, LeaderAndIsrStorageErrors
from odradek.controller.states import PartitionState as P
from odradek.coordination import BadVersionError, EmbeddedBackend, SessionExpiredError
from odradek.coordination.znodes import (
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    TOPICS,
    LogDirEventNotification,
    PartitionReassignment,
    PreferredReplicaElection,
    TopicAssignment,
    TopicPartition,
    topic_path,
)

CONFIG = {"auto.leader.rebalance.enable": False}
MAX_REQUESTS = 150
"""More store requests than any of these events makes; a sweep reaching it has lost its way."""


# ------------------------------------------------------------------------------------------------ checks


async def problems(c: SimCluster) -> list[str]:
    """What keeps the cluster from having converged (empty: converged)."""
    active = c.active()
    if len(active) != 1:
        return [f"{len(active)} active controllers"]
    ctx = active[0].ctx
    admin = c.admin
    assert admin is not None
    out: list[str] = []
    live = {b for b, broker in c.brokers.items() if broker.alive}
    if set(ctx.live_brokers) != live:
        out.append(f"context has live brokers {sorted(ctx.live_brokers)}, the store {sorted(live)}")
    topics = set(await admin.children(TOPICS))
    if ctx.all_topics != topics:
        out.append(f"context has topics {sorted(ctx.all_topics)}, the store {sorted(topics)}")
    table = dict(active[0].partition_states())
    stored_partitions: set[TopicPartition] = set()
    for topic in sorted(topics):
        doc = await c.assignment(topic)
        if doc is None:
            continue
        for p, replicas in doc.partitions.items():
            tp = TopicPartition(topic, p)
            stored_partitions.add(tp)
            ra = ReplicaAssignment(tuple(replicas), tuple(doc.adding_replicas.get(p, ())),
                                   tuple(doc.removing_replicas.get(p, ())))
            if ctx.assignments.get(tp) != ra:
                out.append(f"{tp}: context assignment {ctx.assignments.get(tp)}, the store {ra}")
            if ra.is_reassigning or tp in ctx.being_reassigned:
                out.append(f"{tp}: reassignment half-done ({ra})")
            found = await c.state(topic, p)
            if found is None:
                out.append(f"{tp}: no partition state")
                continue
            state, version = found
            stored = LeaderIsr(state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch, version)
            if ctx.leadership.get(tp) != stored:
                out.append(f"{tp}: context leader and ISR {ctx.leadership.get(tp)}, the store {stored}")
            if state.leader not in live or state.leader not in state.isr or table.get(tp) is not P.ONLINE:
                out.append(f"{tp}: offline (leader {state.leader}, ISR {state.isr}, {table.get(tp)})")
                continue
            view = c.transport.views.get(state.leader)
            told = view.leaders.get((topic, p)) if view else None
            if told is None or told[:2] != (state.leader, state.leader_epoch):
                out.append(f"{tp}: leader {state.leader} at epoch {state.leader_epoch} was told {told}")
    if set(ctx.assignments) != stored_partitions:
        out.append(f"context partitions {sorted(set(ctx.assignments) ^ stored_partitions)} differ from the store")
    pending = {
        "deletions": await admin.children(DELETE_TOPICS),
        "ISR change notifications": await admin.children(ISR_CHANGE_NOTIFICATION),
        "log dir event notifications": await admin.children(LOG_DIR_EVENT_NOTIFICATION),
    }
    out.extend(f"{what} pending: {names}" for what, names in pending.items() if names)
    for path in (REASSIGN_PARTITIONS, PREFERRED_REPLICA_ELECTION):
        if await admin.exists(path) is not None:
            out.append(f"{path} left behind")
    if ctx.topics_to_delete or ctx.being_reassigned or ctx.preferred_election_in_progress:
        out.append(f"context still working: deleting {ctx.topics_to_delete}, reassigning {ctx.being_reassigned}, "
                   f"electing {ctx.preferred_election_in_progress}")
    return out


async def converged(c: SimCluster, expect: Callable[[SimCluster], Awaitable[list[str]]],
                    timeout: float = 20.0) -> None:
    """Wait until :func:`problems` and the scenario's ``expect`` find nothing; fail with what they found."""
    deadline = time.monotonic() + timeout
    found: list[str] = []
    while time.monotonic() < deadline:
        for controller in c.active():
            await controller.wait_idle()
        found = await problems(c) + await expect(c)
        if not found:
            return
    raise AssertionError("did not converge: " + "; ".join(found))


# --------------------------------------------------------------------------------------------- scenarios


async def nothing(c: SimCluster) -> None:
    return None


async def no_expectation(c: SimCluster) -> list[str]:
    return []


@dataclass
class Scenario:
    """An event (or the events one change sets off), set up, triggered and expected."""

    setup: Callable[[SimCluster], Awaitable[None]]
    trigger: Callable[[SimCluster, Controller], Awaitable[None]]
    expect: Callable[[SimCluster], Awaitable[list[str]]] = no_expectation
    settle: Callable[[SimCluster], Awaitable[None]] = nothing
    """What the cluster does after the trigger, as a real one would (a leader growing its ISR)."""
    cut: list[int] = field(default_factory=lambda: [0])
    """Whose sessions are cut: the controller's (broker 0, the first started), or its successors'."""
    config: dict[str, object] = field(default_factory=dict)


async def leader_is(c: SimCluster, topic: str, partition: int, leader: int) -> list[str]:
    found = await c.state(topic, partition)
    now = found[0].leader if found else None
    return [] if now == leader else [f"{topic}-{partition} is led by {now}, not {leader}"]


async def one_topic(c: SimCluster) -> None:
    await c.create_topic("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    await wait_for(lambda: c.state("t", 2), what="t created")


async def led_off_preference(c: SimCluster) -> None:
    """t-0 (replicas [1, 2]) led by 2, with 1 back in its ISR: a preferred election would move it to 1."""
    await one_topic(c)
    await c.brokers[1].kill()
    await wait_for(lambda: leader_is_now(c, "t", 0, 2), what="t-0 moved to 2")
    await c.restart(1)
    await wait_for(lambda: 1 in c.brokers[0].controller.ctx.live_brokers, what="broker 1 back")  # type: ignore
    await c.act_as_leader("t", 0, [2, 1])
    await c.act_as_leader("t", 2, [3, 1])


async def leader_is_now(c: SimCluster, topic: str, partition: int, leader: int) -> bool:
    return not await leader_is(c, topic, partition, leader)


async def create_topic(c: SimCluster, controller: Controller) -> None:
    await c.create_topic("n", {0: [0, 1], 1: [1, 2], 2: [2, 3]})


async def topic_n_exists(c: SimCluster) -> list[str]:
    return [] if await c.assignment("n") is not None else ["topic n missing"]


async def add_partitions(c: SimCluster, controller: Controller) -> None:
    assert c.admin is not None
    doc = TopicAssignment({0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (0, 1), 4: (2, 0)})
    await c.admin.set(topic_path("t"), doc.to_json())


async def five_partitions(c: SimCluster) -> list[str]:
    return [] if len(c.brokers[0].controller.ctx.partitions_of("t")) == 5 else ["t has not 5 partitions"]  # type: ignore


async def delete_topic(c: SimCluster, controller: Controller) -> None:
    assert c.admin is not None
    await c.admin.create(f"{DELETE_TOPICS}/t")


async def topic_gone(c: SimCluster) -> list[str]:
    return ["t still exists"] if await c.assignment("t") is not None else []


TARGET = (0, 3)
T0 = TopicPartition("t", 0)


async def reassign_by_znode(c: SimCluster, controller: Controller) -> None:
    assert c.admin is not None
    await c.admin.create(REASSIGN_PARTITIONS, PartitionReassignment({T0: TARGET}).to_json())


async def reassign_by_api(c: SimCluster, controller: Controller) -> None:
    await controller.alter_partition_reassignments({("t", 0): TARGET})


async def adding_replicas_join_the_isr(c: SimCluster) -> None:
    """The leader of t-0 adds each replica being added to its ISR (as a caught-up follower would be), until the
    reassignment is over."""

    async def finished() -> bool:
        doc = await c.assignment("t")
        assert doc is not None
        if tuple(doc.partitions[0]) == TARGET and not doc.adding_replicas:
            return True
        found = await c.state("t", 0)
        adding = doc.adding_replicas.get(0, ())
        if found is not None and adding and not set(adding) <= set(found[0].isr):
            with contextlib.suppress(BadVersionError):  # the controller wrote first: next round
                await c.act_as_leader("t", 0, [*found[0].isr, *(r for r in adding if r not in found[0].isr)])
        return False

    await wait_for(finished, what="the reassignment of t-0 finished")


async def reassigned(c: SimCluster) -> list[str]:
    doc = await c.assignment("t")
    return [] if doc is not None and tuple(doc.partitions[0]) == TARGET else [f"t-0 assigned {doc}"]


async def kill_broker_2(c: SimCluster, controller: Controller) -> None:
    await c.brokers[2].kill()


async def broker_2_out_of_every_isr(c: SimCluster) -> list[str]:
    out = []
    for p in range(3):
        found = await c.state("t", p)
        if found is not None and 2 in found[0].isr:
            out.append(f"t-{p} keeps dead broker 2 in its ISR {found[0].isr}")
    return out


async def broker_2_killed(c: SimCluster) -> None:
    await one_topic(c)
    await c.brokers[2].kill()
    await wait_for(lambda: leader_is_now(c, "t", 1, 3), what="t-1 moved to 3")


async def restart_broker_2(c: SimCluster, controller: Controller) -> None:
    await c.restart(2)


async def kill_controller(c: SimCluster, controller: Controller) -> None:
    await c.brokers[0].kill()


async def new_controller(c: SimCluster) -> list[str]:
    return [] if c.active() and c.active()[0].broker_id != 0 else ["no new controller"]


async def preferred_by_znode(c: SimCluster, controller: Controller) -> None:
    assert c.admin is not None
    await c.admin.create(PREFERRED_REPLICA_ELECTION, PreferredReplicaElection({T0}).to_json())


async def preferred_by_api(c: SimCluster, controller: Controller) -> None:
    await controller.elect_leaders([("t", 0)])


async def auto_rebalance(c: SimCluster, controller: Controller) -> None:
    controller._post(AutoRebalance())


async def t0_led_by_1(c: SimCluster) -> list[str]:
    return await leader_is(c, "t", 0, 1)


async def controlled_shutdown_of_1(c: SimCluster, controller: Controller) -> None:
    for _ in range(20):
        if not await controller.controlled_shutdown(1):
            return
    raise AssertionError("broker 1 still leads partitions after 20 controlled-shutdown rounds")


async def nothing_led_by_1(c: SimCluster) -> list[str]:
    out = []
    for p in range(3):
        found = await c.state("t", p)
        if found is not None and (found[0].leader == 1 or 1 in found[0].isr):
            out.append(f"t-{p} still has broker 1 as leader or in the ISR: {found[0]}")
    return out


async def shrink_isr(c: SimCluster, controller: Controller) -> None:
    await c.act_as_leader("t", 0, [1])


async def log_dir_failed_on_1(c: SimCluster, controller: Controller) -> None:
    assert c.admin is not None
    await c.admin.create(f"{LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_", LogDirEventNotification(1).to_json(),
                         sequential=True)


async def storage_errors_on_1(c: SimCluster, controller: Controller) -> None:
    controller._post(LeaderAndIsrStorageErrors(1, {T0}))


async def t0_led_by_2(c: SimCluster) -> list[str]:
    return await leader_is(c, "t", 0, 2)


async def epoch_check(c: SimCluster, controller: Controller) -> None:
    controller._post(EpochCheck())


SCENARIOS: dict[str, Scenario] = {
    "TopicChange": Scenario(nothing, create_topic, topic_n_exists),
    "PartitionModifications": Scenario(one_topic, add_partitions, five_partitions),
    "TopicDeletion+StopReplicaDone": Scenario(one_topic, delete_topic, topic_gone),
    "ReassignmentZnode+ReassignmentIsrChange": Scenario(one_topic, reassign_by_znode, reassigned,
                                                        adding_replicas_join_the_isr),
    "ApiCall(alter reassignments)+ReassignmentIsrChange": Scenario(one_topic, reassign_by_api, reassigned,
                                                                   adding_replicas_join_the_isr),
    "BrokerChange(failure)": Scenario(one_topic, kill_broker_2, broker_2_out_of_every_isr),
    "BrokerChange(return)": Scenario(broker_2_killed, restart_broker_2),
    "ControllerChange+Startup(failover)": Scenario(one_topic, kill_controller, new_controller, cut=[1, 2, 3]),
    "PreferredZnode": Scenario(led_off_preference, preferred_by_znode, t0_led_by_1),
    "ApiCall(elect leaders)": Scenario(led_off_preference, preferred_by_api, t0_led_by_1),
    "AutoRebalance": Scenario(led_off_preference, auto_rebalance, t0_led_by_1),
    "ApiCall(controlled shutdown)": Scenario(one_topic, controlled_shutdown_of_1, nothing_led_by_1),
    "IsrChangeNotification": Scenario(one_topic, shrink_isr),
    "LogDirEventNotification": Scenario(one_topic, log_dir_failed_on_1),
    "LeaderAndIsrStorageErrors": Scenario(one_topic, storage_errors_on_1, t0_led_by_2),
    "EpochCheck": Scenario(one_topic, epoch_check),
}


@contextlib.asynccontextmanager
async def at_rest(setup: Callable[[SimCluster], Awaitable[None]],
                  config: dict[str, object] | None = None) -> AsyncIterator[tuple[SimCluster, ConnectionLosses]]:
    """Four simulated brokers (broker 0 the controller) set up by ``setup`` and converged, with a
    :class:`ConnectionLosses` not yet armed."""
    backend = EmbeddedBackend(ManualClock())
    losses = ConnectionLosses(backend)
    c = SimCluster(backend, {**CONFIG, **(config or {})}, losses=losses)
    await c.start(4)
    try:
        controller = await c.wait_controller()
        assert controller.broker_id == 0
        await setup(c)
        await converged(c, no_expectation)
        yield c, losses
    finally:
        await c.stop()


async def run_with_cut(scenario: Scenario, at: int, after: bool) -> bool:
    """One run with the cut at request ``at``; True when the cut happened (the event made that many requests)."""
    async with at_rest(scenario.setup, scenario.config) as (c, losses):
        losses.arm(at, scenario.cut, after)
        await scenario.trigger(c, await c.wait_controller())
        await scenario.settle(c)
        await converged(c, scenario.expect)
        return bool(losses.fired)


@pytest.mark.parametrize("after", [False, True], ids=["cut-before-the-request", "cut-after-the-request"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_an_event_cut_off_at_each_of_its_requests_converges(name: str, after: bool) -> None:
    scenario = SCENARIOS[name]
    at = 1
    while await run_with_cut(scenario, at, after):
        at += 1
        assert at < MAX_REQUESTS, f"{name} still making requests after {MAX_REQUESTS}"
    assert at > 1, f"{name} made no store request to cut"


# --------------------------------------------------------------------------------- waiting and expiry


async def test_a_request_cut_off_waits_for_the_session_and_is_then_sent_again() -> None:
    """No timer, no backoff: the controller stands still until the session is back, then the event finishes."""
    async with at_rest(one_topic) as (c, losses):
        controller = await c.wait_controller()
        losses.hold = True
        losses.arm(1, [0], after=False)
        await reassign_by_znode(c, controller)
        await wait_for(lambda: losses.fired, what="the reassignment's first request cut")
        assert controller.is_active and controller.ctx.being_reassigned == {}
        session = c.brokers[0].session
        assert session is not None
        losses.backend.resume(session.session_id)
        await adding_replicas_join_the_isr(c)
        await converged(c, reassigned)


async def test_a_session_that_expires_while_cut_off_makes_the_controller_resign_and_a_successor_finish() -> None:
    async with at_rest(one_topic) as (c, losses):
        controller = await c.wait_controller()
        losses.hold = True
        losses.arm(3, [0], after=True)
        await create_topic(c, controller)
        await wait_for(lambda: losses.fired, what="a request of the topic creation cut")
        assert controller.is_active  # waiting, not failed
        await c.brokers[0].kill()
        assert not controller.is_active
        await converged(c, topic_n_exists)
        with pytest.raises(SessionExpiredError):
            await controller._shared.store.current_epoch()
