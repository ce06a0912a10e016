r"""The task: prompts whose solve rates are exact, a tiny Qwen2 pretrained in code on them, and
its word-level tokenizer.

The reward is decided by the completion's first token: right iff it is in the prompt's set of
right tokens, so the solve rate is a sum of the model's own probabilities,

.. math::  p_x = \sum_{t \in R(x)} \pi_\theta(t \mid x),

exact from one forward pass (:meth:`Task.solve_rates`), and :math:`\nabla p_x` by autograd.
torch, transformers and trl are imported inside the functions: ``import gsd`` stays light.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from .teacher import EOS, N_U, sample_sequences, shared_teacher, teacher

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


def words(n_prompts: int, structure: str = "own"):
    """The vocabulary of a task of ``n_prompts`` prompts: :data:`~.task.WORDS`, with prompt words up to
    ``q31`` when ``n_prompts`` > 16 and up to ``q{n-1}`` above 32 (the vocabulary's size is part of
    the initial weights, so the tasks of up to 32 prompts stay as they were); with ``structure``
    ``"shared"`` the feature words ``u0…u15`` and ``v0…v{n/16 - 1}`` instead of prompt words."""
    if structure == "shared":
        return WORDS + [f"u{i}" for i in range(N_U)] + [f"v{j}" for j in range(-(-n_prompts // N_U))]
    if n_prompts <= 16:
        return WORDS
    return WORDS + [f"q{i}" for i in range(16, max(32, n_prompts))]


VARIANTS = ("independent", "correlated")
STRUCTURES = ("own", "shared")


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
def torch_threads(n: int):
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
        words ``u{i} v{j}`` whose right answer is a rule of u_i
        (:func:`~gsd.reproduce.transformer.teacher.shared_teacher`), so learning one prompt moves the
        others that share its features or its answer word (``n_prompts`` a multiple of 16;
        ``p_range`` does not apply: the rates are σ(α_i + β_j)).
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
        target, right, prompts = shared_teacher(rng, n_prompts)
        index = {w: i for i, w in enumerate(vocab)}
        prompt_ids = np.array([[index[w] for w in q.split()] for q in prompts])
    else:
        target, right = teacher(rng, n_prompts, (lo, hi))
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
            eos_token_id=EOS,
            bos_token_id=None,
            tie_word_embeddings=False,
        )
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch_threads(1):
        for _ in range(pretrain_steps):
            ids, labels = sample_sequences(rng, target, right, variant, max_len, 16, prompt_ids)
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
