"""The build scripts that make every image layer but the last the same bytes from the same inputs,
whenever it is built (issue 52).

- images/build/clamp-mtimes.sh: run on a made-up tree of old files (a package's own dates) and new
  ones (what the step wrote), a symlink among them: the new ones, folders and the link itself
  included, are dated SOURCE_DATE_EPOCH, the old ones and a link's target keep their dates.
- images/build/point-release-sources.sh: run on apt source files constructed from the files
  base-offline writes (src/kerasenv/images/base_offline.py, one-line sources.list) and Docker
  Hub's debian images carry (deb822 /etc/apt/sources.list.d/debian.sources): only the suite's own
  dist is kept, never -updates, -security or -backports, and it stops when nothing is left.
- images/build/image-tree.sh needs root and runs useradd on the machine it runs on, so it is
  read, not run: its shadow edit (applied to a made-up shadow file), the paths it copies and how
  it dates them.
- images/build/debian-updates.sh, read too: the point-release step uses the two scripts above and
  its cleanup keeps apt's lists/partial and lock, whose deletion would be a whiteout dated by the
  build.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from ..conftest import REPO

BUILD = REPO / "images" / "build"
CLAMP = BUILD / "clamp-mtimes.sh"
SOURCES = BUILD / "point-release-sources.sh"
IMAGE_TREE = BUILD / "image-tree.sh"
DEBIAN_UPDATES = BUILD / "debian-updates.sh"

OLD = 1_000_000_000  # a package's own date, the same in every build


# --- clamp-mtimes.sh ---------------------------------------------------------------------------

def clamp(start: int, root: Path, epoch: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(epoch)
    return subprocess.run(["bash", str(CLAMP), str(start), str(root)], env=env,
                          capture_output=True, text=True, check=True)


def step_tree(tmp: Path) -> tuple[Path, int]:
    """A root with files an earlier layer (or apt) left, dated OLD, and what this step wrote."""
    root = tmp / "root"
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "usr" / "lib" / "libold.so").write_bytes(b"old")
    (root / "usr" / "lib" / "old-link").symlink_to("libold.so")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    for path in [root / "usr" / "lib" / "old-link"]:
        os.utime(path, (OLD, OLD), follow_symlinks=False)
    for path in [root / "usr" / "lib" / "libold.so", root / "etc" / "passwd",
                 root / "usr" / "lib", root / "usr"]:
        os.utime(path, (OLD, OLD))
    # This step starts; what it writes is dated now, which is after START.
    start = int(time.time()) - 5
    (root / "etc" / "kerasenv").mkdir()
    (root / "etc" / "kerasenv" / "state").write_text("trixie@2025-01-01T00:00:00Z\n")
    (root / "etc" / "kerasenv" / "link").symlink_to("state")
    (root / "tmp").mkdir()
    return root, start


def mtime(path: Path) -> int:
    return int(os.lstat(path).st_mtime)


def test_what_the_step_wrote_is_dated_zero_and_older_files_keep_their_dates(tmp_path):
    root, start = step_tree(tmp_path)
    clamp(start, root)
    new = [root, root / "etc", root / "etc" / "kerasenv", root / "etc" / "kerasenv" / "state",
           root / "etc" / "kerasenv" / "link", root / "tmp"]
    assert {str(p.relative_to(root)): mtime(p) for p in new} == {str(p.relative_to(root)): 0 for p in new}
    old = [root / "usr", root / "usr" / "lib", root / "usr" / "lib" / "libold.so",
           root / "usr" / "lib" / "old-link", root / "etc" / "passwd"]
    assert {str(p.relative_to(root)): mtime(p) for p in old} == {str(p.relative_to(root)): OLD for p in old}


def test_source_date_epoch_gives_the_date(tmp_path):
    root, start = step_tree(tmp_path)
    clamp(start, root, epoch=1_700_000_000)
    assert mtime(root / "etc" / "kerasenv" / "state") == 1_700_000_000
    assert mtime(root / "etc" / "kerasenv" / "link") == 1_700_000_000  # the link's own mtime
    assert mtime(root / "etc" / "kerasenv") == 1_700_000_000
    assert mtime(root / "usr" / "lib" / "libold.so") == OLD


def test_a_new_link_is_dated_but_never_followed_to_its_older_target(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "lib").mkdir(parents=True)
    outside.mkdir()
    (outside / "data").write_text("x")
    (root / "lib" / "target.so").write_text("x")
    for path in [outside / "data", outside, root / "lib" / "target.so"]:
        os.utime(path, (OLD, OLD))
    start = int(time.time()) - 5
    (root / "lib" / "new-link").symlink_to("target.so")
    (root / "outside-link").symlink_to(outside)
    clamp(start, root)
    assert mtime(root / "lib" / "new-link") == 0
    assert mtime(root / "outside-link") == 0
    assert mtime(root / "lib" / "target.so") == OLD
    assert mtime(outside) == OLD and mtime(outside / "data") == OLD


def test_the_bound_is_start_minus_one_second(tmp_path):
    """Dated from the second before START: a file written in START's second is caught even though
    START was rounded down; one from two seconds before is not."""
    start = 1_500_000_000
    root = tmp_path / "root"
    root.mkdir()
    for name, when in {"at-start": start, "half-a-second-before": start - 0.5,
                       "two-seconds-before": start - 2}.items():
        (root / name).write_text(name)
        os.utime(root / name, (when, when))
    clamp(start, root, epoch=7)
    assert mtime(root / "at-start") == 7
    assert mtime(root / "half-a-second-before") == 7
    assert mtime(root / "two-seconds-before") == start - 2


# --- point-release-sources.sh ------------------------------------------------------------------

# The one-line sources.list `make base-offline` writes (src/kerasenv/images/base_offline.py,
# _slim(), with mirror http://deb.debian.org/debian and suite trixie).
BASE_OFFLINE_LIST = """\
deb http://deb.debian.org/debian trixie main
deb http://deb.debian.org/debian trixie-updates main
deb http://deb.debian.org/debian-security trixie-security main
"""

# The deb822 /etc/apt/sources.list.d/debian.sources that Docker Hub's debian:trixie-slim carries
# (that image has no /etc/apt/sources.list).
DOCKER_HUB_SOURCES = """\
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.pgp
"""


def etc_apt(tmp: Path, sources_list: str | None = None, parts: dict[str, str] | None = None) -> Path:
    etc = tmp / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources_list is not None:
        (etc / "sources.list").write_text(sources_list)
    for name, text in (parts or {}).items():
        (etc / "sources.list.d" / name).write_text(text)
    return etc


def point_release(suite: str, etc: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SOURCES), suite, str(etc), str(out)], capture_output=True, text=True)


def stanzas(text: str) -> list[dict[str, str]]:
    return [dict(line.split(": ", 1) for line in para.splitlines())
            for para in text.split("\n\n") if para.strip()]


def test_the_base_offline_list_keeps_the_suites_own_dist_only(tmp_path):
    out = tmp_path / "out"
    proc = point_release("trixie", etc_apt(tmp_path, BASE_OFFLINE_LIST), out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "sources.list").read_text() == "deb http://deb.debian.org/debian trixie main\n"
    assert list((out / "parts").iterdir()) == []


def test_one_line_entries_with_options_are_read_past_the_options(tmp_path):
    """`deb [signed-by=...] URI SUITE ...`, the options in one field or in several (constructed: the
    one-line form apt documents in sources.list(5))."""
    listed = ("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main\n"
              "deb [arch=amd64 signed-by=/k.gpg] http://deb.debian.org/debian trixie-updates main\n"
              "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian trixie main contrib\n")
    out = tmp_path / "out"
    proc = point_release("trixie", etc_apt(tmp_path, listed), out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "sources.list").read_text().splitlines() == [listed.splitlines()[0], listed.splitlines()[2]]


def test_docker_hubs_deb822_file_keeps_one_stanza_with_the_suite_alone(tmp_path):
    out = tmp_path / "out"
    proc = point_release("trixie", etc_apt(tmp_path, parts={"debian.sources": DOCKER_HUB_SOURCES}), out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "sources.list").read_text() == ""
    assert sorted(p.name for p in (out / "parts").iterdir()) == ["debian.sources"]
    assert stanzas((out / "parts" / "debian.sources").read_text()) == [{
        "Types": "deb",
        "URIs": "http://deb.debian.org/debian",
        "Suites": "trixie",
        "Components": "main",
        "Signed-By": "/usr/share/keyrings/debian-archive-keyring.pgp",
    }]


def test_backports_and_the_suites_other_dists_are_not_kept_in_list_parts(tmp_path):
    etc = etc_apt(tmp_path, parts={"extra.list": (
        "# written by hand, as a user's image might have it\n"
        "deb http://x trixie-backports main\n"
        "deb-src http://deb.debian.org/debian trixie main\n"
        "deb http://deb.debian.org/debian trixie contrib\n")})
    out = tmp_path / "out"
    proc = point_release("trixie", etc, out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "parts" / "extra.list").read_text() == "deb http://deb.debian.org/debian trixie contrib\n"


def test_a_stanza_of_backports_alone_is_dropped(tmp_path):
    backports = ("Types: deb\nURIs: http://x\nSuites: trixie-backports\nComponents: main\n")
    etc = etc_apt(tmp_path, BASE_OFFLINE_LIST, parts={"backports.sources": backports})
    out = tmp_path / "out"
    proc = point_release("trixie", etc, out)
    assert proc.returncode == 0, proc.stderr
    assert stanzas((out / "parts" / "backports.sources").read_text()) == []


def test_comments_in_the_files_neither_stop_nor_survive_as_entries(tmp_path):
    """A file that says where it came from in a comment, as hand-made and generated ones do."""
    etc = etc_apt(tmp_path, "# kerasenv base-offline (debootstrap trixie)\n" + BASE_OFFLINE_LIST,
                  parts={"debian.sources": "# From Docker Hub's debian:trixie-slim\n\n" + DOCKER_HUB_SOURCES})
    out = tmp_path / "out"
    proc = point_release("trixie", etc, out)
    assert proc.returncode == 0, proc.stderr
    assert (out / "sources.list").read_text() == "deb http://deb.debian.org/debian trixie main\n"
    kept = stanzas((out / "parts" / "debian.sources").read_text())
    assert [s["Suites"] for s in kept] == ["trixie"]


def test_no_source_of_the_suite_stops_with_one_line_naming_it(tmp_path):
    bookworm = BASE_OFFLINE_LIST.replace("trixie", "bookworm")
    etc = etc_apt(tmp_path, bookworm, parts={"debian.sources": DOCKER_HUB_SOURCES.replace("trixie", "bookworm")})
    out = tmp_path / "out"
    proc = point_release("trixie", etc, out)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "trixie" in proc.stderr, proc.stderr
    # Nothing apt could use is left behind.
    left = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "deb " not in left and "Suites:" not in left


# --- image-tree.sh (read, not run: it needs root and runs useradd) -----------------------------

def image_tree_paths(text: str) -> tuple[list[str], list[str]]:
    """The paths the script copies always, and those it adds with --cuda."""
    always = re.search(r"^paths=\(([^)]*)\)$", text, re.M)
    cuda = re.search(r'^if \[ "\$cuda" = --cuda \]; then\n(.*?)^fi$', text, re.M | re.S)
    assert always and cuda
    added = re.findall(r"^\s*paths\+=\(([^)]*)\)$", cuda.group(1), re.M)
    return always.group(1).split(), " ".join(added).split()


def test_image_tree_copies_the_users_files_and_folders_and_the_cuda_cache_only_with_cuda():
    text = IMAGE_TREE.read_text()
    always, cuda = image_tree_paths(text)
    assert always == ["/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow",
                      "/home/keras", "/workspace", "/opt/venv", "/opt/kerasenv"]
    assert cuda == ["/var/cache/kerasenv"]
    assert len(re.findall(r"paths\+?=", text)) == 2  # no other place adds a path


def test_image_tree_copies_with_parents_and_then_dates_everything():
    lines = [line.strip() for line in IMAGE_TREE.read_text().splitlines() if not line.lstrip().startswith("#")]
    tree_lines = [line for line in lines if '"$tree"' in line]
    # Into the tree only by one cp -a --parents of the paths; then every entry, links too, dated.
    assert [line for line in tree_lines if line.startswith("cp ")] == ['cp -a --parents "${paths[@]}" "$tree"/']
    assert tree_lines[-1] == 'find "$tree" -exec touch -h -d "@$epoch" {} +'
    assert lines[-1] == tree_lines[-1]
    assert 'epoch=${SOURCE_DATE_EPOCH:-0}' in lines


def test_image_tree_blanks_the_date_of_the_last_password_change(tmp_path):
    seds = re.findall(r"^sed -i -E '([^']*)' /etc/shadow$", IMAGE_TREE.read_text(), re.M)
    assert len(seds) == 1
    shadow = tmp_path / "shadow"
    # Lines as useradd writes them (the day of the build, 20123, in the third field).
    shadow.write_text("root:*:19000:0:99999:7:::\nkeras:!:20123:0:99999:7:::\n")
    subprocess.run(["sed", "-i", "-E", seds[0], str(shadow)], check=True)
    assert shadow.read_text() == "root:*:19000:0:99999:7:::\nkeras:!::0:99999:7:::\n"


# --- debian-updates.sh (read, not run: it runs apt on the machine it runs on) ------------------

def test_the_point_release_step_uses_the_suites_own_sources_and_clamps_its_dates():
    text = DEBIAN_UPDATES.read_text()
    assert 'point-release-sources.sh "$suite" /etc/apt "$sources"' in text
    clamp_block = re.search(r'^if \[ "\$mode" = point-release \]; then\n(.*?)^fi$', text[text.index("rm -f /var/log/apt"):],
                            re.M | re.S)
    assert clamp_block and 'clamp-mtimes.sh "$started"' in clamp_block.group(1)
    # START is taken before the step writes anything.
    assert text.index("started=$(date +%s)") < text.index("apt-get \"${apt_opts[@]}\" update")


def test_the_cleanup_keeps_apts_partial_folder_and_lock(tmp_path):
    text = DEBIAN_UPDATES.read_text()
    assert "rm -rf /var/lib/apt/lists/*" not in text
    assert "! -name partial" in text and "! -name lock" in text
    # The cleanup's line, run on a made-up lists folder instead of /var/lib/apt/lists.
    [line] = [line for line in text.splitlines() if line.startswith("find /var/lib/apt/lists ")]
    lists = tmp_path / "lists"
    (lists / "partial").mkdir(parents=True)
    (lists / "lock").write_text("")
    (lists / "deb.debian.org_debian_dists_trixie_InRelease").write_text("x")
    (lists / "auxfiles").mkdir()
    local = line.replace("find /var/lib/apt/lists ", f"find {lists} ", 1)
    assert "/var/lib" not in local
    subprocess.run(["bash", "-c", local], check=True)
    assert sorted(p.name for p in lists.iterdir()) == ["lock", "partial"]
