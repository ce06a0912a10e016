"""Grid files: parsing, cartesian expansion, run names, bundles and errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweep_helpers import FAKE, write_grid

from gsd.sweep import expand, load_grid, parse_grid, run_name
from gsd.sweep.grid import MAX_NAME_CHARS, config_hash


def test_cartesian_product_in_file_order(tmp_path):
    g = load_grid(
        write_grid(
            tmp_path / "g.toml",
            """
[base]
steps = 5
[grid]
method = ["grpo", "dapo"]
group_size = [4, 8, 16]
seed = [0, 1]
""",
        )
    )
    assert g.keys == ("method", "group_size", "seed") and g.size == 12
    specs = expand(g, FAKE)
    assert len(specs) == 12
    assert [s.params for s in specs[:3]] == [
        {"method": "grpo", "group_size": 4, "seed": 0},
        {"method": "grpo", "group_size": 4, "seed": 1},
        {"method": "grpo", "group_size": 8, "seed": 0},
    ]
    assert all(s.config.steps == 5 for s in specs)
    assert specs[0].name.startswith("method=grpo__G=4__seed=0__")
    assert len({s.name for s in specs}) == 12
    # deterministic: a second expansion gives the same names; the config's name is the run's
    assert [s.name for s in expand(g, FAKE)] == [s.name for s in specs]
    assert all(s.config.name == s.name for s in specs)


def test_hash_depends_on_the_resolved_config_not_only_the_grid_values():
    a = expand(parse_grid({"base": {"steps": 5}, "grid": {"seed": [0]}}), FAKE)[0]
    b = expand(parse_grid({"base": {"steps": 6}, "grid": {"seed": [0]}}), FAKE)[0]
    assert a.name != b.name and a.name.split("__")[0] == b.name.split("__")[0] == "seed=0"
    changed = {k: v for k, v in a.config_dict.items() if k in ("steps", "seed") and v != 0}
    assert a.name.split("__")[1] == config_hash(changed)  # the fields that differ from the defaults


def test_names_survive_a_new_simulator_field_with_a_default(monkeypatch):
    import dataclasses

    import sweep_fakesim

    grid = parse_grid({"base": {"steps": 5}, "grid": {"seed": [0, 1]}})
    before = [s.name for s in expand(grid, FAKE)]
    fields = [(f.name, f.type, f) for f in dataclasses.fields(sweep_fakesim.SimConfig)]
    Extended = dataclasses.make_dataclass(
        "SimConfig",
        [*fields, ("rollouts", str, dataclasses.field(default="answers"))],
        bases=(sweep_fakesim.SimConfig,),
        frozen=True,
    )
    monkeypatch.setattr(sweep_fakesim, "SimConfig", Extended)
    assert [s.name for s in expand(grid, FAKE)] == before
    changed = parse_grid({"base": {"steps": 5, "rollouts": "counts"}, "grid": {"seed": [0, 1]}})
    assert [s.name for s in expand(changed, FAKE)] != before


def test_bundles_set_several_keys_and_are_named_by_label():
    g = parse_grid(
        {"grid": {"case": [{"label": "fast", "steps": 1, "lr": 0.1}, {"label": "slow", "steps": 9}], "seed": [0, 1]}}
    )
    specs = expand(g, FAKE)
    assert [s.params["case"] for s in specs] == ["fast", "fast", "slow", "slow"]
    assert specs[0].config.steps == 1 and specs[0].config.lr == 0.1 and specs[2].config.steps == 9
    assert specs[0].name.startswith("case=fast__seed=0__")


def test_names_are_safe_and_short():
    name = run_name({"difficulty_path": "/a b/c?d" * 30, "lr": 1e-5}, "deadbeef")
    assert "/" not in name and " " not in name and "?" not in name
    assert len(name) <= MAX_NAME_CHARS + 10 and name.endswith("__deadbeef")
    assert run_name({}, "deadbeef") == "run__deadbeef"
    assert run_name({"flag": True, "lr": 0.25}, "x") == "flag=true__lr=0.25__x"


def test_base_config_file_is_relative_to_the_grid(tmp_path):
    (tmp_path / "base.toml").write_text("steps = 7\nlr = 0.2\n")
    g = load_grid(write_grid(tmp_path / "g.toml", '[sweep]\nconfig = "base.toml"\nnum_cpus = 2\n[grid]\nseed = [3]\n'))
    spec = expand(g, FAKE)[0]
    assert spec.config.steps == 7 and spec.config.lr == 0.2 and spec.config.seed == 3
    assert spec.num_cpus == 2 and spec.num_gpus == 0


def test_cuda_runs_ask_for_a_gpu():
    specs = expand(parse_grid({"grid": {"device": ["cpu", "cuda"]}}), FAKE)
    assert [s.num_gpus for s in specs] == [0, 1]
    specs = expand(parse_grid({"sweep": {"num_gpus": 0.5}, "grid": {"device": ["cuda"]}}), FAKE)
    assert specs[0].num_gpus == 0.5


@pytest.mark.parametrize(
    "data, match",
    [
        ({"grid": {}}, "non-empty"),
        ({}, "non-empty"),
        ({"grid": {"seed": 3}}, "must be a list"),
        ({"grid": {"seed": []}}, "empty list"),
        ({"grid": {"seed": [1, 1]}}, "repeats"),
        ({"grid": {"seed": [[1, 2]]}}, "holds a list"),
        ({"grid": {"seed": [0]}, "arms": {}}, "unknown table"),
        ({"grid": {"seed": [0]}, "sweep": {"workers": 3}}, "unknown key"),
        ({"grid": {"seed": [0]}, "sweep": {"num_cpus": 0}}, "num_cpus"),
        ({"grid": {"seed": [0]}, "sweep": {"config": "nope.toml"}}, "not found"),
        ({"grid": {"c": [{"label": "x"}]}}, "no settings"),
        ({"grid": {"c": [{"label": "x", "seed": 1}], "seed": [0]}}, "another grid key"),
    ],
)
def test_bad_grids_are_refused(data, match):
    with pytest.raises(ValueError, match=match):
        parse_grid(data)


def test_bad_values_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match=r"grid point \(method=sgd\).*method"):
        expand(parse_grid({"grid": {"method": ["sgd"]}}), FAKE)
    with pytest.raises(ValueError, match="unknown override key 'colour'"):
        expand(parse_grid({"grid": {"colour": ["red"]}}), FAKE)
    with pytest.raises(ValueError, match="not valid TOML"):
        load_grid(write_grid(tmp_path / "bad.toml", "[grid\n"))
    with pytest.raises(ValueError, match="not found"):
        load_grid(tmp_path / "missing.toml")
    with pytest.raises(ValueError, match="cannot be imported"):
        expand(parse_grid({"grid": {"seed": [0]}}), "no_such_simulator_module")


def test_a_grid_beyond_the_run_limit_is_refused_before_expansion(tmp_path):
    import time

    from gsd.sweep.grid import MAX_GRID_POINTS, load_grid

    path = tmp_path / "big.toml"
    values = ", ".join(str(i) for i in range(1000))
    path.write_text(f"[grid]\nseed = [{values}]\ncheckpoint_every = [{values.replace('0, ', '1000, ', 1)}]\n")
    start = time.perf_counter()
    with pytest.raises(
        ValueError, match=rf"seed \(1000\) × checkpoint_every \(1000\) = 1,000,000 runs.*{MAX_GRID_POINTS:,}"
    ):
        load_grid(path)
    assert time.perf_counter() - start < 2


def _toml_value(v):
    import json as _json

    return _json.dumps(v) if not isinstance(v, bool) else str(v).lower()


@given(
    axes=st.dictionaries(
        st.sampled_from(["seed", "group_size", "g_max", "max_draws", "lr", "steps", "method", "n_prompts", "nokey"]),
        st.lists(
            st.one_of(
                st.integers(-2, 10**25),
                st.floats(allow_nan=False, allow_infinity=False),
                st.booleans(),
                st.sampled_from(["grpo", "dapo", "x"]),
            ),
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_grid_in_dry_run_lists_its_runs_or_refuses_in_one_line(tmp_path, axes):
    import contextlib
    import io

    from gsd.cli import main

    grid = tmp_path / "g.toml"
    grid.write_text(
        "[base]\nsteps = 1\nn_prompts = 10\n[grid]\n"
        + "".join(f"{k} = [{', '.join(_toml_value(v) for v in vals)}]\n" for k, vals in axes.items())
    )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "sw"), "--dry-run"])
    assert rc in (0, 2) and "Traceback" not in err.getvalue()
    if rc == 2:
        assert err.getvalue().count("\n") == 1, err.getvalue()
    assert not (tmp_path / "sw" / "runs").exists() or not any((tmp_path / "sw" / "runs").iterdir())
