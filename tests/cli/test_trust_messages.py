"""What a new user reads: help texts whose unit examples agree with how the numbers are read, and the lines
that say what was rounded, where files were written, and what a mistyped option meant."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from rooftop.cli.main import build_parser
from rooftop.units import parse_number
from tests.conftest import run_cli

_PAIR = re.compile(r"e\.g\. ([0-9][0-9.]*[A-Za-z]*) or ([0-9][0-9.]*[A-Za-z]*)")


def _helps(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for opt, text in _helps(sub):
                    yield f"{name} {opt}", text
        elif action.help:
            yield "/".join(action.option_strings) or action.dest, action.help


def test_a_help_that_writes_one_number_two_ways_reads_them_alike() -> None:
    """ "2048 or 2k" told the reader that 2k is 2048, where k is 1000 (2Ki is 2048): an example written plainly
    and with a prefix, the prefixed one the same digits over 1000 or 1024, must read as the same number."""
    pairs = [(opt, a, b) for opt, text in _helps(build_parser()) for a, b in _PAIR.findall(text)]
    assert pairs
    for opt, plain, prefixed in pairs:
        digits = float(re.match(r"[0-9.]+", prefixed).group())  # type: ignore[union-attr]
        if plain.isdigit() and digits in (int(plain) / 1000, int(plain) / 1024):
            assert parse_number(plain) == parse_number(prefixed), (opt, plain, prefixed)


TRAIN = ["train", "llama-3-8b", "--chip", "h100", "--chips", "64", "--seq-len", "4096", "--top", "1"]


def test_a_batch_rounded_to_whole_sequences_says_so() -> None:
    code, out, err = run_cli(*TRAIN, "--batch-tokens", "1M")
    assert code == 0, err
    # 1M = 1,000,000 tokens = 244.140625 sequences of 4096: the nearest whole number, 244 (999,424 tokens)
    assert "--batch-tokens 1M = 1,000,000 tokens" in out and "244.1 sequences" in out
    assert f"rounded to 244 sequences, {244 * 4096:,} tokens a step" in out
    code, out, err = run_cli(*TRAIN, "--batch-tokens", "1Mi")  # 2^20 / 4096 = 256 sequences exactly
    assert code == 0 and "rounded" not in out, err
