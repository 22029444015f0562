"""Which Kafka ``inter.broker.protocol.version`` (IBP) speaks which controller request versions, so a mixed cluster
whose Kafka brokers run an IBP odradek does not speak is refused with one line naming both sides' versions.

The tables are Kafka 3.9's own choices: ``ControllerChannelManager`` picks LeaderAndIsr, UpdateMetadata and
StopReplica versions from the controller's IBP, ``BrokerIdZNode`` writes registration version 5 (with features) from
IBP 2.7 on, and ``FeatureZNode`` is written enabled from 2.7 on. odradek speaks the versions of IBP 2.6 (the
controller requests in :data:`~odradek.protocol.controller_requests.VERSIONS`, ISR changes through ZooKeeper);
2.7 is where AlterPartition replaces those ZooKeeper writes, which odradek neither sends nor serves.
"""

from __future__ import annotations

from odradek.protocol.controller_requests import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    VERSIONS,
)

__all__ = ["SPOKEN_IBP", "controller_request_refusal", "registration_refusal"]

SPOKEN_IBP = "2.6"
"""The one IBP odradek speaks and a mixed cluster is tested at."""

NAMES = {LEADER_AND_ISR: "LeaderAndIsr", STOP_REPLICA: "StopReplica", UPDATE_METADATA: "UpdateMetadata",
         CONTROLLED_SHUTDOWN: "ControlledShutdown"}

_SENT_FROM: dict[int, tuple[tuple[int, str], ...]] = {
    # (version, the first IBP whose controller sends it, as Kafka names IBPs), from ControllerChannelManager
    LEADER_AND_ISR: ((1, "1.0-IV0"), (2, "2.2-IV0"), (3, "2.4-IV0"), (4, "2.4-IV1"), (5, "2.8-IV1"), (6, "3.2-IV0"),
                     (7, "3.4-IV0")),
    UPDATE_METADATA: ((4, "1.0-IV0"), (5, "2.2-IV0"), (6, "2.4-IV1"), (7, "2.8-IV1"), (8, "3.4-IV0")),
    STOP_REPLICA: ((1, "2.2-IV0"), (2, "2.4-IV1"), (3, "2.6-IV0"), (4, "3.4-IV0")),
}


def _ibp_of(api_key: int, version: int) -> str | None:
    sent = [ibp for v, ibp in _SENT_FROM.get(api_key, ()) if v == version]
    return sent[0] if sent else None


def _spoken() -> str:
    return ", ".join(f"{NAMES[k]} v{VERSIONS[k]}" for k in (LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA))


def controller_request_refusal(api_key: int, version: int) -> str:
    """The line a broker logs when a controller sends ``version`` of a controller API it does not serve."""
    name = NAMES.get(api_key, f"API {api_key}")
    ibp = _ibp_of(api_key, version)
    if ibp is None:
        sender = "its controller"
    elif version > VERSIONS.get(api_key, version):
        sender = f"a Kafka controller at inter.broker.protocol.version {ibp} or newer"
    else:
        sender = f"a Kafka controller at an inter.broker.protocol.version older than {SPOKEN_IBP}"
    return (f"refusing {name} v{version} from {sender}: odradek speaks {_spoken()} "
            f"(inter.broker.protocol.version {SPOKEN_IBP}); set inter.broker.protocol.version={SPOKEN_IBP} "
            f"on the Kafka brokers of this cluster")


def registration_refusal(broker_id: int, version: int) -> str | None:
    """The line odradek's controller logs when ``/brokers/ids/{broker_id}`` says that broker runs an IBP it does
    not speak (registration version 5: IBP 2.7 or newer), or None for a registration it accepts."""
    if version < 5:
        return None
    return (f"refusing broker {broker_id}: its registration is version {version}, which Kafka writes at "
            f"inter.broker.protocol.version 2.7 or newer (AlterPartition, newer controller requests); odradek "
            f"speaks {_spoken()} (inter.broker.protocol.version {SPOKEN_IBP}); set "
            f"inter.broker.protocol.version={SPOKEN_IBP} on that broker. It gets no requests from this controller "
            f"and leads nothing until then")
