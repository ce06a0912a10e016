r"""The closed forms inside a real trainer: a tiny transformer whose solve rates are known exactly.

A tiny causal LM (Qwen2 from a config, a word-level tokenizer, both built in code) answers
prompts ``q0 … q15`` (up to ``q31``: :func:`words`).  The reward is decided by the completion's
first token: right iff it is in the prompt's set of right tokens, so the solve rate is a sum of the model's own probabilities,

.. math::  p_x = \sum_{t \in R(x)} \pi_\theta(t \mid x),

exact from one forward pass, and :math:`\nabla p_x` by autograd.  Completions go on after the
first token (1 to ``max_len`` tokens in all), so TRL's token-level loss aggregation sees lengths;
in the ``"correlated"`` variant a right first token is mostly followed by EOS (right answers
short, wrong ones long), in ``"independent"`` the length does not depend on the first token.

:func:`train_silent` trains the model with ``GRPOTrainer.train()`` and sets TRL's logged
``frac_reward_zero_std`` beside the closed forms from the exact solve rates.

:func:`run_training` trains GRPO, Dr.GRPO and gsd's skip sampler from one initial model, runs
``gsd diagnose`` on TRL's own completions log against the exact p (:func:`calibrate`), follows the
hardest quarter of the prompts, and measures each group's update against its reward std
(:func:`sigma_update`).

:func:`measured_update` averages the gradient of TRL 1.16.0's own ``GRPOTrainer._compute_loss``
on inputs built by its own ``_generate_and_score_completions`` over many sampled groups and
compares it with the closed form (:ref:`theory-any-policy`).  torch, transformers and trl are
imported inside the functions: ``import gsd`` stays light.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .._errors import InputError
from .._extras import require_trl

#: Vocabulary: specials, answer words a0…a19 (a0–a9 "short", a10–a19 "long"), filler words
#: f0…f19 that continue an answer, prompt words q0…q15.
WORDS = (
    ["<pad>", "<eos>", "<unk>"]
    + [f"a{i}" for i in range(20)]
    + [f"f{i}" for i in range(20)]
    + [f"q{i}" for i in range(16)]
)
#: Most prompts of a task.
MAX_PROMPTS = 256
#: Feature words of the ``"shared"`` structure: a prompt is ``u{i} v{j}`` (:func:`build_task`).
N_U, MAX_V = 16, 16


def words(n_prompts: int, structure: str = "own"):
    """The vocabulary of a task of ``n_prompts`` prompts: :data:`WORDS`, with prompt words up to
    ``q31`` when ``n_prompts`` > 16 and up to ``q{n-1}`` above 32 (the vocabulary's size is part of
    the initial weights, so the tasks of up to 32 prompts stay as they were); with ``structure``
    ``"shared"`` the feature words ``u0…u15`` and ``v0…v{n/16 - 1}`` instead of prompt words."""
    if structure == "shared":
        return WORDS + [f"u{i}" for i in range(N_U)] + [f"v{j}" for j in range(-(-n_prompts // N_U))]
    if n_prompts <= 16:
        return WORDS
    return WORDS + [f"q{i}" for i in range(16, max(32, n_prompts))]


_EOS, _A0, _F0, _Q0 = 1, 3, 23, 43
LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo")
SCALE_REWARDS = ("group", "batch", "none")
VARIANTS = ("independent", "correlated")
#: TRL 1.16.0's advantage: ``(r - mean) / (std + 1e-4)`` with torch's std (ddof 1).
TRL_DDOF, TRL_EPS = 1, 1e-4


@dataclass
class Task:
    """The prompts, their right-token sets and the model (see :func:`build_task`)."""

    model: object
    tokenizer: object
    prompts: list
    right: list  # per prompt, the token ids that make an answer right
    variant: str
    max_len: int

    def solve_rates(self, with_grad: bool = False):
        """Exact :math:`p_x` per prompt (a float64 array), or with ``with_grad`` the torch tensor
        (float32, in the autograd graph of the model's parameters)."""
        import torch

        ids = torch.tensor([self.tokenizer(p)["input_ids"] for p in self.prompts])
        ctx = torch.enable_grad() if with_grad else torch.no_grad()
        with ctx:
            probs = torch.softmax(self.model(input_ids=ids).logits[:, -1, :].float(), dim=-1)
            p = (probs * torch.from_numpy(self.right_mask(probs.shape[-1])).to(probs.dtype)).sum(-1)
        return p if with_grad else p.double().numpy()

    def right_mask(self, vocab: int) -> np.ndarray:
        """(prompts × ``vocab``) booleans: token t as an answer's first token makes prompt x's answer right."""
        rows = np.repeat(np.arange(len(self.right)), [len(r) for r in self.right])
        cols = np.fromiter((t for r in self.right for t in r), dtype=np.int64, count=rows.size)
        mask = np.zeros((len(self.right), vocab), dtype=bool)
        mask[rows, cols] = True
        return mask

    def prompt_rows(self):
        """Per prompt, the input-embedding row of its own token ``q_x``: only that prompt's rows
        reach it through the prompt.  A completion of another prompt x' that samples ``q_x``
        reaches it too, and adds noise only: in expectation x''s update is c ∇p_x', which is 0 on
        this row (p_x' does not depend on it)."""
        return [self.tokenizer(p)["input_ids"][-1] for p in self.prompts]


def import_stack():
    """torch, transformers, datasets and trl, imported once with their import-time warnings
    silenced (tqdm's "IProgress not found" in a notebook without ipywidgets: nothing to act on)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import datasets  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import trl  # noqa: F401


@contextmanager
def _torch_threads(n: int):
    """torch on ``n`` threads inside, the caller's setting after (one thread is the fastest on a
    shared machine: the tiny model's kernels are too small to split)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def tokenizer(words=WORDS, chat_template=None):
    """A word-level tokenizer of ``words`` (token id = position; ``<pad>``, ``<eos>`` and
    ``<unk>`` among them), built in code, nothing downloaded; ``chat_template``: a Jinja template
    for conversational prompts (the task's prompts are plain text and need none)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    if chat_template is not None:
        hf.chat_template = chat_template
    return hf


def _teacher(rng, n_prompts, p_range=(0.05, 0.95)):
    """Targets of the pretraining: solve rates spread evenly over ``p_range`` and right sets of 1–4
    short answer words (a0–a9); the teacher's wrong answers are the long words a10–a19."""
    target = np.linspace(p_range[0], p_range[1], n_prompts)
    rng.shuffle(target)
    right = [
        tuple(int(t) for t in _A0 + rng.choice(10, size=int(rng.integers(1, 5)), replace=False))
        for _ in range(n_prompts)
    ]
    return target, right


def _shared_teacher(rng, n_prompts):
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
    right = [(int(_A0 + k % 10),) for k in i]
    prompts = [f"u{a} v{b}" for a, b in zip(i, j)]
    return target, right, prompts


def _sample_sequences(rng, target, right, variant, max_len, n, prompt_ids=None):
    """``n`` sequences per prompt from the teacher: prompt token(s), first answer word, fillers, EOS.

    ``prompt_ids``: (prompts × L) token ids of the prompts (default: prompt x is the one token q_x).
    Returns the token ids (pad 0 after the end) and the next-token labels (-100 where there is none)."""
    P = len(target)
    if prompt_ids is None:
        prompt_ids = (_Q0 + np.arange(P))[:, None]
    L = prompt_ids.shape[1]
    x = np.repeat(np.arange(P), n)
    is_right = rng.random(P * n) < np.repeat(target, n)
    right_mask = np.zeros((P, 20), bool)
    for i, r in enumerate(right):
        right_mask[i, np.asarray(r) - _A0] = True
    # a uniform right answer word (or a uniform long one: the wrong answers), the arg-max of
    # random keys over the allowed words
    allowed = np.where(is_right[:, None], right_mask[x], np.arange(20) >= 10)
    keys = rng.random((P * n, 20)) + allowed
    first = _A0 + keys.argmax(1)
    short = first < _A0 + 10
    # EOS after each token with this probability: the length law of the continuation
    stop = np.where(short, 0.7, 0.12) if variant == "correlated" else np.full(P * n, 0.35)
    fillers = np.minimum(rng.geometric(stop) - 1, max_len - 1)  # words after the answer word
    width = max_len + L + 1
    col = np.arange(width)
    ids = np.where(col < fillers[:, None] + L + 1, _F0 + rng.integers(0, 20, (P * n, width)), 0)
    ids[:, :L], ids[:, L] = prompt_ids[x], first
    ends = fillers + 1 < max_len  # room for EOS within max_len completion tokens
    ids[np.flatnonzero(ends), fillers[ends] + L + 1] = _EOS
    length = fillers + L + 1 + ends  # tokens of the sequence, prompt included
    labels = np.where((col >= L) & (col < length[:, None]), ids, -100)
    return ids, labels


STRUCTURES = ("own", "shared")


def build_task(
    n_prompts: int = 8,
    *,
    variant: str = "correlated",
    max_len: int = 6,
    seed: int = 0,
    pretrain_steps: int = 150,
    structure: str = "own",
    p_range=(0.05, 0.95),
) -> Task:
    """A tiny Qwen2 pretrained in code on a teacher whose solve rates spread over (0.05, 0.95).

    Parameters
    ----------
    n_prompts : int, optional
        Prompts ``q0 … q{n-1}``, 1 to 256 (default 8; above 16 the vocabulary is larger,
        :func:`words`).
    variant : {"correlated", "independent"}, optional
        ``"correlated"`` (default): after a short answer word (the right ones) the teacher stops
        with probability 0.7 per token, after a long one (the wrong ones) 0.12 — right answers
        are short; ``"independent"``: 0.35 after every word.
    max_len : int, optional
        TRL's ``max_completion_length`` (default 6), 2 to 32.
    seed : int, optional
        Seed of the teacher, the initial weights and the pretraining (default 0).
    pretrain_steps : int, optional
        Adam steps of the next-token pretraining on the teacher's sequences (default 150).
    structure : {"own", "shared"}, optional
        ``"own"`` (default): prompt x is its own token ``q{x}`` with its own right set, so
        learning one prompt moves no other in expectation; ``"shared"``: prompt x is two feature
        words ``u{i} v{j}`` whose right answer is a rule of u_i (:func:`_shared_teacher`), so
        learning one prompt moves the others that share its features or its answer word
        (``n_prompts`` a multiple of 16; ``p_range`` does not apply: the rates are σ(α_i + β_j)).
    p_range : (float, float), optional
        ``"own"``: the teacher's solve rates are spread evenly over this closed interval in [0, 1]
        (default (0.05, 0.95)); 0 makes the teacher never answer right, so the model's p is near 0.

    Returns
    -------
    Task
        The model is what it is after pretraining: the solve rates are the model's own
        (:meth:`Task.solve_rates`), near, not equal to, the teacher's.
    """
    if not (isinstance(n_prompts, (int, np.integer)) and 1 <= n_prompts <= MAX_PROMPTS):
        raise InputError(f"n_prompts must be an integer in [1, {MAX_PROMPTS}], got {n_prompts!r}")
    if variant not in VARIANTS:
        raise InputError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not (isinstance(max_len, (int, np.integer)) and 2 <= max_len <= 32):
        raise InputError(f"max_len must be an integer in [2, 32], got {max_len!r}")
    if not (isinstance(pretrain_steps, (int, np.integer)) and 0 <= pretrain_steps <= 10**5):
        raise InputError(f"pretrain_steps must be an integer in [0, 100000], got {pretrain_steps!r}")
    if structure not in STRUCTURES:
        raise InputError(f"structure must be one of {STRUCTURES}, got {structure!r}")
    if structure == "shared" and n_prompts % N_U:
        raise InputError(f"n_prompts must be a multiple of {N_U} with structure='shared', got {n_prompts!r}")
    lo, hi = (float(v) for v in p_range)
    if not (0.0 <= lo <= hi <= 1.0):
        raise InputError(f"p_range must be (lo, hi) with 0 <= lo <= hi <= 1, got {p_range!r}")
    import_stack()
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    rng = np.random.default_rng(seed)
    vocab = words(n_prompts, structure)
    if structure == "shared":
        target, right, prompts = _shared_teacher(rng, n_prompts)
        index = {w: i for i, w in enumerate(vocab)}
        prompt_ids = np.array([[index[w] for w in q.split()] for q in prompts])
    else:
        target, right = _teacher(rng, n_prompts, (lo, hi))
        prompts, prompt_ids = [f"q{x}" for x in range(n_prompts)], None
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            pad_token_id=0,
            eos_token_id=_EOS,
            bos_token_id=None,
            tie_word_embeddings=False,
        )
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with _torch_threads(1):
        for _ in range(pretrain_steps):
            ids, labels = _sample_sequences(rng, target, right, variant, max_len, 16, prompt_ids)
            # labels are the next tokens already: the model's own shift would drop one
            logits = model(input_ids=torch.from_numpy(ids[:, :-1])).logits
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), torch.from_numpy(labels[:, 1:]).reshape(-1), ignore_index=-100
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return Task(model=model, tokenizer=tokenizer(vocab), prompts=prompts, right=right, variant=variant, max_len=max_len)


def closed_form_factor(p, G, method: str):
    r"""c(p, G) with :math:`\mathbb{E}[g] = c\,\nabla p` for a sequence-level group-mean update.

    ``"grpo"``: TRL's std (ddof 1, eps 1e-4), :math:`\mathbb{E}[\sigma^2/(\sigma_1+\epsilon)]/(p(1-p))`;
    ``"grpo_paper"``: the population std, eps 0, :math:`\varphi(G,p)/\sqrt{p(1-p)}`
    (so that :math:`c\nabla p = \varphi\,\nabla(2\arcsin\sqrt p)`); ``"dr_grpo"``: :math:`1 - 1/G`.
    """
    from ..update import expected_update, fidelity

    p = np.asarray(p, float)
    if method == "dr_grpo":
        return np.full_like(p, 1.0 - 1.0 / G)
    q = p * (1.0 - p)
    if method == "grpo":
        return expected_update(p, G, "grpo", ddof=TRL_DDOF, eps=TRL_EPS) / q
    if method == "grpo_paper":
        return fidelity(p, G) / np.sqrt(q)
    raise InputError(f"method must be 'grpo', 'grpo_paper' or 'dr_grpo', got {method!r}")


def _reference(scale_rewards: str) -> str:
    """The closed form a setting is compared with: GRPO's (TRL's std) for ``"group"`` and
    ``"batch"`` (batch scaling has no per-prompt closed form: its ratio is what a user switching
    from group scaling gets), Dr.GRPO's for ``"none"``."""
    return "dr_grpo" if scale_rewards == "none" else "grpo"


def measured_update(
    task: Task,
    *,
    G: int = 8,
    draws: int = 100,
    copies: int = 4,
    scale_rewards=SCALE_REWARDS,
    loss_types=LOSS_TYPES,
    seed: int = 0,
    threads: int = 1,
) -> dict:
    r"""Monte Carlo of the expected per-prompt update of TRL's own loss against the closed form.

    Parameters
    ----------
    task : Task
        From :func:`build_task`; its parameters are not changed.
    G : int, optional
        TRL's ``num_generations`` (default 8).
    draws : int, optional
        Calls of ``_generate_and_score_completions`` per ``scale_rewards`` (default 100).
    copies : int, optional
        Groups of every prompt in one call (default 4): one batch holds ``copies × prompts × G``
        completions.  ``draws × copies`` groups per prompt in all.
    scale_rewards, loss_types : sequence of str, optional
        The settings (default all three, all four).
    seed : int, optional
        torch's seed before each call (the same for every ``scale_rewards``: common random numbers).
    threads : int, optional
        torch threads during the run (default 1, restored after).

    Returns
    -------
    dict
        ``p`` (per prompt, exact), ``mean_length`` and ``harmonic_length`` (completion tokens,
        over every draw), and ``rows``: per
        (``scale_rewards``, ``loss_type``) ``ratio`` with ``lo``/``hi`` (Monte Carlo 95 %,
        normal over the draws), the same over the hard prompts (p < 1/2: ``ratio_hard``,
        ``lo_hard``, ``hi_hard``) and the easy ones (``_easy``), per prompt ``ratio_per_prompt``
        and ``half_width_per_prompt``, and ``reference``.

    Notes
    -----
    Per call every prompt gets ``copies`` groups; the gradient of TRL's ``_compute_loss`` is
    taken with respect to the input embedding row of each prompt's own token, which only that
    prompt's rows reach, and projected on :math:`\nabla p_x` there.  The update is minus the
    gradient rescaled to a group mean of sequence scores: ``× B Λ / G`` per group, with B the rows
    of the batch and Λ TRL's per-token normalizer's length — ``max_completion_length`` for
    ``dr_grpo`` (a constant: the sequence-level sum, exactly), and for the token means the length
    that makes an answer's mean weight 1: the run's harmonic mean length for ``grpo`` (weight
    1/L per answer), its mean length (1/E[B/ΣL]) for ``bnpo`` and ``dapo`` (1/ΣL per batch).  A
    ratio other than 1 is then the length bias: weights that go with correctness (or with the
    score: 1/L has a gradient of its own).  The ratio is
    :math:`\sum_x \langle \bar g_x, \nabla p_x\rangle / \sum_x c_x \lVert\nabla p_x\rVert^2`
    with c from :func:`closed_form_factor`.  With one process and no gradient accumulation
    TRL's ``dapo`` normalizer (tokens of the generation batch) equals ``bnpo``'s.
    """
    import tempfile

    import torch

    bad = [s for s in scale_rewards if s not in SCALE_REWARDS] + [lt for lt in loss_types if lt not in LOSS_TYPES]
    if bad:
        raise InputError(f"unknown scale_rewards/loss_type {bad[0]!r}: use {SCALE_REWARDS} and {LOSS_TYPES}")
    for name, v, hi in (("G", G, 64), ("draws", draws, 10**6), ("copies", copies, 64)):
        if not (isinstance(v, (int, np.integer)) and (2 if name == "G" else 1) <= v <= hi):
            raise InputError(f"{name} must be an integer in [{2 if name == 'G' else 1}, {hi}], got {v!r}")
    with _torch_threads(threads):
        p, emb, rows, dp = _prompt_gradients(task)
        P = len(rows)
        prompts = [q for _ in range(copies) for q in task.prompts]
        batch = [{"prompt": q} for q in prompts for _ in range(G)]
        B = len(batch)
        proj = {(s, lt): np.empty((draws, P)) for s in scale_rewards for lt in loss_types}
        inv_len = batch_w = 0.0  # sums over the draws: mean 1/L of the rows, B/ΣL of the batch
        with tempfile.TemporaryDirectory() as tmp:
            tr = _trainer(task, G, B, tmp)
            for d in range(draws):
                for s in scale_rewards:
                    tr.scale_rewards = s
                    torch.manual_seed(seed * 1_000_003 + d)
                    inputs = tr._generate_and_score_completions(batch)
                    if s == scale_rewards[0]:  # the same completions for every s
                        L = inputs["completion_mask"].sum(-1).double().clamp(min=1.0)
                        inv_len += float((1.0 / L).mean())
                        batch_w += B / float(L.sum())
                    for lt in loss_types:
                        tr.loss_type = lt
                        tr.model.zero_grad(set_to_none=True)
                        tr._compute_loss(tr.model, inputs).backward()
                        g = -emb.grad[rows].double() * (B / G) / copies  # mean over a prompt's groups
                        proj[(s, lt)][d] = (g * dp).sum(-1).numpy()
        task.model.zero_grad(set_to_none=True)
        task.model.eval()
    # the length Λ that makes an answer's mean weight 1: 1/E[1/L] for a mean per answer, 1/E[B/ΣL]
    # for a mean per batch's tokens, max_completion_length for TRL's dr_grpo
    scale = {"grpo": draws / inv_len, "bnpo": draws / batch_w, "dapo": draws / batch_w, "dr_grpo": task.max_len}
    dp2 = (dp * dp).sum(-1).numpy()
    out = {
        "p": p.tolist(),
        "G": G,
        "groups_per_prompt": draws * copies,
        "variant": task.variant,
        "max_completion_length": task.max_len,
        "harmonic_length": scale["grpo"],
        "mean_length": scale["bnpo"],
        "rows": [],
    }
    hard = p < 0.5
    for (s, lt), v in proj.items():
        ref = _reference(s)
        v = v * scale[lt]
        denom = closed_form_factor(p, G, ref) * dp2
        row = {"scale_rewards": s, "loss_type": lt, "reference": ref}
        for name, keep in (("", np.ones_like(hard)), ("_hard", hard), ("_easy", ~hard)):
            row.update(_pooled(v[:, keep], denom[keep], name))
        per = v / denom
        row["ratio_per_prompt"] = per.mean(0).tolist()
        row["half_width_per_prompt"] = (1.96 * per.std(0, ddof=1) / np.sqrt(draws)).tolist()
        out["rows"].append(row)
    return out


def _prompt_gradients(task: Task):
    """The exact p, the input-embedding matrix, each prompt's own row of it
    (:meth:`Task.prompt_rows`) and :math:`\nabla p_x` on that row (float64, prompts × hidden)."""
    import torch

    p = task.solve_rates()
    pt = task.solve_rates(with_grad=True)
    emb = task.model.get_input_embeddings().weight
    rows = task.prompt_rows()
    dp = torch.stack([torch.autograd.grad(pt[i], emb, retain_graph=True)[0][rows[i]] for i in range(len(rows))])
    return p, emb, rows, dp.double()


def _pooled(v, denom, suffix: str) -> dict:
    """The ratio Σ_x mean_d v[d, x] / Σ_x denom[x] and its normal 95 % interval over the draws d
    (the denominator is exact); NaN over no prompt."""
    if v.shape[1] == 0:
        return {f"ratio{suffix}": np.nan, f"lo{suffix}": np.nan, f"hi{suffix}": np.nan}
    total = v.sum(1) / denom.sum()
    half = 1.96 * total.std(ddof=1) / np.sqrt(len(total)) if len(total) > 1 else np.nan
    r = float(total.mean())
    return {f"ratio{suffix}": r, f"lo{suffix}": r - half, f"hi{suffix}": r + half}


def _trainer(task: Task, G: int, batch_size: int, out_dir):
    """A GRPOTrainer (TRL 1.16.0) on the task's model whose one reward reads the first token."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    right = {p: set(r) for p, r in zip(task.prompts, task.right)}

    def first_token(prompts, completions, completion_ids, **kw):
        return [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]

    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        use_vllm=False,
        report_to=[],
        max_completion_length=task.max_len,
        num_generations=G,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        beta=0.0,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    tr = GRPOTrainer(
        model=task.model,
        reward_funcs=[first_token],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": list(task.prompts)}),
        processing_class=task.tokenizer,
    )
    # set by Trainer's training loop; the loss divides by it
    tr.current_gradient_accumulation_steps = 1
    tr.model.train()
    return tr


#: Monte Carlo sizes of :func:`run`: (draws, copies) per variant of the expected update, and
#: (steps, copies) of each training.
SIZES = {"full": (100, 4), "fast": (8, 4)}
TRAIN_SIZES = {"full": (40, 16), "fast": (20, 8)}


def run(
    *,
    fast: bool = False,
    G: int = 8,
    n_prompts: int = 8,
    seed: int = 0,
    variants=VARIANTS,
    train: bool = True,
    log=None,
) -> dict:
    """Both variants, every (``scale_rewards``, ``loss_type``): :func:`measured_update` on
    :func:`build_task`; then (``train``) :func:`train_silent` of each of :data:`TRAININGS` from the
    last variant's initial model, a copy made before any trainer held it.  The reproduction's
    stage and ``gsd transformer-update``.

    ``fast``: 8 draws of 4 groups per prompt (32) instead of 100 of 4 (400), trainings of 20
    steps of 8 groups per prompt instead of 40 of 16; ``variants``: a subset of
    :data:`VARIANTS`; ``log``: a callable given one line per part.
    """
    import copy

    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        raise InputError(f"variants must be a non-empty subset of {VARIANTS}, got {variants!r}")
    require_trl("TRL's update on a tiny transformer")
    draws, copies = SIZES["fast" if fast else "full"]
    out = {"G": G, "n_prompts": n_prompts, "seed": seed, "draws": draws, "copies": copies, "variants": {}}
    for variant in variants:
        task = build_task(n_prompts, variant=variant, seed=seed)
        # copied before a trainer holds it: accelerate may rebind the model's forward in place
        initial = copy.deepcopy(task)
        res = measured_update(task, G=G, draws=draws, copies=copies, seed=seed)
        out["variants"][variant] = res
        if log:
            log(f"{variant}: {draws * copies} groups per prompt, mean length {res['mean_length']:.2f}")
    if train:
        steps, groups = TRAIN_SIZES["fast" if fast else "full"]
        out["training"] = {"variant": task.variant, "runs": {}}
        for method in TRAININGS:
            t = train_silent(copy.deepcopy(initial), method, G=G, copies=groups, steps=steps, seed=seed)
            out["training"]["runs"][method] = t
            if log:
                log(
                    f"training {method}: silent-fraction R² {t['r2_exact']:.3f} (exact p), "
                    f"{t['r2_pooled']:.3f} (pooled p)"
                )
    return out


def table(result: dict):
    """One row per (variant, scale_rewards, loss_type): the ratio, its interval, the reference."""
    import pandas as pd

    keys = (
        "scale_rewards",
        "loss_type",
        "reference",
        "ratio",
        "lo",
        "hi",
        "ratio_hard",
        "lo_hard",
        "hi_hard",
        "ratio_easy",
        "lo_easy",
        "hi_easy",
    )
    rows = [{"variant": v, **{k: r[k] for k in keys}} for v, res in result["variants"].items() for r in res["rows"]]
    return pd.DataFrame(rows)


def silent_figure(result: dict):
    """Per training step, TRL's ``frac_reward_zero_std`` against the mean of
    :math:`p_x^G + (1-p_x)^G` (exact p) and the pooled-p formula, one panel per method."""
    from ..plotstyle import COLORS, method_label, new_figure, styled

    @styled
    def make():
        runs = result["training"]["runs"]
        fig, axes = new_figure(len(runs), width=4.2 * len(runs), height=3.2, sharey=True)
        axes = np.atleast_1d(axes)
        for ax, (method, t) in zip(axes, runs.items()):
            st = np.arange(1, len(t["steps"]) + 1)
            ax.plot(
                st,
                [r["measured"] for r in t["steps"]],
                "o",
                ms=3,
                color=COLORS["data"],
                label="TRL frac_reward_zero_std",
            )
            ax.plot(
                st,
                [r["exact"] for r in t["steps"]],
                color=COLORS[method],
                label=f"mean p^G+(1−p)^G, exact p (R² {t['r2_exact']:.2f})",
            )
            ax.plot(
                st,
                [r["pooled"] for r in t["steps"]],
                ls="--",
                color=COLORS["law"],
                label=f"pooled p (R² {t['r2_pooled']:.2f})",
            )
            ax.set_xlabel("training step")
            ax.set_title(
                f"{method_label(method)}: scale_rewards={TRAININGS[method]['scale_rewards']!r}, "
                f"loss_type={TRAININGS[method]['loss_type']!r}",
                fontsize=8,
            )
            ax.legend(loc="lower right")
        axes[0].set_ylabel("silent fraction of the step's groups")
        fig.suptitle(
            f"Silent groups in TRL 1.16.0 training, G = {result['G']}, "
            f"{next(iter(runs.values()))['groups_per_step']} groups per step"
        )
        return fig

    return make()


def figure(result: dict):
    """Measured/closed-form ratio (95 % interval) per setting, one panel per variant."""
    from ..plotstyle import COLORS, new_figure, styled

    @styled
    def make():
        variants = list(result["variants"])
        fig, grid = new_figure(len(variants), 2, width=4.4 * len(variants), height=3.3)
        grid = np.asarray(grid).reshape(2, len(variants))
        axes, lower = grid[0], grid[1]
        colors = {"group": COLORS["grpo"], "batch": COLORS["accent"], "none": COLORS["dr_grpo"]}
        loss_colors = {
            "grpo": COLORS["grpo"],
            "bnpo": COLORS["dapo"],
            "dapo": COLORS["extra"],
            "dr_grpo": COLORS["dr_grpo"],
        }
        for ax, v in zip(lower, variants):
            res = result["variants"][v]
            p = np.array(res["p"])
            order = np.argsort(p)
            for r in res["rows"]:
                if r["scale_rewards"] != "group" or r["loss_type"] == "dapo":  # dapo: bnpo's, here
                    continue
                ax.errorbar(
                    p[order],
                    np.array(r["ratio_per_prompt"])[order],
                    yerr=np.array(r["half_width_per_prompt"])[order],
                    fmt="o-",
                    ms=3,
                    capsize=2,
                    lw=0.8,
                    color=loss_colors[r["loss_type"]],
                    label=f"loss_type={r['loss_type']!r}",
                )
            ax.axhline(1.0, color=COLORS["law"], lw=0.8, ls="--")
            ax.set_xlabel("exact solve rate p of the prompt")
            ax.set_title(f"{v}: per prompt, scale_rewards='group'")
        lower[0].set_ylabel("measured / closed form, per prompt")
        lower[0].legend(loc="upper right")
        for ax, v in zip(axes, variants):
            res = result["variants"][v]
            for j, s in enumerate(SCALE_REWARDS):
                rows = [r for r in res["rows"] if r["scale_rewards"] == s]
                x = np.array([LOSS_TYPES.index(r["loss_type"]) for r in rows]) + (j - 1) * 0.22
                y = np.array([r["ratio"] for r in rows])
                err = np.array([[r["ratio"] - r["lo"] for r in rows], [r["hi"] - r["ratio"] for r in rows]])
                ref = "Dr.GRPO" if _reference(s) == "dr_grpo" else "GRPO"
                ax.errorbar(
                    x, y, yerr=err, fmt="o", ms=4, capsize=2, color=colors[s], label=f"scale_rewards={s!r} (vs {ref})"
                )
            ax.axhline(1.0, color=COLORS["law"], lw=0.8, ls="--")
            ax.set_xticks(range(len(LOSS_TYPES)), [f"{lt!r}" for lt in LOSS_TYPES])
            ax.set_xlabel("TRL loss_type")
            ax.set_title(f"{v} lengths (mean {res['mean_length']:.2f} tokens): all prompts")
        axes[0].set_ylabel("measured / closed form along ∇p")
        axes[0].legend(loc="best")
        fig.suptitle(
            f"TRL 1.16.0's update on a tiny Qwen2,\nG = {result['G']}, "
            f"{result['draws'] * result['copies']} groups per prompt"
        )
        return fig

    return make()


#: The trainings of :func:`train_silent` in :func:`run`: TRL's settings per method.
TRAININGS = {
    "grpo": {"scale_rewards": "group", "loss_type": "grpo"},
    "dr_grpo": {"scale_rewards": "none", "loss_type": "dr_grpo"},
}
#: Every method :func:`train_silent` takes: :data:`TRAININGS` and gsd's skip sampler on GRPO's
#: settings (``GSDGRPOTrainer(skip_above=0.95, max_skips=4)``, the values of the docs' example).
METHODS = {**TRAININGS, "skip": TRAININGS["grpo"]}
SKIP = {"skip_above": 0.95, "max_skips": 4}


def trl_settings(
    task: Task,
    *,
    G: int,
    rows: int,
    lr: float,
    steps: int,
    seed: int,
    out_dir,
    method: str = "grpo",
    log_completions: bool = False,
) -> dict:
    """The ``GRPOConfig`` arguments of every training on a task: CPU, no vLLM, one generation per
    optimizer step of ``rows`` completions (``G`` per prompt), no KL term, plain sampling
    (temperature 1, no top-k/top-p), a constant learning rate, and ``method``'s loss
    (:data:`METHODS`)."""
    return dict(
        output_dir=out_dir,
        use_cpu=True,
        use_vllm=False,
        report_to=[],
        learning_rate=lr,
        max_completion_length=task.max_len,
        num_generations=G,
        per_device_train_batch_size=rows,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        beta=0.0,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_steps=steps,
        save_strategy="no",
        logging_steps=1,
        seed=seed,
        lr_scheduler_type="constant",
        log_completions=log_completions,
        num_completions_to_print=0,
        disable_tqdm=True,
        **METHODS[method],
    )


def train_silent(
    task: Task,
    method: str = "grpo",
    *,
    G: int = 8,
    copies: int = 16,
    steps: int = 40,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int = 1,
    completions_dir=None,
    prompts_per_step=None,
    trainer_class=None,
    trainer_kwargs=None,
    args_class=None,
    args_kwargs=None,
) -> dict:
    r"""Train the task's model with TRL's ``GRPOTrainer.train()``; per step, TRL's logged
    ``frac_reward_zero_std`` against the closed forms from the exact solve rates.

    Parameters
    ----------
    task : Task
        Its model is trained in place.
    method : {"grpo", "dr_grpo", "skip"}, optional
        :data:`METHODS`: GRPO (``scale_rewards="group"``, ``loss_type="grpo"``), Dr.GRPO
        (``"none"``, ``"dr_grpo"``), or GRPO's settings in gsd's ``GSDGRPOTrainer`` with its skip
        sampler (:data:`SKIP`): prompts predicted silent are replaced by others before generation,
        so every step generates as many completions as the other two.
    G, copies, steps, lr, seed, threads
        Group size; groups of every prompt per step (the batch is ``copies × prompts × G``
        completions, one generation per step); optimiser steps (AdamW, TRL's default) at ``lr``;
        TRL's seed; torch threads.
    completions_dir : path, optional
        TRL's ``output_dir`` with ``log_completions=True``: TRL writes its own
        ``completions/completions_{step:05d}.parquet`` there at every step, the log
        ``gsd diagnose`` reads (:func:`calibrate`).  Default: a temporary folder, no log.
    prompts_per_step : int, optional
        Groups per step from a dataset of the prompts once each (TRL's ``RepeatSampler`` walks
        through it in shuffled passes) instead of ``copies`` groups of every prompt.
    trainer_class, trainer_kwargs : optional
        A ``GRPOTrainer`` subclass to train with (default: TRL's own, or ``GSDGRPOTrainer`` for
        ``"skip"``) and keyword arguments it takes beyond ``GRPOTrainer``'s.
    args_class, args_kwargs : optional
        A ``GRPOConfig`` subclass (e.g. trl-cgrpo's ``CGRPOConfig``) and fields replacing or adding to
        the ones set here (``max_steps`` is then an upper bound a callback may stop before).

    Returns
    -------
    dict
        Per step: ``measured`` (TRL's ``frac_reward_zero_std``), ``silent_from_rewards`` (the
        same from the rewards the reward function returned: the truth recorded in the run),
        ``exact`` (mean over the step's groups of :math:`p_x^G + (1-p_x)^G`, p_x exact before
        the step's generation), ``pooled`` (:math:`\bar p^G + (1-\bar p)^G` of the mean solve
        rate), ``mean_p``, ``p`` (every prompt's exact p before the generation), ``groups``
        (the prompt index of each group) and ``k`` (its right answers); ``p_final`` (exact p after
        the last step); ``r2_exact``, ``r2_pooled`` (R² of each as a prediction of the measured
        fraction, no refit); for ``"skip"``, ``skipped`` (prompts skipped per step).  Per step also
        ``generations`` (rewards the reward function returned), ``step_time`` (TRL's own
        ``step_time`` metric, seconds) and ``wall`` (``time.perf_counter`` seconds from the start of
        training to the step's end, the exact-p forward passes included).
    """
    import contextlib
    import tempfile
    import time

    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ..silent import silent_rate
    from ..simulator.ledger import r_squared

    if method not in METHODS:
        raise InputError(f"method must be one of {tuple(METHODS)}, got {method!r}")
    for name, v, hi in (("G", G, 64), ("copies", copies, 64), ("steps", steps, 10**5)):
        if not (isinstance(v, (int, np.integer)) and (2 if name == "G" else 1) <= v <= hi):
            raise InputError(f"{name} must be an integer in [{2 if name == 'G' else 1}, {hi}], got {v!r}")
    if prompts_per_step is not None and not (
        isinstance(prompts_per_step, (int, np.integer)) and 1 <= prompts_per_step <= len(task.prompts)
    ):
        raise InputError(f"prompts_per_step must be an integer in [1, {len(task.prompts)}], got {prompts_per_step!r}")
    groups = len(task.prompts) * copies if prompts_per_step is None else int(prompts_per_step)
    right = {p: set(r) for p, r in zip(task.prompts, task.right)}
    index = {p: i for i, p in enumerate(task.prompts)}
    before, generations = [], []  # exact p at each step's start; (prompts, rewards) per generation

    def first_token(prompts, completions, completion_ids, **kw):
        r = [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]
        generations.append(([index[p] for p in prompts], r))
        return r

    ends = []  # perf_counter at each step's end

    class Exact(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            ends.append(time.perf_counter())

        def on_step_begin(self, args, state, control, **kw):
            before.append(task.solve_rates())

        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())

    folder = tempfile.TemporaryDirectory() if completions_dir is None else contextlib.nullcontext(str(completions_dir))
    with _torch_threads(threads), folder as out_dir:
        settings = trl_settings(
            task,
            G=G,
            rows=groups * G,
            lr=lr,
            steps=steps,
            seed=seed,
            out_dir=out_dir,
            method=method,
            log_completions=completions_dir is not None,
        )
        args = (args_class or GRPOConfig)(**{**settings, **dict(args_kwargs or {})})
        kind, extra = GRPOTrainer, {}
        if method == "skip":
            from ..live import GSDGRPOTrainer

            kind, extra = GSDGRPOTrainer, SKIP
        if trainer_class is not None:
            kind, extra = trainer_class, dict(trainer_kwargs or {})
        data = list(task.prompts) * (copies if prompts_per_step is None else 1)
        tr = kind(
            model=task.model,
            reward_funcs=[first_token],
            args=args,
            callbacks=[Exact()],
            train_dataset=Dataset.from_dict({"prompt": data}),
            processing_class=task.tokenizer,
            **extra,
        )
        # The per-step lines (the result has them): PrinterCallback's; with disable_tqdm no progress
        # callback is added, in a notebook neither the NotebookProgressCallback's table of losses.
        for cb in (PrinterCallback, ProgressCallback):
            tr.remove_callback(cb)
        tr.train()
        if completions_dir is not None:
            tr.save_state()  # trainer_state.json beside completions/: TRL's own frac_reward_zero_std per step
    task.model.eval()
    measured = [h["frac_reward_zero_std"] for h in tr.state.log_history if "frac_reward_zero_std" in h]
    step_time = [h["step_time"] for h in tr.state.log_history if "step_time" in h]
    rows = []
    for p, (who, r), m, st, end in zip(before, generations, measured, step_time, ends[1:]):
        grp = np.asarray(who).reshape(-1, G)[:, 0]
        r = np.asarray(r).reshape(-1, G)
        rows.append(
            {
                "generations": int(r.size),
                "step_time": float(st),
                "wall": end - ends[0],
                "measured": m,
                "silent_from_rewards": float((r.min(1) == r.max(1)).mean()),
                "exact": float(np.mean(silent_rate(p[grp], G))),
                "pooled": float(silent_rate(p[grp].mean(), G)),
                "mean_p": float(p.mean()),
                "p": p.tolist(),
                "groups": grp.tolist(),
                "k": r.sum(1).astype(int).tolist(),
            }
        )
    obs = [r["measured"] for r in rows]
    out = {
        "method": method,
        "G": G,
        "groups_per_step": groups,
        "lr": lr,
        "steps": rows,
        "p_final": task.solve_rates().tolist(),
        "r2_exact": r_squared(obs, [r["exact"] for r in rows]),
        "r2_pooled": r_squared(obs, [r["pooled"] for r in rows]),
        "trl_reward": [h["reward"] for h in tr.state.log_history if "reward" in h],
    }
    if getattr(tr, "gsd_tracker", None) is not None:
        out["skipped"] = [int(m.get("skipped", 0)) for m in tr.gsd_tracker.metrics]
    return out


def calibrate(trained: dict, completions_dir, *, level: float = 0.9, half_life=None) -> dict:
    """``gsd diagnose`` (:func:`gsd.diagnose.diagnose`, its defaults: empirical-Bayes prior, no
    half-life unless ``half_life`` is given) on the completions TRL wrote in :func:`train_silent` (``completions_dir``), against
    the exact p the run recorded.

    Returns
    -------
    dict
        Over the groups of steps ≥ 2 whose prompt had rollouts before: ``mae`` (mean absolute
        difference of the posterior mean before the step and the exact p at the step), ``coverage`` (share of exact p inside the
        posterior's equal-tailed ``level`` interval), ``mae_run_mean`` (the same posterior mean
        against the prompt's exact p averaged over the steps before: what pooled counts estimate);
        ``groups`` (how many); per step ``silent_measured``, ``silent_pred`` (diagnose's) and
        ``silent_exact`` (mean of p^G + (1−p)^G at the exact p) with ``r2_pred`` and ``r2_exact``
        (each as a prediction of the measured fraction, no refit); ``k_matches`` (at every step
        the groups' k diagnose read, as a multiset, are those the reward function returned).
    """
    from ..diagnose import diagnose
    from ..posterior import BetaPosterior
    from ..silent import silent_rate
    from ..simulator.ledger import r_squared

    dx = diagnose(completions_dir, half_life=half_life)
    g = dx.groups
    labels = dx.prompts["prompt"].to_numpy()
    x = np.array([int(str(lab)[1:]) for lab in labels])[g["prompt"].to_numpy()]
    step = g["step"].to_numpy()
    P = np.array([s["p"] for s in trained["steps"]])  # steps × prompts, exact before each generation
    exact = P[step - 1, x]
    keep = (step >= 2) & (g["n_before"].to_numpy() > 0)
    lo, hi = BetaPosterior(g["a"].to_numpy(), g["b"].to_numpy(), (np.nan, np.nan)).interval(level)
    mean_before = (np.cumsum(P, 0) - P) / np.maximum(np.arange(len(P)), 1)[:, None]
    err = np.abs(g["p_before"].to_numpy() - exact)
    # per step, the multiset of k the reward function returned against the one diagnose read
    truth_k = np.concatenate([np.sort(s["k"]) for s in trained["steps"]])
    got_k = np.concatenate([np.sort(g["k"].to_numpy()[step == t]) for t in range(1, len(P) + 1)])
    st = dx.steps
    G = trained["G"]
    silent_exact = [float(np.mean(silent_rate(np.asarray(s["p"])[s["groups"]], G))) for s in trained["steps"]]
    measured = st["silent_frac"].tolist()
    return {
        "level": level,
        "groups": int(keep.sum()),
        "mae": float(err[keep].mean()),
        "coverage": float(((lo <= exact) & (exact <= hi))[keep].mean()),
        "mae_run_mean": float(np.abs(g["p_before"].to_numpy() - mean_before[step - 1, x])[keep].mean()),
        "k_matches": bool(truth_k.size == got_k.size and np.array_equal(truth_k, got_k)),
        "silent_measured": measured,
        "silent_pred": st["silent_pred"].tolist(),
        "silent_exact": silent_exact,
        "r2_pred": r_squared(measured, st["silent_pred"].tolist()),
        "r2_exact": r_squared(measured, silent_exact),
        "half_life": dx.summary["half_life"],
    }


def sigma_update(
    task: Task, *, G: int = 8, draws: int = 50, loss_types=("dr_grpo", "grpo"), seed: int = 0, threads: int = 1
) -> dict:
    r"""Per group, TRL's own update (``scale_rewards="group"``) projected on :math:`\nabla p_x`
    against the group's σ-term :math:`\hat\sigma_0^2/(\hat\sigma_1+10^{-4})` (σ̂ of its 0/1
    rewards, ddof 0 and TRL's ddof 1): the identity :math:`\mathbb{E}[g\mid k] =
    \hat\sigma_0^2/(\hat\sigma_1+\epsilon)\,\nabla p/(p(1-p))` for a sequence-level update.

    One group of every prompt per call of ``_generate_and_score_completions`` (``draws`` calls), so
    each prompt's input-embedding row (:meth:`Task.prompt_rows`) carries that one group's
    gradient.  y = (projection, rescaled as in :func:`measured_update`) · p(1−p)/‖∇p‖².

    Returns
    -------
    dict
        Per loss type: ``slope`` (least squares through 0 of y on the σ-term over every group, 1
        for the identity) with ``slope_lo``/``slope_hi`` (normal 95 %), ``r2_k`` (R² of the line
        slope·x as a prediction of the mean y per k, each k weighted by its groups),
        ``r2_cells`` (the same over (prompt, k) cells of ≥ 5 groups), ``by_k`` (mean y and groups
        per k), ``slope_hard``/``slope_easy`` (prompts with p < 1/2, ≥ 1/2).
    """
    import tempfile

    import torch

    bad = [lt for lt in loss_types if lt not in LOSS_TYPES]
    if bad:
        raise InputError(f"unknown loss_type {bad[0]!r}: use {LOSS_TYPES}")
    if not (isinstance(draws, (int, np.integer)) and 2 <= draws <= 10**6):
        raise InputError(f"draws must be an integer in [2, 1000000], got {draws!r}")
    with _torch_threads(threads):
        p, emb, rows, dp = _prompt_gradients(task)
        P = len(rows)
        batch = [{"prompt": q} for q in task.prompts for _ in range(G)]
        B = len(batch)
        proj = {lt: np.empty((draws, P)) for lt in loss_types}
        k = np.empty((draws, P), np.int64)
        inv_len = 0.0
        right = task.right_mask(task.model.config.vocab_size)
        with tempfile.TemporaryDirectory() as tmp:
            tr = _trainer(task, G, B, tmp)
            tr.scale_rewards = "group"
            for d in range(draws):
                torch.manual_seed(seed * 1_000_003 + d)
                inputs = tr._generate_and_score_completions(batch)
                # the right answers of each group, from the completions themselves (the reward's rule)
                first = inputs["completion_ids"][:, 0].numpy().reshape(P, G)
                k[d] = right[np.arange(P)[:, None], first].sum(1)
                inv_len += float((1.0 / inputs["completion_mask"].sum(-1).double().clamp(min=1.0)).mean())
                for lt in loss_types:
                    tr.loss_type = lt
                    tr.model.zero_grad(set_to_none=True)
                    tr._compute_loss(tr.model, inputs).backward()
                    proj[lt][d] = (-emb.grad[rows].double() * (B / G) * dp).sum(-1).numpy()
        task.model.zero_grad(set_to_none=True)
        task.model.eval()
    scale = {"grpo": draws / inv_len, "dr_grpo": task.max_len}
    var = k * (G - k) / G**2
    xs = var / (np.sqrt(k * (G - k) / (G * (G - TRL_DDOF))) + TRL_EPS)
    norm = p * (1 - p) / (dp * dp).sum(-1).numpy()
    out = {"G": G, "draws": draws, "p": p.tolist(), "groups": int(k.size)}
    for lt in loss_types:
        y = proj[lt] * scale.get(lt, np.nan) * norm
        res = {}
        for name, keep in (("", np.ones(P, bool)), ("_hard", p < 0.5), ("_easy", p >= 0.5)):
            xx, yy = xs[:, keep].ravel(), y[:, keep].ravel()
            b = float((xx * yy).sum() / (xx * xx).sum())
            se = float(np.sqrt(((yy - b * xx) ** 2).sum() / (xx.size - 1) / (xx * xx).sum()))
            res[f"slope{name}"], res[f"slope{name}_lo"], res[f"slope{name}_hi"] = b, b - 1.96 * se, b + 1.96 * se
        by_k = []
        for j in range(G + 1):
            m = k == j
            by_k.append(
                {
                    "k": j,
                    "x": float(xs[m][0]) if m.any() else np.nan,
                    "y": float(y[m].mean()) if m.any() else np.nan,
                    "n": int(m.sum()),
                }
            )
        cells = [
            (xs[:, i][k[:, i] == j][0], y[:, i][k[:, i] == j].mean(), (k[:, i] == j).sum())
            for i in range(P)
            for j in range(G + 1)
            if (k[:, i] == j).sum() >= 5
        ]
        res["r2_k"] = _weighted_r2([(c["x"], c["y"], c["n"]) for c in by_k if c["n"] > 0], res["slope"])
        res["r2_cells"] = _weighted_r2(cells, res["slope"])
        res["by_k"] = by_k
        out[lt] = res
    return out


def _weighted_r2(cells, slope) -> float:
    """R² of ``slope·x`` as a prediction of the cells' mean y, each cell weighted by its count (NaN
    without two cells)."""
    if len(cells) < 2:
        return float("nan")
    x, y, n = (np.array([c[i] for c in cells], float) for i in range(3))
    ybar = (n * y).sum() / n.sum()
    return float(1 - (n * (y - slope * x) ** 2).sum() / (n * (y - ybar) ** 2).sum())


#: Sizes of :func:`run_training`: (prompts, steps, groups of each prompt per step, seeds, σ draws).
TRAIN_RUN_SIZES = {"full": (32, 30, 4, 3, 100), "fast": (16, 8, 2, 1, 10)}


def run_training(*, fast: bool = False, G: int = 8, lr: float = 1e-3, log=None, out=None) -> dict:
    """The three methods of :data:`METHODS` trained by TRL from one initial model per seed (its
    own pretraining and TRL's seed), equal generations per step; each writes TRL's completions
    log, which :func:`calibrate` diagnoses; then :func:`sigma_update` on seed 0's initial model.

    ``out``: a new folder that keeps each training's TRL logs, ``out/seed{seed}/{method}/`` (TRL's
    ``output_dir``: ``completions/`` and ``trainer_state.json``), for ``gsd diagnose``; by default
    they go to a temporary folder.

    Returns ``runs`` (per seed, per method: :func:`train_silent`'s result with ``calibration``),
    ``hardest`` (per seed, the prompts of the lowest quarter of initial exact p), ``quartile``
    (per method and seed, the mean exact p of those prompts per step, the final after the last
    step), and ``sigma``.
    """
    import contextlib
    import copy
    import tempfile
    from pathlib import Path

    require_trl("TRL's trainings of a tiny transformer")
    n_prompts, steps, copies, seeds, draws = TRAIN_RUN_SIZES["fast" if fast else "full"]
    if out is not None:
        from ..atomic import make_folder

        keep = Path(out)
        if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            raise InputError(
                f"out {str(out)!r} exists and is not an empty folder: give a new one (TRL's logs of "
                "another run there would be mixed with these)"
            )
        make_folder(keep)
    out_folder, out = (
        out,
        {
            "G": G,
            "lr": lr,
            "n_prompts": n_prompts,
            "steps": steps,
            "copies": copies,
            "runs": {},
            "hardest": {},
            "quartile": {m: {} for m in METHODS},
        },
    )
    for seed in range(seeds):
        task = build_task(n_prompts, seed=seed)
        initial = copy.deepcopy(task)
        p0 = task.solve_rates()
        hard = np.argsort(p0, kind="stable")[: n_prompts // 4]
        out["hardest"][seed] = hard.tolist()
        out["runs"][seed] = {}
        for method in METHODS:
            where = (
                tempfile.TemporaryDirectory()
                if out_folder is None
                else contextlib.nullcontext(str(Path(out_folder) / f"seed{seed}" / method))
            )
            with where as tmp:
                t = train_silent(
                    copy.deepcopy(initial),
                    method,
                    G=G,
                    copies=copies,
                    steps=steps,
                    lr=lr,
                    seed=seed,
                    completions_dir=tmp,
                )
                t["calibration"] = calibrate(t, tmp)
                t["calibration_auto"] = calibrate(t, tmp, half_life="auto")  # gsd diagnose --half-life auto
            out["runs"][seed][method] = t
            traj = [float(np.mean(np.asarray(s["p"])[hard])) for s in t["steps"]] + [
                float(np.mean(np.asarray(t["p_final"])[hard]))
            ]
            out["quartile"][method][seed] = traj
            if log:
                c = t["calibration"]
                log(
                    f"seed {seed} {method}: hardest quarter {traj[0]:.3f} → {traj[-1]:.3f}; diagnose MAE "
                    f"{c['mae']:.3f}, coverage {c['coverage']:.2f}, silent R² {c['r2_pred']:.2f}"
                )
        if seed == 0:
            sigma_task = initial
    out["sigma"] = sigma_update(sigma_task, G=G, draws=draws)
    return out


def train_figure(result: dict):
    """Three panels: the hardest quarter's mean exact p per step per method; diagnose's predicted
    silent fraction against TRL's and the exact-p closed form (seed 0, GRPO); the mean projected
    update per k against the σ-term, sequence- and token-level."""
    from ..plotstyle import COLORS, method_label, new_figure, styled

    @styled
    def make():
        fig, axes = new_figure(3, width=13.0, height=3.6)
        axes = np.atleast_1d(axes)
        col = {"grpo": COLORS["grpo"], "dr_grpo": COLORS["dr_grpo"], "skip": COLORS["dapo"]}
        for m, per_seed in result["quartile"].items():
            a = np.array(list(per_seed.values()))
            x = np.arange(a.shape[1])
            axes[0].plot(x, a.mean(0), color=col[m], label="gsd skip sampler" if m == "skip" else method_label(m))
            if len(a) > 1:
                axes[0].fill_between(x, a.min(0), a.max(0), color=col[m], alpha=0.15)
        axes[0].set_xlabel("training step")
        axes[0].set_ylabel("mean exact p, hardest quarter")
        axes[0].legend(loc="upper left")
        c = result["runs"][0]["grpo"]["calibration"]
        st = np.arange(1, len(c["silent_measured"]) + 1)
        axes[1].plot(st, c["silent_measured"], "o", ms=3, color=COLORS["data"], label="TRL's groups (measured)")
        axes[1].plot(st, c["silent_pred"], color=COLORS["accent"], label=f"gsd diagnose (R² {c['r2_pred']:.2f})")
        axes[1].plot(st, c["silent_exact"], ls="--", color=COLORS["law"], label=f"exact p (R² {c['r2_exact']:.2f})")
        axes[1].set_xlabel("training step")
        axes[1].set_ylabel("silent fraction (GRPO, seed 0)")
        axes[1].legend(loc="best")
        s = result["sigma"]
        for lt, color in (("dr_grpo", COLORS["dr_grpo"]), ("grpo", COLORS["grpo"])):
            bk = [b for b in s[lt]["by_k"] if b["n"] > 0]
            axes[2].plot(
                [b["x"] for b in bk],
                [b["y"] for b in bk],
                "o",
                ms=4,
                color=color,
                label=f"loss_type={lt!r}: slope {s[lt]['slope']:.2f}",
            )
        xmax = max(b["x"] for b in s["dr_grpo"]["by_k"])
        axes[2].plot([0, xmax], [0, xmax], ls="--", color=COLORS["law"], lw=0.8, label="identity")
        axes[2].set_xlabel("σ̂₀²/(σ̂₁ + 1e-4) of the group")
        axes[2].set_ylabel("update along ∇p · p(1−p)/‖∇p‖², mean per k")
        axes[2].legend(loc="upper left")
        fig.suptitle(f"TRL 1.16.0 training on a tiny Qwen2, {result['n_prompts']} prompts, G = {result['G']}")
        return fig

    return make()


def training_table(result: dict):
    """One row per (seed, method) of :func:`run_training`: the hardest quarter's mean exact p at
    the start and after the last step, and diagnose's calibration (its defaults, and with
    ``half_life="auto"``: the ``*_auto`` columns and the half-life it chose)."""
    import pandas as pd

    rows = []
    for seed, runs in result["runs"].items():
        for method, t in runs.items():
            c, q = t["calibration"], result["quartile"][method][seed]
            rows.append(
                {
                    "seed": seed,
                    "method": method,
                    "hardest_p0": q[0],
                    "hardest_final": q[-1],
                    "mae": c["mae"],
                    "mae_run_mean": c["mae_run_mean"],
                    "coverage": c["coverage"],
                    "silent_r2_diagnose": c["r2_pred"],
                    "silent_r2_exact": c["r2_exact"],
                    **(
                        {f"{k}_auto": t["calibration_auto"][k] for k in ("half_life", "mae", "coverage", "r2_pred")}
                        if "calibration_auto" in t
                        else {}
                    ),
                    "skipped": sum(t.get("skipped", [0])),
                }
            )
    return pd.DataFrame(rows)


_import_stack = import_stack  # the former name
