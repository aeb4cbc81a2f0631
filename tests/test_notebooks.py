"""Every notebook runs top to bottom in a real Jupyter kernel at smoke scale, and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has stored outputs"


# 02, 03 and 05 share a run directory, each going on from the last: under `pytest -n` they
# stay on one worker, in that order.
SHARED_RUN = ("02_sft_warmup.ipynb", "03_rl_training.ipynb", "05_evaluation.ipynb")


@pytest.mark.slow
@pytest.mark.timeout(900)  # a whole notebook: 04 trains and evaluates about ten arms
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xdist_group("notebooks-recipe-run"))
                                  if p.name in SHARED_RUN else p for p in NOTEBOOKS], ids=lambda p: p.name)
def test_notebook_runs_at_smoke_scale(path):
    nb = nbformat.read(path, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert params and 'SCALE = "smoke"' in params[0].source, "the parameter cell must default to smoke scale"
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
