# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What makes the engine's API key too weak; the sentences never quote it."""
import secrets
import string
import uuid

import pytest

from ansible_collections.gb10.serving.plugins.module_utils.api_key import MIN_LENGTH, key_problems

ALNUM = string.ascii_letters + string.digits

WEAK = [
    ('abc', 'it has 3 characters, the minimum is 32'),
    ('e2e-readiness-timeout-key', 'it has 25 characters, the minimum is 32'),
    ('a' * 40, 'only 1 different character(s)'),
    ('0123456789' * 4, 'repeats a 10-character part'),
    ('Passw0rd!' * 4, 'repeats a 9-character part'),
    ('abcdefghijklmnopqrstuvwxyzABCDEFGHIJ', 'mostly a run'),
    ('9876543210zyxwvutsrqponmlkjihgfedcba', 'mostly a run'),
    ('correct horse battery staple and more words', 'printable ASCII without spaces'),
    ('tab\there-0123456789abcdefghijklmnopqrst', 'printable ASCII without spaces'),
    ('schlüssel-0123456789abcdefghijklmnopqrstu', 'printable ASCII without spaces'),
    # The gateway's lookup holds "Bearer " and the key in 256 bytes (map_hash_bucket_size).
    (secrets.token_hex(101), 'it has 202 characters, the most the gateway\'s key lookup holds is 200'),
]


@pytest.mark.parametrize('key,expected', WEAK, ids=[w[1][:30] + str(i) for i, w in enumerate(WEAK)])
def test_a_weak_key_is_refused_without_being_quoted(key, expected):
    problems = key_problems(key)
    assert any(expected in p for p in problems), problems
    assert not any(key in p for p in problems), problems


def test_the_minimum_is_32_characters():
    assert MIN_LENGTH == 32
    assert key_problems('x7Kq' + 'Zp3mW9aRt2LvB8nYc4HdJ6fGs1QeU5') == []  # 34 random-looking characters
    assert key_problems('x7KqZp3mW9aRt2LvB8nYc4HdJ6fGs1Q')[0] == 'it has 31 characters, the minimum is 32'


@pytest.mark.parametrize('make', [
    lambda: ''.join(secrets.choice(ALNUM) for _i in range(48)),   # what roles/api_key generates
    lambda: secrets.token_hex(16),                              # openssl rand -hex 16
    lambda: secrets.token_hex(24),                              # openssl rand -hex 24 (the message's fix)
    lambda: secrets.token_urlsafe(32),
    lambda: str(uuid.uuid4()),
], ids=['generated-48', 'hex-32', 'hex-48', 'urlsafe', 'uuid4'])
def test_random_keys_of_the_usual_makes_pass(make):
    for _try in range(2000):
        key = make()
        assert key_problems(key) == [], key


def test_the_vaulted_key_of_the_molecule_scenario_passes():
    assert key_problems('from-the-vault-0123456789abcdef0123456789') == []


def test_no_key_is_left_to_the_generator():
    assert key_problems('') == [] and key_problems(None) == []
