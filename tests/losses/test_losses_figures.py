"""gsd.losses.figures: every figure is written, small, and the seed's numbers agree."""

from pathlib import Path

import pytest

from gsd.losses import figures
from gsd.plotstyle import save_figure


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures") / "out"
    return out, figures.make_all(out)


def test_make_all_writes_small_pngs(written):
    out, paths = written
    assert [p.name for p in paths] == list(figures.FIGURES)
    assert len(paths) == 10
    for p in paths:
        assert p.parent == out
        assert p.name.startswith("loss_") and p.suffix == ".png"
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert 5_000 < len(data) < 250_000


def test_regeneration_is_byte_identical(written, tmp_path):
    # No timestamp in the PNG metadata: rebuilding a figure gives the same file.
    out, paths = written
    again = tmp_path / "loss_temperature.png"
    save_figure(figures.fig_temperature(), again)
    assert again.read_bytes() == (out / "loss_temperature.png").read_bytes()


def test_seed_examples_agree():
    df = figures.seed_examples()
    assert df["agrees"].all(), df[~df["agrees"]]
    assert len(df) == 14


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_committed_figures_exist(name):
    # figures/ holds the output of make_all() (regenerate with gsd.losses.figures.make_all())
    root = Path(__file__).resolve().parents[2]
    assert (root / "figures" / name).is_file()


def test_cli_subcommand(capsys, tmp_path):
    import argparse
    import json

    from gsd.losses import cli

    parser = argparse.ArgumentParser(prog="gsd")
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["losses", "--json"])
    assert args.func(args) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 14 and all(r["agrees"] for r in records)
    args = parser.parse_args(["losses", "--figures", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "d_t" in out and str(tmp_path / "loss_dpo_cases.png") in out
