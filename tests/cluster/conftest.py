"""tests/cluster: a real Slurm cluster on this machine (slurm_cluster.py).
Under ctest (cluster.slurm, BENCHD_CLUSTER_STRICT=1) a missing tool or root
fails the tests; run by hand they skip."""
import os

import pytest

import slurm_cluster


def missing(reason):
    """Skip by hand; fail under ctest (BENCHD_CLUSTER_STRICT), whose set-up
    (scripts/setup.sh) installs the tools."""
    if os.environ.get("BENCHD_CLUSTER_STRICT"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def need_slurm():
    absent = slurm_cluster.missing()
    if absent:
        missing("a Slurm cluster needs: " + ", ".join(absent))
