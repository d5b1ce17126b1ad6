#!/usr/bin/env python3
"""A bounded load generator for `xtrain serve` (Python stdlib only): N client threads on loopback share a
fixed number of POST /v1/completions requests (each with its own seed), each client sending its next
request when the previous one is answered. Prints one JSON line: requests/s, generated tokens/s, and the
p50/p99 request latency in seconds.

usage: serve_load.py --port P --clients N --requests R [--max-tokens M] [--prompt TEXT]
"""
import argparse
import http.client
import json
import threading
import time


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Call me Ishmael. ")
    a = ap.parse_args()
    lock = threading.Lock()
    next_request = [0]
    latencies, tokens, errors = [], [0], [0]

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=600)
        while True:
            with lock:
                i = next_request[0]
                if i >= a.requests:
                    break
                next_request[0] += 1
            body = json.dumps({"prompt": a.prompt, "max_tokens": a.max_tokens, "seed": i, "top_k": 40})
            start = time.perf_counter()
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            elapsed = time.perf_counter() - start
            with lock:
                if r.status != 200:
                    errors[0] += 1
                    continue
                latencies.append(elapsed)
                tokens[0] += json.loads(data)["usage"]["completion_tokens"]
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(a.clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    print(json.dumps({"clients": a.clients, "requests": len(latencies), "errors": errors[0], "seconds": round(wall, 3),
                      "requests_per_s": round(len(latencies) / wall, 3), "tokens_per_s": round(tokens[0] / wall, 1),
                      "p50_s": round(percentile(latencies, 0.5), 4), "p99_s": round(percentile(latencies, 0.99), 4)}))


if __name__ == "__main__":
    main()
