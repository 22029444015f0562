"""Partitions as nftables rules inside one host's namespace: packets to and from the blocked addresses are dropped.

Dropping (not rejecting) is what a cut cable or a dead switch port looks like to TCP: established connections stall
and new ones time out, so brokers and ZooKeeper learn of the cut the way they would in production, by timeouts.
The rules hook input and output of the host's own namespace, so cutting host A from B needs rules on A only; a
partition of several hosts is the union of each host's rules. The table is replaced in one ``nft -f`` transaction.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable

from odradek.lab.netns import Host

__all__ = ["TABLE", "apply", "ruleset"]

TABLE = "odradek_lab"


def ruleset(blocked: Iterable[str]) -> str:
    """The nft script that makes the host drop everything to and from ``blocked`` (none: the table is emptied)."""
    addresses = sorted(set(blocked))
    lines = [f"table inet {TABLE}", f"delete table inet {TABLE}"]
    if addresses:
        members = ", ".join(addresses)
        lines += [
            f"table inet {TABLE} {{",
            "  chain input { type filter hook input priority 0; policy accept; "
            f"ip saddr {{ {members} }} drop; }}",
            "  chain output { type filter hook output priority 0; policy accept; "
            f"ip daddr {{ {members} }} drop; }}",
            "}",
        ]
    return "\n".join(lines) + "\n"


def apply(host: Host, blocked: Iterable[str]) -> None:
    result = subprocess.run(host.command(["nft", "-f", "-"]), input=ruleset(blocked), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nft in {host.namespace}: {result.stderr.strip()}")
