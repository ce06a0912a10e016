"""Every trainer module keeps the contract of gsd.integrations.contract, and the contract check bites."""

import re
import types
from pathlib import Path

import pytest

from gsd.integrations import TRAINERS, trainer_module, trainer_modules
from gsd.integrations.contract import TABLE, ContractError, RunContext, TrainerHooks, hook_specs, resolve

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", TRAINERS)
def test_every_registered_trainer_keeps_the_contract(name):
    module = trainer_module(name)
    hooks = resolve(module)
    assert isinstance(hooks, TrainerHooks)
    assert hooks.NAME == name
    for spec in hook_specs():  # a hook the module gives is its own object; one it leaves out is the default
        expected = getattr(module, spec["name"]) if hasattr(module, spec["name"]) else spec["default"]
        assert getattr(hooks, spec["name"]) is expected, spec["name"]


def test_the_reader_loads_every_trainer_through_the_contract():
    from gsd.diagnose.discover import TRAINER_HOOKS

    assert list(TRAINER_HOOKS) == list(TRAINERS)
    assert all(isinstance(h, TrainerHooks) for h in TRAINER_HOOKS.values())


def _fake(**names):
    """A module built from the TRL module's required hooks, plus or minus the names given."""
    trl = trainer_module("trl")
    module = types.ModuleType("gsd.integrations.fake")
    for spec in hook_specs():
        if spec["required"]:
            setattr(module, spec["name"], getattr(trl, spec["name"]))
    for key, value in names.items():
        if value is _DROP:
            delattr(module, key)
        else:
            setattr(module, key, value)
    return module


_DROP = object()


def test_a_minimal_module_passes_and_takes_every_default():
    hooks = resolve(_fake())
    for spec in hook_specs():
        if not spec["required"]:
            assert getattr(hooks, spec["name"]) is getattr(TABLE, spec["name"]) is spec["default"]


@pytest.mark.parametrize(
    "misspelt, meant",
    [
        ("fingerprnt", "fingerprint"),
        ("GROUPSIZE", "GROUP_SIZE"),
        ("zero_sdt", "zero_std"),
        ("describe_group", "describe_groups"),
        ("arange", "arrange"),
    ],
)
def test_a_misspelt_hook_is_refused_by_name(misspelt, meant):
    with pytest.raises(ContractError, match=rf"defines '{misspelt}', not a hook: a misspelt '{meant}'"):
        resolve(_fake(**{misspelt: lambda *a: None}))


@pytest.mark.parametrize("required", [s["name"] for s in hook_specs() if s["required"]])
def test_a_missing_required_hook_is_refused_by_name(required):
    with pytest.raises(ContractError, match=rf"lacks the required hook\(s\) {required}\b"):
        resolve(_fake(**{required: _DROP}))


@pytest.mark.parametrize(
    "name, value, why",
    [
        ("GROUP_SIZE", "yes", "must be bool"),
        ("DDOF", 1.0, "must be int"),
        ("DDOF", True, "must be int, got bool"),
        ("SUFFIXES", ".parquet", "must be tuple"),
        ("SUFFIXES", (".parquet", 3), "tuple of str"),
        ("FILTER", 0, r"must be str \| None"),
        ("zero_std", lambda values, group: None, r"cannot be called as zero_std\(values, group, n_groups\)"),
        ("step_of", "completions_1", "must be a function of"),
        ("arrange", lambda chunks, context, extra: None, "cannot be called as arrange"),
    ],
)
def test_a_hook_of_the_wrong_kind_is_refused(name, value, why):
    with pytest.raises(ContractError, match=why):
        resolve(_fake(**{name: value}))


def test_find_state_needs_read_state():
    with pytest.raises(ContractError, match="find_state without read_state"):
        resolve(_fake(find_state=lambda roots: None))
    assert resolve(_fake(find_state=lambda roots: None, read_state=lambda path: {})).read_state is not None


def test_helpers_that_are_not_hooks_pass():
    # Names of the real modules' own helpers, far from every hook's name.
    resolve(
        _fake(
            generation_fingerprint=lambda t: "",
            find_trainer_state=lambda f: None,
            group_std=lambda: 0,
            DEFAULT_REWARD="score",
            _fingerprnt=lambda t: None,
        )
    )


def test_run_context_defaults_are_fresh_per_run():
    a, b = RunContext(group_size=None, group_size_given=False, warnings=[]), RunContext(None, False, [])
    a.repeated_steps.append(3)
    a.trainer_silent[1] = 0.5
    assert b.repeated_steps == [] and b.trainer_silent == {}


def test_the_docs_name_the_registered_trainers():
    """docs/logs.md's generated table of trainers names the same modules as TRAINERS (the block itself is
    checked against the modules in tests/docs/test_trainers_table.py)."""
    text = (ROOT / "docs" / "logs.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- trainers table: generated") : text.index("<!-- trainers table: end -->")]
    named = re.findall(r"`gsd\.integrations\.([a-z]\w*)`", block)
    assert named == list(trainer_modules())
