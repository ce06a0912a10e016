"""The closed forms inside a real trainer: a tiny transformer whose solve rates are known exactly.

A tiny causal LM (Qwen2 from a config, a word-level tokenizer, both built in code) answers
prompts ``q0 … q15``.  The reward is decided by the completion's first token: right iff it is in
the prompt's set of right tokens, so the solve rate is a sum of the model's own probabilities,

.. math::  p_x = \\sum_{t \\in R(x)} \\pi_\\theta(t \\mid x),

exact from one forward pass, and :math:`\\nabla p_x` by autograd.  Completions go on after the
first token (1 to ``max_len`` tokens), so TRL's token-level loss aggregation sees lengths; in
the ``"correlated"`` variant a right first token is mostly followed by EOS (right answers short),
in ``"independent"`` the length does not depend on the first token.

:func:`expected_update` averages the gradient of TRL 1.16.0's own ``GRPOTrainer._compute_loss``
on inputs built by its own ``_generate_and_score_completions`` over many sampled groups and
compares it with the closed form (:ref:`theory-any-policy`).  torch, transformers and trl are
imported inside the functions: ``import gsd`` stays light.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._errors import InputError

#: Vocabulary: specials, answer words a0…a19 (a0–a9 "short", a10–a19 "long"), filler words
#: f0…f19 that continue an answer, prompt words q0…q15.
WORDS = (["<pad>", "<eos>", "<unk>"] + [f"a{i}" for i in range(20)] + [f"f{i}" for i in range(20)]
         + [f"q{i}" for i in range(16)])
_EOS, _A0, _F0, _Q0 = 1, 3, 23, 43
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}{% endif %}")
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
            mask = torch.zeros_like(probs)
            for i, r in enumerate(self.right):
                mask[i, list(r)] = 1.0
            p = (probs * mask).sum(-1)
        return p if with_grad else p.double().numpy()

    def prompt_rows(self):
        """Per prompt, the embedding row of its own token ``q_x``: the parameters only that
        prompt's rows reach through the input (a completion that samples ``q_x`` reaches it too,
        and adds only noise: its expected contribution is the prompt's own ∇p there, which is 0)."""
        return [self.tokenizer(p)["input_ids"][-1] for p in self.prompts]


def tokenizer():
    """The word-level tokenizer of :data:`WORDS` (built in code, nothing downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    hf.chat_template = CHAT_TEMPLATE
    return hf


def _teacher(rng, n_prompts, variant, max_len):
    """Targets of the pretraining: solve rates spread over (0.05, 0.95), right sets of 1–4 short
    answer words, and the law of the continuation."""
    target = np.linspace(0.05, 0.95, n_prompts)
    rng.shuffle(target)
    right = [tuple(int(t) for t in _A0 + rng.choice(10, size=int(rng.integers(1, 5)), replace=False))
             for _ in range(n_prompts)]
    return target, right


def _sample_sequences(rng, target, right, variant, max_len, n):
    """``n`` sequences per prompt from the teacher: prompt token, first answer word, fillers, EOS.

    Returns the token ids (pad 0 after the end) and the next-token labels (-100 where there is none)."""
    P = len(target)
    x = np.repeat(np.arange(P), n)
    is_right = rng.random(P * n) < np.repeat(target, n)
    right_mask = np.zeros((P, 20), bool)
    for i, r in enumerate(right):
        right_mask[i, np.asarray(r) - _A0] = True
    # a uniform right (or wrong) answer word: the arg-max of random keys over the allowed words
    keys = rng.random((P * n, 20)) + np.where(right_mask[x] == is_right[:, None], 1.0, 0.0)
    first = _A0 + keys.argmax(1)
    short = first < _A0 + 10
    # EOS after each token with this probability: the length law of the continuation
    stop = np.where(short, 0.7, 0.12) if variant == "correlated" else np.full(P * n, 0.35)
    fillers = np.minimum(rng.geometric(stop) - 1, max_len - 1)  # words after the answer word
    width = max_len + 2
    col = np.arange(width)
    ids = np.where(col < fillers[:, None] + 2, _F0 + rng.integers(0, 20, (P * n, width)), 0)
    ids[:, 0], ids[:, 1] = _Q0 + x, first
    ends = fillers + 1 < max_len  # room for EOS within max_len completion tokens
    ids[np.flatnonzero(ends), fillers[ends] + 2] = _EOS
    length = fillers + 2 + ends  # tokens of the sequence, prompt included
    labels = np.where((col >= 1) & (col < length[:, None]), ids, -100)
    return ids, labels


def build_task(n_prompts: int = 8, *, variant: str = "correlated", max_len: int = 6, seed: int = 0,
               pretrain_steps: int = 150) -> Task:
    """A tiny Qwen2 pretrained in code on a teacher whose solve rates spread over (0.05, 0.95).

    Parameters
    ----------
    n_prompts : int, optional
        Prompts ``q0 … q{n-1}``, 1 to 16 (default 8).
    variant : {"correlated", "independent"}, optional
        ``"correlated"`` (default): after a short answer word (every right one, half the wrong
        ones) the teacher stops with probability 0.7 per token, after a long one 0.12 — right
        answers are short; ``"independent"``: 0.35 after every word.
    max_len : int, optional
        TRL's ``max_completion_length`` (default 6), 2 to 32.
    seed : int, optional
        Seed of the teacher, the initial weights and the pretraining (default 0).
    pretrain_steps : int, optional
        Adam steps of the next-token pretraining on the teacher's sequences (default 150).

    Returns
    -------
    Task
        The model is what it is after pretraining: the solve rates are the model's own
        (:meth:`Task.solve_rates`), near, not equal to, the teacher's.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if not (isinstance(n_prompts, (int, np.integer)) and 1 <= n_prompts <= 16):
        raise InputError(f"n_prompts must be an integer in [1, 16], got {n_prompts!r}")
    if variant not in VARIANTS:
        raise InputError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not (isinstance(max_len, (int, np.integer)) and 2 <= max_len <= 32):
        raise InputError(f"max_len must be an integer in [2, 32], got {max_len!r}")
    rng = np.random.default_rng(seed)
    target, right = _teacher(rng, n_prompts, variant, max_len)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(WORDS) + 1, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         pad_token_id=0, eos_token_id=_EOS, bos_token_id=None,
                                         tie_word_embeddings=False))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(pretrain_steps):
        ids, labels = _sample_sequences(rng, target, right, variant, max_len, 16)
        # labels are the next tokens already: the model's own shift would drop one
        logits = model(input_ids=torch.from_numpy(ids[:, :-1])).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 torch.from_numpy(labels[:, 1:]).reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return Task(model=model, tokenizer=tokenizer(), prompts=[f"q{x}" for x in range(n_prompts)],
                right=right, variant=variant, max_len=max_len)


def closed_form_factor(p, G, method: str):
    """c(p, G) with :math:`\\mathbb{E}[g] = c\\,\\nabla p` for a sequence-level group-mean update.

    ``"grpo"``: TRL's std (ddof 1, eps 1e-4), :math:`\\mathbb{E}[\\sigma^2/(\\sigma_1+\\epsilon)]/(p(1-p))`;
    ``"grpo_paper"``: the population std, eps 0, :math:`\\varphi(G,p)/\\sqrt{p(1-p)}`
    (so that :math:`c\\nabla p = \\varphi\\,\\nabla(2\\arcsin\\sqrt p)`); ``"dr_grpo"``: :math:`1 - 1/G`.
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


def expected_update(task: Task, *, G: int = 8, draws: int = 100, copies: int = 4, scale_rewards=SCALE_REWARDS,
                    loss_types=LOSS_TYPES, seed: int = 0, threads: int = 1) -> dict:
    """Monte Carlo of the expected per-prompt update of TRL's own loss against the closed form.

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
        ``p`` (per prompt, exact), ``mean_length`` (completion tokens), and ``rows``: per
        (``scale_rewards``, ``loss_type``) ``ratio`` with ``lo``/``hi`` (Monte Carlo 95 %,
        normal over the draws), per prompt ``ratio_per_prompt``, and ``reference``.

    Notes
    -----
    Per call every prompt gets ``copies`` groups; the gradient of TRL's ``_compute_loss`` is
    taken with respect to the input embedding row of each prompt's own token, which only that
    prompt's rows reach, and projected on :math:`\nabla p_x` there.  The update is minus the
    gradient rescaled to a group mean of sequence scores: ``× B Λ / G`` per group, with B the rows
    of the batch and Λ TRL's per-token normalizer's length — ``max_completion_length`` for
    ``dr_grpo`` (a constant: the sequence-level sum, exactly), the mean completion length of the
    run for ``grpo``, ``bnpo`` and ``dapo`` (per-sequence 1/L, per-batch 1/ΣL), so that a ratio
    other than 1 is the length bias.  The ratio is
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
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        p = task.solve_rates()
        pt = task.solve_rates(with_grad=True)
        emb = task.model.get_input_embeddings().weight
        rows = task.prompt_rows()
        P = len(rows)
        dp = torch.stack([torch.autograd.grad(pt[i], emb, retain_graph=True)[0][rows[i]] for i in range(P)]).double()
        prompts = [q for _ in range(copies) for q in task.prompts]
        batch = [{"prompt": q} for q in prompts for _ in range(G)]
        B = len(batch)
        proj = {(s, lt): np.empty((draws, P)) for s in scale_rewards for lt in loss_types}
        total_len = 0.0
        with tempfile.TemporaryDirectory() as tmp:
            tr = _trainer(task, G, B, tmp)
            for d in range(draws):
                for s in scale_rewards:
                    tr.scale_rewards = s
                    torch.manual_seed(seed * 1_000_003 + d)
                    inputs = tr._generate_and_score_completions(batch)
                    if s == scale_rewards[0]:
                        total_len += float(inputs["completion_mask"].sum())
                    for lt in loss_types:
                        tr.loss_type = lt
                        tr.model.zero_grad(set_to_none=True)
                        tr._compute_loss(tr.model, inputs).backward()
                        g = -emb.grad[rows].double() * (B / G) / copies  # mean over a prompt's groups
                        proj[(s, lt)][d] = (g * dp).sum(-1).numpy()
        task.model.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(old_threads)
    mean_len = total_len / (draws * B)
    dp2 = (dp * dp).sum(-1).numpy()
    out = {"p": p.tolist(), "G": G, "groups_per_prompt": draws * copies, "variant": task.variant,
           "max_completion_length": task.max_len, "mean_length": mean_len, "rows": []}
    for (s, lt), v in proj.items():
        ref = _reference(s)
        v = v * (task.max_len if lt == "dr_grpo" else mean_len)
        denom = closed_form_factor(p, G, ref) * dp2
        total = v.sum(1) / denom.sum()
        half = 1.96 * total.std(ddof=1) / np.sqrt(draws) if draws > 1 else np.nan
        r = float(total.mean())
        out["rows"].append({"scale_rewards": s, "loss_type": lt, "reference": ref, "ratio": r,
                            "lo": r - half, "hi": r + half,
                            "ratio_per_prompt": (v.mean(0) / denom).tolist()})
    return out


def _trainer(task: Task, G: int, batch_size: int, out_dir):
    """A GRPOTrainer (TRL 1.16.0) on the task's model whose one reward reads the first token."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    right = {p: set(r) for p, r in zip(task.prompts, task.right)}

    def first_token(prompts, completions, completion_ids, **kw):
        return [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]

    args = GRPOConfig(output_dir=str(out_dir), use_cpu=True, use_vllm=False, report_to=[],
                      max_completion_length=task.max_len, num_generations=G, per_device_train_batch_size=batch_size,
                      gradient_accumulation_steps=1, steps_per_generation=1, beta=0.0, temperature=1.0, top_k=0,
                      top_p=1.0, save_strategy="no", logging_steps=1, seed=0)
    tr = GRPOTrainer(model=task.model, reward_funcs=[first_token], args=args,
                     train_dataset=Dataset.from_dict({"prompt": list(task.prompts)}), processing_class=task.tokenizer)
    # set by Trainer's training loop; the loss divides by it
    tr.current_gradient_accumulation_steps = 1
    tr.model.train()
    return tr
