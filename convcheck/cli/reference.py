"""The command-line reference (``docs/cli.md``), generated from the parser the command itself uses.

``python -m convcheck.cli.reference --write docs/cli.md`` writes it; ``tests/test_docs.py`` fails when
the page and the parser differ, so neither can drift.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .main import build_parser

HEAD = """# Command-line reference

Every subcommand of `convcheck` (also `python -m convcheck`) and every option it takes, generated from
the command's own parser by `python -m convcheck.cli.reference --write docs/cli.md`
(`tests/test_docs.py` fails when this page and the parser differ). What the commands are for is in
[the README](../README.md#the-commands); one check's output in [checks.md](checks.md); the campaigns in
[campaigns.md](campaigns.md).

**Exit codes** (every command): `0` passed; `1` a check failed (a wrong answer, a crash, a hang, or
`mistrusted`); `2` your input was wrong (a malformed descriptor, an impossible shape, a missing or
truncated file, a bad option, a path that cannot be written, a problem too large for the memory): one
line on stderr, never a traceback; `3` the implementation asked for is not available here (no GPU, no
CUDA driver, no libcudnn, no frontend, no CuPy) or declined the problem; `4` an internal error; `128+N`
a sweep stopped by signal N.
"""


def _subcommands(parser: argparse.ArgumentParser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in action._choices_actions}
    return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    if action.choices is not None and action.metavar is None:
        value = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        value = action.metavar or action.dest.upper()
    if action.nargs == "?":
        value = f"[{value}]"
    elif action.nargs in ("*", "+"):
        value = f"{value}..."
    return f"`{names} {value}`"


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % dict(vars(action), prog=prog)
    extra = []
    if action.option_strings and action.choices is not None and action.metavar is not None:
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.option_strings and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS, [], ""):
        extra.append(f"default `{action.default}`")
    if action.required and action.option_strings:
        extra.append("required")
    if isinstance(action, argparse._AppendAction):
        extra.append("may be given more than once")
    return _cell(text + (" (" + "; ".join(extra) + ")" if extra else ""))


def render() -> str:
    """The whole page, from :func:`convcheck.cli.main.build_parser`."""
    parser = build_parser()
    out = [HEAD]
    subs = _subcommands(parser)
    out.append("| command | what it does |\n|---|---|")
    out.extend(f"| [`{name}`](#convcheck-{name}) | {_cell(text)} |" for name, text, _ in subs)
    for name, text, sub in subs:
        out.append(f"\n## convcheck {name}\n\n{_cell(text)[:1].upper() + _cell(text)[1:]}.\n")
        if sub.description:
            out.append(sub.description.strip() + "\n")
        out.append("| argument | what it does |\n|---|---|")
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if getattr(action, "why", None):  # an option of a check this command refuses, and why
                out.append(f"| `{', '.join(action.option_strings)}` | refused here (one line, exit 2): {_cell(action.why)} |")
            elif action.help != argparse.SUPPRESS:
                out.append(f"| {_spelling(action)} | {_help(action, f'convcheck {name}')} |")
    return "\n".join(out).rstrip() + "\n"


def long_options() -> dict[str, set[str]]:
    """Every long option of every subcommand, as the parser knows them."""
    return {name: {o for a in sub._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
            for name, _, sub in _subcommands(build_parser())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m convcheck.cli.reference", description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="FILE", help="write the page to FILE (default: print it)")
    args = ap.parse_args(argv)
    text = render()
    if args.write:
        Path(args.write).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
