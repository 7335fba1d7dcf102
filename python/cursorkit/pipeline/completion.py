"""``cursorkit completion bash|zsh``: a shell completion script made from the argument parser itself.

Commands complete after ``cursorkit``, each command's options after ``-``, and file names otherwise;
zsh runs the same function through ``bashcompinit``. Generated from the parser, so it never falls
behind the options.
"""

from __future__ import annotations

import argparse

__all__ = ["script"]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(opt for action in parser._actions for opt in action.option_strings)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell`` (``bash`` or ``zsh``)."""
    commands: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                commands[name] = _options(sub)
    cases = "\n".join(
        f'        {name}) opts="{" ".join(opts)}" ;;' for name, opts in sorted(commands.items())
    )
    top = " ".join([*sorted(commands), *_options(parser)])
    body = f"""_cursorkit() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}"
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "{top}" -- "$cur"))
        return
    fi
    local opts=""
    case "${{COMP_WORDS[1]}}" in
{cases}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _cursorkit cursorkit
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
