# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Makes the tiny model the simulated cluster serves: Llama-shaped, random weights, a byte-level
BPE tokenizer trained on corpus.txt, and a chat template. Runs inside the serving image
(torch, transformers and tokenizers are there); build_model.sh calls it and caches the result.

Shape: every number that tensor parallelism splits is divisible by both 2 and 3, so the same model
serves at TP=2 (scripts/sim.sh deploy m27, two hosts) and TP=3 (deploy m3, three hosts):
attention heads 6, KV heads 6 (vLLM shards KV heads when tp divides them, and can only replicate
them when they divide tp: 6 is divisible by 2 and 3), intermediate size 768, vocab 768.
Head size 64 is one that vLLM's CPU attention supports.

Usage: python make_tiny_model.py <corpus.txt> <output dir>
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

TP_SIZES = (2, 3)
SHAPE = {
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 6,
    "intermediate_size": 768,
    "vocab_size": 768,
    "num_hidden_layers": 2,
}
# The last four are the think markers of the reasoning parsers the profiles name: vLLM's
# minimax_m3 and deepseek_v4 parsers refuse a tokenizer without them as single tokens.
SPECIAL = ["<|begin|>", "<|end|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>",
           "<think>", "</think>", "<mm:think>", "</mm:think>"]
# The model ends its answers (EOS) after any of ANSWER_ENDERS tokens, none special and none of
# the generation prompt's, so an answer is never empty and is about 768 / 64 = 12 tokens long
# where random weights would fill every max_tokens (512 tokens of noise took 20-60 s per request
# on 2 cores). 64 rather than 16 (48 tokens): every launch's smoke test and every chat of the e2e
# suite waits for one answer, which took 10-25 s at 48 tokens over TP=2 and TP=3 (issue 28's
# budget); a dozen tokens still prove that the engine generates across the ranks. How: the token
# embeddings are scaled up so the current token dominates the last hidden state, and EOS's row of
# lm_head points at the enders' embeddings (logit ~ENDER_LOGIT after one of them, near 0 after any
# other token, against ~0.4 for the rest of the vocabulary).
ANSWER_ENDERS = 64
EMBEDDING_SCALE = 50.0  # init std 0.02 -> ~1, above what the two random layers add
ENDER_LOGIT = 12.0
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def check_shape():
    """Fail early, with the number at fault, if a TP size does not divide the shape."""
    for tp in TP_SIZES:
        for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size"):
            if SHAPE[key] % tp:
                raise SystemExit("%s=%d is not divisible by TP=%d" % (key, SHAPE[key], tp))


def train_tokenizer(corpus, out):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=SHAPE["vocab_size"],
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([corpus], trainer)
    if tok.get_vocab_size() > SHAPE["vocab_size"]:
        raise SystemExit("tokenizer has %d tokens, more than vocab_size" % tok.get_vocab_size())
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        additional_special_tokens=SPECIAL[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def end_answers(model, fast):
    """Make EOS follow one of ANSWER_ENDERS tokens (see above), chosen with a fixed seed."""
    prompt = set(fast.encode(fast.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                      add_generation_prompt=True), add_special_tokens=False))
    excluded = set(fast.all_special_ids) | prompt
    candidates = [i for i in range(fast.backend_tokenizer.get_vocab_size()) if i not in excluded]
    order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(1))
    enders = [candidates[i] for i in order[:ANSWER_ENDERS].tolist()]
    with torch.no_grad():
        embeddings = model.model.embed_tokens.weight
        embeddings.mul_(EMBEDDING_SCALE)
        directions = embeddings[enders] / embeddings[enders].norm(dim=1, keepdim=True)
        # After the final RMSNorm the hidden state has length ~sqrt(hidden_size).
        scale = ENDER_LOGIT / SHAPE["hidden_size"] ** 0.5
        model.lm_head.weight[fast.eos_token_id] = scale * directions.sum(0)
    return enders


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    check_shape()
    os.makedirs(out, exist_ok=True)
    fast = train_tokenizer(corpus, out)
    torch.manual_seed(0)
    config = LlamaConfig(
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="bfloat16",
        **SHAPE
    )
    model = LlamaForCausalLM(config)
    enders = end_answers(model, fast)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "gb10-sim-model.json"), "w") as f:
        json.dump({"made_by": "tests/sim/model/make_tiny_model.py", "shape": SHAPE, "answer_enders": enders,
                   "tokenizer_tokens": fast.backend_tokenizer.get_vocab_size()}, f, indent=1)


if __name__ == "__main__":
    main()
