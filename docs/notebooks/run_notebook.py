"""Executes a notebook top to bottom against a live benchd, failing on any
cell's error (ctest python_client.notebook runs quickstart.ipynb this way).

    python docs/notebooks/run_notebook.py docs/notebooks/quickstart.ipynb
    python docs/notebooks/run_notebook.py --write docs/notebooks/quickstart.ipynb
    python docs/notebooks/run_notebook.py --address gpu-node:7531 --write ...

Without --address it starts a CPU daemon of its own (benchd from
$BENCHD_BIN_DIR, default build/bin; devices cpu:0 and cpu:1, a temporary data
dir) and stops it at the end. The kernel gets BENCHD_ADDRESS. --write saves
the executed notebook (outputs included) over the file, to commit; without it
the file is left as it is. Needs nbclient, nbformat and ipykernel (the
package's [dev] extra) in the Python that runs this.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The package's test fixtures start and stop the daemon (one implementation).
sys.path.insert(0, os.path.join(REPO, "client", "python", "tests"))


def execute(path: str, address: str, timeout: float, write: bool) -> int:
    nb = nbformat.read(path, as_version=4)
    os.environ["BENCHD_ADDRESS"] = address
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}})
    t = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"run_notebook: {path} failed against {address}:\n{e}", file=sys.stderr)
        return 1
    took = time.monotonic() - t
    cells = sum(1 for c in nb.cells if c.cell_type == "code")
    print(f"run_notebook: {path}: {cells} code cells ran against {address} in {took:.1f} s")
    if write:
        nbformat.write(nb, path)
        print(f"run_notebook: wrote the outputs into {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook")
    ap.add_argument("--address", help="a running daemon (default: start a CPU one here)")
    ap.add_argument("--write", action="store_true", help="save the outputs into the notebook")
    ap.add_argument("--cell-timeout", type=float, default=300, help="seconds per cell")
    a = ap.parse_args()
    path = os.path.abspath(a.notebook)
    if a.address:
        return execute(path, a.address, a.cell_timeout, a.write)
    from conftest import Daemon
    daemon = Daemon(["cpu:0", "cpu:1"], prefix="benchd-notebook-").start()
    try:
        daemon.wait_workers_up()
        return execute(path, daemon.address, a.cell_timeout, a.write)
    finally:
        daemon.cleanup()


if __name__ == "__main__":
    sys.exit(main())
