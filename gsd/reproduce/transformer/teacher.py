"""The teacher a tiny model is pretrained on: each prompt's target solve rate, its right answer
words, and token sequences sampled from it (prompt, first answer word, fillers, EOS).

Token ids are positions in :data:`~gsd.reproduce.transformer.task.WORDS`: ``<eos>`` is 1, the
answer words a0…a19 start at :data:`A0`, the fillers f0…f19 at :data:`F0`, the prompt words at
:data:`Q0`.
"""

from __future__ import annotations

import numpy as np

#: Token ids in :data:`~gsd.reproduce.transformer.task.WORDS`: ``<eos>``, the first answer word a0, the
#: first filler f0, the first prompt word q0.
EOS, A0, F0, Q0 = 1, 3, 23, 43
#: Feature words of the ``"shared"`` structure: a prompt is ``u{i} v{j}`` (:func:`shared_teacher`).
N_U, MAX_V = 16, 16


def teacher(rng, n_prompts, p_range=(0.05, 0.95)):
    """Targets of the pretraining: solve rates spread evenly over ``p_range`` and right sets of 1–4
    short answer words (a0–a9); the teacher's wrong answers are the long words a10–a19."""
    target = np.linspace(p_range[0], p_range[1], n_prompts)
    rng.shuffle(target)
    right = [
        tuple(int(t) for t in A0 + rng.choice(10, size=int(rng.integers(1, 5)), replace=False))
        for _ in range(n_prompts)
    ]
    return target, right


def shared_teacher(rng, n_prompts):
    r"""The ``"shared"`` structure: prompt x is ``u{i} v{j}`` (i = x mod 16, j = x div 16); its one
    right answer is ``a{i mod 10}``, a rule of the feature u_i that prompts share (u_i with every
    v_j, and u_i, u_{i+10} one answer word); the teacher's solve rate is
    :math:`\sigma(\alpha_i + \beta_j)` with α spread over [−2, 2] and β over [−6, 4] (shuffled),
    so it spans (0, 1), and every u_i has easy prompts beside its hard ones."""
    n_v = n_prompts // N_U
    alpha, beta = np.linspace(-2.0, 2.0, N_U), np.linspace(-6.0, 4.0, n_v)
    rng.shuffle(alpha)
    rng.shuffle(beta)
    x = np.arange(n_prompts)
    i, j = x % N_U, x // N_U
    target = 1.0 / (1.0 + np.exp(-(alpha[i] + beta[j])))
    right = [(int(A0 + k % 10),) for k in i]
    prompts = [f"u{a} v{b}" for a, b in zip(i, j)]
    return target, right, prompts


def sample_sequences(rng, target, right, variant, max_len, n, prompt_ids=None):
    """``n`` sequences per prompt from the teacher: prompt token(s), first answer word, fillers, EOS.

    ``prompt_ids``: (prompts × L) token ids of the prompts (default: prompt x is the one token q_x).
    Returns the token ids (pad 0 after the end) and the next-token labels (-100 where there is none)."""
    P = len(target)
    if prompt_ids is None:
        prompt_ids = (Q0 + np.arange(P))[:, None]
    L = prompt_ids.shape[1]
    x = np.repeat(np.arange(P), n)
    is_right = rng.random(P * n) < np.repeat(target, n)
    right_mask = np.zeros((P, 20), bool)
    for i, r in enumerate(right):
        right_mask[i, np.asarray(r) - A0] = True
    # a uniform right answer word (or a uniform long one: the wrong answers), the arg-max of
    # random keys over the allowed words
    allowed = np.where(is_right[:, None], right_mask[x], np.arange(20) >= 10)
    keys = rng.random((P * n, 20)) + allowed
    first = A0 + keys.argmax(1)
    short = first < A0 + 10
    # EOS after each token with this probability: the length law of the continuation
    stop = np.where(short, 0.7, 0.12) if variant == "correlated" else np.full(P * n, 0.35)
    fillers = np.minimum(rng.geometric(stop) - 1, max_len - 1)  # words after the answer word
    width = max_len + L + 1
    col = np.arange(width)
    ids = np.where(col < fillers[:, None] + L + 1, F0 + rng.integers(0, 20, (P * n, width)), 0)
    ids[:, :L], ids[:, L] = prompt_ids[x], first
    ends = fillers + 1 < max_len  # room for EOS within max_len completion tokens
    ids[np.flatnonzero(ends), fillers[ends] + L + 1] = EOS
    length = fillers + L + 1 + ends  # tokens of the sequence, prompt included
    labels = np.where((col >= L) & (col < length[:, None]), ids, -100)
    return ids, labels
