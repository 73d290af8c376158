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
# Every answer of the model is KNOWN_ANSWER, then EOS, greedy or sampled: the profiles' known-answer
# check has an answer to expect, and each launch's smoke test waits for a few tokens
# instead of max_tokens of noise (512 tokens took 20-60 s per request on 2 cores). How: the token
# embeddings are scaled up so that the current token dominates the last hidden state, and lm_head's
# row of each answer token points at the embedding of the token before it (the generation prompt's
# last token for the first one, the answer's last token for EOS): a logit of ~CHAIN_LOGIT for the
# next token of the answer against ~1-5 for any other. Those rows lie in every tensor-parallel
# shard of the vocabulary (embedding and lm_head are split by vocabulary rows), so the answer comes
# back only when every rank's part of both arrives: the expected answer at TP=1 (checked here with
# transformers) is what a broken vocabulary split at TP=2 or TP=3 changes. The two random layers
# add too little to the hidden state for a broken attention or MLP split to change it; a real
# model's answer depends on every layer, which is what the profiles' own known answers check.
# A token sampled off the answer (rare at temperature 1) still ends the answer: EOS follows any of
# ANSWER_ENDERS other tokens with ~ENDER_LOGIT.
KNOWN_ANSWER = " the cluster answers."
CHAIN_LOGIT = 20.0
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


def answer_tokens(fast):
    """(the generation prompt's last token, KNOWN_ANSWER's tokens); refuses an answer whose tokens
    repeat, are special, or do not fall in every TP shard of the vocabulary."""
    prompt = fast.encode(fast.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                  add_generation_prompt=True), add_special_tokens=False)
    answer = fast.encode(KNOWN_ANSWER, add_special_tokens=False)
    if len(set(answer)) != len(answer) or set(answer) & (set(fast.all_special_ids) | {prompt[-1]}):
        raise SystemExit("KNOWN_ANSWER %r: tokens %s repeat, are special or end the prompt" % (KNOWN_ANSWER, answer))
    for tp in TP_SIZES:
        shard = SHAPE["vocab_size"] // tp
        if {i // shard for i in answer} != set(range(tp)):
            raise SystemExit("KNOWN_ANSWER %r: tokens %s miss a vocabulary shard at TP=%d" % (KNOWN_ANSWER, answer, tp))
    return prompt[-1], answer


def shape_answers(model, fast):
    """Make every answer KNOWN_ANSWER then EOS, and any detour end soon after (see above)."""
    start, answer = answer_tokens(fast)
    chain = list(zip([start] + answer, answer + [fast.eos_token_id]))
    excluded = set(fast.all_special_ids) | {start} | set(answer)
    candidates = [i for i in range(fast.backend_tokenizer.get_vocab_size()) if i not in excluded]
    order = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(1))
    enders = [candidates[i] for i in order[:ANSWER_ENDERS].tolist()]
    # After the final RMSNorm the hidden state has length ~sqrt(hidden_size).
    unit = 1.0 / SHAPE["hidden_size"] ** 0.5
    with torch.no_grad():
        embeddings = model.model.embed_tokens.weight
        embeddings.mul_(EMBEDDING_SCALE)
        direction = embeddings / embeddings.norm(dim=1, keepdim=True)
        model.lm_head.weight[fast.eos_token_id] = ENDER_LOGIT * unit * direction[enders].sum(0)
        for before, after in chain:
            model.lm_head.weight[after] += CHAIN_LOGIT * unit * direction[before]
    return answer, enders


def greedy_answer(model, fast, question):
    """The model's greedy answer at TP=1, as transformers computes it."""
    ids = fast.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                   return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=fast.pad_token_id)
    return fast.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


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
    answer, enders = shape_answers(model, fast)
    model = model.to(torch.bfloat16)
    # The reference the simulation overlay's known answer is (profiles/overlays/sim-cpu.yml): refuse
    # a model whose greedy answer at TP=1 is anything else, whatever the question.
    for question in ("What is 17 + 25? Reply with the number only.", "What is the weather in Paris?"):
        got = greedy_answer(model, fast, question)
        if got != KNOWN_ANSWER:
            raise SystemExit("greedy answer to %r at TP=1 is %r, not %r" % (question, got, KNOWN_ANSWER))
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "gb10-sim-model.json"), "w") as f:
        json.dump({"made_by": "tests/sim/model/make_tiny_model.py", "shape": SHAPE, "known_answer": KNOWN_ANSWER,
                   "answer_tokens": answer, "answer_enders": enders,
                   "tokenizer_tokens": fast.backend_tokenizer.get_vocab_size()}, f, indent=1)


if __name__ == "__main__":
    main()
