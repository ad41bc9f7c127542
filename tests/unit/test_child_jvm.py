"""The JVM options of the tests' child processes, checked on the real JVM that Spark starts."""

import os
import re
import shutil
import subprocess
from pathlib import Path

from kill import child_env

MIB = 1024 * 1024


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "no java on PATH and no JAVA_HOME"
    return java


def _flags(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(
        [_java(), "-XX:+PrintFlagsFinal", "-version"], env=env, capture_output=True, text=True, check=True
    )
    return dict(re.findall(r"^\s*\S+\s+(\w+)\s+:?=\s+(\S+)", done.stdout, re.M))


def test_a_child_jvm_runs_c1_only_with_the_code_cache_of_a_tiered_jvm():
    """A kernel JVM that ran several notebooks under C1 alone filled its 48 MiB code cache, failing a job."""
    flags = _flags(child_env())
    assert flags["TieredStopAtLevel"] == "1"
    assert int(flags["ReservedCodeCacheSize"]) >= 240 * MIB
