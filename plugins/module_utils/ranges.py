# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's numbers checked against their ranges before anything changes (argument specs have types
and choices, no ranges): one check and one message for every role (filter gb10.serving.out_of_range).

Each setting is a dict: ``var`` (its name), ``value``, and its bounds: ``min``/``max`` (inclusive),
``above``/``below`` (exclusive), or ``choices`` (compared as lower-case text); ``number: float``
where a fraction is allowed (else the value must be a whole number); ``note`` (the unit or the
reason, shown in brackets); ``range`` (the text, where the bounds' own would not say it) and ``ok``
(a condition no bound expresses, with ``range``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import operator

BOUNDS = (('min', operator.ge), ('max', operator.le), ('above', operator.gt), ('below', operator.lt))
FIX = "Fix: set it within that range, or leave it out to get the role's default."


class RangeError(Exception):
    """A setting described without a name or a bound."""


def _number(value, whole):
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    try:
        return int(text) if whole else float(text)
    except ValueError:
        return None


def within(setting):
    """Whether the setting's value is within its bounds."""
    if 'ok' in setting:
        return bool(setting['ok']) and str(setting['ok']).lower() not in ('false', 'no', '0')
    if 'choices' in setting:
        return str(setting.get('value')).strip().lower() in [str(c).lower() for c in setting['choices']]
    if all(setting.get(key) is None for key, unused in BOUNDS):
        # A range's text alone checks nothing: every value would pass.
        raise RangeError('%s: no bound given (min, max, above, below, choices or ok with range)' % setting.get('var', '?'))
    number = _number(setting.get('value'), setting.get('number', 'int') != 'float')
    if number is None:
        return False
    return all(test(number, float(setting[key])) for key, test in BOUNDS if setting.get(key) is not None)


def describe(setting):
    """The range as the message says it: 1..65535, 1 or more, above 0 and below 1, a, b or c."""
    if setting.get('range'):
        return str(setting['range'])
    if 'choices' in setting:
        choices = [str(c) for c in setting['choices']]
        text = choices[0] if len(choices) == 1 else ', '.join(choices[:-1]) + ' or ' + choices[-1]
    else:
        low, high = setting.get('min'), setting.get('max')
        above, below = setting.get('above'), setting.get('below')
        if low is not None and high is not None:
            text = '%s..%s' % (low, high)
        elif low is not None:
            text = '%s or more' % low
        elif above is not None:
            text = 'above %s' % above + (' and below %s' % below if below is not None else '') + (
                ' and at most %s' % high if high is not None else '')
        elif high is not None or below is not None:
            text = 'at most %s' % high if high is not None else 'below %s' % below
        else:
            raise RangeError('%s: no bound given (min, max, above, below, choices or ok with range)'
                             % setting.get('var', '?'))
    return text + (' (%s)' % setting['note'] if setting.get('note') else '')


def out_of_range(settings, host):
    """One message per setting out of its range, naming the host, the variable, the range and the fix."""
    problems = []
    for setting in settings:
        if not setting.get('var'):
            raise RangeError('a range setting without its variable name: %r' % (setting,))
        text = describe(setting)
        if not within(setting):
            problems.append('host %s: %s=%s is out of range, it must be %s. %s'
                            % (host, setting['var'], setting.get('value'), text, FIX))
    return problems
