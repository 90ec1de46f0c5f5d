"""`barca get` answered from a kept answer (engine.cached_get) before click, the engine or the
warm pool is reached: a script polling an unchanged pipeline pays little more than Python's
start-up. Only the plain form is tried, `barca get [TARGET] FILE.py ... [--json | --pretty]`,
in the project root (elsewhere the command first names the root on stderr); any other form,
and any doubt, runs the command as usual.
"""

from __future__ import annotations

import os


def quick_get(argv: list[str]) -> tuple[bool, str | None]:
    """Print the kept answer of `barca get ARGV[1:]` and say so; or say that there is none
    that holds (nothing printed or written). Either way, the project's
    engine.local.environment_identity if it was computed (the warm pool is found by it)."""
    args = argv[1:]
    positionals = [a for a in args if a not in ("--json", "--pretty")]
    mode = _mode([a for a in args if a in ("--json", "--pretty")])
    if mode is None:
        return False, None
    if not positionals or any(a.startswith("-") or a in (".", "..") for a in positionals):
        return False, None
    target = None if positionals[0].endswith(".py") else positionals.pop(0)
    if (target is not None and "/" in target) or not positionals or \
            not all(p.endswith(".py") for p in positionals):
        return False, None
    if os.environ.get("BARCA_READ_ONLY") == "1":
        return False, None
    from barca.project_root import root_of

    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        return False, None
    root = root_of(cwd)
    if root != cwd:
        return False, None
    from barca.engine.cached_get import answer
    from barca.engine.local import environment_identity

    identity = environment_identity(root)
    text = answer(root, cwd, target, positionals, mode, identity)
    if text is None:
        return False, identity
    _write(text.encode())
    return True, identity


def _mode(flags: list[str]) -> str | None:
    """"json" or "pretty", as cli.output.choose_mode picks it; None when that would be an
    error (both flags, a bad BARCA_OUTPUT: the command says so)."""
    if len(flags) > 1:
        return None
    if flags:
        return flags[0][2:]
    chosen = os.environ.get("BARCA_OUTPUT")
    if chosen:
        return chosen if chosen in ("json", "pretty") else None
    return "pretty" if os.isatty(1) else "json"


def _write(data: bytes) -> None:
    """To stdout as the command writes its result: a reader that is gone wanted no more; any
    other failure is the command's exit 3 (the run is recorded already)."""
    try:
        while data:
            data = data[os.write(1, data):]
    except BrokenPipeError:
        pass
    except OSError as exc:
        from barca.cli.app import report_error
        from barca.errors import InfraError

        error = InfraError(f"could not write the result to stdout: {exc.strerror or exc}",
                           "check where stdout goes (a full disk, a closed terminal) and run "
                           "the command again; a run is recorded before its result is "
                           "printed (barca history)", errno=exc.errno)
        report_error(error, True)
        os._exit(error.exit_code)
