"""The one SparkSession of a process, started once and kept warm.

Spark prints only errors (its console progress bar and INFO/WARN logs are off, through the
log4j2 file beside this module), so a command prints its own lines. `spark.*` properties
pass through unchanged, so the same planner runs on `local[*]` or on a real Spark cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J2 = Path(__file__).with_name("log4j2.properties")

# Plans shuffle a few million rows at most: a handful of shuffle partitions per core keeps
# the per-task overhead of Spark's default 200 from dominating a local run.
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
}


# The master URLs Spark accepts (Spark's "Master URLs" in its submitting-applications guide).
_MASTER_FORMS = re.compile(
    r"local(\[(\*|[1-9]\d*)(\s*,\s*\d+)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^:/,\s]+:\d+(,[^:/,\s]+:\d+)*"
    r"|yarn"
    r"|(k8s|mesos)://\S+"
)


def master_problem(master: str) -> str | None:
    """Why Spark would refuse this master URL, or None: checked before a JVM starts for it."""
    if _MASTER_FORMS.fullmatch(master):
        return None
    return "not a Spark master URL; use local[*], local[N], spark://host:port, yarn, k8s://... or mesos://..."


def spark_session(
    master: str = "local[*]", conf: Mapping[str, str] | None = None, *, app_name: str = "keel-planner"
) -> SparkSession:
    """The process's SparkSession, created on the first call (later calls return it)."""
    from pyspark.sql import SparkSession

    settings = {**DEFAULTS, **(conf or {})}
    java_options = f"-Dlog4j2.configurationFile=file:{LOG4J2}"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        settings[key] = f"{java_options} {settings.get(key, '')}".strip()
    # The driver's JVM reads its options before SparkConf exists: hand them over as
    # pyspark's launcher expects them.
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{java_options}" pyspark-shell')
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _jvm_stderr_filtered():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# What the JVM and Spark print on their own before the log configuration applies (the
# module notice, the shell's default-level banner): dropped. Spark's logs still pass.
_JVM_NOISE = re.compile(
    rb"^(WARNING: Using incubator modules|Setting default log level to|To adjust logging level use)"
)


@contextlib.contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """The JVM started inside this block inherits a pipe as its stderr; a thread passes
    its lines on to ours, less the JVM's start-up notices."""
    try:
        target = os.dup(2)
    except OSError:
        yield
        return
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(target, 2)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:
                if not _JVM_NOISE.match(line):
                    os.write(target, line)

    threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()
