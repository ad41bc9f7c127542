"""The only module that builds a SparkSession.

On Databricks the runtime's session is used as it is. Locally (and in tests) we build one with Delta
configured, resolving the Delta jar from Maven Central into an Ivy cache outside the repository, so a fresh
clone reuses what an earlier run fetched.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from ingest.errors import SparkSetupError

logger = logging.getLogger(__name__)

SCALA_BINARY = "2.13"
# delta-spark 4.4.1 on PyPI asks for io.delta:delta-spark_4.2_2.13:4.4.1, which is not published on Maven
# Central (only 4.4.0 is, for Spark 4.2). The Python sources of 4.4.0 and 4.4.1 are identical apart from
# their version string, so we load the 4.4.0 jar under the 4.4.1 Python package.
DELTA_JAR_VERSION = "4.4.0"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "ticdc-delta-ingest"
# How long either side of a loopback socket between the driver's Python and its JVM waits for the other.
AUTH_SOCKET_TIMEOUT_S = 300
# A batch job wants throughput, not short pauses: G1's concurrent threads cost a two-core machine about a
# sixth of its CPU on a mirror's workload (BENCHMARKS.md, "The local JVM's collector").
LOCAL_JAVA_OPTIONS = ("-XX:+UseParallelGC",)


def driver_java_options(*extra: str) -> str:
    """``spark.driver.extraJavaOptions`` of a local Spark: ours, then ``extra``."""
    return " ".join((*LOCAL_JAVA_OPTIONS, *extra))


def delta_package(spark_version: str) -> str:
    """Maven coordinate of the Delta jar that matches a pyspark version such as ``4.2.0``."""
    major_minor = ".".join(spark_version.split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_BINARY}:{DELTA_JAR_VERSION}"


def kafka_package(spark_version: str) -> str:
    """Maven coordinate of Spark's Kafka source; it must match the pyspark version exactly."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{spark_version}"


# spark-sql-kafka 4.2.0 depends on spark-token-provider-kafka 4.2.0, which Maven Central does not have (of
# the 4.x line it holds only 4.0.0), so Ivy fails the whole resolution. We exclude it there and load the
# 4.0.0 jar instead: its classes (KafkaTokenUtil, KafkaConfigUpdater) are unchanged since, and the Kafka
# tests exercise them on every read.
TOKEN_PROVIDER = f"org.apache.spark:spark-token-provider-kafka-0-10_{SCALA_BINARY}"
TOKEN_PROVIDER_VERSION = "4.0.0"


def _token_provider_jar(cache_dir: Path) -> Path:
    """The token-provider jar in our cache, fetched once from Maven Central and checked against its SHA-1."""
    group, artifact = TOKEN_PROVIDER.split(":")
    name = f"{artifact}-{TOKEN_PROVIDER_VERSION}.jar"
    target = cache_dir / "jars" / name
    if target.exists():
        return target
    url = f"{MAVEN_CENTRAL}{group.replace('.', '/')}/{artifact}/{TOKEN_PROVIDER_VERSION}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            payload = response.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as response:
            expected = response.read().decode().split()[0]
    except OSError as exc:
        raise SparkSetupError(f"could not fetch {url}: {exc}; check network access to Maven Central") from exc
    if hashlib.sha1(payload).hexdigest() != expected:
        raise SparkSetupError(f"{url}: SHA-1 does not match Maven Central's; try again")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(payload)
    partial.rename(target)
    return target


def on_databricks() -> bool:
    """True inside a Databricks runtime, where the session and its jars are provided."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def on_serverless() -> bool:
    """True on Databricks serverless compute (jobs and notebooks), where streams run ``availableNow`` only.

    Serverless sets ``IS_SERVERLESS=TRUE`` and reports its environment version, not a runtime version, as
    ``DATABRICKS_RUNTIME_VERSION`` (``client.<n>``).
    """
    if os.environ.get("IS_SERVERLESS", "").strip().lower() == "true":
        return True
    return os.environ.get("DATABRICKS_RUNTIME_VERSION", "").startswith("client.")


def cached(frame: DataFrame) -> DataFrame:
    """``frame.persist()``, or the frame as it is on Databricks serverless, which refuses caching APIs.

    Without the cache a frame is computed again by each action that reads it: slower, the same rows (every
    frame we cache is a deterministic function of its input).
    """
    return frame if on_serverless() else frame.persist()


LOCAL_MASTER = "local[2]"
# The master of a local session the CLI starts, in place of LOCAL_MASTER: ``local[8]`` on a larger machine.
LOCAL_MASTER_ENV = "TICDC_INGEST_MASTER"


def get_session(
    *,
    app_name: str = "ticdc-ingest",
    warehouse_dir: str | None = None,
    remote: str | None = None,
    catalog_warehouse: str | None = None,
) -> SparkSession:
    """The active session on Databricks; a Spark Connect session when given a URL; else a local one.

    Args:
        catalog_warehouse: for a local session, a warehouse whose catalog lasts beyond the session (an
            embedded Derby metastore in it), so tables created by name are there for the next one.
        remote: a Spark Connect URL (``sc://host:port``, the ``--spark-remote`` option); without it,
            ``SPARK_REMOTE`` from the environment. Then nothing is set on the session: no master, jars or
            JVM options, which the Connect server owns.

    A local session's master is ``TICDC_INGEST_MASTER`` from the environment, else ``local[2]``.
    """
    if on_databricks():
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        return SparkSession.builder.getOrCreate()
    url = remote or os.environ.get("SPARK_REMOTE")
    if url:
        return remote_session(url, app_name=app_name)
    master = os.environ.get(LOCAL_MASTER_ENV) or LOCAL_MASTER
    if catalog_warehouse is not None:
        return local_session(
            app_name=app_name, warehouse_dir=catalog_warehouse, persistent_catalog=True, master=master
        )
    return local_session(app_name=app_name, warehouse_dir=warehouse_dir, master=master)


def remote_session(url: str, *, app_name: str = "ticdc-ingest") -> SparkSession:
    """A Spark Connect session to ``url`` (``sc://host:port``).

    Raises:
        SparkSetupError: the Connect client is not installed (the ``connect`` extra), or the server does
            not answer.
    """
    if not url.startswith(("sc://", "local")):
        raise SparkSetupError(f"spark-remote: {url!r} is not a Spark Connect URL; write sc://host:port")
    try:
        return SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    except ImportError as exc:
        raise SparkSetupError(
            f"the Spark Connect client is not installed ({exc}); install the connect extra: "
            "pip install 'ticdc-delta-ingest[connect]'"
        ) from exc
    except Exception as exc:  # pyspark raises SparkConnectGrpcException and kin, with no common base
        raise SparkSetupError(f"could not connect to Spark Connect at {url}: {exc}") from exc


@contextmanager
def _jvm_output_to_stderr() -> Iterator[None]:
    """While the JVM starts, file descriptor 1 points at stderr, so the JVM (a child process, which keeps
    the descriptors it started with) writes Ivy's and Spark's own output to stderr for its whole life.
    The command's stdout then carries only its answer, and ``as-of --sql`` pipes into a SQL client."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no descriptor 1 to move (an embedding host): start as it is
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def local_session(
    *,
    app_name: str = "ticdc-ingest",
    master: str = LOCAL_MASTER,
    warehouse_dir: str | None = None,
    extra_packages: Sequence[str] = (),
    cache_dir: Path = DEFAULT_CACHE_DIR,
    driver_memory: str = "3g",
    persistent_catalog: bool = False,
) -> SparkSession:
    """Build (or return) a local Spark session with Delta Lake configured.

    ``persistent_catalog``: Spark's session catalog keeps its tables in an embedded Derby metastore under the
    warehouse directory (Spark's Hive support), so the next session of the same warehouse sees them; without
    it the catalog lives as long as the session.

    Raises:
        SparkSetupError: the JVM did not start, most often because the Delta jar could not be fetched.
    """
    import pyspark

    set_driver_python_env()
    packages = [delta_package(pyspark.__version__), kafka_package(pyspark.__version__), *extra_packages]
    ivy_dir = cache_dir / "ivy"
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in local_conf(cache_dir, packages, partitions=local_cores(master)).items():
        builder = builder.config(key, value)
    builder = builder.config("spark.driver.memory", driver_memory)
    if warehouse_dir is not None:
        builder = builder.config("spark.sql.warehouse.dir", warehouse_dir)
    if persistent_catalog:
        for key, value in persistent_catalog_conf(warehouse_dir or "spark-warehouse").items():
            builder = builder.config(key, value)
    try:
        with _jvm_output_to_stderr():
            spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises PySparkRuntimeError(JAVA_GATEWAY_EXITED) with no cause
        raise SparkSetupError(
            "Spark could not start. The usual cause is that the Delta or Kafka jars could not be fetched "
            f"from Maven Central: packages {', '.join(packages)} into Ivy cache {ivy_dir}. Check network "
            "access to Maven Central (or pre-fill ~/.m2), and that Java 17 is on PATH. "
            f"Original error: {exc}"
        ) from exc
    return spark


def set_driver_python_env() -> None:
    """The environment this driver's Python needs before its JVM starts (a user's own values win)."""
    # Python workers must run this interpreter, or they miss pyarrow/orjson from the virtualenv.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The driver's side of a collect's loopback socket: pyspark gives up after 15 s connecting and
    # authenticating, which a busy two-core machine can exceed; the JVM's side is waited for as long.
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", str(AUTH_SOCKET_TIMEOUT_S))


def persistent_catalog_conf(warehouse_dir: str) -> dict[str, str]:
    """A session catalog that outlives the session: Hive's metastore, in an embedded Derby database in the
    warehouse directory. One process at a time may open it."""
    warehouse = os.path.abspath(warehouse_dir)
    return {
        "spark.sql.warehouse.dir": warehouse,
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={warehouse}/metastore_db;create=true"
        ),
        # Derby's log goes beside its database, not into the working directory.
        "spark.driver.extraJavaOptions": driver_java_options(
            f"-Dderby.stream.error.file={warehouse}/derby.log"
        ),
    }


MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"


def local_cores(master: str) -> int:
    """The task threads of a ``local[N]`` master; 2 for any other (``local``, ``local[*]``, a cluster)."""
    inside = master.removeprefix("local[").removesuffix("]")
    return int(inside) if master.startswith("local[") and inside.isdigit() and int(inside) > 0 else 2


def local_conf(
    cache_dir: Path = DEFAULT_CACHE_DIR, packages: Sequence[str] = (), partitions: int = 2
) -> dict[str, str]:
    """The settings of a local Spark with Delta and Kafka: a local session's, and a local Connect server's.

    Args:
        packages: Maven coordinates to load (default: Delta and Kafka for the installed pyspark).
        partitions: shuffles and Delta's state reconstruction; a local session's are its task threads, since
            on data small enough for one machine a further partition is one more task per stage, whose
            start costs more than it shares.
    """
    import pyspark

    ivy_dir = cache_dir / "ivy"
    packages = packages or (delta_package(pyspark.__version__), kafka_package(pyspark.__version__))
    return {
        "spark.jars.packages": ",".join(packages),
        "spark.jars.ivy": str(ivy_dir),
        "spark.jars.ivySettings": str(_write_ivy_settings(ivy_dir)),
        "spark.jars.excludes": TOKEN_PROVIDER,
        "spark.jars": str(_token_provider_jar(cache_dir)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        "spark.databricks.delta.snapshotPartitions": str(partitions),
        "spark.ui.enabled": "false",
        # A local Spark talks to itself only: driver and block manager listen on loopback, not on every
        # interface of the machine.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.showConsoleProgress": "false",
        # As SparkContext.setLogLevel would, but a conf: a Spark Connect client has no SparkContext.
        "spark.log.level": "WARN",
        "spark.sql.session.timeZone": "UTC",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        # A collect hands Python a loopback socket that the JVM closes if nobody connects within this
        # time (15 s by default). Tables apply on several threads; on a busy two-core machine the thread
        # that asked can wait longer than that for its turn, and its collect then fails as "Connection
        # refused" although nothing went wrong.
        "spark.python.authenticate.socketTimeout": f"{AUTH_SOCKET_TIMEOUT_S}s",
        "spark.driver.extraJavaOptions": driver_java_options(),
    }


def _write_ivy_settings(ivy_dir: Path) -> Path:
    """Resolve from Maven Central into our own cache only.

    Spark's default chain tries ~/.m2 first; a ~/.m2 that holds a POM without its jar (which `mvn
    dependency:get` leaves behind for transitive artifacts) makes Ivy fail with "NOT FOUND" for that jar.
    """
    ivy_dir.mkdir(parents=True, exist_ok=True)
    path = ivy_dir / "ivysettings.xml"
    text = f"""<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{ivy_dir / "cache"}"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="{MAVEN_CENTRAL}"/>
  </resolvers>
</ivysettings>
"""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
