"""Torch's threads chosen from the cores free (memprobe_core.models.threads): env parsing, the
user's explicit choice, hysteresis on synthetic load (a fake clock and sampler: no real load,
no timing), and the batch boundaries that call ``adapt``."""

from __future__ import annotations

from typing import Any

import pytest

from memprobe_core.errors import UsageError
from memprobe_core.models import threads
from memprobe_core.models.base import Completion, Decoding, Generator, Request
from memprobe_core.models.threads import ThreadAdapter, ThreadMode, thread_mode

# --- the environment ----------------------------------------------------------------------------


def test_default_is_auto() -> None:
    assert thread_mode({}) == ThreadMode("auto")
    assert thread_mode({"MEMPROBE_THREADS": "auto"}) == ThreadMode("auto")
    assert thread_mode({"MEMPROBE_THREADS": " AUTO "}) == ThreadMode("auto")
    assert thread_mode({"MEMPROBE_THREADS": ""}) == ThreadMode("auto")  # empty: as unset


def test_a_whole_number_fixes_the_threads() -> None:
    assert thread_mode({"MEMPROBE_THREADS": "1"}) == ThreadMode("fixed", 1)
    assert thread_mode({"MEMPROBE_THREADS": " 3 "}) == ThreadMode("fixed", 3)


@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_torchs_own_variables_leave_torch_alone_unless_memprobe_threads_is_set(name: str) -> None:
    assert thread_mode({name: "4"}).kind == "user"
    assert thread_mode({name: "4"}).source == name
    assert thread_mode({name: "4", "MEMPROBE_THREADS": "2"}) == ThreadMode("fixed", 2)
    assert thread_mode({name: "4", "MEMPROBE_THREADS": "auto"}) == ThreadMode("auto")


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "auto2"])
def test_bad_values_are_a_usage_error_naming_the_variable_and_the_fix(value: str) -> None:
    with pytest.raises(UsageError) as err:
        thread_mode({"MEMPROBE_THREADS": value})
    text = str(err.value)
    assert f"MEMPROBE_THREADS={value!r}" in text
    assert "'auto'" in text and "at least 1" in text and "unset it" in text


def test_a_bad_value_stops_the_cli_with_exit_2_before_a_run_is_stored(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked when a model that runs torch here is loaded, not inside a unit (where it would
    be one failed unit, exit 1)."""
    from memprobe_core.cli import main
    from memprobe_core.store import Store
    from tests.helpers.tiny_models import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(seed=2)
    folder = tmp_path / "tiny-victim"
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "probe", "--corpus-id", "legal:mit-33338842"]
    argv += ["--method", "ps_inst", "--length", "8", "--victim", str(folder)]
    monkeypatch.setenv("MEMPROBE_THREADS", "zero")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "MEMPROBE_THREADS='zero'" in err and "at least 1" in err
    assert not store.exists() or Store(store).list_runs() == []
    monkeypatch.setenv("MEMPROBE_THREADS", "1")  # the remedy the message names
    assert main(argv) == 0
    assert len(Store(store).list_runs()) == 1


# --- choosing the count -------------------------------------------------------------------------


class FakeLoad:
    """A sampler and clock: ``busy`` is what the next sample reports, time moves per call."""

    def __init__(self, busy: float = 0.0, step_s: float = 1.0) -> None:
        self.busy = busy
        self.now = 0.0
        self.step_s = step_s
        self.samples = 0

    def sample(self) -> float | None:
        self.samples += 1
        return self.busy

    def clock(self) -> float:
        return self.now


class FakeTorch:
    def __init__(self, threads: int = 2) -> None:
        self.threads = threads
        self.sets: list[int] = []

    def get(self) -> int:
        return self.threads

    def set(self, n: int) -> None:
        self.threads = n
        self.sets.append(n)


def adapter(load: FakeLoad, torch: FakeTorch, cores: int = 2) -> tuple[ThreadAdapter, list]:
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        load.now += s

    a = ThreadAdapter(
        sampler=load,  # type: ignore[arg-type]
        clock=load.clock,
        sleep=sleep,
        cores=lambda: cores,
        get_threads=torch.get,
        set_threads=torch.set,
    )
    return a, slept


AUTO = ThreadMode("auto")


def run(a: ThreadAdapter, load: FakeLoad, busy: list[float]) -> list[int | None]:
    out = []
    for b in busy:
        load.now += load.step_s
        load.busy = b
        out.append(a.adapt(AUTO))
    return out


def test_first_call_measures_briefly_then_picks_the_free_cores_rounded_down() -> None:
    load, torch = FakeLoad(busy=1.0), FakeTorch(2)
    a, slept = adapter(load, torch)
    assert a.adapt(AUTO) == 1  # one core busy elsewhere: one thread
    assert slept == [threads.FIRST_WINDOW_S]
    assert torch.sets == [1]
    assert run(a, load, [1.0]) == [1]
    assert slept == [threads.FIRST_WINDOW_S]  # later calls never sleep


def test_idle_machine_keeps_all_cores_and_background_noise_does_not_drop_one() -> None:
    load, torch = FakeLoad(busy=0.05), FakeTorch(2)
    a, _ = adapter(load, torch)
    assert a.adapt(AUTO) == 2
    assert run(a, load, [0.1, 0.03, 0.0, 0.08]) == [2, 2, 2, 2]
    assert torch.sets == []  # already 2: never set


def test_drops_at_once_and_rises_only_after_patience_with_a_band() -> None:
    load, torch = FakeLoad(busy=0.0), FakeTorch(2)
    a, _ = adapter(load, torch)
    assert a.adapt(AUTO) == 2
    # A browser takes a fifth of a core: down at the first measurement.
    assert run(a, load, [0.2]) == [1]
    # It stops for one measurement: no rise yet (patience); load inside the band (1.9–1.95
    # free) never raises; two clear measurements in a row do.
    assert run(a, load, [0.0, 0.9, 0.0, 0.08, 0.0, 0.0]) == [1, 1, 1, 1, 1, 2]
    assert torch.sets == [1, 2]
    assert a.changes == 2


def test_does_not_flap_on_load_that_swings_around_the_boundary() -> None:
    load, torch = FakeLoad(busy=0.0), FakeTorch(2)
    a, _ = adapter(load, torch)
    a.adapt(AUTO)
    swings = [0.3, 0.0, 0.8, 0.0, 0.2, 0.0, 0.8, 0.0]
    assert run(a, load, swings) == [1] * len(swings)
    assert a.changes == 1


def test_never_more_than_the_cores_nor_fewer_than_one() -> None:
    load, torch = FakeLoad(busy=0.0), FakeTorch(16)
    a, _ = adapter(load, torch, cores=4)
    assert a.adapt(AUTO) == 4  # torch's default above our affinity: capped
    assert run(a, load, [4.0, 4.0]) == [1, 1]
    assert torch.sets == [4, 1]


def test_short_intervals_are_not_measured() -> None:
    load, torch = FakeLoad(busy=0.0, step_s=0.3), FakeTorch(2)
    a, _ = adapter(load, torch)
    a.adapt(AUTO)
    first = load.samples
    assert run(a, load, [1.0, 1.0, 1.0]) == [2, 2, 2]  # 0.3 to 0.9 s after: not sampled
    assert load.samples == first
    assert run(a, load, [1.0]) == [1]  # 1.2 s since the last measurement: sampled
    assert load.samples == first + 1


def test_fixed_and_user_modes() -> None:
    load, torch = FakeLoad(busy=2.0), FakeTorch(2)
    a, slept = adapter(load, torch)
    assert a.adapt(ThreadMode("fixed", 2)) == 2
    assert torch.sets == []
    assert a.adapt(ThreadMode("fixed", 3)) == 3
    assert torch.sets == [3]
    assert a.adapt(ThreadMode("user", source="OMP_NUM_THREADS")) is None
    assert torch.sets == [3] and load.samples == 0 and slept == []  # load never measured


def test_applies_in_each_calling_thread() -> None:
    """Torch keeps the count per thread: a thread whose count differs gets it set again."""
    load, torch = FakeLoad(busy=1.0), FakeTorch(2)
    a, _ = adapter(load, torch)
    assert a.adapt(AUTO) == 1
    torch.threads = 2  # another thread's own (default) count
    load.now += 0.1
    assert a.adapt(AUTO) == 1
    assert torch.sets == [1, 1]


def test_adapt_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("MEMPROBE_THREADS", "1")
        assert threads.adapt() == 1
        assert torch.get_num_threads() == 1
        monkeypatch.delenv("MEMPROBE_THREADS")
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert threads.adapt() is None
        assert torch.get_num_threads() == 1  # left alone
    finally:
        torch.set_num_threads(before)


# --- where adapt is called -------------------------------------------------------------------


class Echo(Generator):
    backend = "echo"
    model_id = "echo"

    def __init__(self, white_box: bool) -> None:
        self._white = white_box
        super().__init__()

    @property
    def white_box(self) -> bool:
        return self._white

    def _generate(
        self, requests: list[Request], decoding: Decoding, references: list[str] | None = None
    ) -> list[list[Completion]]:
        return [[Completion("x", 1, "length")] * decoding.n for _ in requests]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    monkeypatch.setattr(threads, "adapt", lambda: seen.append(1))
    return seen


def test_generate_adapts_for_a_torch_backend(calls: list[int]) -> None:
    gen = Echo(white_box=True)
    assert gen.runs_torch_here
    gen.generate(["a", "b"])
    gen.generate(["c"])
    assert len(calls) == 2  # once per batch


def test_generate_leaves_threads_alone_for_endpoints(calls: list[int]) -> None:
    from memprobe_core.models.openai.generator import OpenAIGenerator

    Echo(white_box=False).generate(["a"])
    endpoint: Any = OpenAIGenerator("m", base_url="http://127.0.0.1:9/v1", api_key_env="")
    assert not endpoint.runs_torch_here
    endpoint._generate = lambda requests, decoding, references=None: [
        [Completion("x", 1, "length")] for _ in requests
    ]
    endpoint.generate(["a"])
    from memprobe_core.models.vllm_backend import VLLMGenerator

    assert not object.__new__(VLLMGenerator).runs_torch_here
    assert calls == []


def test_the_hf_backend_runs_torch_here_and_adapts(calls: list[int]) -> None:
    from tests.helpers.tiny_models import tiny_hf_generator

    gen = tiny_hf_generator()
    assert gen.runs_torch_here
    gen.generate(["Licensed"], max_new_tokens=2)
    assert calls == [1]


def test_gcg_steps_and_the_scoring_pass_adapt(calls: list[int]) -> None:
    from memprobe_core.attacks.gcg_core import GcgSearchConfig, gcg_search
    from memprobe_core.membership.scoring_pass import forward_rows
    from tests.helpers.tiny_models import tiny_causal_lm

    model, tok = tiny_causal_lm(384, 0)
    ids = tok.encode("Licensed under the Apache License", add_special_tokens=False)
    gcg_search(
        model, tok, ids[:3], ids[3:6], GcgSearchConfig(steps=3, search_width=4, top_k=4, seed=0)
    )
    assert len(calls) == 3  # one per step
    forward_rows(model, [ids, ids[:2]], pad_id=0, device="cpu")
    assert len(calls) == 4
