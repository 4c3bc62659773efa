"""``memprobe probe --pam`` gives the prior-aware check's ``pam_*`` keys beside ``log10_p_z``
(``--json``) and its verdict in words (text); without ``--pam`` nothing is measured; a ``K``
below the rank test's minimum is a usage error (docs/method.md, "Prior-aware check")."""

from __future__ import annotations

import json

from memprobe_core.cli import main
from memprobe_core.measuring.prior_aware import PAM_VERDICTS
from tests.unit.cli.tiny_victim import TEXT


def _probe(tmp_path, *extra: str) -> list[str]:
    store = ["--store", str(tmp_path / "runs.sqlite")]
    return [*store, "probe", TEXT, "--method", "verbatim", "--length", "40", "--victim", "tiny"] + [
        *extra
    ]


def test_probe_json_gives_the_prior_aware_check_beside_p_z(tmp_path, tiny_models, capsys):
    assert main([*_probe(tmp_path, "--pam", "--pam-prefixes", "7"), "--json"]) == 0
    verbatim = json.loads(capsys.readouterr().out)["verbatim"]
    assert "log10_p_z" in verbatim
    assert verbatim["pam_verdict"] in PAM_VERDICTS and verbatim["pam_prefixes"] == 7
    assert 1 / 8 <= verbatim["pam_p"] <= 1
    # A pasted text has no domain of the built-in corpus: every domain lends its prefixes.
    assert "every domain" in verbatim["pam_source"]
    assert main(_probe(tmp_path, "--pam", "--pam-prefixes", "7")) == 0
    assert f"Prior-aware check: {verbatim['pam_verdict']}." in capsys.readouterr().out


def test_without_pam_nothing_is_measured(tmp_path, tiny_models, capsys):
    assert main([*_probe(tmp_path), "--json"]) == 0
    verbatim = json.loads(capsys.readouterr().out)["verbatim"]
    assert not any(key.startswith("pam_") for key in verbatim)


def test_too_few_unrelated_prefixes_is_a_usage_error(tmp_path, tiny_models, capsys):
    assert main(_probe(tmp_path, "--pam", "--pam-prefixes", "3")) == 2
    assert "--pam-prefixes 3" in capsys.readouterr().err
