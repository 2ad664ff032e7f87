"""nodedaemons.py: one cudackptd per node of a test cluster (slurmcluster.py),
on the simulated driver, each listening where its node's steps find it at
the default socket path (Cluster.node_socket), as the node daemon of a real
node listens at /run/cudackpt/io.cudackpt.Process.

    with NodeDaemons(cluster, gpus={"n1": 1, "n2": 2}) as daemons:
        daemons["n1"].kill()  ...

gpus gives a node's simulated GPU count (CUDACKPT_SIM_DEVICE_COUNT), which
tells the nodes' daemons apart; config is their configuration (default: the
simulator's NVML too, so that `cudackptctl gpus` answers); env is every
daemon's further environment (the simulator's variables), node_env(node) a
node's own besides.  The programs are ctest's:
CUDACKPT_TEST_DAEMON and CUDACKPT_TEST_SIM."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from simdaemon import SimDaemon  # noqa: E402


class NodeDaemon(SimDaemon):
    """SimDaemon on the socket path it is given rather than one in its
    directory (its configuration, log and lease store stay there)."""

    def __init__(self, socket_path, *args, **kw):
        self.node_socket = socket_path
        super().__init__(*args, **kw)
        self.socket = socket_path

    def argv(self):
        return [self.binary, "--socket=" + self.node_socket, "--driver=" + self.driver] + self.flags


class NodeDaemons(dict):
    """node name -> NodeDaemon, started together, stopped together."""

    def __init__(self, cluster, gpus=None, env=None, config=None, node_env=None):
        super().__init__()
        binary, driver = os.environ.get("CUDACKPT_TEST_DAEMON"), os.environ.get("CUDACKPT_TEST_SIM")
        if not binary or not driver:
            raise RuntimeError("CUDACKPT_TEST_DAEMON or CUDACKPT_TEST_SIM unset: run through ctest")
        try:
            for n in cluster.names:
                e = dict(env or {})
                e.update(node_env(n) if node_env else {})
                e["CUDACKPT_SIM_DEVICE_COUNT"] = str((gpus or {}).get(n, 1))
                self[n] = NodeDaemon(cluster.node_socket(n), binary, driver, dict(config or {"nvml": driver}), e,
                                     prefix="cudackpt-slurm-%s-" % n)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for d in self.values():
            d.stop()
        self.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
