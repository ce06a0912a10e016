"""gsd.io.atomic and gsd.plotstyle: atomic writes, strict JSON, one figure style and folder."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from gsd import plotstyle
from gsd.io import atomic


def _leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_write_atomic_text_bytes_and_parents(tmp_path):
    path = atomic.write_atomic(tmp_path / "a" / "b.txt", "héllo\n")
    assert path.read_text(encoding="utf-8") == "héllo\n"
    atomic.write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert not _leftovers(path.parent)


def test_write_json_is_strict_and_keeps_key_order(tmp_path):
    obj = {
        "z": np.float64("nan"),
        "a": [1.5, math.inf, np.int64(3)],
        "p": tmp_path,
        "arr": np.arange(3),
        "flag": np.bool_(True),
        4: "int key",
    }
    path = atomic.write_json(tmp_path / "x.json", obj)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text and text.endswith("\n")
    back = atomic.read_json(path)
    assert list(back) == ["z", "a", "p", "arr", "flag", "4"]
    assert back == {"z": None, "a": [1.5, None, 3], "p": str(tmp_path), "arr": [0, 1, 2], "flag": True, "4": "int key"}
    assert json.loads(text) == back


def test_atomic_path_replaces_on_success_and_cleans_up_on_failure(tmp_path):
    target = tmp_path / "ckpt.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old" and not _leftovers(tmp_path)
    with atomic.atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".ckpt.bin.") and tmp.suffix == ".tmp"
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and not _leftovers(tmp_path)


def test_write_table_parquet_or_csv(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    pd.testing.assert_frame_equal(pd.read_parquet(atomic.write_table(tmp_path / "t.parquet", df)), df)
    pd.testing.assert_frame_equal(pd.read_csv(atomic.write_table(tmp_path / "t.csv", df)), df)
    assert not _leftovers(tmp_path)


def test_remove_temps(tmp_path):
    (tmp_path / ".ledger.parquet.123.abcd1234.tmp").write_bytes(b"half")
    (tmp_path / "keep.json").write_text("{}")
    removed = atomic.remove_temps(tmp_path)
    assert [p.name for p in removed] == [".ledger.parquet.123.abcd1234.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]


def test_figures_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GSD_FIGURES_DIR", str(tmp_path))
    assert plotstyle.figures_dir() == tmp_path
    monkeypatch.delenv("GSD_FIGURES_DIR")
    assert plotstyle.figures_dir().name == "figures"


@plotstyle.styled
def _small_figure():
    fig, ax = plotstyle.new_figure()
    ax.plot([0, 1], [0, 1], color=plotstyle.COLORS["grpo"], label=plotstyle.method_label("dr_grpo"))
    return fig


def test_style_is_scoped_to_the_maker():
    import matplotlib

    before = dict(matplotlib.rcParams)
    fig = _small_figure()
    assert fig.axes[0].get_legend_handles_labels()[1] == ["Dr.GRPO"]
    assert dict(matplotlib.rcParams) == before


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg"])
def test_save_figure_is_atomic_and_reproducible(tmp_path, suffix):
    a = plotstyle.save_figure(_small_figure(), tmp_path / f"a{suffix}")
    b = plotstyle.save_figure(_small_figure(), tmp_path / f"b{suffix}")
    assert a.read_bytes() == b.read_bytes()
    if suffix == ".png":
        assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not _leftovers(tmp_path)


def test_new_figure_with_fixed_margins():
    fig, axes = plotstyle.new_figure(2, margins={"left": 0.1, "right": 0.95, "wspace": 0.3})
    assert fig.get_layout_engine() is None and len(axes) == 2
    assert (fig.subplotpars.left, fig.subplotpars.right, fig.subplotpars.wspace) == (0.1, 0.95, 0.3)
    assert plotstyle.new_figure()[0].get_layout_engine() is not None  # constrained by default


def test_a_nul_character_in_a_path_is_an_input_error(tmp_path):
    from gsd import InputError

    with pytest.raises(InputError, match="NUL"):
        atomic.write_json(tmp_path / "r" / "a\x00.json", {})
    with pytest.raises(InputError, match="NUL"):
        atomic.make_folder(tmp_path / "a\x00b")
    assert not (tmp_path / "r").exists() and not _leftovers(tmp_path)
