"""deploy/Containerfile, built and run: `deploy/container.sh build` makes
the image with Debian's buildah (vfs storage, chroot isolation, a bookworm
base made by mmdebstrap, since no registry is reachable here), then the
image is checked the way an operator would use it:

- `parley --version` runs inside as the image's user, uid 10001, and names
  the pinned librdkafka the build stage compiled;
- the image config carries the HEALTHCHECK on /healthz, SIGTERM as the
  stop signal and /models as a volume;
- nothing of a model is in the image, and a model mounted read-only is
  read by `parley inspect` inside (at /mnt/models: `buildah run` lays the
  image's own anonymous volume over a bind mount at a VOLUME path, which
  podman, docker and Kubernetes do not).

The build compiles librdkafka and parley in the container: a few minutes
on 2 cores, once per test run (the image is removed at the end; the base
tarball stays cached in ~/.cache/parley/container).  No container engine
runs the HEALTHCHECK here: buildah has no health runner.
"""

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from conftest import REPO_ROOT, _missing

SCRIPT = REPO_ROOT / "deploy" / "container.sh"
ENV = dict(os.environ, STORAGE_DRIVER="vfs")


def _buildah(*args, check=True, timeout=120):
    r = subprocess.run(["buildah", *args], capture_output=True, text=True, env=ENV,
                       timeout=timeout)
    if check and r.returncode != 0:
        pytest.fail(f"buildah {' '.join(args)} exited {r.returncode}: {r.stderr[-2000:]}")
    return r


@pytest.fixture(scope="module")
def image():
    for tool in ("buildah", "mmdebstrap"):
        if not shutil.which(tool):
            _missing(f"{tool} is not installed (deploy/setup.sh apt)")
    if os.geteuid() != 0:
        pytest.skip("buildah with chroot isolation and vfs storage needs root here")
    tag = f"localhost/parley-test:{uuid.uuid4().hex[:8]}"
    r = subprocess.run([str(SCRIPT), "build", tag], capture_output=True, text=True,
                       timeout=1500)
    if r.returncode != 0:
        pytest.fail(f"deploy/container.sh build exited {r.returncode}:\n{r.stderr[-4000:]}"
                    f"\n{r.stdout[-4000:]}")
    yield tag
    _buildah("rmi", "-f", tag, check=False)


def _config(tag):
    out = _buildah("inspect", "--type", "image", tag).stdout
    return json.loads(out)["Docker"]["config"]


def test_version_runs_inside_as_non_root(image):
    r = subprocess.run([str(SCRIPT), "smoke", image], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "10001", r.stdout
    version = "\n".join(lines[:-1])
    assert version.startswith("parley "), version
    assert "librdkafka 2.12.1" in version, version


def test_image_config(image):
    cfg = _config(image)
    assert cfg["User"] == "10001:10001"
    hc = cfg.get("Healthcheck") or {}
    assert hc.get("Test") and "/healthz" in " ".join(hc["Test"]), hc
    assert cfg.get("StopSignal") == "SIGTERM"
    assert "/models" in (cfg.get("Volumes") or {})
    assert cfg["Entrypoint"] == ["/usr/local/bin/parley"]


def test_model_is_mounted_not_baked(image, parley_bin, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    gguf = models / "cai-tiny.gguf"
    subprocess.run([parley_bin, "mkmodel", "--preset", "cai-tiny", "--out", str(gguf)],
                   check=True, capture_output=True, timeout=120)
    os.chmod(models, 0o755)
    os.chmod(gguf, 0o644)
    c = _buildah("from", "--pull-never", image).stdout.strip()
    try:
        r = _buildah("run", "--isolation", "chroot", "--user", "10001:10001", c, "--",
                     "sh", "-c", "find / -xdev -name '*.gguf' 2>/dev/null | wc -l")
        assert r.stdout.strip() == "0", r.stdout
        r = _buildah("run", "--isolation", "chroot", "--user", "10001:10001",
                     "-v", f"{models}:/mnt/models:ro", c, "--",
                     "/usr/local/bin/parley", "inspect", "/mnt/models/cai-tiny.gguf")
        assert re.search(r"^\s*llama\.block_count\s+u32\s+12$", r.stdout, re.M), r.stdout[-2000:]
    finally:
        _buildah("rm", c, check=False)
