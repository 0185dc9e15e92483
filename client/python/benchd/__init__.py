"""benchd: the Python client of benchd, the GPU benchmarking daemon.

    import benchd
    c = benchd.Client()                      # $BENCHD_ADDRESS, else 127.0.0.1:7531
    c = benchd.Client("gpu-node:7531", credentials=benchd.Credentials(
        token_file="~/.config/benchd/token", tls_ca="ca.pem"))   # or BENCHD_TOKEN_FILE, ...
    c.node()                                 # devices, workers, versions
    job = c.benchmark(preset="small", mode="train_step", precision="bf16", steps=10)
    res = job.wait().result                  # a progress bar in a notebook or terminal
    res.to_pandas()                          # one row per step: step_ms, forward_ms, ...
    sw = c.benchmark(preset="small", sweep={"precision": ["fp32", "bf16"]}).wait().result
    sw.to_pandas(); sw.pivot("model.preset", "precision")  # a sweep: one row per cell

Request kinds (keywords are benchctl's flags): benchmark, profile, memory,
collective, attention, precision, ddp; and jobs/job/cancel, models/evict, node,
nodes/wait_for_nodes (a cluster), create_group/groups/
destroy_group, artifacts/download. Plots: benchd.plots (pip install
'benchd[plot]'). Errors: benchd.BenchdError and its subclasses.
"""
from ._aio import AsyncClient, AsyncJob
from ._client import Client, Job, JobList
from ._common import Event, JobState, load_snapshot
from ._credentials import DEFAULT_ADDRESS, Credentials, TokenFileWarning
from ._errors import (Aborted, ArgumentError, ArgumentTypeError, BenchdError, Cancelled,
                      CredentialsError,
                      DeadlineExceeded, FailedPrecondition, Internal, InvalidArgument, JobFailed,
                      JobNotDone, NotFound, PermissionDenied, ResourceExhausted, RpcError,
                      Unauthenticated, Unavailable, Unimplemented, WaitTimeout)
from ._results import (AttentionResult, BenchmarkResult, CollectiveResult, DdpResult,
                       MemoryEstimate, MemoryResult, Node, Nodes, PrecisionResult, ProfileResult,
                       Records, Result, SweepResult)

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "Job", "AsyncJob", "JobList", "JobState", "Event",
    "Credentials", "TokenFileWarning", "CredentialsError",
    "BenchmarkResult", "ProfileResult", "MemoryResult", "CollectiveResult", "AttentionResult",
    "PrecisionResult", "DdpResult", "SweepResult",
    "Result", "Node", "Nodes", "MemoryEstimate",
    "Records", "load_snapshot", "DEFAULT_ADDRESS",
    "BenchdError", "ArgumentError", "ArgumentTypeError", "RpcError", "InvalidArgument",
    "Unavailable", "NotFound", "FailedPrecondition", "ResourceExhausted", "PermissionDenied",
    "Unauthenticated", "DeadlineExceeded", "Cancelled", "Aborted", "Unimplemented", "Internal",
    "JobFailed", "JobNotDone", "WaitTimeout",
]
