"""What a new user reads: help texts whose unit examples agree with how the numbers are read, and the lines
that say what was rounded, where files were written, and what a mistyped option meant."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

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
        digits = float(re.match(r"[0-9.]+", prefixed).group())
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


def test_a_mistyped_option_names_its_subcommand_and_the_closest_option() -> None:
    code, out, err = run_cli("serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--promt-len", "512")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("rooftop serve: error: unrecognized arguments: --promt-len 512")
    assert "(did you mean --prompt-len?)" in err and "(see rooftop serve --help)" in err
    code, _, err = run_cli("serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--zzz")
    assert code == 2 and "rooftop serve: error: unrecognized arguments: --zzz (see" in err


def test_timeline_and_html_say_where_they_were_written(tmp_path: Path) -> None:
    """As --plot does: the last line names the file."""
    timeline, html = tmp_path / "t.json", tmp_path / "p.html"
    trace = Path(__file__).parent.parent / "fixtures" / "h100" / "decoder_torch.json.gz"
    code, out, err = run_cli("profile", str(trace), "--chip", "h100", "--timeline", str(timeline), "--html", str(html))
    assert code == 0, err
    assert out.splitlines()[-2:] == [f"timeline written to {timeline}", f"HTML report written to {html}"]
    assert timeline.stat().st_size > 0 and html.stat().st_size > 0


def test_the_train_page_sorts_each_part_with_its_terms_and_scrolls_its_tables(tmp_path: Path) -> None:
    """Sorting the first table of train.html tore terms from their parts: each part and its terms are one
    <tbody>, which the page's script sorts as one (by the part's row); every table sits in a box that
    scrolls sideways, so a wide one no longer widens the page (profile.html was 2516 px in a 1400 px window)."""
    page = tmp_path / "train.html"
    code, _, err = run_cli(*TRAIN, "--batch-tokens", "1Mi", "--html", str(page))
    assert code == 0, err
    text = page.read_text()
    first = text[text.index("<table") : text.index("</table>")]
    bodies = re.findall(r"<tbody>(.*?)</tbody>", first, re.S)
    assert len(bodies) > 3
    for body in bodies:
        names = re.findall(r'<td class="name" data-v="[^"]*">([^<]*)</td>', body)
        assert not names[0].startswith("  ") and all(n.startswith("  ") for n in names[1:]), names
    assert "grouped ? table.tBodies : parent.rows" in text  # the script sorts the groups of a grouped table
    assert text.count("<table") == text.count('<div class="wide"><table') and "overflow-x: auto" in text


def test_profile_report_takes_a_chip_name_as_jaxlink_does() -> None:
    import rooftop
    from rooftop.hardware.catalog import get_chip

    trace = Path(__file__).parent.parent / "fixtures" / "h100" / "decoder_torch.json.gz"
    by_name = rooftop.profile_report(trace, chip="h100")
    assert by_name == rooftop.profile_report(trace, chip=get_chip("h100"))
