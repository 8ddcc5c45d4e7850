"""The CLI's parser (daemon/cli/parser.py): what ``--help`` promises matches what the commands do."""

from __future__ import annotations

import pytest

from daemon.cli.daemon_cmds import EXIT_NOT_RUNNING, EXIT_STARTING
from daemon.cli.parser import build_parser


def test_status_help_names_every_exit_code(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["status", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 running" in text
    assert f"{EXIT_NOT_RUNNING} not running" in text
    assert f"{EXIT_STARTING} starting" in text
    assert (EXIT_NOT_RUNNING, EXIT_STARTING) == (3, 4)  # as daemon/cli/main.py and the README say
