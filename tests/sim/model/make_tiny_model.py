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
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "gb10-sim-model.json"), "w") as f:
        json.dump({"made_by": "tests/sim/model/make_tiny_model.py", "shape": SHAPE,
                   "tokenizer_tokens": fast.backend_tokenizer.get_vocab_size()}, f, indent=1)


if __name__ == "__main__":
    main()
