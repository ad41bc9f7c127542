"""Local Kafka broker and schema registry from Maven Central jars, for the tests and the local quickstart.

No Docker: the real Apache Kafka broker (KRaft, one combined broker+controller node) and Apicurio Registry
run as plain Java processes on 127.0.0.1 with free ports. ``mvn`` resolves them once per machine into
``~/.cache/ticdc-delta-ingest/m2``; not ``~/.m2``, because Spark's Ivy reads ``~/.m2`` first and trips over
the POM-only entries ``mvn`` leaves there.

Command line (what ``make kafka-up`` / ``make kafka-down`` run)::

    python -m testkit.local_services kafka-up        # prints the bootstrap servers
    python -m testkit.local_services produce-sample  # the bundled sample stream into topic tidb_cdc
    python -m testkit.local_services kafka-down
    python -m testkit.local_services connect-up      # a Spark Connect server; prints sc://127.0.0.1:PORT
    python -m testkit.local_services connect-down
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from testkit.tls import Certificates

logger = logging.getLogger(__name__)

CACHE_DIR = Path.home() / ".cache" / "ticdc-delta-ingest"
MAVEN_REPO = CACHE_DIR / "m2"
STATE_DIR = CACHE_DIR / "local"
# Newest first; the next one is tried when Maven Central does not have a version.
KAFKA_VERSIONS = ("4.3.1", "4.1.2")
LOG4J_VERSION = "2.25.4"  # the version Kafka 4.3 itself depends on; slf4j-api there is 1.7.x
# 3.3.1 has no artifacts on Maven Central (only 3.0.9, 3.3.2 and 3.3.3 of the 3.x line are published);
# 3.3.x is built for Java 21.
APICURIO_VERSIONS = ("3.3.3", "3.3.2")
HOST = "127.0.0.1"
CCOMPAT_PATH = "/apis/ccompat/v7"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"
BROKER_USER = "broker"
MIRROR_USER = "mirror"


class ServiceError(RuntimeError):
    """A local service could not be resolved, started or stopped."""


# -- resolving from Maven Central ---------------------------------------------------------------------------


def _mvn(*args: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceError("mvn is not on PATH; install Maven (e.g. apt-get install maven) and Java 17")
    command = [mvn, "-B", "-q", f"-Dmaven.repo.local={MAVEN_REPO}", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ServiceError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.ticdc-delta-ingest</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version></dependency>
  </dependencies>
</project>
"""


@contextlib.contextmanager
def _installing() -> Iterator[None]:
    """One installer at a time across processes: test workers start services at once on a fresh machine,
    and two of them extracting or resolving into the same cache would break each other's copy."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (CACHE_DIR / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def kafka_classpath() -> tuple[str, str]:
    """The Kafka version and the broker's runtime classpath, resolved once and cached."""
    with _installing():
        return _kafka_classpath()


def _kafka_classpath() -> tuple[str, str]:
    errors = []
    for version in KAFKA_VERSIONS:
        cached = CACHE_DIR / f"kafka-{version}.classpath"
        if cached.exists() and all(Path(p).exists() for p in cached.read_text().split(os.pathsep)):
            return version, cached.read_text().strip()
        project = CACHE_DIR / "poms" / f"kafka-{version}"
        project.mkdir(parents=True, exist_ok=True)
        (project / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_VERSION))
        try:
            _mvn(
                "-f",
                str(project / "pom.xml"),
                "dependency:build-classpath",
                "-Dmdep.includeScope=runtime",
                f"-Dmdep.outputFile={cached}",
            )
        except ServiceError as exc:
            errors.append(str(exc))
            continue
        return version, cached.read_text().strip()
    raise ServiceError("no Kafka version resolved from Maven Central:\n" + "\n".join(errors))


def apicurio_home() -> tuple[str, Path]:
    """The Apicurio Registry version and the directory holding its ``quarkus-run.jar``."""
    with _installing():
        return _apicurio_home()


def _apicurio_home() -> tuple[str, Path]:
    errors = []
    for version in APICURIO_VERSIONS:
        home = CACHE_DIR / f"apicurio-registry-{version}"
        found = sorted(home.glob("**/quarkus-run.jar"))
        if found:
            return version, found[0].parent
        try:
            _mvn(
                "dependency:get",
                "-Dtransitive=false",
                f"-Dartifact=io.apicurio:apicurio-registry-app:{version}:tar.gz:all",
            )
        except ServiceError as exc:
            errors.append(str(exc))
            continue
        archive = (
            MAVEN_REPO
            / "io/apicurio/apicurio-registry-app"
            / version
            / f"apicurio-registry-app-{version}-all.tar.gz"
        )
        partial = home.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        partial.rename(home)
        found = sorted(home.glob("**/quarkus-run.jar"))
        if found:
            return version, found[0].parent
        errors.append(f"{archive} holds no quarkus-run.jar")
    raise ServiceError("no Apicurio Registry version resolved from Maven Central:\n" + "\n".join(errors))


# -- processes ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _java_major(java: str) -> int:
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if match is None:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _java(minimum: int) -> str:
    """A ``java`` of at least ``minimum``: ``$JAVA_HOME``, then ``PATH``, then the JDKs under /usr/lib/jvm."""
    candidates = [os.path.join(os.environ["JAVA_HOME"], "bin", "java")] if "JAVA_HOME" in os.environ else []
    candidates += [p for p in [shutil.which("java")] if p]
    candidates += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java"))
    for java in dict.fromkeys(candidates):
        if os.access(java, os.X_OK) and _java_major(java) >= minimum:
            return java
    raise ServiceError(
        f"no Java {minimum} or newer found (looked at JAVA_HOME, PATH and /usr/lib/jvm); install one, "
        "e.g. apt-get install openjdk-17-jdk for Kafka, a JDK 21 for Apicurio Registry 3.3"
    )


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM one process we started, then SIGKILL if it outlives ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass  # not our child (started by an earlier `kafka-up`): fall back to a signal probe
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


# Run beside a service started for a test run: when the process that started it is gone (a test run
# killed with SIGKILL or interrupted before its teardown), the service is killed too, so no broker or
# registry outlives the run that needed it.
_WATCHDOG = """
import os, signal, sys, time
owner, service, group = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] == ["group"]
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
while alive(owner) and alive(service):
    time.sleep(1)
if alive(service):
    (os.killpg if group else os.kill)(service, signal.SIGKILL)
"""


def watch(pid: int, *, group: bool = False, owner: int | None = None) -> None:
    """Kill ``pid`` (with ``group``: its whole process group) when this process (or ``owner``) dies first,
    however it dies: a process started in a session of its own outlives an interrupted test run otherwise."""
    owner = os.getpid() if owner is None else owner
    subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(owner), str(pid), *(["group"] if group else [])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


@dataclass
class _Process:
    """A Java service process: started detached, its output in a log file.

    ``owned``: the service lives only as long as the process that started it (tests); ``make kafka-up``
    starts one that outlives the command, until ``make kafka-down``.
    """

    name: str
    log_path: Path
    owned: bool = True
    pid: int | None = None
    _popen: subprocess.Popen[bytes] | None = None

    def launch(self, command: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
        with self.log_path.open("ab") as log:
            # A session of its own: Ctrl-C in a test run does not reach the service before teardown does.
            self._popen = subprocess.Popen(
                list(command),
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=None if env is None else dict(env),
            )
        self.pid = self._popen.pid
        if self.owned:
            watch(self.pid)

    def running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and _alive(self.pid)

    def wait_until(self, ready: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise ServiceError(f"{self.name} exited while starting; see {self.log_path}:\n{self.tail()}")
            if ready():
                return
            time.sleep(0.2)
        self.stop()
        raise ServiceError(f"{self.name} not ready after {timeout:.0f}s; see {self.log_path}:\n{self.tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        if self.pid is not None and self.running():
            _terminate(self.pid, timeout)
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=5)
        self.pid, self._popen = None, None

    def kill(self) -> None:
        if self.pid is not None and self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.stop(timeout=5)

    def tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class _Service:
    """A local service run as one :class:`_Process`: ``with`` stops it cleanly on a normal exit, and kills it
    when the block raised."""

    _process: _Process

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def stop(self) -> None:
        """Shut down cleanly (SIGTERM, then SIGKILL after 30 s); its data stays for a later ``start()``."""
        self._process.stop()

    def kill(self) -> None:
        self._process.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill() if exc[0] is not None else self.stop()


class KafkaBroker(_Service):
    """A single-node KRaft broker (combined broker and controller) on 127.0.0.1.

    ``stop()`` then ``start()`` brings the same broker back on the same port with the same data, which is
    how the tests take it away mid-stream.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        owned: bool = True,
        tls: Certificates | None = None,
        users: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.version, self._classpath = kafka_classpath()
        self._process = _Process("Kafka broker", data_dir / "kafka.log", owned)
        self.tls = tls
        # The broker's own SCRAM user speaks for it on the inter-broker listener, the one listener it has.
        self.users = {BROKER_USER: uuid.uuid4().hex, **(users or {})} if tls else {}

    @property
    def secure(self) -> bool:
        """Clients must speak SASL/SCRAM-SHA-512 over TLS to the one client listener."""
        return self.tls is not None

    def spark_options(self, user: str, password: str) -> dict[str, str]:
        """The ``kafka.*`` options a Spark Kafka client needs for this broker; ``password`` may be a secret
        reference, which the mirror resolves."""
        if self.tls is None:
            return {}
        return {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": SCRAM_MECHANISM,
            "kafka.sasl.jaas.config": f'{SCRAM_LOGIN} username="{user}" password="{password}";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(self.tls.ca),
        }

    def mirror_params(self, user: str = MIRROR_USER) -> dict[str, str]:
        """The mirror's settings for this broker as ``user``, the password a ``{{file:...}}`` reference to a
        file only its owner can read, as a mounted secret is."""
        params = {"kafka-bootstrap-servers": self.bootstrap_servers}
        if self.tls is None:
            return params
        secret = self.data_dir / "secrets" / f"{user}.password"
        secret.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        secret.touch(mode=0o600)
        secret.write_text(self.users[user])
        return params | self.spark_options(user, f"{{{{file:{secret}}}}}")

    def client_config(self, user: str = BROKER_USER) -> dict[str, Any]:
        """A librdkafka client configuration (``confluent_kafka``) for this broker, as ``user``."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.tls is not None:
            config.update(
                {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanisms": SCRAM_MECHANISM,
                    "sasl.username": user,
                    "sasl.password": self.users[user],
                    "ssl.ca.location": str(self.tls.ca),
                }
            )
        return config

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def _properties(self) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"{self._listener}://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"{self._listener}://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": self._listener,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{self._listener}:{self._listener}",
            "log.dirs": str(self.data_dir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # No no-op records in the metadata log twice a second: an idle test broker then uses a third
            # less CPU, which the tests sharing the runner's two cores get instead.
            "metadata.max.idle.interval.ms": "0",
        }
        if self.tls is not None:
            # The controller's listener stays plain: only the broker itself, on loopback, talks to it.
            login = f'{SCRAM_LOGIN} username="{BROKER_USER}" password="{self.users[BROKER_USER]}";'
            settings |= {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": login,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.tls.server_bundle),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.ca),
            }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    @property
    def _listener(self) -> str:
        return "SASL_SSL" if self.tls is not None else "PLAINTEXT"

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        """Start the broker (formatting its storage the first time) and wait until it serves clients."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text(self._properties())
        java = _java(17)
        if not (self.data_dir / "data" / "meta.properties").exists():
            self.format_storage(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
        log4j = self.data_dir / "log4j2.properties"
        log4j.write_text(
            "rootLogger.level=INFO\nrootLogger.appenderRef.out.ref=out\nappender.out.type=Console\n"
            "appender.out.name=out\nappender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=[%d] %p %m (%c)%n\nlogger.kafka.name=org.apache.kafka\n"
            "logger.kafka.level=WARN\nlogger.raft.name=org.apache.kafka.raft\nlogger.raft.level=WARN\n"
        )
        command = [
            java, "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", self._classpath, "kafka.Kafka", str(config),
        ]  # fmt: skip
        started = time.monotonic()
        self._process.launch(command, self.data_dir)
        self._process.wait_until(self._ready, timeout)
        logger.info(
            "Kafka %s broker up at %s in %.1fs (pid %s, data %s)",
            self.version,
            self.bootstrap_servers,
            time.monotonic() - started,
            self.pid,
            self.data_dir,
        )
        return self

    def format_storage(self, cluster_id: str) -> None:
        """Format the broker's storage for a new cluster.

        The id is passed as ``--cluster-id=ID``: a random url-safe id starts with ``-`` one time in 64,
        and kafka-storage's argument parser reads a separate ``-t -X...`` as a missing value.
        """
        config = self.data_dir / "server.properties"
        # SCRAM users are records in the metadata log: format writes them before the broker first starts.
        scram = [
            arg
            for user, password in self.users.items()
            for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")
        ]
        done = subprocess.run(
            [_java(17), "-cp", self._classpath, "kafka.tools.StorageTool", "format",
             f"--cluster-id={cluster_id}", "-c", str(config), *scram],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ServiceError(f"kafka-storage format failed: {done.stdout}{done.stderr}")

    def _ready(self) -> bool:
        if not _port_open(self.port):
            return False
        # The listener accepts connections before the broker has caught up with the metadata log.
        return "Kafka Server started" in self._process.tail(200)


class RegistryServer(_Service):
    """Apicurio Registry 3 with in-memory storage; its Confluent-compatible API is at :attr:`url`."""

    def __init__(self, work_dir: Path, *, port: int | None = None, owned: bool = True) -> None:
        self.work_dir = work_dir
        self.port = port or free_port()
        self.version, self._home = apicurio_home()
        self._process = _Process("Apicurio Registry", work_dir / "apicurio.log", owned)

    @property
    def url(self) -> str:
        """Base URL of the Confluent-compatible API, e.g. ``http://127.0.0.1:PORT/apis/ccompat/v7``."""
        return f"http://{HOST}:{self.port}{CCOMPAT_PATH}"

    def start(self, timeout: float = 120.0) -> RegistryServer:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        command = [
            _java(21), "-Xms128m", "-Xmx512m",
            f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={self.port}",
            # Quarkus' management interface (health, metrics; fixed at build time to be on) would listen on
            # 0.0.0.0:9000: on every interface, and on a port a second registry cannot share.
            f"-Dquarkus.management.host={HOST}", f"-Dquarkus.management.port={free_port()}",
            "-Dapicurio.storage.kind=sql", "-Dapicurio.storage.sql.kind=h2",
            "-Dquarkus.log.level=WARN", "-jar", str(self._home / "quarkus-run.jar"),
        ]  # fmt: skip
        started = time.monotonic()
        self._process.launch(command, self.work_dir)
        self._process.wait_until(self._ready, timeout)
        logger.info(
            "Apicurio Registry %s up at %s in %.1fs (pid %s)",
            self.version,
            self.url,
            time.monotonic() - started,
            self.pid,
        )
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False


class SparkConnectServer:
    """A local Spark Connect server with Delta and Kafka, listening on 127.0.0.1 only.

    Started with pyspark's own ``spark-submit`` and the ``spark-connect`` jar pyspark ships in its ``jars``
    directory, the same Delta and Kafka packages (and Ivy cache) as ``ingest.spark.local_session``, Delta's
    SQL extension and catalog. The server runs in a process group of its own, and ``stop()`` ends the whole
    group (the JVM and its Python workers); an owned server is also stopped at exit, and killed by a
    watchdog when the process that started it dies.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        port: int | None = None,
        owned: bool = True,
        driver_memory: str = "2g",
    ) -> None:
        self.work_dir = work_dir
        self.port = port or free_port()
        self.driver_memory = driver_memory
        self.owned = owned
        self._process = _Process("Spark Connect server", work_dir / "spark-connect.log", owned)

    @property
    def url(self) -> str:
        """The client URL, ``sc://127.0.0.1:PORT`` (``SPARK_REMOTE``, ``--spark-remote``)."""
        return f"sc://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def command(self) -> list[str]:
        """The ``spark-submit`` command line that starts the server."""
        import pyspark

        from ingest.spark import driver_java_options, local_conf

        home = Path(pyspark.__file__).parent
        jars = sorted((home / "jars").glob("spark-connect_*.jar"))
        if not jars:
            raise ServiceError(
                f"no spark-connect jar in {home / 'jars'}; reinstall pyspark {pyspark.__version__}"
            )
        conf = {
            # Two task threads for its clients (the test workers share one server), each stage of a client's
            # few rows in one partition.
            **local_conf(partitions=1),
            "spark.master": "local[2]",
            "spark.app.name": "ticdc-ingest Spark Connect server",
            "spark.driver.memory": self.driver_memory,
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.sql.warehouse.dir": str(self.work_dir / "warehouse"),
            "spark.driver.extraJavaOptions": driver_java_options(
                f"-Dderby.system.home={self.work_dir / 'derby'}"
            ),
        }
        command = [str(home / "bin" / "spark-submit"), "--class", SPARK_CONNECT_SERVER_CLASS]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        return [*command, str(jars[0])]

    def start(self, timeout: float = 240.0) -> SparkConnectServer:
        """Start the server (resolving its packages from the Ivy cache) and wait until it accepts clients."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        java = _java(17)
        env = {
            **os.environ,
            "JAVA_HOME": str(Path(java).resolve().parent.parent),
            # The server's Python workers (foreachBatch, mapInArrow) run this interpreter: its packages.
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": HOST,
        }
        env.pop("SPARK_REMOTE", None)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        started = time.monotonic()
        self._process.launch(self.command(), self.work_dir, env)
        if self.owned:
            atexit.register(self.stop)
        self._process.wait_until(lambda: _port_open(self.port), timeout)
        logger.info(
            "Spark Connect server up at %s in %.1fs (pid %s)", self.url, time.monotonic() - started, self.pid
        )
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server's whole process group: the JVM and the Python workers it forked."""
        pid = self._process.pid
        if pid is not None:
            terminate_group(pid, timeout)
        self._process.stop(timeout=5)
        if self.owned:
            atexit.unregister(self.stop)

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def nginx_binary() -> Path:
    """nginx from Debian's package, unpacked (no root, no install) into the cache once per machine."""
    with _installing():
        return _nginx_binary()


def _nginx_binary() -> Path:
    home = CACHE_DIR / "nginx"
    binary = home / "usr" / "sbin" / "nginx"
    if binary.exists():
        return binary
    partial = home.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)

    def download() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["apt-get", "download", "nginx"], cwd=partial, capture_output=True, text=True, check=False
        )

    done = download()
    if done.returncode != 0 and os.geteuid() == 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        done = download()
    packages = sorted(partial.glob("nginx_*.deb"))
    if done.returncode != 0 or not packages:
        raise ServiceError(f"apt-get download nginx failed: {done.stdout}{done.stderr}")
    subprocess.run(["dpkg-deb", "-x", str(packages[0]), str(partial / "root")], check=True)
    (partial / "root").rename(home)
    shutil.rmtree(partial, ignore_errors=True)
    return binary


def _ssha(password: str) -> str:
    """A password as nginx reads ``{SSHA}`` in an htpasswd file: salted SHA-1, never the clear text."""
    salt = os.urandom(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


class AuthProxy(_Service):
    """nginx on 127.0.0.1 in front of a local HTTP service: TLS with the harness's server certificate, HTTP
    basic auth for one user, then each request passed on as it came, without the credentials.

    This is how a registry is secured in production when it has no auth of its own: the client under test
    sees a real TLS stack (OpenSSL in nginx) and real 401s, from code this project did not write.
    """

    def __init__(
        self,
        work_dir: Path,
        upstream: str,
        tls: Certificates,
        user: str,
        password: str,
        *,
        owned: bool = True,
    ) -> None:
        self.work_dir = work_dir
        self.upstream = upstream.rstrip("/")
        self.tls = tls
        self.user = user
        self.port = free_port()
        self._password = password
        self._process = _Process("nginx", work_dir / "nginx.log", owned)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def _config(self) -> str:
        w = self.work_dir
        temp = " ".join(f"{kind}_temp_path {w / 'temp' / kind};" for kind in ("client_body", "proxy"))
        return f"""daemon off;
master_process off;
pid {w / "nginx.pid"};
error_log {w / "error.log"} warn;
events {{ worker_connections 64; }}
http {{
  access_log {w / "access.log"};
  {temp}
  fastcgi_temp_path {w / "temp" / "fastcgi"}; uwsgi_temp_path {w / "temp" / "uwsgi"};
  scgi_temp_path {w / "temp" / "scgi"};
  server {{
    listen {HOST}:{self.port} ssl;
    ssl_certificate {self.tls.server_cert};
    ssl_certificate_key {self.tls.server_key};
    location / {{
      auth_basic "ticdc-delta-ingest test registry";
      auth_basic_user_file {w / "htpasswd"};
      proxy_set_header Authorization "";
      proxy_pass {self.upstream};
    }}
  }}
}}
"""

    def start(self, timeout: float = 30.0) -> AuthProxy:
        (self.work_dir / "temp").mkdir(parents=True, exist_ok=True)
        (self.work_dir / "htpasswd").write_text(f"{self.user}:{_ssha(self._password)}\n")
        config = self.work_dir / "nginx.conf"
        config.write_text(self._config())
        started = time.monotonic()
        # -e: the error log before the configuration is read, which would otherwise be under /var/log.
        command = [str(nginx_binary()), "-p", f"{self.work_dir}/", "-e", "stderr", "-c", str(config)]
        self._process.launch(command, self.work_dir)
        self._process.wait_until(lambda: _port_open(self.port), timeout)
        logger.info(
            "nginx TLS + basic-auth proxy up at %s for %s in %.1fs (pid %s)",
            self.url,
            self.upstream,
            time.monotonic() - started,
            self.pid,
        )
        return self


@dataclass(frozen=True)
class SecuredRegistry:
    """A registry reached only through an :class:`AuthProxy`: its URL, the certificates the proxy's came
    from (``tls.ca`` signed it, ``tls.other_ca`` did not), and the user whose password is in
    :attr:`password_file`, as a mounted secret would be."""

    url: str
    tls: Certificates
    user: str
    password_file: Path

    def params(self) -> dict[str, str]:
        """The mirror's settings for this registry, the password a ``{{file:...}}`` secret reference."""
        return {
            "schema-registry": self.url,
            "schema-registry-user-info": f"{self.user}:{{{{file:{self.password_file}}}}}",
            "schema-registry-ca-file": str(self.tls.ca),
        }

    def client(self) -> Any:
        """A registry client with the right credentials, for registering writer schemas as TiCDC does."""
        from ingest.source.registry import RegistryAccess, SchemaRegistry

        user_info = f"{self.user}:{self.password_file.read_text()}"
        return SchemaRegistry(self.url, access=RegistryAccess(user_info=user_info, ca_file=str(self.tls.ca)))


SPARK_CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def terminate_group(pid: int, timeout: float) -> None:
    """SIGTERM the process group that ``pid`` leads (started in a session of its own), then SIGKILL."""
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return
    if group != pid:  # not a group leader we started: only the process itself
        _terminate(pid, timeout)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


# -- producing captured records ----------------------------------------------------------------------------


Client = str | KafkaBroker
"""A broker to talk to: its bootstrap servers (plain), or the broker itself (its own security settings)."""


def _client_config(client: Client) -> dict[str, Any]:
    if isinstance(client, KafkaBroker):
        return client.client_config()
    return {"bootstrap.servers": client}


def create_topic(client: Client, topic: str, partitions: int) -> None:
    """Create a topic with ``partitions`` partitions (no-op if it exists with that many)."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({**_client_config(client), "log_level": 3})
    existing = admin.list_topics(timeout=30).topics
    if topic in existing:
        have = len(existing[topic].partitions)
        if have != partitions:
            raise ServiceError(f"topic {topic} exists with {have} partitions, not {partitions}")
        return
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)


def produce_records(client: Client, records: Iterable[Mapping[str, Any]], topic: str | None = None) -> int:
    """Produce captured records (``testkit.sample`` shape: base64 key/value) to their partitions, in order.

    One idempotent producer keeps each partition's order and never duplicates on retry, like TiCDC's
    single in-flight producer. Returns how many records were acknowledged.
    """
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer(
        {
            **_client_config(client),
            "enable.idempotence": True,
            "linger.ms": 5,
            "acks": "all",
            "log_level": 3,
        }
    )
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{message.topic()}/{message.partition()}: {error}")

    count = 0
    for record in records:
        value = base64.b64decode(record["value"]) if record.get("value") is not None else None
        key = base64.b64decode(record["key"]) if record.get("key") is not None else None
        while True:
            try:
                producer.produce(
                    topic or record["topic"],
                    value=value,
                    key=key,
                    partition=int(record["partition"]),
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    left = producer.flush(60)
    if left or failures:
        raise ServiceError(f"{left} records not delivered; failures: {failures[:5]}")
    return count


# -- command line ------------------------------------------------------------------------------------------


def _state_file(name: str) -> Path:
    return STATE_DIR / f"{name}.json"


def _read_state(name: str) -> dict[str, Any] | None:
    path = _state_file(name)
    if not path.exists():
        return None
    state: dict[str, Any] = json.loads(path.read_text())
    if not _alive(int(state["pid"])):
        path.unlink()
        return None
    return state


def _service_up(name: str, address_key: str, start: Callable[[Path], tuple[int | None, str]]) -> int:
    """Print a running service's address, or start it (detached) in a new work directory and record its
    pid, address and directory for the matching ``-down`` command."""
    state = _read_state(name)
    if state is None:
        work_dir = Path(tempfile.mkdtemp(prefix=f"ticdc-ingest-{name}-"))
        pid, address = start(work_dir)
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        state = {"pid": pid, address_key: address, "data_dir": str(work_dir)}
        _state_file(name).write_text(json.dumps(state))
    print(state[address_key])
    return 0


def _kafka_up() -> int:
    def start(work_dir: Path) -> tuple[int | None, str]:
        broker = KafkaBroker(work_dir, owned=False).start()
        return broker.pid, broker.bootstrap_servers

    return _service_up("kafka", "bootstrap_servers", start)


def _registry_up() -> int:
    def start(work_dir: Path) -> tuple[int | None, str]:
        registry = RegistryServer(work_dir, owned=False).start()
        return registry.pid, registry.url

    return _service_up("registry", "url", start)


def _connect_up() -> int:
    def start(work_dir: Path) -> tuple[int | None, str]:
        server = SparkConnectServer(work_dir, owned=False).start()
        return server.pid, server.url

    return _service_up("connect", "url", start)


def _down(name: str, marker: str) -> int:
    state = _read_state(name)
    if state is None:
        print(f"no local {name} running")
        return 0
    pid = int(state["pid"])
    cmdline = Path(f"/proc/{pid}/cmdline")
    # The pid in the state file may have been reused by another process since: only stop our service.
    if cmdline.exists() and marker not in cmdline.read_bytes().decode(errors="replace"):
        print(f"pid {pid} is no longer the local {name}; leaving it alone")
    else:
        terminate_group(pid, 30.0)
    shutil.rmtree(state["data_dir"], ignore_errors=True)
    _state_file(name).unlink(missing_ok=True)
    print(f"local {name} stopped")
    return 0


def _produce_sample(topic: str) -> int:
    from testkit.sample import build_sample

    state = _read_state("kafka")
    if state is None:
        print("error: no local broker; run `make kafka-up` first", file=sys.stderr)
        return 1
    stream = build_sample()
    create_topic(state["bootstrap_servers"], topic, stream.partitions)
    count = produce_records(state["bootstrap_servers"], stream.records, topic=topic)
    print(
        f"produced {count} records to {topic} ({stream.partitions} partitions) "
        f"at {state['bootstrap_servers']}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.local_services", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("kafka-up", help="start a local broker (once) and print its bootstrap servers")
    commands.add_parser("kafka-down", help="stop the local broker and delete its data")
    commands.add_parser("registry-up", help="start a local schema registry (once) and print its URL")
    commands.add_parser("registry-down", help="stop the local schema registry")
    commands.add_parser(
        "connect-up", help="start a local Spark Connect server (once) with Delta and Kafka; print its URL"
    )
    commands.add_parser("connect-down", help="stop the local Spark Connect server")
    produce = commands.add_parser(
        "produce-sample", help="produce the bundled sample stream to the local broker"
    )
    produce.add_argument("--topic", default="tidb_cdc")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "kafka-up":
            return _kafka_up()
        if args.command == "kafka-down":
            return _down("kafka", "kafka.Kafka")
        if args.command == "registry-up":
            return _registry_up()
        if args.command == "registry-down":
            return _down("registry", "quarkus-run.jar")
        if args.command == "connect-up":
            return _connect_up()
        if args.command == "connect-down":
            return _down("connect", SPARK_CONNECT_SERVER_CLASS)
        return _produce_sample(args.topic)
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
