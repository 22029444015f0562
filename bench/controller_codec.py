"""Encode and decode of the controller's largest requests: LeaderAndIsr and UpdateMetadata at failover size.

At failover the controller sends every broker a LeaderAndIsr and an UpdateMetadata naming up to 100,000 partitions;
encoding happens on the controller, decoding on each broker, both off the event loop but on the critical path of
leadership moving. The current codec (``odradek.protocol.controller_requests``) is measured against a baseline read from
git (by default the JSON codec it replaced), in the same process, on requests of the same shape: 1,000 topics of 100
partitions, replication factor 3, 10 live brokers. "UpdateMetadata, next broker" is the same partition states with
another broker epoch, which both codecs answer from their cache of encoded states. Each figure is the best of
``--repeat`` runs (the machine may be shared).

    .venv/bin/python bench/controller_codec.py
    .venv/bin/python bench/controller_codec.py --partitions 100000 --baseline 7678e98 --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.protocol import controller_requests as current

ROOT = Path(__file__).resolve().parent.parent
# Where the codec lives, then where it lived until it moved into protocol/ (the default baseline is older).
CODEC_PATHS = ("src/odradek/protocol/controller_requests.py", "src/odradek/controller/requests.py")
PER_TOPIC = 100
BROKERS = 10


def load_baseline(rev: str) -> types.ModuleType:
    for path in CODEC_PATHS:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no controller codec at {rev} (looked for {', '.join(CODEC_PATHS)})")
    module = types.ModuleType("controller_codec_baseline")
    sys.modules[module.__name__] = module  # dataclasses look their module up while building the classes
    exec(compile(shown.stdout, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def leader_and_isr(codec: Any, partitions: int) -> Any:
    states = []
    for p in range(partitions):
        replicas = [(p + i) % BROKERS for i in range(3)]
        states.append(codec.LeaderAndIsrPartitionState(
            f"topic-{p // PER_TOPIC}", p % PER_TOPIC, 7, replicas[0], 12, list(replicas), 31, replicas, [], [], False))
    leaders = [codec.LeaderAndIsrLiveLeader(b, "127.0.0.1", 9092 + b) for b in range(BROKERS)]
    return codec.LeaderAndIsrRequest(1, 7, 4242, states, leaders)


def update_metadata_states(codec: Any, partitions: int) -> list[Any]:
    states = []
    for p in range(partitions):
        replicas = [(p + i) % BROKERS for i in range(3)]
        states.append(codec.UpdateMetadataPartitionState(
            f"topic-{p // PER_TOPIC}", p % PER_TOPIC, 7, replicas[0], 12, list(replicas), 31, replicas, []))
    return states


def update_metadata(codec: Any, states: list[Any], broker_epoch: int) -> Any:
    brokers = [codec.MetadataBroker(b, [codec.MetadataEndpoint(9092 + b, "127.0.0.1", "PLAINTEXT", "PLAINTEXT")],
                                    f"rack-{b % 3}") for b in range(BROKERS)]
    return codec.UpdateMetadataRequest(1, 7, broker_epoch, states, brokers)


def best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def measure(codec: Any, partitions: int, repeat: int) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    lair = leader_and_isr(codec, partitions)
    seconds, body = best(repeat, lambda: codec.encode_body(lair))
    out["LeaderAndIsr encode"] = (seconds, len(body))
    seconds, decoded = best(repeat, lambda: codec.decode_request(codec.LEADER_AND_ISR, body))
    assert decoded == lair
    out["LeaderAndIsr decode"] = (seconds, len(body))

    states = update_metadata_states(codec, partitions)
    # a fresh list each run: the codecs cache encoded states by list identity, and a new round has a new list
    seconds, body = best(repeat, lambda: codec.encode_body(update_metadata(codec, list(states), 100)))
    out["UpdateMetadata encode"] = (seconds, len(body))
    shared = list(states)
    codec.encode_body(update_metadata(codec, shared, 100))
    seconds, _ = best(repeat, lambda: codec.encode_body(update_metadata(codec, shared, 101)))
    out["UpdateMetadata encode, next broker"] = (seconds, len(body))
    seconds, decoded = best(repeat, lambda: codec.decode_request(codec.UPDATE_METADATA, body))
    assert decoded == update_metadata(codec, states, 100)
    out["UpdateMetadata decode"] = (seconds, len(body))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--baseline", default="7678e98", help="git revision whose codec to compare against")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    baseline = measure(load_baseline(args.baseline), args.partitions, args.repeat)
    now = measure(current, args.partitions, args.repeat)
    print(f"{args.partitions:,} partitions, best of {args.repeat}")
    print(f"| {'':<36} | {'baseline ' + args.baseline:>18} | {'current':>18} | {'ratio':>6} |")
    print(f"|{'-' * 38}|{'-' * 20}|{'-' * 20}|{'-' * 8}|")
    for name, (old_s, old_bytes) in baseline.items():
        new_s, new_bytes = now[name]
        print(f"| {name:<36} | {old_s:7.3f} s {old_bytes / 1e6:5.1f} MB | {new_s:7.3f} s {new_bytes / 1e6:5.1f} MB "
              f"| {old_s / new_s:5.1f}x |")


if __name__ == "__main__":
    main()
