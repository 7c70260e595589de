"""The tags a push writes: the dated full tag keeps an image reachable after a security rebuild
moves the short and full tags."""

from __future__ import annotations

from kerasenv.publish import tags

STATE = "bookworm@2026-07-11T10:16:37Z bookworm-updates@2026-12-02T02:09:57Z bookworm-security@2026-12-01T19:40:00Z"


def test_the_dated_full_tag_is_the_newest_debian_archive_date(real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    written = tags.tags(real_matrix, v, {"io.kerasenv.debian-updates": STATE})
    assert written == [v.id, tags.full_tag(v), f"{tags.full_tag(v)}-20261202", "latest-cpu"]


def test_an_image_without_the_label_gets_no_dated_tag(real_matrix):
    v = real_matrix.get(real_matrix.default_gpu)
    assert tags.tags(real_matrix, v, {}) == [v.id, tags.full_tag(v), "latest-gpu"]
    assert tags.dated_tag(v, None) is None
