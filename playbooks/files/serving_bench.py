#!/usr/bin/env python
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Serving benchmark against an OpenAI-compatible endpoint (run by playbooks/benchmark.yml).

Shape of the field reports: prompts of PREFILL tokens, GENERATE tokens out (ignore_eos, so every
request produces exactly that many), at each concurrency level; every request's prompt starts with
a word of its own, so that the prefix cache cannot serve it. Streams every response to time
the first token; reports each level's mean and its p50/p90/p99 time to first token and time per
output token, and, given an earlier run's JSON, each level's change against it. Uses the `openai` client from PyPI. Bounded: each level sends
`requests_per_level` requests, each with a timeout. Writes JSON, prints a table and, where the
controller has matplotlib, draws the run (and the earlier one) as a PNG beside the JSON.
"""
import argparse
import asyncio
import json
import random
import ssl
import statistics
import sys
import time

import openai

WORDS = ('spark grace blackwell unified memory tensor parallel rank nccl roce gloo ray vllm '
         'kernel marlin triton cache prefill decode token expert router shard weight').split()


async def calibrated_prompt(client, model, target_tokens, seed):
    """A prompt of about target_tokens tokens, measured by the server's own tokenizer. The first
    probe is an eighth of the words, so that a tokenizer that splits each word into several tokens
    (the simulation's tiny one does) cannot overrun the served context; then the word count is
    scaled by the tokens per word the server counted."""
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for unused in range(max(1, target_tokens // 8))]
    for unused_round in range(5):  # bounded: converges in two or three rounds
        text = ' '.join(words)
        probe = await client.completions.create(model=model, prompt=text, max_tokens=1)
        have = probe.usage.prompt_tokens
        if abs(have - target_tokens) <= max(8, target_tokens // 100):
            return text, have
        want = max(1, int(len(words) * target_tokens / have))
        words = words[:want] if want <= len(words) else words + [rng.choice(WORDS) for unused in range(want - len(words))]
    return ' '.join(words), have


async def one_request(client, model, prompt, generate):
    start = time.perf_counter()
    first = None
    chunks = 0
    stream = await client.completions.create(
        model=model, prompt=prompt, max_tokens=generate, stream=True, temperature=0.0,
        stream_options={'include_usage': True},
        extra_body={'ignore_eos': True, 'min_tokens': generate})
    usage = None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            chunks += 1
            if first is None:
                first = time.perf_counter()
        if chunk.usage:
            usage = chunk.usage
    end = time.perf_counter()
    out_tokens = usage.completion_tokens if usage else chunks
    return {'latency_s': end - start, 'ttft_s': (first or end) - start,
            'output_tokens': out_tokens,
            'tpot_s': (end - (first or end)) / max(out_tokens - 1, 1)}


def percentiles(values, points=(50, 90, 99)):
    """{'p50': ..., 'p90': ..., 'p99': ...} of the values: the standard library's inclusive
    quantiles, linear between the closest ranks as numpy's default that vLLM's `vllm bench serve`
    and llama-benchy report; a single value is every percentile."""
    values = list(values)
    if len(values) < 2:
        return dict(('p%d' % point, values[0]) for point in points)
    cuts = statistics.quantiles(values, n=100, method='inclusive')
    return dict(('p%d' % point, cuts[point - 1]) for point in points)


def change(previous, rows):
    """Each level's output tok/s and mean TTFT against the same concurrency of a previous run's
    JSON (its 'levels'): [(concurrency, tok/s before, now, percent change, TTFT before, now)]."""
    before = dict((level['concurrency'], level) for level in (previous or {}).get('levels') or [])
    out = []
    for row in rows:
        old = before.get(row['concurrency'])
        if old and old.get('output_tok_per_s'):
            out.append((row['concurrency'], old['output_tok_per_s'], row['output_tok_per_s'],
                        round(100.0 * (row['output_tok_per_s'] - old['output_tok_per_s']) / old['output_tok_per_s'], 1),
                        old.get('mean_ttft_s'), row['mean_ttft_s']))
    return out


def decode_gate(previous, rows, within_pct):
    """The levels whose decode speed (one request's tokens per second after its first, from the
    median time per output token) fell more than within_pct percent below the same concurrency of a
    previous run: [(concurrency, decode tok/s before, now)]. upgrade.yml's gate (O8): a new launch
    that decodes slower than the one it replaces gives way to it."""
    before = dict((level['concurrency'], level) for level in (previous or {}).get('levels') or [])
    out = []
    for row in rows:
        old = before.get(row['concurrency'])
        if old and old['tpot_ms']['p50'] > 0 and row['tpot_ms']['p50'] > 0:
            then, now = 1000.0 / old['tpot_ms']['p50'], 1000.0 / row['tpot_ms']['p50']
            if now < then * (1.0 - within_pct / 100.0):
                out.append((row['concurrency'], round(then, 2), round(now, 2)))
    return out


async def level(client, model, prompts, generate, concurrency, total):
    gate = asyncio.Semaphore(concurrency)

    async def gated(i):
        # A word of its own in front of each request's prompt: the server's prefix cache (V9)
        # already holds every calibrated prompt, and a hit would time a cache lookup, not a
        # prefill of the whole prompt.
        prompt = 'run%d.%d %s' % (concurrency, i, prompts[i % len(prompts)])
        async with gate:
            return await one_request(client, model, prompt, generate)

    start = time.perf_counter()
    results = await asyncio.gather(*(gated(i) for i in range(total)))
    wall = time.perf_counter() - start
    out = sum(r['output_tokens'] for r in results)
    ttft = percentiles([r['ttft_s'] for r in results])
    tpot = percentiles([1000 * r['tpot_s'] for r in results])
    return {
        'concurrency': concurrency,
        'requests': total,
        'wall_s': round(wall, 3),
        'output_tokens': out,
        'output_tok_per_s': round(out / wall, 2),
        'mean_ttft_s': round(statistics.mean(r['ttft_s'] for r in results), 3),
        'mean_tpot_ms': round(1000 * statistics.mean(r['tpot_s'] for r in results), 2),
        'per_request_tok_per_s': round(statistics.mean(
            r['output_tokens'] / r['latency_s'] for r in results), 2),
        'ttft_s': dict((k, round(v, 3)) for k, v in ttft.items()),
        'tpot_ms': dict((k, round(v, 2)) for k, v in tpot.items()),
    }


def draw(report, previous, path):
    """Output tok/s, TTFT and TPOT percentiles by concurrency, this run beside the earlier one, as a
    PNG. matplotlib is optional on a controller: without it the PNG is skipped, said with the command
    that installs it into the Python that runs this."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        return 'png: not drawn, matplotlib is not installed (%s -m pip install matplotlib)' % sys.executable
    figure, (rate, ttft, tpot) = pyplot.subplots(1, 3, figsize=(13, 4))
    runs = [('this run', report['levels'], '-')]
    if previous:
        runs.append(('earlier run', previous.get('levels', []), '--'))
    for label, levels, style in runs:
        rate.plot([r['concurrency'] for r in levels], [r['output_tok_per_s'] for r in levels], style, marker='o',
                  label=label)
        # Runs of releases before the percentiles have means only: their rate is drawn, not these.
        spread = [r for r in levels if isinstance(r.get('ttft_s'), dict) and isinstance(r.get('tpot_ms'), dict)]
        for point in ('p50', 'p90', 'p99') if spread else ():
            x = [r['concurrency'] for r in spread]
            ttft.plot(x, [r['ttft_s'][point] for r in spread], style, marker='o', label='%s %s' % (label, point))
            tpot.plot(x, [r['tpot_ms'][point] for r in spread], style, marker='o', label='%s %s' % (label, point))
    for axis, title, unit in ((rate, 'output tokens per second', 'tok/s'), (ttft, 'time to first token', 's'),
                              (tpot, 'time per output token', 'ms')):
        axis.set_title(title)
        axis.set_xlabel('concurrent requests')
        axis.set_ylabel(unit)
        axis.set_xticks([r['concurrency'] for r in report['levels']])
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize='small')
    figure.suptitle('%s: %d-token prompts, %d generated' % (report['model'], report['prefill_tokens'],
                                                            report['generate_tokens']))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return 'png: %s' % path


async def main(args):
    # The gateway's certificate is proven by the cluster's CA (A1), as the printed curl does.
    http_client = (openai.DefaultAsyncHttpxClient(verify=ssl.create_default_context(cafile=args.cacert))
                   if args.cacert else None)
    client = openai.AsyncOpenAI(base_url=args.base_url, api_key=args.api_key or 'none',
                                timeout=args.timeout, max_retries=0, http_client=http_client)
    model = args.model or (await client.models.list()).data[0].id
    calibrated = [await calibrated_prompt(client, model, args.prefill, seed) for seed in range(max(args.concurrency))]
    prompts = [text for text, unused_tokens in calibrated]
    measured = calibrated[0][1]
    await one_request(client, model, prompts[0], 8)  # warm-up, not reported
    rows = []
    for concurrency in args.concurrency:
        total = max(args.requests_per_level, concurrency)
        rows.append(await level(client, model, prompts, args.generate, concurrency, total))
    report = {'endpoint': args.base_url, 'model': model, 'prefill_tokens': measured,
              'generate_tokens': args.generate, 'levels': rows}
    previous = None
    if args.previous:
        with open(args.previous) as handle:
            previous = json.load(handle)
        report['previous'] = args.previous
        report['change'] = [dict(zip(('concurrency', 'tok_per_s_before', 'tok_per_s', 'percent', 'ttft_s_before', 'ttft_s'), c))
                            for c in change(previous, rows)]
    with open(args.output, 'w') as handle:
        json.dump(report, handle, indent=2)
    print('model %s, prompt %d tokens, %d generated per request'
          % (model, measured, args.generate))
    print('%11s %8s %8s %12s %10s %10s %10s %10s %14s'
          % ('concurrency', 'requests', 'wall_s', 'out_tok/s', 'ttft_p50', 'ttft_p99', 'tpot_p50', 'tpot_p99', 'tok/s/request'))
    for r in rows:
        print('%11d %8d %8.2f %12.2f %10.3f %10.3f %10.2f %10.2f %14.2f'
              % (r['concurrency'], r['requests'], r['wall_s'], r['output_tok_per_s'], r['ttft_s']['p50'],
                 r['ttft_s']['p99'], r['tpot_ms']['p50'], r['tpot_ms']['p99'], r['per_request_tok_per_s']))
    for c in report.get('change', []):
        print('against %s at concurrency %d: %.2f -> %.2f tok/s (%+.1f %%), mean TTFT %.3f -> %.3f s'
              % (args.previous, c['concurrency'], c['tok_per_s_before'], c['tok_per_s'], c['percent'],
                 c['ttft_s_before'] or 0.0, c['ttft_s']))
    print('json: %s' % args.output)
    if args.png:
        print(draw(report, previous, args.png))
    if args.gate_pct is not None:
        slower = decode_gate(previous, rows, args.gate_pct)
        if slower:
            return 'decode slower than %s by more than %g %%: %s' % (args.previous, args.gate_pct, ', '.join(
                'concurrency %d %.2f -> %.2f tok/s' % level for level in slower))
        print('decode within %g %% of %s' % (args.gate_pct, args.previous))
    return None


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--base-url', required=True)
    parser.add_argument('--api-key', default=None, help='or the OPENAI_API_KEY environment')
    # A file keeps the key out of every process list and of the environment a -vvv run prints.
    parser.add_argument('--api-key-file', default=None, help='a file whose first line is the key')
    parser.add_argument('--cacert', default=None, help="the CA file that proves the endpoint's certificate")
    parser.add_argument('--model', default=None)
    parser.add_argument('--prefill', type=int, default=2048)
    parser.add_argument('--generate', type=int, default=128)
    parser.add_argument('--concurrency', type=int, nargs='+', default=[1, 4, 8])
    parser.add_argument('--requests-per-level', type=int, default=8)
    parser.add_argument('--timeout', type=float, default=600.0)
    parser.add_argument('--output', required=True)
    parser.add_argument('--previous', default=None, help="an earlier run's JSON to compare each level with")
    parser.add_argument('--png', default=None, help='draw the run (beside the earlier one) into this PNG (needs matplotlib)')
    parser.add_argument('--gate-pct', type=float, default=None,
                        help='exit 3 when a level decodes more than this many percent slower than --previous')
    arguments = parser.parse_args()
    if arguments.api_key is None and arguments.api_key_file:
        with open(arguments.api_key_file) as key_file:
            arguments.api_key = key_file.readline().strip()
    if arguments.api_key is None:
        import os
        arguments.api_key = os.environ.get('OPENAI_API_KEY')
    if arguments.gate_pct is not None and not arguments.previous:
        parser.error('--gate-pct needs --previous, the run to compare with')
    try:
        failed_gate = asyncio.run(main(arguments))
    except openai.APIError as exc:
        sys.exit('benchmark failed against %s: %s' % (arguments.base_url, exc))
    if failed_gate:
        print(failed_gate, file=sys.stderr)
        sys.exit(3)
