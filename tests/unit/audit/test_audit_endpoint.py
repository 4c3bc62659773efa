"""An audit goes on only where it was sent: resumed with models served from another endpoint
(what the Audit page's sidebar may hold), it is refused before it is claimed or anything is
asked; with the models of its first session it goes on."""

from __future__ import annotations

import pytest

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.audit import resume_audit, run_audit, start_audit
from memprobe_core.models.endpoints import EndpointMismatch
from memprobe_core.store import Store
from tests.helpers.scripted_models import parrot
from tests.unit.audit.test_audit import FakeRunner, models, snippets


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "runs.sqlite") as s:
        yield s


def test_an_audit_resumed_on_another_endpoint_is_refused_before_anything(store):
    run_id = start_audit(store, snippets(3), ["ps_inst"], [20])
    run_audit(store, run_id, models=models(), runner=FakeRunner(interrupt_on=("s1", "ps_inst")))
    before = store.get_run(run_id)
    said = "w14 w15 w16 w17"
    elsewhere = ModelSet(
        victim=parrot("test/parrot-elsewhere", said),
        base=parrot("test/base", said),
        attacker=parrot("test/att", said),
    )
    runner = FakeRunner()
    with pytest.raises(EndpointMismatch, match="run 1's victim was sent to model 'test/parrot'"):
        resume_audit(store, run_id, models=elsewhere, runner=runner)
    assert runner.calls == [] and store.get_run(run_id) == before  # not even claimed
    summary = resume_audit(store, run_id, models=models(), runner=runner)
    assert summary.status == "finished" and runner.calls
