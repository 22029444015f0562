"""A cluster across hosts, and a nemesis (issue 15).

Each broker and each ZooKeeper server runs on its own host, a Linux network namespace on a bridge, so they talk over
real interfaces at real addresses and a partition is a firewall rule, not a flag in the code under test.
:mod:`~odradek.lab.cluster` builds the hosts and servers, :mod:`~odradek.lab.nemesis` draws and injects faults,
:mod:`~odradek.lab.workload` drives real clients and records what they saw, :mod:`~odradek.lab.checker` judges the
record against Kafka's documented guarantees, and :mod:`~odradek.lab.run` puts them together.
"""
