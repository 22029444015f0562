"""Kafka's placement and election algorithms as a pure library.

Replica placement (``AdminUtils``), the four classic consumer assignors, leader election rules and the auto
leader rebalance arithmetic, each giving Apache Kafka's exact answers.  Nothing here does I/O or imports the
rest of odradek, so the controller, the group coordinator and the CLI can all call it.
"""

from .election import (
    DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE,
    ElectionResult,
    KRaftElection,
    LeaderRecoveryState,
    controlled_shutdown_election,
    controlled_shutdown_leader,
    kraft_elect_leader,
    new_partition_state,
    offline_election,
    offline_leader,
    preferred_election,
    preferred_leader,
    reassign_election,
    reassign_leader,
)
from .errors import (
    AdminOperationException,
    InvalidPartitionsException,
    InvalidReplicaAssignmentException,
    InvalidReplicationFactorException,
    PlacementError,
)
from .model import BrokerMetadata, PartitionInfo, Subscription, TopicPartition
from .range_assignor import RangeAssignor
from .rebalance import (
    DEFAULT_AUTO_LEADER_REBALANCE_ENABLE,
    DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
    DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    KRAFT_MAX_ELECTIONS_PER_IMBALANCE,
    imbalanced_brokers,
    kraft_imbalanced_partitions,
    leader_imbalance_ratio,
    should_trigger_rebalance,
)
from .replicas import (
    assign_replicas_to_brokers,
    broker_metadatas,
    new_partitions_assignment,
    rack_alternated_broker_list,
    validate_manual_assignment,
)
from .roundrobin_assignor import RoundRobinAssignor
from .sticky import CooperativeStickyAssignor, StickyAssignor
from .sticky_constrained import AssignmentError
from .sticky_userdata import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)}

__all__ = [
    "ASSIGNORS",
    "DEFAULT_AUTO_LEADER_REBALANCE_ENABLE",
    "DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS",
    "DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE",
    "DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE",
    "KRAFT_MAX_ELECTIONS_PER_IMBALANCE",
    "AdminOperationException",
    "AssignmentError",
    "BrokerMetadata",
    "CooperativeStickyAssignor",
    "ElectionResult",
    "InvalidPartitionsException",
    "InvalidReplicaAssignmentException",
    "InvalidReplicationFactorException",
    "KRaftElection",
    "LeaderRecoveryState",
    "PartitionInfo",
    "PlacementError",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "assign_replicas_to_brokers",
    "broker_metadatas",
    "controlled_shutdown_election",
    "controlled_shutdown_leader",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "imbalanced_brokers",
    "kraft_elect_leader",
    "kraft_imbalanced_partitions",
    "leader_imbalance_ratio",
    "new_partition_state",
    "new_partitions_assignment",
    "offline_election",
    "offline_leader",
    "preferred_election",
    "preferred_leader",
    "rack_alternated_broker_list",
    "reassign_election",
    "reassign_leader",
    "should_trigger_rebalance",
    "validate_manual_assignment",
]
