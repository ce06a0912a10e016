"""The policy-gradient methods the package knows, defined once.

Every list of method names in the package is derived from :data:`METHOD_SPECS`:

* :data:`UPDATE_METHODS` — every method (:func:`gsd.core.update.expected_update`,
  :func:`gsd.core.weighting.large_group_weight`, the simulator's ``method`` key);
* :data:`ADVANTAGE_METHODS` — the methods with an advantage estimator of their own
  (:func:`gsd.core.groups.advantages`); DAPO uses GRPO's and changes which groups are kept.

For binary rewards each method is an operation on the group's reward std σ
(see :ref:`theory-identity`): GRPO divides the centred rewards by σ, Dr.GRPO does not, RLOO
scales them by G/(G−1), DAPO redraws groups with σ = 0.  In the large-G limit the per-prompt
logit update is sqrt(p(1−p)) for the methods that divide by σ and p(1−p) for the others
(:ref:`theory-update`).

Examples
--------
>>> method_spec("dapo").advantage
'grpo'
>>> UPDATE_METHODS
('grpo', 'dr_grpo', 'dapo', 'rloo')
>>> ADVANTAGE_METHODS
('grpo', 'dr_grpo', 'rloo')
"""

from __future__ import annotations

from typing import NamedTuple

from ..validation import InputError

__all__ = ["Method", "METHOD_SPECS", "UPDATE_METHODS", "ADVANTAGE_METHODS", "method_spec"]


class Method(NamedTuple):
    """One method: its name and the three facts the rest of the package reads from it."""

    name: str
    advantage: str  # the advantage estimator its groups are scored with
    divides_by_std: bool  # advantages standardised by σ: large-G update sqrt(p(1−p)), else p(1−p)
    redraws_silent: bool  # silent groups are redrawn (DAPO's dynamic sampling)


#: Every method, by name.
METHOD_SPECS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("grpo", advantage="grpo", divides_by_std=True, redraws_silent=False),
        Method("dr_grpo", advantage="dr_grpo", divides_by_std=False, redraws_silent=False),
        Method("dapo", advantage="grpo", divides_by_std=True, redraws_silent=True),
        Method("rloo", advantage="rloo", divides_by_std=False, redraws_silent=False),
    )
}

#: Every method name.
UPDATE_METHODS: tuple[str, ...] = tuple(METHOD_SPECS)

#: Methods with an advantage estimator of their own (DAPO scores its groups with GRPO's).
ADVANTAGE_METHODS: tuple[str, ...] = tuple(n for n, m in METHOD_SPECS.items() if m.advantage == n)


def method_spec(method: str, allowed: tuple[str, ...] = UPDATE_METHODS) -> Method:
    """The :class:`Method` named ``method``; :class:`gsd.InputError` naming it when it is not in ``allowed``.

    >>> method_spec("grpo").divides_by_std
    True
    """
    if not isinstance(method, str) or method not in allowed:
        raise InputError(f"method must be one of {allowed}, got {method!r}")
    return METHOD_SPECS[method]
