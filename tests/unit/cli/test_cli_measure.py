"""The CLI's options of what is measured beside Mem: bad values exit 2 naming the flag."""

from __future__ import annotations

import pytest

from memprobe_core.cli import main
from memprobe_core.store import Store


@pytest.mark.parametrize(
    "flag, value", [("--min-k-percent", "0"), ("--min-k-percent", "150"), ("--extract-k", "0")]
)
def test_a_bad_measure_option_exits_2_naming_its_flag(tmp_path, capsys, flag, value):
    args = ["--store", str(tmp_path / "runs.sqlite"), "probe", "--victim", "fake"]
    args += ["--attacker", "fake", "--corpus-id", "legal:mit-33338842", flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{flag} " in err and "out of range" in err
    store = tmp_path / "runs.sqlite"
    assert not store.exists() or Store(store).list_runs() == []  # refused before any run
