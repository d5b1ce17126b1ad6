#!/usr/bin/env python3
"""`xtrain serve` end to end: a tiny GPT trained here for a few steps, served on a free loopback port,
driven with urllib. Checks: greedy and seeded completions equal `xtrain generate` token for token;
streaming equals non-streaming; concurrent (batched) requests equal the same requests one at a time;
every error path answers its status with a JSON error naming the field; a full queue answers 503 with
Retry-After; the token rule; SIGTERM loses no accepted request; /metrics parses as Prometheus text.

usage: serve_test.py BUILD/xtrain
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

XTRAIN = None
FAILURES = []

TRAIN = ["--set", "xtrain.model.layers=1", "--set", "xtrain.model.d_model=32", "--set", "xtrain.model.heads=2",
         "--set", "xtrain.model.seq_len=32", "--set", "train_batch_size=4", "--set", "train_micro_batch_size_per_gpu=4",
         "--set", "xtrain.steps=3", "--set", "xtrain.save_interval=3", "--set", "xtrain.eval_interval=0",
         "--set", "xtrain.eval_batches=1", "--set", "xtrain.generate.tokens=0"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


class Server:
    def __init__(self, run, *extra):
        self.p = subprocess.Popen([XTRAIN, "serve", "--run", run, "--port", "0"] + list(extra),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            raise RuntimeError("serve did not print its address: %r %s" % (line, self.p.stderr.read()))
        self.port = int(m.group(1))

    def request(self, method, path, body=None, headers=None, raw=None):
        """(status, headers, body text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        conn.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode("utf-8")
        conn.close()
        return r.status, dict(r.getheaders()), text

    def complete(self, body, **kw):
        status, headers, text = self.request("POST", "/v1/completions", body, **kw)
        return status, headers, json.loads(text)

    def metrics(self):
        return self.request("GET", "/metrics")[2]

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        return self.p.wait(timeout=60)


def generate(run, prompt, n, top_k, temperature, seed):
    """The ids `xtrain generate --raw` prints after the prompt (byte-level run: one id per byte)."""
    out = subprocess.run([XTRAIN, "generate", "--run", run, "--prompt", prompt, "-n", str(n), "--top-k", str(top_k),
                          "--temperature", str(temperature), "--seed", str(seed), "--raw"],
                         stdout=subprocess.PIPE, check=True).stdout
    assert out.endswith(b"\n")
    return list(out[len(prompt.encode()):-1])


def sse_text(server, body):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    events = [line[6:] for line in r.read().decode("utf-8").split("\n") if line.startswith("data: ")]
    conn.close()
    chunks = [json.loads(e) for e in events[:-1]]
    return r.status, r.getheader("Content-Type"), events[-1], chunks


def test_matches_generate_and_streaming(server, run):
    for top_k, temperature, seed in [(1, 1.0, 1), (5, 0.9, 7)]:
        want = generate(run, "Call me", 24, top_k, temperature, seed)
        body = {"prompt": "Call me", "max_tokens": 24, "top_k": top_k, "temperature": temperature, "seed": seed}
        status, _, got = server.complete(body)
        check(status == 200 and got["choices"][0]["token_ids"] == want,
              "completion == xtrain generate (top_k %d, temperature %g, seed %d)" % (top_k, temperature, seed))
        check(got["usage"] == {"prompt_tokens": 7, "completion_tokens": 24, "total_tokens": 31}, "usage counts")
        status, ctype, last, chunks = sse_text(server, body)
        text = "".join(c["choices"][0]["text"] for c in chunks)
        check(status == 200 and ctype.startswith("text/event-stream") and last == "[DONE]", "stream ends with [DONE]")
        check(text == got["choices"][0]["text"], "streamed text == non-streamed text")
        check(chunks[-1]["choices"][0]["finish_reason"] == "length", "stream's last chunk has the finish reason")
    status, _, greedy = server.complete({"prompt": "Call me", "max_tokens": 24, "temperature": 0})
    check(greedy["choices"][0]["token_ids"] == generate(run, "Call me", 24, 1, 1.0, 1), "temperature 0 is greedy")


def test_batched_equals_sequential(server):
    bodies = [{"prompt": "It was %d" % i, "max_tokens": 40, "temperature": 0.8, "top_k": 10, "seed": 100 + i}
              for i in range(8)]
    alone = [server.complete(b)[2]["choices"][0]["token_ids"] for b in bodies]
    together = [None] * len(bodies)

    def one(i):
        together[i] = server.complete(bodies[i])[2]["choices"][0]["token_ids"]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(together == alone, "8 concurrent (batched) requests == the same requests one at a time")
    m = server.metrics()
    sizes = re.search(r'xtrain_serve_batch_size_bucket\{le="1"\} (\d+)', m), re.search(r"xtrain_serve_batch_size_count (\d+)", m)
    check(int(sizes[1].group(1)) > int(sizes[0].group(1)), "some decoding steps ran more than one sequence")


def test_stop_strings(server):
    """A stop string: the first ASCII byte a sampled completion produces (after its first two tokens)."""
    body = {"prompt": "The ", "max_tokens": 40, "temperature": 1.0, "seed": 3}
    ids = server.complete(body)[2]["choices"][0]["token_ids"]
    at = next((i for i, t in enumerate(ids) if i >= 2 and 32 < t < 127), None)
    if at is None:
        check(False, "stop: no ASCII byte in the sampled completion %s" % ids)
        return
    stop = chr(ids[at])
    cut = server.complete(dict(body, stop=[stop]))[2]["choices"][0]
    first = ids.index(ids[at])
    check(cut["finish_reason"] == "stop" and cut["token_ids"] == ids[:first + 1] and stop not in cut["text"],
          "a stop string ends the completion at the token that made it, and is cut from the text")


def expect_error(server, body, status, param, what, raw=None):
    code, _, text = server.request("POST", "/v1/completions", body, raw=raw)
    err = json.loads(text).get("error", {})
    check(code == status and err.get("param") == param and err.get("message"),
          "%s -> %d naming %s (got %d %s)" % (what, status, param, code, text[:160]))


def test_errors(server):
    expect_error(server, None, 400, None, "bad JSON", raw="{not json")
    expect_error(server, None, 400, None, "a JSON list body", raw="[1, 2]")
    expect_error(server, {"max_tokens": 3}, 400, "prompt", "no prompt")
    expect_error(server, {"prompt": 123}, 400, "prompt", "a number as prompt")
    expect_error(server, {"prompt": "x" * 40}, 400, "prompt", "a prompt over the context (32)")
    expect_error(server, {"prompt": [1, 300]}, 400, "prompt", "a token id outside the vocabulary")
    expect_error(server, {"prompt": "x", "max_tokens": -1}, 400, "max_tokens", "negative max_tokens")
    expect_error(server, {"prompt": "x", "max_tokens": "5"}, 400, "max_tokens", "a string as max_tokens")
    expect_error(server, {"prompt": "x", "temperature": "hot"}, 400, "temperature", "a string as temperature")
    expect_error(server, {"prompt": "x", "temperature": -1}, 400, "temperature", "a negative temperature")
    expect_error(server, {"prompt": "x", "top_p": 2}, 400, "top_p", "top_p above 1")
    expect_error(server, {"prompt": "x", "top_k": 1.5}, 400, "top_k", "a fractional top_k")
    expect_error(server, {"prompt": "x", "stop": 5}, 400, "stop", "a number as stop")
    expect_error(server, {"prompt": "x", "stream": "yes"}, 400, "stream", "a string as stream")
    expect_error(server, {"prompt": "x", "n": 2}, 400, "n", "n = 2")
    status, _, got = server.complete({"prompt": "x", "max_tokens": 2, "frobnicate": 1})
    check(status == 200 and any("frobnicate" in w for w in got.get("warnings", [])), "an unknown field is warned")
    code, _, text = server.request("POST", "/v1/classify", {"text": "hi"})
    check(code == 400 and "completions" in text, "classify on a language model -> 400")
    code, _, text = server.request("GET", "/v1/nothing")
    check(code == 404 and "error" in json.loads(text), "an unknown route -> 404 with a JSON error")
    code, _, text = server.request("GET", "/health", headers={"Host": "evil.example:80"})
    check(code == 403, "a non-loopback Host header without a token -> 403")
    code, _, text = server.request("GET", "/health")
    check(code == 200 and json.loads(text)["context"] == 32, "/health")


def test_metrics_parse(server):
    text = server.metrics()
    sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? '
                        r'(?:[-+0-9.eE]+|[-+]?Inf|NaN)$')
    bad = [l for l in text.splitlines() if l and not l.startswith("# ") and not sample.match(l)]
    check(not bad, "every /metrics line is a Prometheus sample or comment (bad: %s)" % bad[:3])
    for name in ["xtrain_serve_request_duration_seconds", "xtrain_serve_batch_size"]:
        buckets = [int(v) for v in re.findall(name + r'_bucket\{le="[^"]+"\} (\d+)', text)]
        count = int(re.search(name + r"_count (\d+)", text).group(1))
        check(buckets == sorted(buckets) and buckets[-1] == count, name + ": cumulative buckets, +Inf == count")
    errors = int(re.search(r"xtrain_serve_errors_total (\d+)", text).group(1))
    check(errors >= 17, "errors_total counts the error answers (%d)" % errors)
    for name in ["xtrain_serve_generated_tokens_total", "xtrain_serve_tokens_per_second", "xtrain_serve_queue_length",
                 "xtrain_serve_active_sequences", 'xtrain_serve_requests_total{route="/v1/completions",code="200"}']:
        check(name in text, "/metrics has " + name)


def test_full_queue(run):
    server = Server(run, "--max-batch", "1", "--max-queue", "0")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 1000000, "stream": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.fp.readline()  # the first chunk: the long request is decoding
        status, headers, text = server.request("POST", "/v1/completions", {"prompt": "y", "max_tokens": 2})
        check(status == 503 and headers.get("Retry-After") == "1" and "busy" in text, "a full queue -> 503 + Retry-After")
        conn.close()  # the server drops the long request at its next write
        deadline = time.time() + 30
        while time.time() < deadline and server.request("POST", "/v1/completions", {"prompt": "y", "max_tokens": 2})[0] != 200:
            time.sleep(0.1)
        check(time.time() < deadline, "a request is served again once the client of the long one left")
    finally:
        server.stop()


def test_token(run):
    server = Server(run, "--token", "s3cret-token-0123456789")
    try:
        check(server.request("GET", "/health")[0] == 401, "no token -> 401")
        check(server.request("GET", "/health", headers={"Authorization": "Bearer wrong"})[0] == 401, "a wrong token -> 401")
        check(server.request("GET", "/health", headers={"Authorization": "Bearer s3cret-token-0123456789"})[0] == 200,
              "the token -> 200")
    finally:
        server.stop()


def test_shutdown_loses_nothing(run):
    server = Server(run, "--max-batch", "4")
    results = [None] * 6

    def one(i):
        try:
            results[i] = server.complete({"prompt": "Ship %d" % i, "max_tokens": 400, "seed": i})
        except OSError as e:
            results[i] = (None, None, str(e))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while time.time() < deadline:  # every request accepted: 4 decoding, 2 waiting
        m = server.metrics()
        active = int(re.search(r"xtrain_serve_active_sequences (\d+)", m).group(1))
        waiting = int(re.search(r"xtrain_serve_queue_length (\d+)", m).group(1))
        if active + waiting == 6:
            break
        time.sleep(0.01)
    code = server.stop()
    for t in threads:
        t.join()
    ok = all(r[0] == 200 and r[2]["usage"]["completion_tokens"] == 400 for r in results)
    check(ok, "SIGTERM: all 6 accepted requests complete in full (%s)" % [r[0] for r in results])
    check(code == 0, "serve exits 0 after SIGTERM (got %s)" % code)


def test_classify(work):
    """An MLP on Fashion-MNIST (2 steps): one 28x28 sample, nested or flat, and the error paths."""
    run = os.path.join(work, "mlp")
    config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "fashion_mlp.json")
    subprocess.run([XTRAIN, "train", "--config", config, "--output", run, "--set", "xtrain.steps=2",
                    "--set", "train_batch_size=8", "--set", "xtrain.eval_interval=0", "--set", "xtrain.eval_batches=1",
                    "--set", "xtrain.save_interval=2"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server(run)
    try:
        image = [[[((r * 28 + c) % 17) / 17.0 for c in range(28)] for r in range(28)]]
        code, _, nested = server.request("POST", "/v1/classify", {"input": image})
        code2, _, flat = server.request("POST", "/v1/classify", {"input": [v for row in image[0] for v in row]})
        got = json.loads(nested)
        p = got.get("probabilities", [])
        check(code == 200 and len(p) == 10 and abs(sum(p) - 1) < 1e-5 and got["label"] == p.index(max(p)),
              "classify: 10 probabilities summing to 1, the label their argmax (%d %s)" % (code, nested[:120]))
        check(code2 == 200 and json.loads(flat)["probabilities"] == p, "classify: a flat list == the nested one")
        code, _, text = server.request("POST", "/v1/classify", {"input": [1.0, 2.0]})
        check(code == 400 and json.loads(text)["error"]["param"] == "input", "classify: a wrong size -> 400 naming input")
        code, _, text = server.request("POST", "/v1/classify", {"input": [[1.0], [1.0, 2.0]]})
        check(code == 400 and json.loads(text)["error"]["param"] == "input", "classify: a ragged list -> 400")
        code, _, text = server.request("POST", "/v1/classify", {"text": "hello"})
        check(code == 400 and json.loads(text)["error"]["param"] == "text", "classify: text to an image model -> 400")
        code, _, text = server.request("POST", "/v1/completions", {"prompt": "x"})
        check(code == 400 and "classify" in text, "completions on a classifier -> 400")
    finally:
        check(server.stop() == 0, "serve (classifier) exits 0")


def main():
    global XTRAIN
    XTRAIN = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="xtrain-serve-")
    run = os.path.join(work, "run")
    subprocess.run([XTRAIN, "train", "--output", run] + TRAIN, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    server = Server(run)
    try:
        test_matches_generate_and_streaming(server, run)
        test_batched_equals_sequential(server)
        test_stop_strings(server)
        test_errors(server)
        test_metrics_parse(server)
    finally:
        check(server.stop() == 0, "serve exits 0")
    test_full_queue(run)
    test_token(run)
    test_shutdown_loses_nothing(run)
    test_classify(work)
    print("\n%d failed" % len(FAILURES))
    if not FAILURES:
        subprocess.run(["rm", "-rf", work])
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
