"""The one map from errors to the ``memprobe`` command's exit codes, and how they are shown.

Exit codes:
    0    everything asked for was done.
    1    the run finished but some units failed (their errors are in the report).
    2    bad usage or input (unknown method, unreadable dataset, unknown run, unwritable output,
         a store it cannot use).
    3    a model could not be loaded or queried.
    70   internal error: an exception memprobe did not expect (a bug in memprobe, never a verdict
         on the model: not 0, 1, 2 or 3, which a pipeline reads as one); shown as one line,
         ``--verbose`` shows the traceback. 70 is sysexits.h's EX_SOFTWARE.
    130  interrupted (Ctrl-C); an audit can be continued with ``memprobe resume RUN``.

No other code is ever returned (:data:`CONTRACT`).
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import MissingModelError
from memprobe_core.cli.option_flags import library_flags
from memprobe_core.errors import MemprobeError, OptionError
from memprobe_core.models.base import ModelError
from memprobe_core.ner.labels import LabelError
from memprobe_core.ner.model import NerModelError
from memprobe_core.option_fields import options_of
from memprobe_core.store.schema import StoreError

EXIT_OK, EXIT_UNITS_FAILED, EXIT_USAGE, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE: an unexpected exception, a bug in memprobe
# Every code `memprobe` may exit with; main() turns anything else into EXIT_INTERNAL.
CONTRACT = frozenset(
    {EXIT_OK, EXIT_UNITS_FAILED, EXIT_USAGE, EXIT_MODEL, EXIT_INTERNAL, EXIT_INTERRUPTED}
)

# Most specific first: the first class an error is an instance of decides.
EXIT_CODES: list[tuple[type[BaseException], int, str]] = [
    (ModelError, EXIT_MODEL, "model error"),
    (MissingModelError, EXIT_MODEL, "model error"),
    (NerModelError, EXIT_MODEL, "model error"),
    (LabelError, EXIT_MODEL, "model error"),  # the NER model has no usable person label
    (MemprobeError, EXIT_USAGE, "error"),
    # Not ours, but the user's to fix (a corrupted or read-only store, a full disk, an
    # unwritable path, a bad value): one line, exit 2; `--verbose` shows the traceback.
    (sqlite3.Error, EXIT_USAGE, "store error"),
    (OSError, EXIT_USAGE, "error"),
    (ValueError, EXIT_USAGE, "error"),
]

EPILOG_EXIT_CODES = """\
exit codes:
  0    done
  1    the run finished but some units failed (see `memprobe report RUN`)
  2    bad usage or input (unknown method, bad dataset, unknown run, unwritable output,
       store it cannot use)
  3    a model could not be loaded or queried
  70   internal error: a bug in memprobe, not a verdict (--verbose shows the traceback)
  130  interrupted (Ctrl-C); continue an audit with `memprobe resume RUN`"""


def exit_code_for(exc: BaseException) -> tuple[int, str] | None:
    """``(exit code, label)`` for a memprobe error, ``None`` for anything else (a bug)."""
    for cls, code, label in EXIT_CODES:
        if isinstance(exc, cls):
            return code, label
    return None


# Library argument names that error messages mention, and the flag a CLI user types instead.
# Messages are written for the library (``encoding='latin-1'``); the CLI shows them with flags
# (``--encoding 'latin-1'``), so nobody is told to pass an argument they cannot reach.
CLI_FLAGS: dict[str, str] = {
    "text_column": "--text-column",
    "id_column": "--id-column",
    "domain_column": "--domain-column",
    "encoding": "--encoding",
    "txt_mode": "--txt-mode",
    "max_bytes": "--max-bytes",
    "max_snippets": "--max-snippets",
    "limit": "--limit",
    "base_url": "--base-url",
    "api_key_env": "--api-key-env",
    # The option classes' fields, from their declarations (memprobe_core.option_fields).
    **library_flags(),
    "significance": "--significance",
    "select": "--select",
    "executor": "--executor",
    # `memprobe audit --executor ray`
    "address": "--ray-address",
    "workers": "--workers",
    "gpus_per_worker": "--gpus-per-worker",
    "cpus_per_worker": "--cpus-per-worker",
    "max_attempts": "--max-attempts",
    "prefetch_window": "--prefetch-window",
    # `memprobe ner`
    "in_names": "--in-names",
    "in_conll": "--in-conll",
    "out_names": "--out-names",
    # `memprobe audit --dc-pdd-corpus FILE`: how that file is read
    "dc_pdd_encoding": "--dc-pdd-encoding",
    "dc_pdd_max_bytes": "--dc-pdd-max-bytes",
    "dc_pdd_max_texts": "--dc-pdd-max-texts",
}


# Library remedies no `memprobe` flag reaches, said as what a CLI user can do instead (the
# library's own message keeps its argument names: its users can pass them).
CLI_REWORDS: list[tuple[re.Pattern[str], str]] = [
    # memprobe_core.models.openai.transport: one answer over max_response_bytes (8 MiB on the CLI)
    (re.compile(r"max_response_bytes=(\S+) \("), r"memprobe's cap for one answer (\1 bytes, "),
    (
        re.compile(r"; lower max_new_tokens or n, or raise max_response_bytes"),
        "; nothing on memprobe's side raises that cap: have the server send shorter answers",
    ),
    # memprobe_core.models.openai.generator: the server does not echo prompt logprobs
    (re.compile(r", or pass prompt_logprobs=False\)"), ")"),
]


# A method's option named as `method.field` (`divergence.reference_encoding=…`, one without a
# flag of its own): the CLI sets it with `--method-option method.field=VALUE`.
@cache
def _method_option_pattern(sections: tuple[tuple[str, type], ...]) -> re.Pattern[str]:
    names = sorted(
        (f"{key}.{opt.name}" for key, cls in sections for opt in options_of(cls)),
        key=len,
        reverse=True,
    )
    return re.compile(
        rf"(?<![\w.-])({'|'.join(map(re.escape, names))})(?:='([^']*)'|=(\S+))?(?!\w)"
    )


def _method_options() -> re.Pattern[str]:
    """The pattern of every registered method's ``section.field`` (read when a message is shown:
    a method registered after this module was imported is in it)."""
    sections = {  # --method-option takes a method's name: a section named otherwise is left
        spec.name: spec.options_class
        for spec in registry.specs()
        if spec.options_key == spec.name and spec.options_class is not None
    }
    return _method_option_pattern(tuple(sorted(sections.items())))


# `name=` always; a bare name only when it is an identifier no sentence uses (has a `_`).
_NAMES = "|".join(sorted(CLI_FLAGS, key=len, reverse=True))
_LIBRARY_NAME = re.compile(rf"(?<![\w.-])(?:({_NAMES})=|(\w+_\w+)(?!\w))")

# The endpoint backend names the variable it read the key from; the CLI adds how to change it.
_KEY_VARIABLE = re.compile(r"in the environment variable \w+")


def cli_message(exc: BaseException) -> str:
    """How the ``memprobe`` command shows an error: an option error names the flag a user types
    (``--pairs 0: give …``), a store error says how to pick another store; any other message has
    its library argument names replaced by flags (:func:`cli_text`)."""
    if isinstance(exc, OptionError) and exc.option in CLI_FLAGS:
        return f"{CLI_FLAGS[exc.option]} {exc.value!r}: {cli_text(exc.problem)}"
    text = cli_text(" ".join(str(exc).split()) or type(exc).__name__)
    if isinstance(exc, StoreError):
        text += " (pick it with --store PATH)"
    return text


def cli_text(message: str) -> str:
    """``message`` with library argument names replaced by their ``memprobe`` flags.

    ``name=value`` becomes ``--flag value``; ``name=`` and a bare ``snake_name`` become ``--flag``.
    """

    def flag(match: re.Match[str]) -> str:
        if match.group(1):
            following = message[match.end() : match.end() + 1]
            return CLI_FLAGS[match.group(1)] + (
                " " if following and not following.isspace() else ""
            )
        return CLI_FLAGS.get(match.group(2), match.group(2))

    def method_option(match: re.Match[str]) -> str:
        value = match.group(2) if match.group(2) is not None else match.group(3)
        return f"--method-option {match.group(1)}={value or 'VALUE'}"

    message = _KEY_VARIABLE.sub(r"\g<0> (or name another with --api-key-env)", message)
    for pattern, words in CLI_REWORDS:
        message = pattern.sub(words, message)
    message = _method_options().sub(method_option, message)
    return _LIBRARY_NAME.sub(flag, message)
