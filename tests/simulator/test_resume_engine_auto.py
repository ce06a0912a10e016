"""Issue 44 (older catalogue): a numpy run resumed with engine = "auto" went on without a word.
The resume message now says which engine continues it."""

import pytest

from gsd.simulator.dispatch import run_simulation
from gsd.simulator.runfolder import RunInterrupted


def test_a_run_resumed_with_engine_auto_says_which_engine_continues(tmp_path):
    cfg = dict(n_prompts=10, steps=6, checkpoint_every=1, device="cpu", engine="numpy")

    def stop(step):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted):
        run_simulation(cfg, tmp_path / "run", progress=False, on_step=stop)
    said = []
    summary = run_simulation(
        {**cfg, "engine": "auto"}, tmp_path / "run", resume=True, progress=False, notify=said.append
    )
    assert summary["engine"] == "numpy"
    assert len(said) == 1 and "engine = 'auto' continues with the numpy engine that wrote it" in said[0]
