# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How strong the engine's API key must be: the key is the only thing between the
network-facing OpenAI endpoint and anyone the firewall lets reach its port, and vLLM neither
limits nor locks out wrong keys, so a key must resist guessing at the speed the engine answers.

Pure functions; the messages say what is wrong with a key and never contain the key itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# 32 characters: a random key of letters and digits then carries ~190 bits, one of hex digits
# (openssl rand -hex 16) 128 bits, the usual floor for a secret that must stand unlimited
# guessing. The generated key (roles/api_key) has 48 letters and digits (~285 bits).
MIN_LENGTH = 32
# The gateway looks a key up as its Authorization header ("Bearer " and the key) in one nginx hash
# bucket of 256 bytes (map_hash_bucket_size in roles/api_gateway/templates/gateway.conf.j2): nginx
# refuses to start with a longer entry, so a key that long would take the front door down.
MAX_LENGTH = 200
# A random 32-character hex key has fewer than 8 different characters, or a run over 3/4 of its
# neighbours, with a chance below one in a million; 'aaaa...', 'abcabc...', '1234...' have them.
MIN_DISTINCT = 8
MAX_RUN_SHARE = 0.75

WHY = ('the key alone guards a network-facing API and vLLM does not limit wrong tries, so it must '
       'resist guessing: 32 random letters and digits are ~190 bits, 32 hex digits 128 bits')


def _period(key):
    """Length of the shortest unit that key repeats (len(key) when it repeats none)."""
    for size in range(1, len(key) // 2 + 1):
        if all(key[i] == key[i % size] for i in range(len(key))):
            return size
    return len(key)


def key_problems(key, min_length=MIN_LENGTH):
    """What is wrong with an API key, as sentences that never quote it; [] for a good key.

    An empty key is not judged here (the api_key role then generates one)."""
    if key is None:
        return []
    text = key if isinstance(key, str) else str(key)
    if not text:
        return []
    problems = []
    if len(text) < min_length:
        problems.append('it has %d characters, the minimum is %d' % (len(text), min_length))
    if len(text) > MAX_LENGTH:
        problems.append('it has %d characters, the most the gateway\'s key lookup holds is %d' % (len(text), MAX_LENGTH))
    if any(not ('!' <= char <= '~') for char in text):
        problems.append('it has a space, a control or a non-ASCII character; it travels in an HTTP '
                        'header (Authorization: Bearer) and the engine\'s environment, so only '
                        'printable ASCII without spaces is kept intact')
    distinct = len(set(text))
    if distinct < MIN_DISTINCT:
        problems.append('it uses only %d different character(s), at least %d are needed' % (distinct, MIN_DISTINCT))
    else:
        period = _period(text)
        if period < len(text):
            problems.append('it repeats a %d-character part' % period)
        else:
            steps = sum(1 for a, b in zip(text, text[1:]) if abs(ord(a) - ord(b)) <= 1)
            if len(text) > 1 and steps >= MAX_RUN_SHARE * (len(text) - 1):
                problems.append('it is mostly a run of neighbouring or equal characters (like abcd... or 1234...)')
    return problems
