"""The schema registry's throughput: registrations per second, and lookups by id per second, cached and uncached.

Starts ``odradek up --port 0`` (one broker, the registry on a free port) and measures from this process:

- registrations: ``POST /subjects/{s}/versions`` of distinct Avro schemas, each a write to ``_schemas`` with
  acks=all read back before the answer (the primary serializes writes), from 1 and from ``--threads`` clients;
- lookups by id, uncached: ``GET /schemas/ids/{id}`` over keep-alive HTTP (httpx), every request answered by the
  registry, from 1 and from ``--threads`` clients;
- lookups by id, cached: confluent-kafka's ``SchemaRegistryClient.get_schema`` for ids it has fetched once (what a
  deserializer does per record), answered from the client's cache.

    .venv/bin/python bench/schema_registry.py
    .venv/bin/python bench/schema_registry.py --schemas 500 --lookups 5000 --threads 8
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from confluent_kafka.schema_registry import SchemaRegistryClient

from odradek.ready_file import read_ready_file

MEDIA = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def start(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = work / "ready"
    cmd = [sys.executable, "-m", "odradek", "up", "--port", "0", "--schema-registry-port", "0", "--data-dir",
           str(work / "data"), "--ready-file", str(ready), "--log-level", "WARNING"]
    log = open(work / "broker.log", "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while not (ready.exists() and "schema.registry.url=" in ready.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"odradek did not start: {(work / 'broker.log').read_text()[-2000:]}")
        time.sleep(0.1)
    return proc, read_ready_file(ready)["schema.registry.url"]


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": "string"}]})


def in_threads(threads: int, count: int, work: Callable[[httpx.Client, int], None], url: str) -> float:
    """Run ``work(client, i)`` for i in 0..count-1 spread over ``threads`` keep-alive clients; requests per second."""
    def run(offset: int) -> None:
        with httpx.Client(base_url=url, headers=MEDIA, timeout=60) as client:
            for i in range(offset, count, threads):
                work(client, i)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-sr-bench-") as tmp:
        proc, url = start(Path(tmp))
        try:
            def register(offset: int) -> Callable[[httpx.Client, int], None]:
                def work(client: httpx.Client, i: int) -> None:
                    resp = client.post(f"/subjects/s{offset + i}/versions", json={"schema": schema(offset + i)})
                    resp.raise_for_status()
                return work

            # the first write waits for the election (the group's first rebalance is held back by Kafka's
            # group.initial.rebalance.delay.ms, 3 s by default): not what a registration costs
            with httpx.Client(base_url=url, headers=MEDIA, timeout=60) as client:
                client.post("/subjects/warm-up/versions", json={"schema": '"string"'}).raise_for_status()
            one = in_threads(1, args.schemas, register(0), url)
            many = in_threads(args.threads, args.schemas, register(args.schemas), url)
            ids = 2 * args.schemas + 1

            def lookup(client: httpx.Client, i: int) -> None:
                client.get(f"/schemas/ids/{i % ids + 1}").raise_for_status()

            uncached_one = in_threads(1, args.lookups, lookup, url)
            uncached_many = in_threads(args.threads, args.lookups, lookup, url)
            cached_client = SchemaRegistryClient({"url": url})
            for i in range(1, ids + 1):
                cached_client.get_schema(i)
            started = time.perf_counter()
            for i in range(args.lookups):
                cached_client.get_schema(i % ids + 1)
            cached = args.lookups / (time.perf_counter() - started)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"registrations/s: {one:,.0f} (1 client), {many:,.0f} ({args.threads} clients); {args.schemas} each")
    print(f"lookups by id/s, uncached (HTTP): {uncached_one:,.0f} (1 client), {uncached_many:,.0f} "
          f"({args.threads} clients); {args.lookups} each")
    print(f"lookups by id/s, cached (confluent-kafka's client cache): {cached:,.0f}")


if __name__ == "__main__":
    main()
