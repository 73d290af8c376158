"""The variables tables of every role's README, made from the role's meta/argument_specs.yml (what
`ansible-doc -t role` shows) and defaults/main.yml (the values a run gets), so that the README
cannot say other than the spec and the defaults say.

    python3 scripts/role_docs.py           # print the roles whose README differs (exit 1 if any)
    python3 scripts/role_docs.py --write   # write the tables into each README

Each README's "## Variables" section holds the tables between the two marker lines below; what is
outside them is written by hand. tests/unit/test_role_docs.py fails when a table differs.
"""
import os
import re
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = '<!-- role_docs: begin (scripts/role_docs.py --write makes this part) -->'
END = '<!-- role_docs: end -->'
# A template longer than this is named, not shown, in a table cell.
SHORT_TEMPLATE = 60


def load(role, *path):
    with open(os.path.join(TOP, 'roles', role, *path)) as f:
        return yaml.safe_load(f) or {}


def roles():
    return sorted(r for r in os.listdir(os.path.join(TOP, 'roles'))
                  if os.path.isfile(os.path.join(TOP, 'roles', r, 'meta', 'argument_specs.yml')))


def text(value):
    """A description (a string or a list of paragraphs) on one line, as a table cell holds it, with
    ansible-doc's markup (C(), O(), V(), I()) as Markdown."""
    if isinstance(value, list):
        value = ' '.join(value)
    value = ' '.join(str(value or '').split())
    value = re.sub(r'\b[COV]\(([^()]*)\)', r'`\1`', value)
    return re.sub(r'\bI\(([^()]*)\)', r'*\1*', value)


def cell(value):
    return value.replace('|', '\\|')


def templated(value):
    return isinstance(value, str) and ('{{' in value or '{%' in value)


def default_cell(name, spec, defaults):
    """What a run gets: the defaults file's value (a derived one named so), else the spec's."""
    if name in defaults:
        value = defaults[name]
        if templated(value):
            if text(spec.get('description')).startswith('Derived'):
                return 'derived'
            flat = ' '.join(value.split())
            return '`%s`' % flat if len(flat) <= SHORT_TEMPLATE else 'from other variables (defaults/main.yml)'
    elif 'default' in spec:
        value = spec['default']
    elif spec.get('required'):
        return 'required'
    else:
        return 'unset'
    shown = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip()
    if shown.endswith('\n...'):
        shown = shown[:-4]
    return '`%s`' % shown if shown != '' else '`""`'


def tables(role):
    """The generated part of the role's README: one table per entry point."""
    specs = load(role, 'meta', 'argument_specs.yml')['argument_specs']
    defaults = load(role, 'defaults', 'main.yml')
    main = specs.get('main', {}).get('options') or {}
    out = []
    for entry, spec in specs.items():
        options = spec.get('options') or {}
        head = 'Entry point `%s`' % entry
        if spec.get('short_description'):
            head += ': %s' % text(spec['short_description'])
        out.append(head + '.' if not head.endswith('.') else head)
        out.append('')
        # An entry point that reads main's variables as they are (the same spec) names them only.
        same = [n for n, o in options.items() if entry != 'main' and main.get(n) == o]
        own = [n for n in options if n not in same]
        if own:
            out.append('| Variable | Default | Description |')
            out.append('|---|---|---|')
            for name in own:
                out.append('| `%s` | %s | %s |' % (name, cell(default_cell(name, options[name], defaults)),
                                                   cell(text(options[name].get('description')))))
            out.append('')
        if same:
            out.append('Reads as `main` does: %s.' % ', '.join('`%s`' % n for n in same))
            out.append('')
        if not options:
            out.append('No variables of its own.')
            out.append('')
    return '\n'.join([BEGIN, ''] + out + [END])


def readme_with_tables(role):
    path = os.path.join(TOP, 'roles', role, 'README.md')
    with open(path) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        raise SystemExit('%s: no "%s" ... "%s" lines in its Variables section' % (path, BEGIN, END))
    before, rest = readme.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    return path, readme, before + tables(role) + after


def main(argv):
    write = '--write' in argv
    differ = []
    for role in roles():
        path, readme, wanted = readme_with_tables(role)
        if readme != wanted:
            differ.append(path)
            if write:
                with open(path, 'w') as f:
                    f.write(wanted)
    for path in differ:
        print(('wrote ' if write else 'differs: ') + os.path.relpath(path, TOP))
    return 0 if write or not differ else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
