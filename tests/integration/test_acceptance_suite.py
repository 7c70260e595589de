"""The acceptance suite can fail: against a deliberately broken image, each check it
should catch fails (a suite that passes anything proves nothing)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from kerasenv.engine import docker_client

from .conftest import REPO

BROKEN_TAG = "kerasenv-test/broken:acceptance"
# Derived from the CPU image; each line breaks what one or more checks guard.
BROKEN_DOCKERFILE = """\
FROM kerasenv:tf2.21-cpu
USER root
RUN touch /root/.netrc \\
 && mkdir -p /home/keras/.cache/pip /opt/project/.git \\
 && echo leftover > /tmp/leftover \\
 && ln -s /bin/true /usr/local/bin/gcc \\
 && pip uninstall -y --quiet wheel
ENV SERVICE_API_TOKEN=not-a-secret-but-looks-like-one
LABEL io.kerasenv.tensorflow="2.99.0" org.opencontainers.image.documentation="http://example.invalid/"
"""
# test name -> why it must fail on the broken image
MUST_FAIL = {
    "test_default_user_is_keras_uid_1000": "USER root",
    "test_no_credential_files": "/root/.netrc",
    "test_no_pip_or_uv_caches": "~/.cache/pip",
    "test_no_git_directories": "/opt/project/.git",
    "test_tmp_is_empty": "/tmp/leftover",
    "test_no_compilers_but_the_one_torch_compile_needs": "gcc on PATH",
    "test_no_secret_looking_environment_variables": "SERVICE_API_TOKEN",
    "test_labels_equal_the_matrix_entry": "tensorflow label 2.99.0",
    "test_labels_equal_what_the_running_image_reports": "tensorflow label 2.99.0",
    "test_label_urls_are_https": "http:// documentation",
    "test_every_locked_package_is_installed_at_its_locked_version": "wheel uninstalled",
    "test_pip_check_is_clean": "astunparse requires wheel",
}


@pytest.fixture(scope="module")
def broken_image(docker, built_images):
    build_from_text(docker, BROKEN_DOCKERFILE, BROKEN_TAG)
    yield BROKEN_TAG
    docker.images.remove(BROKEN_TAG, force=True)


def test_acceptance_suite_fails_each_broken_property(broken_image):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "smoke_tests", "--image", broken_image, "-q", "-rfE",
         "-p", "no:cacheprovider", "-k", " or ".join(MUST_FAIL)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    failed = {line.split("::")[1].split("[")[0] for line in proc.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR "))}
    missing = {name: why for name, why in MUST_FAIL.items() if name not in failed}
    assert missing == {}, f"checks that did not catch their breakage:\n{proc.stdout[-4000:]}"
    assert proc.returncode == 1
    assert "ERROR " not in proc.stdout, "a check errored instead of failing"


# The default GPU image as it was before the ld.so.conf.d step (TF 2.21's RUNPATH lacks
# nvidia/cusolver/lib): TensorFlow's own library check must catch it.
NO_LOADER_CONFIG_TAG = "kerasenv-test/broken:cuda-no-ldconfig"
NO_LOADER_CONFIG_DOCKERFILE = """\
FROM kerasenv:tf2.21-cuda12.9
USER root
RUN rm /etc/ld.so.conf.d/kerasenv-cuda-wheels.conf && ldconfig
USER 1000:1000
"""


def build_from_text(docker, dockerfile: str, tag: str) -> None:
    import tarfile

    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    docker.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                        labels={docker_client.PROJECT_LABEL: "kerasenv"})


def test_tensorflow_library_check_fails_on_an_image_whose_loader_cannot_find_cusolver(docker, built_images):
    build_from_text(docker, NO_LOADER_CONFIG_DOCKERFILE, NO_LOADER_CONFIG_TAG)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "smoke_tests/test_tf_gpu_libraries.py", "--image", NO_LOADER_CONFIG_TAG,
             "-q", "-rfE", "-p", "no:cacheprovider", "-k", "try_dlopen_cuda_libraries_succeeds or open_later"],
            cwd=REPO, capture_output=True, text=True, timeout=900)
    finally:
        docker.images.remove(NO_LOADER_CONFIG_TAG, force=True)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "FAILED smoke_tests/test_tf_gpu_libraries.py::test_tensorflow_try_dlopen_cuda_libraries_succeeds" in proc.stdout
    assert "TensorFlow cannot dlopen libcusolver.so.11" in proc.stdout
    # NVRTC sits outside cuDNN's directory: without the loader configuration cuDNN cannot open it
    assert "nvrtc" in proc.stdout and "libnvrtc.so.12" in proc.stdout
