"""`python manage.py jeeves <verb>`: every verb is a Django management command of its own (`jeeves_<verb>`),
which the `jeeves` entry routes to through one table, so Django's help and completion know them (pure: no
services; the verbs themselves are tested in their own files)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import ManagementUtility, call_command, get_commands, load_command_class
from django.core.management.base import CommandError

from jeeves.management.commands import jeeves
from tests.conftest import ROOT

COMMANDS = ROOT / "jeeves" / "management" / "commands"
DJANGO_OWN = {
    "--help",
    "--version",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
}


def _module(verb: str) -> str:
    return f"jeeves_{verb.replace('-', '_')}"


def _own_options(parser) -> set[str]:
    """The long options a parser accepts beyond the ones Django gives every command."""
    found = {max(a.option_strings, key=len) for a in parser._actions if a.option_strings}
    return found - DJANGO_OWN


def _completion(monkeypatch, capsys, line: str) -> list[str]:
    """What Django's bash completion offers for `line` (the word being completed is its last)."""
    words = line.split(" ")
    monkeypatch.setenv("DJANGO_AUTO_COMPLETE", "1")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
    with pytest.raises(SystemExit):
        ManagementUtility(["manage.py"]).autocomplete()
    return capsys.readouterr().out.split()


def test_every_verb_is_a_django_command_of_the_jeeves_app_and_every_command_module_a_verb():
    commands = get_commands()
    for verb, command in jeeves.VERBS.items():
        assert commands.get(_module(verb)) == "jeeves", verb
        assert type(load_command_class("jeeves", _module(verb))) is command
    modules = {p.stem for p in COMMANDS.glob("jeeves_*.py")}
    assert modules == {_module(verb) for verb in jeeves.VERBS}, "a verb module the jeeves entry does not route to"


def test_jeeves_help_lists_every_verb_with_what_it_does():
    text = jeeves.Command().create_parser("manage.py", "jeeves").format_help()
    for verb, command in jeeves.VERBS.items():
        assert f"    {verb} " in text
        assert command.help.split()[0] in text


@pytest.mark.parametrize("verb", sorted(jeeves.VERBS))
def test_a_verbs_help_under_jeeves_shows_the_options_of_its_own_command(verb, capsys):
    parser = jeeves.Command().create_parser("manage.py", "jeeves")
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([verb, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: manage.py jeeves {verb} ")
    own = jeeves.VERBS[verb]().create_parser("manage.py", _module(verb))
    for option in _own_options(own):
        assert option in text, f"jeeves {verb} --help does not show {option}"
    sub = next(a for a in parser._actions if a.dest == "verb").choices[verb]
    assert _own_options(sub) == _own_options(own)


def test_completion_offers_the_verb_commands_and_a_verbs_options(monkeypatch, capsys):
    offered = _completion(monkeypatch, capsys, "manage.py jeeves_")
    assert set(offered) == {_module(verb) for verb in jeeves.VERBS}
    offered = _completion(monkeypatch, capsys, "manage.py jeeves_audit --")
    assert {"--json", "--channel="} <= set(offered)
    offered = _completion(monkeypatch, capsys, "manage.py jeeves_reembed --d")
    assert offered == ["--dry-run"]


def test_a_verb_answers_the_same_through_jeeves_and_as_its_own_command(tmp_path: Path, monkeypatch):
    from jeeves.management.commands import jeeves_bench

    (tmp_path / "tally.py").write_text('"""Tally benchmark: counts to three."""\nprint(1, 2, 3)\n')
    monkeypatch.setattr(jeeves_bench, "BENCH_DIR", tmp_path)
    outputs = []
    for words in (["jeeves", "bench"], ["jeeves_bench"], ["jeeves", "bench", "tally"], ["jeeves_bench", "tally"]):
        out = StringIO()
        call_command(*words, stdout=out)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] and "tally  Tally benchmark: counts to three." in outputs[0]
    assert outputs[2] == outputs[3] == "1 2 3\n"
    for words in (["jeeves", "bench", "absent"], ["jeeves_bench", "absent"]):
        with pytest.raises(CommandError, match="unknown benchmark 'absent'") as raised:
            call_command(*words, stdout=StringIO())
        assert raised.value.returncode == 2


def test_jeeves_without_a_verb_or_with_an_unknown_one_is_refused():
    with pytest.raises(CommandError, match="verb"):
        call_command("jeeves", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="invalid choice: 'fly'"):
        call_command("jeeves", "fly", stdout=StringIO(), stderr=StringIO())
