"""gsd inside a TRL GRPOTrainer run: a tiny model built in code, trained on the CPU in under a minute.

    pip install 'grpo-gsd[trl]'
    python trl_live.py [OUTPUT_FOLDER]

Nothing is downloaded: the model is a one-layer Qwen2 with random weights and the tokenizer a
word-level one.  The reward stands in for a verifier: each question is answered right with its
own solve rate, and 4 of the 16 questions are never right, 4 always.
"""

import random
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig

from gsd.live import GroupTracker, GSDGRPOTrainer

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())

# A tiny causal LM and a word-level tokenizer, built in code.
words = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(40)] + [f"q{i}" for i in range(16)]
vocab = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
vocab.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=vocab, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
model = Qwen2ForCausalLM(
    Qwen2Config(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
)

# 16 questions: 4 never right, 4 always right, 8 in between.
solve_rate = [0.0] * 4 + [1.0] * 4 + [0.3, 0.5, 0.7, 0.5] * 2
dataset = Dataset.from_dict({"prompt": [f"q{i} w1 w2" for i in range(16)], "solve_rate": solve_rate})
rng = random.Random(0)


def correct(prompts, completions, solve_rate, **kwargs):
    """1 for a right answer, 0 for a wrong one (TRL passes the dataset's columns)."""
    return [float(rng.random() < p) for p in solve_rate]


# The three lines gsd adds: a tracker, the trainer subclass, and (optionally) skipping.
tracker = GroupTracker(num_generations=4)
trainer = GSDGRPOTrainer(
    model=model,
    processing_class=tokenizer,
    reward_funcs=[correct],
    train_dataset=dataset,
    args=GRPOConfig(
        output_dir=str(out / "trl"),
        use_cpu=True,
        max_completion_length=3,
        num_generations=4,
        per_device_train_batch_size=64,
        max_steps=8,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
    ),
    gsd_tracker=tracker,
    skip_above=0.9,
    max_skips=4,
)
trainer.train()

print("step  silent  predicted  effective  fidelity  recommended G  skipped")
for e in trainer.state.log_history:
    if "gsd/silent_frac" in e:
        print(
            f"{e['step']:4d}  {e['gsd/silent_frac']:6.3f}  {e['gsd/silent_pred']:9.3f}  "
            f"{e['gsd/effective_ratio']:9.3f}  {e['gsd/fidelity']:8.3f}  "
            f"{e['gsd/recommended_group_size']:13.1f}  {e['gsd/skipped']:7.0f}"
        )
print("skipping:", trainer.gsd_skip_counts)

# The whole run, as `gsd diagnose` reports it, and a table it reads back with no flags.
dx = tracker.diagnosis()
print(
    f"run: {dx.summary['groups']} groups, silent fraction {dx.summary['silent_frac']:.3f}, "
    f"wasted rollouts {dx.summary['wasted_rollouts']} of {dx.summary['rollouts']}"
)
path = tracker.save(out / "run.parquet")
print(f"saved {path}: gsd diagnose {path}")
