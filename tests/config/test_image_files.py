"""An image path that names no regular file (a FIFO, a device) is refused before it is opened; what is read is
bounded by max_image_mb; a file that is no image is named with the type it looks like, never its bytes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from bench.config.readers import load_dataset
from bench.core.errors import ParamsError
from tests.config.test_dataset_images import jsonl, refusal, source


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "shelf.png"
    os.mkfifo(fifo)
    said: list[bytes] = []
    writer = threading.Thread(target=lambda: said.append(fifo.write_bytes(b"root:*:20000:0:99999:7:::\n")))
    writer.start()  # before the fix the reader opened the FIFO (a bare reader waits for a writer forever)
    try:
        text = refusal(tmp_path, "shelf.png")
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # frees the writer, whether or not it was read
        writer.join()
        os.close(reader)
    assert "d.jsonl:2" in text and "column 'img'" in text and str(fifo) in text
    assert "is a FIFO (named pipe), not a regular file" in text and "root:*" not in text


@pytest.mark.parametrize("device, kind", [("/dev/zero", "character device"), ("/dev/null", "character device")])
def test_a_device_is_refused_not_read(tmp_path, device, kind):
    text = refusal(tmp_path, device)
    assert f"{device} is a {kind}, not a regular file" in text and "d.jsonl:2" in text


def test_a_folder_is_refused_naming_it(tmp_path):
    (tmp_path / "imgs").mkdir()
    assert f"{tmp_path / 'imgs'} is a folder, not a regular file" in refusal(tmp_path, "imgs")


def test_a_file_whose_size_is_not_known_ahead_is_read_only_up_to_the_limit(tmp_path):
    # /proc files are regular files of size 0 whatever they hold: the size check before reading cannot see it
    text = refusal(tmp_path, "/proc/self/maps", max_image_mb=0.0005)
    assert "/proc/self/maps" in text and "more than scenarios.dataset.max_image_mb = 0.0005 (500 bytes)" in text


@pytest.mark.parametrize("content, looks", [(b"root:*:20000:0:99999:7:::\n", "text"),
                                            (b"%PDF-1.7\n%secret", "a PDF document"),
                                            (b"PK\x03\x04secret", "a ZIP archive"),
                                            (b"\x7fELF\x02\x01secret", "an ELF executable"),
                                            (b"", "an empty file"),
                                            (b"\x00\x01\x02secret\xff", "unrecognised binary data")])
def test_a_file_that_is_no_image_is_named_with_its_type_never_its_bytes(tmp_path, content, looks):
    (tmp_path / "notes.png").write_bytes(content)
    text = refusal(tmp_path, "notes.png")
    assert f"notes.png is not a PNG, JPEG, GIF or WebP image (it looks like {looks})" in text
    assert "root:*" not in text and "secret" not in text and "PDF-1" not in text


def test_a_data_url_that_is_no_image_shows_no_bytes(tmp_path):
    text = refusal(tmp_path, "data:image/png;base64,cm9vdDoqOjIwMDAw")  # "root:*:20000"
    assert "the value is not a PNG, JPEG, GIF or WebP image (it looks like text)" in text and "root:*" not in text


def test_a_regular_image_file_is_still_read(tmp_path):
    from tests.config.test_dataset_images import png
    (tmp_path / "red.png").write_bytes(png())
    jsonl(tmp_path / "d.jsonl", [{"q": "a", "img": "red.png"}])
    (scenario,) = load_dataset(source(tmp_path / "d.jsonl", images=["img"]), [tmp_path])
    assert scenario.images[0]["mime"] == "image/png"
