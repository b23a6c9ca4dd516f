"""The worker and the model file's own chat template (issue 41 §3): a
template outside the Jinja subset is refused at load with a log line that
names the construct and the format used instead; one inside it is rendered
(cai-tiny carries Llama 3's template, which every worker e2e test renders).
"""
import subprocess
import sys
import time

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("confluent_kafka")

from worker_kit import Env  # noqa: E402


def mk(parley_bin, tmp_path, preset, template):
    base = tmp_path / (preset + ".gguf")
    subprocess.run([str(parley_bin), "mkmodel", "--preset", preset, "--out", str(base)],
                   check=True, capture_output=True, timeout=60)
    if template is None:
        return base
    out = tmp_path / (preset + "-tmpl.gguf")
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--chat-template", template,
                    str(base), str(out)], check=True, capture_output=True, input=b"y\n", timeout=120)
    return out


def wait_log(env, wid, what, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        if what in env.log(wid):
            return env.log(wid)
        p = env.procs.get(wid)
        if p is not None and p.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("not seen: %s\n%s" % (what, env.log(wid)[-3000:]))


def test_refused_template_falls_back_with_a_log_line(kafka_bootstrap, parley_bin, tmp_path):
    model = mk(parley_bin, tmp_path, "tiny-gemma3", "{% include 'x.jinja' %}{{ messages }}")
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    try:
        env.start("t1")
        log = wait_log(env, "t1", "event=worker_ready")
        line = [ln for ln in log.splitlines() if "event=chat_template_refused" in ln]
        assert line and "include" in line[0] and "fallback=gemma" in line[0], log[-3000:]
        ready = [ln for ln in log.splitlines() if "event=worker_ready" in ln][0]
        assert "template=gemma " in ready
    finally:
        env.stop_all()


def test_files_template_is_rendered(kafka_bootstrap, parley_bin, tmp_path):
    model = mk(parley_bin, tmp_path, "cai-tiny", None)
    env = Env(kafka_bootstrap, parley_bin, model, tmp_path)
    try:
        env.start("t2")
        log = wait_log(env, "t2", "event=worker_ready")
        ready = [ln for ln in log.splitlines() if "event=worker_ready" in ln][0]
        assert "template=file family=llama3 " in ready
        assert "chat_template_refused" not in log
    finally:
        env.stop_all()
