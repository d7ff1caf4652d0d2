"""Training the stand-in: its recipe, tokenizer, model config and the training loop.

:class:`Recipe` (:data:`RECIPE`, versioned by :data:`RECIPE_VERSION`) holds every setting that
determines the weights besides the demo data; ``_train`` runs AdamW with a cosine schedule on
one CPU thread, deterministically. torch, transformers and tokenizers are imported inside the
functions: importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from helpers.standin.data import Sample
from helpers.standin.template import CHAT_TEMPLATE, MARKER_TOKENS, SPECIAL_TOKENS

# Bump when anything in the recipe below changes in a way the hash would not see
# (training code, sample construction, tokenizer settings).
RECIPE_VERSION = 3


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the stand-in's weights besides the demo data.

    Sized to overfit the demo conversations in about two minutes on 2 CPU cores, with a CPU
    kernel in vLLM 0.32 for every layer: Mamba-2 (``M``), attention with head_dim 64 (``*``;
    head_dim 16 has none) and ReLU² MLP (``-``); no MoE. Measured (teacher-forced greedy check,
    seeds 0-2): with 2 attention heads the city lookup formed in only some seeds, 8 heads got
    every sequence right in all three. One thread: on a shared 2-core box 2 threads ran 5x slower,
    and a fixed count keeps the weights identical everywhere. 300 steps of 32 sequences (~25
    epochs) take 100-180 s.
    """

    pattern: str = "M*M-"
    hidden_size: int = 128
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    mamba_num_heads: int = 4
    mamba_head_dim: int = 32
    ssm_state_size: int = 16
    n_groups: int = 1
    conv_kernel: int = 4
    chunk_size: int = 128
    intermediate_size: int = 256
    vocab_size: int = 1536
    max_position_embeddings: int = 4096
    seed: int = 0
    threads: int = 1
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 20
    weight_decay: float = 0.0


RECIPE = Recipe()


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


@contextlib.contextmanager
def _torch_settings(threads: int) -> Iterator[None]:
    import torch

    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


def _train_tokenizer(samples: list[Sample], recipe: Recipe):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    # Words (a space and what follows up to the next space or .,!?) are the largest tokens, so
    # reasoning and answers take one token per word or more (a thinking budget of 8
    # tokens cuts real text), while markup without spaces (tool schemas, tool-call XML)
    # compresses to a few tokens and keeps sequences short enough to train in minutes.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r" ?[^ .,!?]+|[.,!?]+| +"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS + MARKER_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    specials = SPECIAL_TOKENS + MARKER_TOKENS

    def texts():
        for s in samples:
            text = "".join(t for t, _ in s.pieces)
            for sp in specials:
                text = text.replace(sp, "\n")
            yield text

    tok.train_from_iterator(texts(), trainer=trainer)
    # Register the specials as added tokens so they are never split.
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKER_TOKENS])
    return tok


def _make_hf_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="<unk>",
        clean_up_tokenization_spaces=False,
        model_max_length=RECIPE.max_position_embeddings,
    )
    hf.chat_template = CHAT_TEMPLATE
    hf.add_bos_token = False
    return hf


def _make_config(recipe: Recipe, tok):
    from transformers import NemotronHConfig

    same = ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "intermediate_size", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
            "conv_kernel", "chunk_size", "max_position_embeddings")  # fmt: skip
    return NemotronHConfig(
        **{key: getattr(recipe, key) for key in same},
        hybrid_override_pattern=recipe.pattern,
        mlp_hidden_act="relu2",
        expand=2,
        tie_word_embeddings=False,
        pad_token_id=tok.token_to_id("<unk>"),
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
        num_logits_to_keep=1,
        use_cache=True,
        residual_in_fp32=False,
        rescale_prenorm_residual=True,
        dtype="float32",
    )


def _encode_samples(tok, samples: list[Sample]) -> list[tuple[list[int], list[int]]]:
    """Token ids and labels (-100 = no loss) for each training sequence."""
    end_think = tok.token_to_id("</think>")
    out = []
    for s in samples:
        ids: list[int] = []
        labels: list[int] = []
        for i, (text, trained) in enumerate(s.pieces):
            piece = tok.encode(text, add_special_tokens=False).ids
            if i == 1 and s.cut_reasoning is not None:
                head, head_labels = list(ids), list(labels)
            ids.extend(piece)
            labels.extend(piece if trained else [-100] * len(piece))
        if s.cut_reasoning is None:
            out.append((ids, labels))
            continue
        tail = ids[len(head) :]
        tail_labels = labels[len(head) :]
        reasoning = tok.encode(s.cut_reasoning, add_special_tokens=False).ids
        head_text = s.pieces[0][0]
        # Every cut in the first 16 tokens (the demo budgets), then every 4th.
        for k in sorted(set(range(min(16, len(reasoning)))) | set(range(16, len(reasoning), 4))):
            # Server-side budget: the generated tokens, then a forced `</think>`.
            seq = head + reasoning[:k] + [end_think] + tail
            lab = head_labels + [-100] * (k + 1) + tail_labels
            out.append((seq, lab))
            if s.two_pass and k % 2 == 1:
                # Two-pass client budget (helpers.chat): the cut reasoning goes back as
                # text, `<think>\n{reasoning}\n</think>`, and is tokenized afresh.
                text = head_text + tok.decode(reasoning[:k]).rstrip() + "\n</think>"
                pre = tok.encode(text, add_special_tokens=False).ids
                out.append((pre + tail, [-100] * len(pre) + tail_labels))
    return out


def _train(
    model, data: list[tuple[list[int], list[int]]], recipe: Recipe, log=None, progress: bool = False
) -> dict[str, float]:
    import torch

    rng = random.Random(recipe.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": recipe.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=recipe.lr,
        betas=(0.9, 0.95),
    )

    def lr_at(step):
        if step < recipe.warmup:
            return recipe.lr * (step + 1) / recipe.warmup
        progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return recipe.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))

    def batches() -> Iterator[list[int]]:
        # Shuffled epochs; within pools of 8 batches, sequences of similar length share a
        # batch (less padding, so fewer wasted tokens on 1-2 CPU cores).
        pool = 8 * recipe.batch_size
        while True:
            perm = list(range(len(data)))
            rng.shuffle(perm)
            epoch: list[list[int]] = []
            for start in range(0, len(perm), pool):
                chunk = sorted(perm[start : start + pool], key=lambda i: (len(data[i][0]), i))
                epoch += [
                    chunk[j : j + recipe.batch_size]
                    for j in range(0, len(chunk), recipe.batch_size)
                ]
            rng.shuffle(epoch)
            yield from epoch

    stream = batches()
    model.train()
    last = first = float("nan")
    t0 = time.perf_counter()
    from tqdm.std import tqdm  # the text bar: an executed notebook saves its final state

    bar = tqdm(total=recipe.steps, desc="training the stand-in", unit="step", disable=not progress)
    for step in range(recipe.steps):
        batch = [data[i] for i in next(stream)]
        L = max(len(ids) for ids, _ in batch)
        input_ids = torch.zeros((len(batch), L), dtype=torch.long)
        labels = torch.full((len(batch), L), -100, dtype=torch.long)
        for i, (ids, lab) in enumerate(batch):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            labels[i, : len(lab)] = torch.tensor(lab)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        hidden = model.model(input_ids=input_ids, use_cache=False).last_hidden_state
        target = labels[:, 1:]
        keep = target != -100
        logits = model.lm_head(hidden[:, :-1][keep])  # logits only where there is a loss
        loss = torch.nn.functional.cross_entropy(logits.float(), target[keep])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        last = float(loss.detach())
        if step == 0:
            first = last
        bar.update(1)
        if step % 25 == 0:
            bar.set_postfix(loss=f"{last:.3f}")
        if log and (step % 25 == 0 or step == recipe.steps - 1):
            log(f"step {step:4d}  loss {last:.4f}  {time.perf_counter() - t0:6.1f}s")
    bar.set_postfix(loss=f"{last:.3f}")
    bar.close()
    return {"first_loss": first, "final_loss": last, "train_seconds": time.perf_counter() - t0}
