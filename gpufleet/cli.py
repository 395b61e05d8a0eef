"""`gpufleet run STAGE -i INVENTORY`: one command, one JSON file, one exit code for pipelines.

Every way a run can end writes summary.json with a one-line `reason`: 0 all nodes passed, 1 some
nodes failed checks, 2 the run itself broke (a configuration error, bad -e, unwritable artifacts,
inventory that does not parse, --limit matching nothing, every node unreachable, Ansible or runner
errors, a cancel). A command-line error writes it only where --artifacts names. `gpufleet` with no
arguments prints its help and exits 2, writing nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple

from gpufleet import __version__, console, mirror
from gpufleet import plan as plan_cmd
from gpufleet import artifacts as artifacts_mod
from gpufleet.cancel import Cancelled, SignalGuard
from gpufleet.cancel import describe as describe_signal
from gpufleet.runner import (DEFAULT_PROGRESS_EVERY_S, EXIT_RUN_BROKEN, STAGE_PLAYBOOKS, STAGES, AnsibleOptions,
                             RunBroken, colour_enabled, run_stage)
from gpufleet.secrets import scrub_text, secret_values
from gpufleet.summary import broken_summary, build_summary, summary_table

SUMMARY_FILE = artifacts_mod.SUMMARY_FILE

EPILOG = ("Exit codes: 0 all nodes passed; 1 some nodes failed checks (named on stderr and in summary.json); "
          "2 the run itself broke (a configuration error -- stack request, profile, variables -- bad arguments, "
          "inventory, --limit, artifacts directory, every node unreachable, Ansible error, cancelled); "
          "summary.json's `reason` says which.")


class UsageError(Exception):
    """argparse found the command line wrong; raised instead of argparse's own exit."""

    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message, self.format_usage())


def _unknown_option(parser: argparse.ArgumentParser, argv: list[str]) -> UsageError | None:
    """The first --option the command's parser does not know, named with the nearest it does: argparse
    would report a missing -i first, or take a typo for an abbreviation."""
    command = None
    for action in parser._subparsers._group_actions if parser._subparsers else []:  # pylint: disable=protected-access
        command = action.choices.get(argv[0]) if argv else None
    if command is None:
        return None
    known = [option for action in command._actions for option in action.option_strings]  # pylint: disable=protected-access
    for arg in argv[1:]:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            close = difflib.get_close_matches(name, [k for k in known if k.startswith("--")], n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            return UsageError(f"unknown option {name}{hint} (gpufleet {argv[0]} --help lists them)",
                              command.format_usage())
    return None


def _version_text() -> str:
    from gpufleet import collection

    found = collection.locate()
    try:
        from ansible.release import __version__ as ansible_version
    except ImportError:
        ansible_version = "not installed"
    where = (f"collection gpufleet.cluster {found.version} ({found.source}: {found.root})" if found
             else "collection gpufleet.cluster not installed")
    return f"gpufleet {__version__}; {where}; ansible-core {ansible_version}; Python {sys.version.split()[0]}"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_text())
        parser.exit()


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 15:
        raise argparse.ArgumentTypeError(f"{text} is outside 0 < SECONDS <= 15")
    return value


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _stage_list() -> str:
    width = max(len(name) for name in STAGES)
    return "stages, in the order site runs them:\n" + "\n".join(
        f"  {name:<{width}}  {what}" for name, (_playbook, what) in STAGES.items())


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("stage", choices=list(STAGES), metavar="STAGE", help="which stage to run (listed below)")
    run.add_argument("-i", "--inventory", required=True,
                     help="inventory file or directory (or a host list 'a,b,'), as for ansible-playbook")
    run.add_argument("--artifacts", type=Path, default=None,
                     help="where events, reports and summary.json go: a new or empty directory, or one an earlier "
                     "run made (default: a new artifacts/<stage>-<UTC time>)")
    run.add_argument("--baseline-dir", type=Path, default=None,
                     help="where smoke-test baselines are kept across runs (default: baselines/)")
    run.add_argument("--progress-every", type=_positive_seconds, default=DEFAULT_PROGRESS_EVERY_S, metavar="SECONDS",
                     help=f"print the running task and its nodes this often (default {DEFAULT_PROGRESS_EVERY_S:g}, at most 15)")
    passed = run.add_argument_group("passed to ansible-playbook unchanged")
    passed.add_argument("-l", "--limit", default=None, help="limit to these hosts/groups (a host pattern)")
    passed.add_argument("-t", "--tags", default=None, help="only these tags of the stage (e.g. validate --tags health)")
    passed.add_argument("--skip-tags", default=None, help="skip these tags")
    passed.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="KEY=VALUE pairs, a JSON/YAML mapping or @FILE; repeatable")
    passed.add_argument("-C", "--check", action="store_true", help="check mode: change nothing, report what would change")
    passed.add_argument("-D", "--diff", action="store_true", help="show the differences in changed files")
    passed.add_argument("-v", "--verbose", action="count", default=0,
                        help="Ansible's verbosity; also streams Ansible's own output (repeat for more)")
    passed.add_argument("-f", "--forks", type=_positive_int, default=None, help="parallel processes")
    passed.add_argument("-u", "--user", default=None, help="connect as this user")
    passed.add_argument("--private-key", "--key-file", dest="private_key", default=None, metavar="FILE",
                        help="SSH private key file")
    passed.add_argument("--vault-id", action="append", default=[], help="vault identity, as for ansible-playbook")
    passed.add_argument("--vault-password-file", action="append", default=[], metavar="FILE", help="vault password file")


class Subcommand(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace, list[str]], int]  # (parsed arguments, raw argv) -> exit code
    description: str = ""
    epilog: str = ""


def _subcommands() -> dict[str, Subcommand]:
    """Every subcommand, registered here and nowhere else: a new one is one entry."""
    return {
        "run": Subcommand("run one stage against an inventory", add_run_arguments, _run_main,
                          description=_stage_list(), epilog=EPILOG),
        "mirror": Subcommand("build an offline mirror of what the stack plan installs", mirror.add_arguments,
                             mirror.main, description=mirror.DESCRIPTION, epilog=mirror.EPILOG),
        "plan": Subcommand("print the stack plan and why, with no node", plan_cmd.add_arguments, plan_cmd.main,
                           description=plan_cmd.DESCRIPTION, epilog=plan_cmd.EPILOG),
        # main() hands `gpufleet compat ...` to gpufleet.compat's own parser; listed here so --help shows it.
        "compat": Subcommand("show or refresh the release data the stack solver plans from (gpufleet compat --help)",
                             _compat_arguments, _compat_main),
    }


def _compat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("compat_args", nargs=argparse.REMAINDER, metavar="...", help="gpufleet compat's own arguments")


def _compat_main(args: argparse.Namespace, _argv: list[str]) -> int:
    from gpufleet.compat import main as compat_main
    return compat_main(args.compat_args)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpufleet", description="Provision and verify GPU training clusters "
                     "(ansible-runner front end).", epilog=EPILOG, formatter_class=console.HelpFormatter)
    parser.add_argument("--version", action=_VersionAction, help="print the versions of gpufleet, its collection "
                        "and ansible-core, and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, command in _subcommands().items():
        sub_parser = sub.add_parser(name, help=command.help, description=command.description or None,
                                    epilog=command.epilog or None, formatter_class=console.HelpFormatter)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(handler=command.main)
    return parser


def _argv_hints(argv: list[str]) -> tuple[str | None, Path | None, str | None]:
    """Stage, --artifacts and -i as far as they can be read from a command line argparse rejected."""
    stage = artifacts = inventory = None
    for i, arg in enumerate(argv):
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if arg == "--artifacts" and nxt:
            artifacts = Path(nxt)
        elif arg.startswith("--artifacts="):
            artifacts = Path(arg.split("=", 1)[1])
        elif arg in ("-i", "--inventory") and nxt:
            inventory = nxt
        elif arg.startswith("--inventory="):
            inventory = arg.split("=", 1)[1]
        elif arg in STAGE_PLAYBOOKS and i > 0 and argv[i - 1] == "run":
            stage = arg
    return stage, artifacts, inventory


def write_summary(summary: dict, claimed: artifacts_mod.ArtifactsDir | None, secrets: list[str]) -> Path | None:
    """Writes summary.json atomically into the claimed artifacts directory or -- when there is none or
    it cannot be written -- into a new temporary directory, so that a pipeline always finds a reason.
    Returns None (and says why on stderr) when no disk takes it."""
    text = scrub_text(json.dumps(summary, indent=2) + "\n", secrets)
    problems = []
    if claimed is not None:
        try:
            return claimed.write_summary(text)
        except OSError as exc:
            problems.append(f"{claimed.path}: {exc.strerror or exc}")
    fallback = None
    try:
        fallback = Path(tempfile.mkdtemp(prefix="gpufleet-summary-"))
        artifacts_mod.write_atomically(fallback / SUMMARY_FILE, text)
        return fallback / SUMMARY_FILE
    except OSError as exc:
        problems.append(f"{fallback or tempfile.gettempdir()}: {exc.strerror or exc}")
        if fallback is not None:
            shutil.rmtree(fallback, ignore_errors=True)
    print("gpufleet: summary.json could not be written (" + "; ".join(problems) + ")", file=sys.stderr)
    return None


def _broken(stage, inventory, limit, reason, started_at, claimed, secrets, config_errors=()) -> int:
    summary = broken_summary(stage, inventory, limit, reason, started_at,
                             artifacts=claimed.path if claimed is not None else None)
    summary["config_errors"] = list(config_errors)
    path = write_summary(summary, claimed, secrets)
    if config_errors:  # whole, one a line: the reason may be cut
        print(scrub_text("gpufleet: run broke: " + "\n".join(config_errors) + f"\nsummary: {path}", secrets),
              file=sys.stderr)
    else:
        print(scrub_text(f"gpufleet: run broke: {summary['reason']} (summary: {path})", secrets), file=sys.stderr)
    return EXIT_RUN_BROKEN


def _claim_or_broken(artifacts: Path | None, stage: str | None, started_at: datetime):
    """(the claimed artifacts directory, None) or (None, why it could not be claimed)."""
    try:
        if artifacts is None:
            return artifacts_mod.claim(artifacts_mod.default_directory(stage, started_at), new=True), None
        return artifacts_mod.claim(artifacts), None
    except (artifacts_mod.ArtifactsRefused, artifacts_mod.ArtifactsUnwritable) as exc:
        return None, str(exc)


def _run_main(args: argparse.Namespace, _argv: list[str]) -> int:
    started_at, secrets = args.started_at, args.secrets
    claimed, refused = _claim_or_broken(args.artifacts, args.stage, started_at)
    if claimed is None:
        return _broken(args.stage, args.inventory, args.limit, refused, started_at, None, secrets)
    with claimed:
        return _run_claimed(args, claimed, started_at, secrets)


def _run_claimed(args, claimed: artifacts_mod.ArtifactsDir, started_at: datetime, secrets: list[str]) -> int:
    options = AnsibleOptions(limit=args.limit, tags=args.tags, skip_tags=args.skip_tags, extra_vars=args.extra_vars,
                             check=args.check, diff=args.diff, verbosity=args.verbose, forks=args.forks,
                             user=args.user, private_key=args.private_key, vault_ids=args.vault_id,
                             vault_password_files=args.vault_password_file)

    def broken(reason: str, config_errors=()) -> int:
        return _broken(args.stage, args.inventory, args.limit, reason, started_at, claimed, secrets, config_errors)

    try:
        print(console.clip(f"gpufleet: stage {args.stage} on {args.inventory}"
                           + (f" (limit {args.limit})" if args.limit else ""), console.width()), flush=True)
        run = run_stage(args.stage, args.inventory, claimed, options=options, baseline_dir=args.baseline_dir,
                        progress_every=args.progress_every, secrets=secrets)
        summary = build_summary(run, args.limit, started_at)
    except RunBroken as exc:
        return broken(str(exc), getattr(exc, "problems", ()))
    except (KeyboardInterrupt, Cancelled) as exc:
        return broken(f"cancelled by {describe_signal(str(exc) or 'SIGINT')} before ansible-playbook started")
    except Exception as exc:  # the contract: a reason in summary.json and exit 2, never a bare traceback
        if os.environ.get("GPUFLEET_DEBUG"):
            raise
        return broken(f"internal error: {type(exc).__name__}: {exc} (set GPUFLEET_DEBUG=1 for the traceback)")
    summary = json.loads(scrub_text(json.dumps(summary), secrets))  # the console gets what the file gets
    path = write_summary(summary, claimed, secrets)
    print(summary_table(summary, colour=colour_enabled(sys.stdout)))
    plan_text = plan_cmd.plan_from_reports(claimed.reports)  # preflight and site: what the stack will install
    if plan_text:
        print(plan_text, end="")
    print(f"reports: {claimed.reports}")
    print(f"summary: {path}")
    if summary.get("config_errors"):  # the whole message: the reason may be cut
        print("gpufleet: run broke: " + "\n".join(summary["config_errors"]), file=sys.stderr)
    elif summary["exit_code"] == EXIT_RUN_BROKEN:
        print(f"gpufleet: run broke: {summary['reason']}", file=sys.stderr)
    elif summary["failed_nodes"]:
        print("gpufleet: nodes failed: " + ", ".join(summary["failed_nodes"]), file=sys.stderr)
    return summary["exit_code"]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        _parser().print_help(sys.stderr)
        return EXIT_RUN_BROKEN
    if argv[:1] == ["compat"]:  # release data maintenance: gpufleet/compat.py has its own parser
        from gpufleet.compat import main as compat_main
        return compat_main(argv[1:])
    started_at = datetime.now(timezone.utc)
    secrets = secret_values()
    signals = SignalGuard()  # SIGINT, SIGTERM, SIGHUP: one policy from here to the exit (gpufleet.cancel)
    signals.install()
    try:
        try:
            parser = _parser()
            unknown = _unknown_option(parser, argv)
            if unknown is not None:
                raise unknown
            args = parser.parse_args(argv)
        except UsageError as exc:
            sys.stderr.write(exc.usage)
            stage, artifacts, inventory = _argv_hints(argv)
            # A typo is no run: a summary only where the pipeline named the directory for it (--artifacts).
            if "run" not in argv or artifacts is None:
                print(f"gpufleet: error: {exc}", file=sys.stderr)
                return EXIT_RUN_BROKEN
            claimed, _refused = _claim_or_broken(artifacts, stage, started_at)
            with claimed or contextlib.nullcontext():
                return _broken(stage, inventory, None, f"bad command line: {exc}", started_at, claimed, secrets)
        args.started_at, args.secrets = started_at, secrets
        return args.handler(args, argv)
    finally:
        signals.restore()


if __name__ == "__main__":
    sys.exit(main())
