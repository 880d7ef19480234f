"""Starting Spark for `spark-audit`: what can go wrong is the user's environment, said in one line.

No Java, a wrong JAVA_HOME, an unreachable master or pyspark missing are problems the user can fix,
so they are a `SparkStartError` (an `MqtoolError`: one `Error:` line, exit 2); any other exception
is a bug and keeps its traceback.
"""

from mqtool.errors import MqtoolError


class SparkStartError(MqtoolError):
    """Spark could not be started (pyspark missing, Java missing, master unreachable)."""


def start_spark(master: str, verbose: bool = False, conf: dict | None = None):
    """`mqtool.spark.runner.spark_session`, with start-up failures as `SparkStartError`."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        from mqtool.spark.runner import spark_session
    except ImportError as e:
        raise SparkStartError(f"Spark is not available ({e}); use --local") from None
    try:
        return spark_session(master, verbose=verbose, conf=conf)
    except (PySparkException, Py4JError, OSError) as e:  # the JVM gateway, the launcher, the cluster
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SparkStartError(f"cannot start Spark with master {master}: {first}") from None
