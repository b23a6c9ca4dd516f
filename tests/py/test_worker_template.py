"""The worker and the model file's own chat template (issue 41 §3): a
template outside the Jinja subset is refused at load with a log line that
names the construct and the format used instead; one inside it is rendered
(cai-tiny carries Llama 3's template, which every worker e2e test renders).
Tools: a template that writes tool use itself gets a turn's tools as its
`tools` variable (its own few tokens for them), one that does not gets
parley's text (hundreds), through the gateway and the worker.
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


# A Gemma-turn template that writes tool use its own way: the tools as
# their names only, a call as "CALL name {arguments}", results as role
# tool.  The worker's probes find it writes tools, so a turn's tools reach
# it as `tools` and parley adds none of its own text; Gemma 3's original
# template (no tools) gets parley's text (structured.md) instead.
TOOL_TMPL = ("{{ bos_token }}{% if tools %}<start_of_turn>system\nTOOLS:{% for t in tools %} "
             "{{ t.function.name }}{% endfor %}<end_of_turn>\n{% endif %}{% for m in messages %}"
             "<start_of_turn>{{ m.role }}\n{% if m.tool_calls %}{% for c in m.tool_calls %}CALL "
             "{{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}{% else %}"
             "{{ m.content }}{% endif %}<end_of_turn>\n{% endfor %}"
             "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
PLAIN_TMPL = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' "
              "else m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"
              "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather of a city, " + "in detail, " * 20,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _tools_cost(kafka_bootstrap, parley_bin, tmp_path, template, name):
    """prompt_tokens(tools shown) - prompt_tokens(tool_choice none) for one
    user message on a worker whose model carries template."""
    openai = pytest.importorskip("openai")
    import uuid
    from test_gateway import start_gateway, stop
    from test_structured import start_gemma_worker
    d = tmp_path / name
    d.mkdir()
    model = mk(parley_bin, d, "tiny-gemma3", template)
    prefix = f"tt-{uuid.uuid4().hex[:10]}"
    worker, _ = start_gemma_worker(kafka_bootstrap, parley_bin, model, d, prefix,
                                   "--model.chat_template", "")
    gw, url = start_gateway(kafka_bootstrap, parley_bin, prefix, "--gateway.timeout_ms", "120000")
    try:
        log = (d / "worker.log").read_text(errors="replace")
        assert "template=file family=gemma " in log, log[-3000:]
        c = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0, timeout=180)
        msgs = [{"role": "user", "content": "Weather in Paris?"}]
        n = {}
        for choice in ("auto", "none"):
            r = c.chat.completions.create(model="gemma", max_tokens=1, temperature=0, messages=msgs,
                                          tools=[WEATHER], tool_choice=choice)
            n[choice] = r.usage.prompt_tokens
        # history with a call and its result renders through the template too
        hist = msgs + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                              "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "14 C"}]
        r = c.chat.completions.create(model="gemma", max_tokens=1, temperature=0, messages=hist,
                                      tools=[WEATHER], tool_choice="none")
        assert r.usage.prompt_tokens > n["none"]
        return n["auto"] - n["none"]
    finally:
        stop(gw)
        stop(worker)


def test_tools_reach_a_template_that_writes_them_as_its_variable(kafka_bootstrap, parley_bin, tmp_path):
    own = _tools_cost(kafka_bootstrap, parley_bin, tmp_path, TOOL_TMPL, "own")
    parley = _tools_cost(kafka_bootstrap, parley_bin, tmp_path, PLAIN_TMPL, "plain")
    # own: "<start_of_turn>system\nTOOLS: get_weather<end_of_turn>\n" only;
    # plain: parley's "# Tools ... <tools>{the whole definition}</tools> ..." text
    print("\ntools cost %d prompt tokens through the template's own `tools`, %d as parley's text"
          % (own, parley))
    assert 0 < own < 60 and parley > 300, (own, parley)
