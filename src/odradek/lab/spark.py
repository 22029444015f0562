"""The example pipeline on a Spark standalone cluster across processes, against the lab's namespaced brokers.

A master and two workers start from the pyspark package (``spark-class ...deploy.master.Master`` and
``...deploy.worker.Worker``) as separate processes on the machine; the driver is this process and the executors
are the workers' children, so the odradek source and sink run in three kinds of processes (driver, the driver's
streaming planner, executor Python workers) that all reach the brokers at their real addresses through the
machine's veth. The pipeline is ``odradek demo``'s (examples/clickstream.py into examples/page_views.py); midway
the leader of ``clicks-0`` is isolated from everything for ``--cut-seconds``, then healed; the run passes when the
Parquet output holds exactly the totals the generator produced.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from odradek.lab.cluster import Lab
from odradek.lab.processes import wait_until

__all__ = ["SparkStandalone", "run_pipeline"]

SRC = Path(__file__).resolve().parents[2]  # what executors need on their PYTHONPATH to import odradek


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SparkStandalone:
    """A master and ``workers`` workers (one core, 1 GiB each) on loopback."""

    def __init__(self, base_dir: Path, workers: int = 2) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.base_dir = base_dir
        self.workers = workers
        self.port = 0
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> Path:
        log = self.base_dir / f"spark-{name}.log"
        env = dict(os.environ, SPARK_HOME=str(self.home), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_WORKER_DIR=str(self.base_dir / "spark-work"), PYSPARK_PYTHON=sys.executable,
                   PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], stdout=out,
                                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        return log

    def start(self) -> SparkStandalone:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        master_log = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                            "--port", str(self.port), "--webui-port", str(_free_port())])
        wait_until(lambda: "I have been elected leader" in master_log.read_text(errors="replace"), 120,
                   "the Spark master up")
        for n in range(self.workers):
            self._spawn(f"worker{n}", ["org.apache.spark.deploy.worker.Worker", "--cores", "1", "--memory", "1g",
                                       "--webui-port", str(_free_port()), self.url])
        wait_until(lambda: master_log.read_text(errors="replace").count("Registering worker") >= self.workers,
                   120, "both Spark workers registered")
        return self

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        self.procs.clear()


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    import odradek.spark

    # The driver's JVM starts its Python workers (the data source's planner among them) from this variable, not
    # from spark.pyspark.python: without it they run whatever python3 is first on the PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master(master).appName("odradek-lab-page-views")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.cores.max", "2").config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
        .config("spark.pyspark.python", sys.executable).config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", str(SRC))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark


def run_pipeline(base_dir: Path, *, events: int = 20000, seconds: float = 90.0, cut_seconds: float = 10.0,
                 say: Any = print) -> bool:
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek import examples

    clickstream, page_views = examples.load()
    with Lab(base_dir=base_dir / "lab") as lab:
        say(f"lab: {lab.describe()}")
        admin = AdminClient({"bootstrap.servers": lab.bootstrap})
        for fut in admin.create_topics([NewTopic("clicks", 3, 3, config={"min.insync.replicas": "2"}),
                                        NewTopic("page-views", 1, 3)]).values():
            fut.result(60)
        spark_cluster = SparkStandalone(base_dir / "spark").start()
        say(f"spark standalone: {spark_cluster.url}, {spark_cluster.workers} workers")
        spark = None
        try:
            spark = _session(spark_cluster.url)
            queries = page_views.start_queries(spark, lab.bootstrap, "clicks", "page-views", base_dir / "job")
            produced: Counter[tuple[str, int]] = Counter()

            def generate() -> None:
                produced.update(clickstream.generate(lab.bootstrap, "clicks", events=events, minutes=5,
                                                     rate_per_s=events / max(seconds / 2, 1)))

            generator = threading.Thread(target=generate, name="clickstream")
            generator.start()
            time.sleep(seconds / 6)  # midway through producing, on purpose: the cut lands on a running pipeline
            victim = lab.leader_of("clicks", 0)
            assert victim is not None
            host = lab.broker_host(victim)
            say(f"isolating broker {victim} ({host.address}, leader of clicks-0) for {cut_seconds:.0f}s")
            lab.isolate(host)
            time.sleep(cut_seconds)
            lab.heal(host)
            say(f"broker {victim} healed")
            generator.join()
            got: Counter[tuple[str, int]] = Counter()

            def done() -> bool:
                nonlocal got
                got = page_views.parquet_totals(spark, base_dir / "job")
                return got == produced or any(q.exception() is not None for q in queries)

            try:
                wait_until(done, seconds * 2, "the Parquet output to hold the generator's totals", 2)
            except TimeoutError:
                pass
            for q in queries:
                if q.exception() is not None:
                    say(f"query {q.name or q.id} failed: {str(q.exception()).splitlines()[:8]}")
                q.stop()
            say(f"produced {sum(produced.values())} page views in {len(produced)} (page, minute) windows")
            say(f"counted  {sum(got.values())} page views in {len(got)} windows (Parquet)")
            ok: bool = got == produced
            say("totals match: nothing lost, nothing counted twice" if ok else "MISMATCH")
            return ok
        finally:
            if spark is not None:
                spark.stop()
            spark_cluster.stop()
