"""A zombie controller over real partitions (issue 15): the controller's host is cut from one broker and then from
ZooKeeper, never from the other brokers. It keeps its queued requests and keeps retrying them; once another broker
has won the election and spoken to the cut-off broker, the link is healed and the zombie's requests arrive: the
broker refuses them by controller epoch (STALE_CONTROLLER_EPOCH) and keeps what the new controller told it.

tests/cluster/test_zombie_controller.py forges the stale requests in-process; here the zombie is a real controller
process whose session expired behind a firewall, and the stale requests are the ones it queued itself."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from odradek.admin import create_topic, metadata
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.lab.cluster import Lab
from odradek.lab.processes import wait_until

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]

TOPIC = "zombie"


@pytest.fixture
def lab(tmp_path) -> Iterator[Lab]:
    with Lab(base_dir=tmp_path) as lab:
        yield lab


def _leader_seen_by(address: str, topic: str) -> int | None:
    """Partition 0's leader in ``address``'s own metadata cache (what its controller last told it)."""
    try:
        with KafkaConnection(address) as conn:
            t = metadata(conn, [topic]).topics[0]
    except OSError:
        return None
    if t.error_code != ErrorCode.none or not t.partitions:
        return None
    return int(t.partitions[0].leader_id)


def test_a_controller_cut_from_zookeeper_is_refused_by_epoch_once_the_new_controller_has_spoken(lab: Lab) -> None:
    wait_until(lambda: lab.controller_id() is not None, 30, "a controller")
    zombie = lab.controller_id()
    assert zombie is not None
    old_epoch = lab.controller_epoch()
    cut_off, other = (b for b in sorted(lab.brokers) if b != zombie)
    zombie_host = lab.broker_host(zombie)
    cut_off_broker = lab.brokers[cut_off]

    # 1. The controller loses its link to one broker; a new topic makes it queue requests for that broker.
    lab.block(zombie_host, {cut_off_broker.host.address})
    with KafkaConnection(lab.brokers[other].address) as conn:
        error, message = create_topic(conn, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    assert error == ErrorCode.none, message
    wait_until(lambda: lab.partition_state(TOPIC, 0) is not None, 30, "the zombie writing the partition state")
    assert lab.partition_state(TOPIC, 0)["controller_epoch"] == old_epoch  # type: ignore[index]

    # 2. It is cut from ZooKeeper as well (the other broker and the clients still reach it); its session expires
    #    and another broker becomes controller with a higher epoch, and tells the cut-off broker about the topic.
    lab.block(zombie_host, {z.host.address for z in lab.zookeepers.values()})
    assert old_epoch is not None
    # The new controller registers in /controller before it increments /controller_epoch: wait for both.
    wait_until(lambda: lab.controller_id() not in (None, zombie) and (lab.controller_epoch() or 0) > old_epoch, 60,
               "another broker taking over as controller with a higher epoch")
    new_epoch = lab.controller_epoch()
    assert new_epoch is not None
    wait_until(lambda: _leader_seen_by(cut_off_broker.address, TOPIC) not in (None, -1, zombie), 60,
               "the new controller telling the cut-off broker who leads the topic")
    leader_before = _leader_seen_by(cut_off_broker.address, TOPIC)
    assert lab.brokers[zombie].alive, "the zombie is a live process, only cut off"

    # 3. The link between the zombie and the broker heals (ZooKeeper stays out of its reach): the requests it kept
    #    retrying arrive, stamped with the old epoch, and are refused.
    lab.unblock(zombie_host, {cut_off_broker.host.address})
    refusal = re.compile(rf"ignoring LeaderAndIsr from controller {zombie} epoch {old_epoch}: stale_controller_epoch",
                         re.IGNORECASE)
    wait_until(lambda: refusal.search(cut_off_broker.log_path.read_text(errors="replace")), 120,
               "the cut-off broker refusing the zombie's queued LeaderAndIsr by epoch")
    assert _leader_seen_by(cut_off_broker.address, TOPIC) == leader_before, "a stale request changed the broker"

    # 4. Healed completely, the old controller learns its session expired, registers again and follows.
    lab.heal()
    wait_until(lambda: lab.healthy({TOPIC: 1}), 90, "the cluster whole again")
    assert lab.controller_id() != zombie or (lab.controller_epoch() or 0) > new_epoch
