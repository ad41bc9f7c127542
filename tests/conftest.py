"""Markers by folder, so no test escapes its group, and one Spark session for the whole run."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))

_FOLDER_MARKERS = {"spark": "spark", "kafka": "kafka", "notebooks": "notebook"}


# -- one Spark per mode: classic (local[2] in this process) and Spark Connect (a local server) ---------------
#
# As delta-spark's Python suite runs one test mixin on a classic base and on a Connect base, a test marked
# `both_modes` runs twice: with `spark` a classic session, then a Spark Connect one. pyspark runs one mode
# per process (once a Connect session exists, `pyspark.sql.functions` build Connect columns), so every
# Connect test runs after every classic one, and the first one stops the classic session.

BOTH_MODES = "both_modes"
CLASSIC, CONNECT = "classic", "connect"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if (
        metafunc.definition.get_closest_marker(BOTH_MODES)
        and "spark" in metafunc.fixturenames
        and not _parametrized(metafunc, "spark")  # a test that names its modes itself
    ):
        metafunc.parametrize("spark", [CLASSIC, CONNECT], indirect=True, scope="session")


def _parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        names = marker.args[0]
        if name in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for folder, marker in _FOLDER_MARKERS.items():
            if folder in parts:
                item.add_marker(getattr(pytest.mark, marker))
        if _mode(item) == CONNECT:
            item.add_marker(pytest.mark.connect)
    if not FULL:
        _leave_to_the_full_profile(config, items)


# A session fixture that builds a mirror is built once per worker that runs a test using it: its tests go
# to one worker together (`--dist loadgroup`), which builds it once.
_SHARED_BUILDS = ("mirrored_history",)


@pytest.hookimpl(tryfirst=True)  # before xdist names each item's group
def pytest_itemcollected(item: pytest.Item) -> None:
    for name in _SHARED_BUILDS:
        if name in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(name))


# -- the full profile: `make test` keeps within its time on a two-core runner; `make test-full` runs it all
#
# A test marked `full` runs only under CORPUS_PROFILE=full: a further corpus or protocol through a path
# another test already walks in CI, or a Connect run of a test whose classic run stays. `full(modes=
# ("connect",))` leaves only that mode's run to the profile. Left-out tests are deselected, never skipped,
# and the run's summary counts them.

FULL = os.environ.get("CORPUS_PROFILE", "ci") == "full"
# How many were deselected: counted where the items are collected, in each xdist worker, and reported by the
# controller, which collects none.
_left_to_full = {"tests": 0}


def _full_only(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("full")
    return marker is not None and _mode(item) in marker.kwargs.get("modes", (CLASSIC, CONNECT))


def _leave_to_the_full_profile(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        (left if _full_only(item) else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
    _left_to_full["tests"] = len(left)
    if hasattr(config, "workeroutput"):  # an xdist worker: sent to the controller when it finishes
        config.workeroutput["left_to_full"] = len(left)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    reported = getattr(node, "workeroutput", {}).get("left_to_full", 0)
    _left_to_full["tests"] = max(_left_to_full["tests"], reported)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _left_to_full["tests"]:
        terminalreporter.write_line(
            f"{_left_to_full['tests']} tests marked `full` were deselected: `make test-full` "
            "(CORPUS_PROFILE=full) runs them"
        )


class _ConnectLast:
    """Orders the Connect runs after everything else, once pytest has ordered and selected the items; among
    them the tests marked ``long`` come first.

    Workers take one test at a time in this order, so a long test taken last keeps one worker busy while the
    other has nothing left to take: Connect's long tests first, the run ends on short tests and the workers
    finish together. The classic tests keep their order, which spreads their long tests among short ones:
    put first, the long tests all ran side by side and each took up to twice its time (a two-core runner's
    CPU, shared by two heavy Spark runs and their child JVMs), which cost more than they saved.
    """

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # stable: Connect tests last with their long ones first, the rest in their order
        def key(item: pytest.Item) -> tuple[bool, bool]:
            connect = _mode(item) == CONNECT
            return connect, connect and item.get_closest_marker("long") is None

        items.sort(key=key)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_ConnectLast(), "ticdc-ingest-connect-last")


def _mode(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    return str(callspec.params.get("spark", CLASSIC)) if callspec is not None else CLASSIC


_connect_started: list[bool] = []


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> object:
    """The session of the test's mode: classic unless the test is `both_modes` and in its Connect run."""
    mode = getattr(request, "param", CLASSIC)
    if mode == CONNECT:
        return request.getfixturevalue("connect_spark")
    if _connect_started:
        pytest.fail("a classic Spark test runs after the Connect ones; pyspark runs one mode per process")
    return request.getfixturevalue("classic_spark")


@pytest.fixture
def spark_mode(request: pytest.FixtureRequest) -> str:
    """``classic`` or ``connect``: the mode of this run of the test."""
    return _mode(request.node)


@pytest.fixture(scope="session")
def classic_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from ingest.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    # One task thread and one partition: two workers share the runner's two cores, and a test's data is a
    # few rows, where a second partition is a second task (and Python worker) per stage that only costs.
    # The `several_partitions` fixture gives a test 3 partitions back, for what only a split can show.
    session = local_session(
        app_name="ticdc-ingest-tests",
        warehouse_dir=str(tmp_path_factory.mktemp("warehouse")),
        master="local[1]",
    )
    # Delta keeps each table path's log and cached snapshot for an hour, up to 10,000 paths: right for a
    # mirror's few hundred tables, but every test writes tables at new paths, so one worker's JVM would hold
    # thousands. Set before the first Delta read, which sizes the cache.
    session.conf.set("spark.databricks.delta.delta.log.cacheSize", "64")
    yield session
    if not _connect_started:
        session.stop()


SPLIT_CONFS = ("spark.sql.shuffle.partitions", "spark.databricks.delta.snapshotPartitions")


@pytest.fixture(scope="module")
def several_partitions(spark: object) -> Iterator[None]:
    """Shuffles and Delta's state reconstruction in 3 partitions for the module's tests (the session has 1),
    so a step that wrongly relies on one partition's order is seen. Module-wide: Hypothesis tests cannot
    take a fixture made anew for each test."""
    before = {key: spark.conf.get(key) for key in SPLIT_CONFS}
    for key in SPLIT_CONFS:
        spark.conf.set(key, "3")
    yield
    for key, value in before.items():
        spark.conf.set(key, value)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local Spark Connect server (Delta, Kafka; 127.0.0.1, free port) for the test run; stopped after.

    Under pytest-xdist the workers share it: one JVM start and warm-up instead of one per worker, on a
    machine whose cores the suite keeps busy. The first worker to need it starts it, the last one done
    with it stops it, and it dies with the run's main process if the run is interrupted.
    """
    from testkit.local_services import SparkConnectServer, terminate_group, watch

    if "PYTEST_XDIST_WORKER" not in os.environ:
        with SparkConnectServer(tmp_path_factory.mktemp("connect")) as server:  # started, then stopped
            yield server
        return
    shared = tmp_path_factory.getbasetemp().parent  # the run's directory, above each worker's own
    with _SharedService(shared / "connect") as users:
        if users.state is None:
            # Its Connect tests run side by side: more memory than one worker's server.
            server = SparkConnectServer(shared / "connect", owned=False, driver_memory="3g")
            server.start()
            assert server.pid is not None
            watch(server.pid, group=True, owner=os.getppid())  # the xdist controller: gone means interrupted
            users.state = {"url": server.url, "pid": server.pid}
        url = users.state["url"]
    try:
        yield SimpleNamespace(url=url)
    finally:
        with _SharedService(shared / "connect", leaving=True) as users:
            if users.last and users.state is not None:
                terminate_group(int(users.state["pid"]), 30.0)
                users.state = None


class _SharedService:
    """A service the xdist workers of one run share, counted under a file lock: ``state`` is what the
    first user recorded (None: not started yet, or stopped by the last user); ``last``, on leaving,
    whether no other worker still uses it."""

    def __init__(self, directory: Path, *, leaving: bool = False) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._lock_path, self._file = directory / "users.lock", directory / "users.json"
        self.leaving, self.state, self.last = leaving, None, False

    def __enter__(self) -> _SharedService:
        import fcntl
        import json

        self._lock = self._lock_path.open("w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        saved = json.loads(self._file.read_text()) if self._file.exists() else {"users": 0, "state": None}
        self._users, self.state = saved["users"], saved["state"]
        self._users += -1 if self.leaving else 1
        self.last = self._users == 0
        return self

    def __exit__(self, *exc: object) -> None:
        import json

        try:
            if exc[0] is None:
                self._file.write_text(json.dumps({"users": self._users, "state": self.state}))
        finally:
            self._lock.close()  # releases the lock


@pytest.fixture(scope="session")
def connect_spark(connect_server: object) -> Iterator[object]:
    """A Spark Connect session to the local server; stops this process's classic session first."""
    from ingest.spark import remote_session

    _stop_classic_spark()
    _connect_started.append(True)
    url = connect_server.url  # type: ignore[attr-defined]
    # What a user sets: the CLI (main(...)), notebooks' kernels and subprocesses get the Connect session too.
    os.environ["SPARK_REMOTE"] = url
    session = remote_session(url)
    yield session
    session.stop()
    os.environ.pop("SPARK_REMOTE", None)


def _stop_classic_spark() -> None:
    """Stop the classic session and its JVM: the Connect tests need neither, and CI needs the memory."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession._instantiatedSession
    if active is not None:
        active.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
            proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real Kafka broker (KRaft, single node, 127.0.0.1) per test session; killed at the end.

    Its one client listener takes SASL/SCRAM over TLS only, as production brokers do: every Kafka test
    reads through it with the mirror user's password given as a secret reference (``mirror_params``)."""
    from testkit.local_services import MIRROR_USER, KafkaBroker
    from testkit.tls import make_certificates

    tls = make_certificates(tmp_path_factory.mktemp("kafka-tls"))
    users = {MIRROR_USER: f"mirror-{uuid.uuid4().hex}"}
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), tls=tls, users=users)
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real Confluent-compatible schema registry (Apicurio, in memory), e.g.
    ``http://127.0.0.1:PORT/apis/ccompat/v7``; one per test session, killed at the end."""
    from testkit.local_services import RegistryServer

    registry = RegistryServer(tmp_path_factory.mktemp("registry"))
    registry.start()
    try:
        yield registry.url
    finally:
        registry.kill()


@pytest.fixture(scope="session")
def secured_registry(schema_registry: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The session's registry as production runs one: only through nginx on 127.0.0.1, which demands HTTP
    basic auth over TLS with a certificate from a CA made for the session (``testkit.SecuredRegistry``)."""
    from urllib.parse import urlsplit

    from testkit.local_services import AuthProxy, SecuredRegistry
    from testkit.tls import make_certificates

    upstream = urlsplit(schema_registry)
    tls = make_certificates(tmp_path_factory.mktemp("registry-tls"))
    password = f"registry-{uuid.uuid4().hex}"
    secret = tmp_path_factory.mktemp("registry-secret") / "password"
    secret.touch(mode=0o600)
    secret.write_text(password)
    user = "cdc-reader"
    proxy = AuthProxy(
        tmp_path_factory.mktemp("nginx"), f"{upstream.scheme}://{upstream.netloc}", tls, user, password
    )
    proxy.start()
    try:
        yield SecuredRegistry(proxy.url + upstream.path, tls, user, secret)
    finally:
        proxy.kill()
