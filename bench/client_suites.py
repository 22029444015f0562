"""Run the Kafka clients' own integration suites against a fresh odradek and print their pass counts.

A measuring tool, not part of CI: the suites are not ours to copy into the repository. Prepare each suite as
``../shared/notes/client-suites.md`` describes (a source tree of the tagged release and a venv with the suite's
dependencies), then::

    python bench/client_suites.py --kafka-python /tmp/suites/kp --kafka-python-venv /tmp/suites/venv-kp \\
        --confluent /tmp/suites/ckp --confluent-venv /tmp/suites/venv-ckp --confluent-schema-registry

``--confluent-schema-registry`` runs confluent-kafka-python's ``tests/integration/schema_registry`` (sync and async)
against the registry ``odradek up`` serves (``SR_URL`` from its ready file), in the same tree and venv (which then
also needs ``pytest-asyncio`` and ``googleapis-common-protos``).

Each suite gets its own broker (``odradek up --port 0``) on a fresh data directory, so one suite's topics and
groups never change another's results. The summary line of each pytest run is parsed into counts; the failing
test ids are printed under it.

kafkajs and librdkafka run against three brokers (``bench/suite_clusters.py``: ``odradek broker`` processes on a
ZooKeeper of their own), or, with ``--kafkajs-against kafka`` / ``--librdkafka-against kafka``, against Apache Kafka
3.9 in the same harness, to tell odradek's failures from the suite's or the harness's. Both need Java 17 (ZooKeeper,
Kafka's tools); kafkajs's run also needs root, for its network namespace.

kafkajs (git tag v2.2.4 of tulios/kafkajs; ``npm install`` in the tree, Node 20)::

    git -C <kafkajs git dir> archive v2.2.4 | tar -x -C /tmp/suites/kafkajs
    (cd /tmp/suites/kafkajs && npm install --no-audit --no-fund --ignore-scripts)
    python bench/client_suites.py --kafkajs /tmp/suites/kafkajs                    # every jest test, 5-11 min
    python bench/client_suites.py --kafkajs /tmp/suites/kafkajs --kafkajs-against kafka \
        --kafkajs-test src/broker/__tests__/heartbeat.spec.js                    # some test files, Kafka 3.9

librdkafka (git tag v2.15.0 of confluentinc/librdkafka, built from source; ``rapidjson-dev`` for the tests that
read statistics)::

    git -C <librdkafka git dir> archive v2.15.0 | tar -x -C /tmp/suites/librdkafka
    (cd /tmp/suites/librdkafka && ./configure --disable-gssapi && make libs && make -C tests build)
    python bench/client_suites.py --librdkafka /tmp/suites/librdkafka --librdkafka-parallel 3   # every test, ~20 min
    python bench/client_suites.py --librdkafka /tmp/suites/librdkafka --librdkafka-scenario noautocreate
    python bench/client_suites.py --librdkafka /tmp/suites/librdkafka --librdkafka-against kafka \
        --librdkafka-tests 0081,0113                                              # some tests, Kafka 3.9

``--librdkafka-kafka-version 4.0.0`` sets the suite's TEST_KAFKA_VERSION (3.9.0 by default) so it leaves out what
Kafka 4.0 removed. ``--keep`` keeps the work directory: each runner's log, jest's report, the brokers' logs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import suite_clusters  # the script's directory is on sys.path
from odradek.ready_file import read_ready_file

ROOT = Path(__file__).resolve().parent.parent
# The broker settings kafka-python's own fixture gives the Kafka it starts (servers/resources/default/
# kafka.properties, num.partitions={partitions} with the fixture's default of 4) where they differ from Kafka's
# defaults: its test_group uses a 3 s session timeout, which Kafka's default group.min.session.timeout.ms (6000,
# odradek's too) refuses with INVALID_SESSION_TIMEOUT, and its transactional offsets test commits offsets of partition
# 1 of an auto-created topic (UNKNOWN_TOPIC_OR_PARTITION with one partition, from Kafka as from odradek).
# Its fixture's _acl_config for Kafka 2.4-3.x turns the ACL authorizer on with allow.everyone.if.no.acl.found=true
# (test_create_describe_delete_acls needs an authorizer).
KAFKA_PYTHON_BROKER = ["num.partitions=4", "group.min.session.timeout.ms=1000", "group.initial.rebalance.delay.ms=0",
                       "offsets.topic.num.partitions=2",
                       "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                       "allow.everyone.if.no.acl.found=true"]
# What confluent-kafka-python's docker-compose gives its Kafka beyond the defaults: the ACL authorizer with the
# anonymous user as super user (test_basic_operations creates and deletes ACLs).
CONFLUENT_BROKER = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:ANONYMOUS"]
ODRADEK = [sys.executable, "-m", "odradek"]
READY_TIMEOUT_S = 60.0

KAFKA_PYTHON_ARGS = [
    "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=60", "-rfE", "test/integration",
    "--deselect", "test/integration/test_ssl_integration.py",
]
CONFLUENT_ARGS = [
    "-m", "pytest", "-p", "no:cacheprovider", "--timeout=120", "-rfEs", "tests/integration",
    "--ignore=tests/integration/schema_registry", "--ignore=tests/integration/serialization",
    "--ignore=tests/integration/share_consumer", "--ignore=tests/integration/share_consumer_oauth",
    "--ignore=tests/integration/share_consumer_sasl", "--ignore=tests/integration/integration_test.py",
    "--deselect", "tests/integration/admin/test_describe_operations.py",
]
# The one test that needs a second, older cluster (Confluent Platform 7.0.1, whose registry answered 500 where newer
# ones answer 422) is left out, in both halves; the async half needs ByoFixture.async_schema_registry, which the
# suite's fixture lacks (bench/confluent_byo_async_registry.py adds it).
OLDER_CLUSTER_TEST = "test_api_client.py::test_api_get_register_schema_invalid[kafka_cluster_cp_7_0_1-500-500]"
CONFLUENT_SR_ARGS = [
    "-m", "pytest", "-p", "no:cacheprovider", "-p", "confluent_byo_async_registry", "-o", "asyncio_mode=auto",
    "--timeout=120", "-rfEs", "tests/integration/schema_registry",
    "--deselect", f"tests/integration/schema_registry/_sync/{OLDER_CLUSTER_TEST}",
    "--deselect", f"tests/integration/schema_registry/_async/{OLDER_CLUSTER_TEST}",
]
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed)")


@dataclass
class SuiteResult:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    skips: list[str] = field(default_factory=list)


def start_broker(data_dir: Path, overrides: list[str],
                 schema_registry: bool = False) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """Start ``odradek up`` on a free port and return it with its ready file's endpoints (``bootstrap.servers``,
    ``schema.registry.url``). The registry is off unless asked for: its election group is a stable consumer group,
    which suites that expect none (confluent-kafka-python's test_basic_operations) would count."""
    ready = data_dir.parent / f"{data_dir.name}.ready"
    ready.unlink(missing_ok=True)
    cmd = [*ODRADEK, "up", "--port", "0", "--data-dir", str(data_dir), "--ready-file", str(ready),
           "--schema-registry-port", "0" if schema_registry else "none"]
    for item in overrides:
        cmd += ["--override", item]
    log_file = (data_dir.parent / f"{data_dir.name}.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            return proc, read_ready_file(ready)
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}; see {log_file.name}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("broker did not become ready")


def stop_broker(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_suite(name: str, tree: Path, venv: Path, args: list[str], env: dict[str, str], work: Path,
              overrides: list[str]) -> SuiteResult:
    data_dir = work / f"data-{name}"
    proc, ready = start_broker(data_dir, overrides, schema_registry="SR_URL" in env)
    bootstrap = ready["bootstrap.servers"].split(",")[0]
    result = SuiteResult(name)
    started = time.monotonic()
    try:
        full_env = {**os.environ, **{k: v.replace("{bootstrap}", bootstrap)
                                     .replace("{schema_registry}", ready.get("schema.registry.url", ""))
                                     for k, v in env.items()}}
        full_env.pop("PYTHONPATH", None)
        if "PYTHONPATH" in env:
            full_env["PYTHONPATH"] = env["PYTHONPATH"]
        out = subprocess.run([str(venv / "bin" / "python"), *args], cwd=tree, env=full_env,
                             capture_output=True, text=True, check=False)
    finally:
        stop_broker(proc)
    result.seconds = time.monotonic() - started
    (work / f"pytest-{name}.log").write_text(out.stdout + out.stderr)
    summary = [line for line in out.stdout.splitlines() if line.startswith("=") and " in " in line]
    if summary:
        for number, kind in COUNT.findall(summary[-1]):
            result.counts[kind.rstrip("s") if kind.startswith("error") else kind] = int(number)
    result.failures = [line.split(" ", 1)[1] for line in out.stdout.splitlines()
                       if line.startswith(("FAILED ", "ERROR "))]
    return result


# kafkajs's docker-compose.2_4.yml: three ZooKeeper-mode brokers (ids 0-2), each with PLAINTEXT, SSL and SASL_SSL on
# three consecutive ports from 9092, 9095, 9098 (testHelpers/index.js hard-codes them), and these settings beyond the
# defaults. Its SCRAM user is scripts/createScramCredentials.sh's.
KAFKAJS_FIRST_PORTS = (9092, 9095, 9098)
KAFKAJS_BROKER = {
    "auto.create.topics.enable": "true", "default.replication.factor": "2", "num.partitions": "2",
    "delete.topic.enable": "true", "group.initial.rebalance.delay.ms": "0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true",
}
KAFKAJS_SCRAM = ("testscram", "testtestscram=256", "testtestscram=512")


def run_kafkajs_inside(tree: Path, against: str, work: Path, patterns: list[str], workers: int) -> SuiteResult:
    """Inside the namespace: the three-listener cluster, kafkajs's SCRAM user, then its jest suite (all of it, or
    the test files matching ``patterns``) with the environment its package.json's ``jest`` script sets."""
    keystore = suite_clusters.make_certificates(work / "certs")
    shims = kafkajs_docker_shim(work / "kafkajs-bin", suite_clusters.kafka_path(work / "kafka-path"))
    settings = [suite_clusters.listener_settings(port, keystore, KAFKAJS_BROKER) for port in KAFKAJS_FIRST_PORTS]
    cluster = suite_clusters.start_cluster(against, work / f"cluster-{against}", settings)
    result = SuiteResult(f"kafkajs ({against})")
    started = time.monotonic()
    try:
        suite_clusters.add_scram_user("127.0.0.1:9092", *KAFKAJS_SCRAM)
        report = work / f"jest-{against}.json"
        env = {**os.environ, "KAFKA_VERSION": "2.4", "NODE_ENV": "test", "KAFKAJS_DEBUG_PROTOCOL_BUFFERS": "1",
               "NODE_OPTIONS": "--dns-result-order=ipv4first", "PATH": f"{shims}:{os.environ['PATH']}"}
        cmd = ["node", "node_modules/.bin/jest", "--ci", "--forceExit", "--no-watchman", f"--maxWorkers={workers}",
               "--json", f"--outputFile={report}", *patterns]
        with (work / f"jest-{against}.log").open("w") as log:
            subprocess.run(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    finally:
        cluster.stop()
    result.seconds = time.monotonic() - started
    parse_jest(report, tree, result)
    return result


def kafkajs_docker_shim(directory: Path, kafka_path: Path) -> Path:
    """A ``docker`` for kafkajs's scripts/addPartitions.sh, which runs ``kafka-topics --zookeeper zookeeper:2181``
    in its broker's container: ``docker ps`` names one container, ``docker exec <id> bash -c CMD`` runs CMD here
    with Kafka 3.9's ``kafka-topics`` (TopicCommand, which takes ``--bootstrap-server`` where 2.4's took
    ``--zookeeper``) on the PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kafka-topics").symlink_to(kafka_path / "bin" / "kafka-topics.sh")
    docker = directory / "docker"
    docker.write_text(
        '#!/bin/sh\n'
        'case "$1" in\n'
        '  ps) echo kafka1 ;;\n'
        '  exec) exec sh -c "$(echo "$5" | sed "s/--zookeeper zookeeper:2181/--bootstrap-server localhost:9092/")" ;;\n'
        '  *) echo "docker shim: $1 is not served" >&2; exit 1 ;;\n'
        'esac\n')
    docker.chmod(0o755)
    return directory


def parse_jest(report: Path, tree: Path, result: SuiteResult) -> None:
    """Counts per test (jest's --json report); a file that failed to run at all counts as one error."""
    data = json.loads(report.read_text()) if report.exists() else {}
    result.counts = {"passed": data.get("numPassedTests", 0), "failed": data.get("numFailedTests", 0),
                     "skipped": data.get("numPendingTests", 0) + data.get("numTodoTests", 0)}
    for suite in data.get("testResults", []):
        name = str(Path(suite["name"]).relative_to(tree)) if suite["name"].startswith(str(tree)) else suite["name"]
        if not suite.get("assertionResults") and suite.get("status") == "failed":
            result.counts["error"] = result.counts.get("error", 0) + 1
            result.failures.append(f"{name} (did not run: {suite.get('message', '').strip().splitlines()[:1]})")
        for test in suite.get("assertionResults", []):
            if test["status"] == "failed":
                result.failures.append(f"{name} :: {test['fullName']}")


def run_kafkajs(tree: Path, against: str, work: Path, patterns: list[str], workers: int) -> SuiteResult:
    """Re-run this script inside a fresh network namespace, where kafkajs's fixed ports are free, and read back
    the result it leaves in ``work``."""
    name = f"odsuites-{os.getpid()}"
    out = work / f"kafkajs-{against}.result.json"
    with suite_clusters.namespace(name):
        cmd = ["ip", "netns", "exec", name, sys.executable, str(Path(__file__).resolve()), "--kafkajs", str(tree),
               "--kafkajs-against", against, "--kafkajs-workers", str(workers), "--inside-namespace", str(work),
               *[arg for p in patterns for arg in ("--kafkajs-test", p)]]
        subprocess.run(cmd, check=False, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if not out.exists():
        return SuiteResult(f"kafkajs ({against})", {"error": 1}, [f"no result: see {work}"])
    return SuiteResult(**json.loads(out.read_text()))


# trivup's broker settings for librdkafka's "default" scenario (tests/scenarios/default.json on trivup's
# server.properties template and cluster_testing.py): auto-created topics with 4 partitions and 3 replicas, the ACL
# authorizer allowing everyone, one rack per broker and, for Kafka only, the rack-aware replica selector: odradek
# does not serve fetch from follower (KIP-392) and refuses the setting as unknown.
# ("noautocreate" differs in auto.create.topics.enable=false.)
LIBRDKAFKA_KAFKA_ONLY = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
LIBRDKAFKA_BROKER = {
    "num.partitions": "4", "default.replication.factor": "3", "offsets.topic.replication.factor": "3",
    "delete.topic.enable": "true", "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
LIBRDKAFKA_SCENARIOS = {"default": {"auto.create.topics.enable": "true"},
                        "noautocreate": {"auto.create.topics.enable": "false"}}
FAILED_AT = re.compile(r'### Test "(\S+)[^"]*" failed at [^\n]*###\n([^\n]*)')  # "name (sub-test)"
SKIPPED_BECAUSE = re.compile(r"^\[(\S+)\s*/[^]]*\] WARN: SKIPPING TEST: (.*)$", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NOT_THIS_MODE = "Filtered due to negative test flags"  # a local test under -L, or one with a known issue


def librdkafka_numbers(tree: Path) -> list[str]:
    """The test numbers ``make`` runs: every number of test.c's table (one number may hold several tests,
    ``0045_subscribe_update`` and its siblings) with a test not marked TEST_F_MANUAL, which the runner only runs
    when named (running each number by name would otherwise run them)."""
    table = (tree / "tests" / "test.c").read_text()
    table = table[table.index("struct test tests[] = {"):]
    return sorted({number for number, flags in re.findall(r"_TEST\((\d{4})_\w+,\s*([^,)]*)", table)
                   if "TEST_F_MANUAL" not in flags})


def run_librdkafka(tree: Path, against: str, work: Path, scenario: str, tests: str, parallel: int,
                   extra_args: list[str], kafka_version: str) -> SuiteResult:
    """librdkafka's test-runner against three brokers with trivup's settings for ``scenario``: every test that
    needs a broker (``-L``; never ``-Q``, its quick mode), or the numbers in ``tests`` (comma-separated).

    Each test number runs in a runner process of its own (``parallel`` of them at once, all on one cluster),
    because a test that overruns its timeout kills the whole runner. KAFKA_PATH points at Kafka 3.9's tools for the
    tests that run kafka-topics.sh and kafka-acls.sh. ``kafka_version`` is TEST_KAFKA_VERSION, the broker version
    the tests adapt to (4.0.0 and later: no message format v0/v1, no old protocol versions, as KIP-896 and
    KIP-724 removed them; odradek serves Kafka 4.0's version floors)."""

    cluster_dir = work / f"rdkafka-{against}-{scenario}"
    settings = [{**LIBRDKAFKA_BROKER, **LIBRDKAFKA_SCENARIOS[scenario], "broker.rack": f"RACK{i}",
                 **(LIBRDKAFKA_KAFKA_ONLY if against == "kafka" else {})} for i in range(3)]
    cluster = suite_clusters.start_cluster(against, cluster_dir, settings)
    result = SuiteResult(f"librdkafka ({against}, {scenario}, TEST_KAFKA_VERSION={kafka_version})")
    started = time.monotonic()
    numbers = [n.strip() for n in tests.split(",") if n.strip()] or librdkafka_numbers(tree)

    def run_one(number: str) -> tuple[dict[str, dict[str, str]], str]:
        report = cluster_dir / f"report-{number}.json"
        log = cluster_dir / f"test-{number}.log"
        env = {**os.environ, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": kafka_version, "BROKERS": brokers,
               "TEST_SCENARIO": scenario, "TEST_REPORT": str(report), "KAFKA_PATH": str(kafka_path),
               "TESTS": number}
        with log.open("w") as out:
            subprocess.run(["./run-test.sh", "-p1", "-L", *extra_args], cwd=tree / "tests", env=env,
                           stdout=out, stderr=subprocess.STDOUT, check=False)
        text = report.read_text(errors="replace") if report.exists() else ""
        try:
            states = json.loads(text)["tests"] if text else {}
        except ValueError:
            states = {}
        return ({k: v for k, v in states.items() if k.startswith(number)},
                ANSI.sub("", log.read_text(errors="replace")))

    try:
        brokers = suite_clusters.bootstrap(cluster)
        conf = cluster_dir / "test.conf"
        # trivup's LibrdkafkaTestApp writes the same multiplier of every test's timeout
        conf.write_text(f"bootstrap.servers={brokers}\nsecurity.protocol=PLAINTEXT\ntest.timeout.multiplier=2\n")
        kafka_path = suite_clusters.kafka_path(work / "kafka-path")
        with ThreadPoolExecutor(parallel) as pool:
            outcomes = list(pool.map(run_one, numbers))
    finally:
        cluster.stop()
    result.seconds = time.monotonic() - started
    for number, (states, log) in zip(numbers, outcomes, strict=True):
        reasons: dict[str, str] = {}
        for name, why in FAILED_AT.findall(log):
            reasons.setdefault(name, why)  # the first failure; later ones say "See 1 previous failure(s)"
        skips = {name: why.strip() for name, why in SKIPPED_BECAUSE.findall(log)
                 if not why.startswith(NOT_THIS_MODE) or states.get(name, {}).get("known_issue")}
        ran = {name: t for name, t in states.items() if t["state"] != "SKIPPED" or name in skips}
        if not states:
            result.counts["error"] = result.counts.get("error", 0) + 1
            result.failures.append(f"{number}: no report (see {cluster_dir}/test-{number}.log)")
        for name, test in sorted(ran.items()):
            kind = test["state"].lower()
            result.counts[kind] = result.counts.get(kind, 0) + 1
            if test["state"] == "FAILED":
                result.failures.append(f"{name}: {reasons.get(name, '(see its log)')}")
            elif test["state"] == "SKIPPED":
                why = f"known issue {test['extra']}" if test.get("known_issue") else skips[name]
                result.skips.append(f"{name}: {why}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka-python", type=Path, help="kafka-python source tree (git tag 3.0.11)")
    parser.add_argument("--kafka-python-venv", type=Path)
    parser.add_argument("--confluent", type=Path, help="confluent-kafka-python source tree (git tag v2.15.0)")
    parser.add_argument("--confluent-venv", type=Path)
    parser.add_argument("--confluent-schema-registry", action="store_true",
                        help="also run its tests/integration/schema_registry against odradek's registry")
    parser.add_argument("--override", action="append", default=[], help="broker config key=value")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    parser.add_argument("--confluent-group-protocol", choices=("classic", "consumer"), default="classic",
                        help="consumer: the suite's consumers use KIP-848 groups (TEST_CONSUMER_GROUP_PROTOCOL)")
    parser.add_argument("--kafkajs", type=Path, help="kafkajs source tree (git tag v2.2.4) with node_modules")
    parser.add_argument("--kafkajs-against", choices=("odradek", "kafka"), default="odradek",
                        help="kafka: Apache Kafka 3.9 in the same harness, to tell odradek's failures from others")
    parser.add_argument("--kafkajs-test", action="append", default=[],
                        help="run only the jest test files matching this pattern (repeatable)")
    parser.add_argument("--kafkajs-workers", type=int, default=2, help="jest --maxWorkers")
    parser.add_argument("--librdkafka", type=Path, help="librdkafka source tree (git tag v2.15.0), built")
    parser.add_argument("--librdkafka-against", choices=("odradek", "kafka"), default="odradek")
    parser.add_argument("--librdkafka-scenario", choices=tuple(LIBRDKAFKA_SCENARIOS), default="default")
    parser.add_argument("--librdkafka-tests", default="", help="TESTS: comma-separated test numbers (all if empty)")
    parser.add_argument("--librdkafka-parallel", type=int, default=2, help="test-runner -p")
    parser.add_argument("--librdkafka-kafka-version", default="3.9.0",
                        help="TEST_KAFKA_VERSION: 4.0.0 makes the tests skip what Kafka 4.0 removed")
    parser.add_argument("--librdkafka-arg", action="append", default=[], help="more test-runner options (-K, -E)")
    parser.add_argument("--inside-namespace", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.inside_namespace:  # the kafkajs half, re-run by run_kafkajs inside its namespace
        r = run_kafkajs_inside(args.kafkajs, args.kafkajs_against, args.inside_namespace, args.kafkajs_test,
                               args.kafkajs_workers)
        (args.inside_namespace / f"kafkajs-{args.kafkajs_against}.result.json").write_text(json.dumps(asdict(r)))
        return 0

    work = Path(tempfile.mkdtemp(prefix="odradek-suites-"))
    results: list[SuiteResult] = []
    if args.kafkajs:
        results.append(run_kafkajs(args.kafkajs.resolve(), args.kafkajs_against, work, args.kafkajs_test,
                                   args.kafkajs_workers))
    if args.librdkafka:
        results.append(run_librdkafka(args.librdkafka.resolve(), args.librdkafka_against, work,
                                      args.librdkafka_scenario, args.librdkafka_tests, args.librdkafka_parallel,
                                      args.librdkafka_arg, args.librdkafka_kafka_version))
    if args.kafka_python:
        kroot = work / "kafka-root"
        kroot.mkdir()
        env = {"KAFKA_ROOT": str(kroot), "KAFKA_VERSION": "3.8.0", "KAFKA_URI": "kafka://{bootstrap}"}
        results.append(run_suite("kafka-python", args.kafka_python, args.kafka_python_venv, KAFKA_PYTHON_ARGS,
                                 env, work, [*KAFKA_PYTHON_BROKER, *args.override]))
    if args.confluent:
        env = {"BROKERS": "{bootstrap}", "TEST_CONSUMER_GROUP_PROTOCOL": args.confluent_group_protocol}
        results.append(run_suite("confluent-kafka-python", args.confluent, args.confluent_venv, CONFLUENT_ARGS,
                                 env, work, [*CONFLUENT_BROKER, *args.override]))
    if args.confluent and args.confluent_schema_registry:
        env = {"BROKERS": "{bootstrap}", "SR_URL": "{schema_registry}", "PYTHONPATH": str(ROOT / "bench")}
        results.append(run_suite("confluent-schema-registry", args.confluent, args.confluent_venv,
                                 CONFLUENT_SR_ARGS, env, work, args.override))
    for r in results:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(r.counts.items()))
        print(f"{r.name}: {counts} ({r.seconds:.0f} s)")
        for failure in r.failures:
            print(f"  {failure}")
        for skip in r.skips:
            print(f"  skipped {skip}")
    print(f"logs: {work}")
    if not args.keep:
        for child in work.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
