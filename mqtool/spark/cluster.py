"""A Spark standalone cluster on 127.0.0.1 (master + workers), started from the installed pyspark.

For tests and the benchmark (and to try `--master spark://...` on one machine). The pip wheel has
no start-master.sh, so the daemons are started with `bin/spark-class`; its PID is the daemon JVM's.
Readiness is read from the master's /json/ (no sleeps); workers start after the master is ALIVE
(a worker's first failed connect backs off ~10 s). `stop()` ends only the PIDs started here.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

FAST_DAEMON_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_ports(n: int) -> list[int]:
    """n distinct free ports, chosen while holding all sockets open (so none is handed out twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class StandaloneCluster:
    """`with StandaloneCluster(workdir, workers=2) as c: ... c.url ...`"""

    def __init__(self, workdir: Path | str, workers: int = 2, cores: int = 1, memory: str = "1g",
                 timeout: float = 90.0):
        self.work = Path(workdir)
        self.workers, self.cores, self.memory, self.timeout = workers, cores, memory, timeout
        self.procs: list[subprocess.Popen] = []
        self.port, self.web = free_ports(2)
        self.url = f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict:
        conf = self.work / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "log4j2.properties").write_text(
            "rootLogger.level = warn\nrootLogger.appenderRef.stdout.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d %p %c{1}: %m%n\n")
        (self.work / "local").mkdir(exist_ok=True)
        env = dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(conf),
                   SPARK_LOCAL_DIRS=str(self.work / "local"), SPARK_DAEMON_MEMORY="256m",
                   SPARK_DAEMON_JAVA_OPTS=FAST_DAEMON_OPTS)
        return env

    def _spawn(self, name: str, args: list[str], env: dict) -> None:
        log = open(self.work / f"{name}.log", "wb")
        p = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), *args], stdout=log,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.procs.append(p)
        with open(self.work / "pids", "a") as fh:
            fh.write(f"{p.pid} {name}\n")

    def _status(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web}/json/", timeout=1) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def _wait(self, ready) -> dict:
        end = time.monotonic() + self.timeout
        while time.monotonic() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode}; see {self.work}/*.log")
            st = self._status()
            if st and ready(st):
                return st
            time.sleep(0.1)
        raise TimeoutError(f"Spark standalone cluster not ready after {self.timeout} s; see {self.work}/*.log")

    def start(self) -> "StandaloneCluster":
        env = self._env()
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.port), "--webui-port", str(self.web)], env)
            self._wait(lambda st: st.get("status") == "ALIVE" and st.get("url") == self.url)
            for i in range(self.workers):
                self._spawn(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                           "--port", "0", "--webui-port", "0", "--cores", str(self.cores),
                                           "--memory", self.memory, "--work-dir", str(self.work / "worker")], env)
            self._wait(lambda st: sum(w.get("state") == "ALIVE" for w in st.get("workers", [])) == self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM the daemons started here (workers first), wait, SIGKILL after 10 s."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def session_conf(self) -> dict:
        """Settings for a SparkSession on this cluster: one 1-core executor per worker."""
        return {"spark.executor.memory": "512m", "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * self.workers)}

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
