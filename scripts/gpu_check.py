#!/usr/bin/env python3
"""Checks a CUDA build of scalelab-worker on a GPU node, end to end (scripts/gpu-check.sh
builds it and runs this). Each check prints PASS or FAIL and what it saw; the exit
status is the number of failures. What is checked:

  1. the worker sees the GPU and refuses nothing it should run (bf16 on compute 8.0+);
  2. training on the GPU learns the SYNTHETIC learnable set, with checkpoints;
  3. a run stopped after epoch k and resumed continues at k+1 and ends the run;
  4. two ranks that share the one GPU train over Gloo (CUDA tensors through c10d), and
     their averaged gradients equal one process's on the concatenated batch;
  5. every rank on its own GPU over NCCL, when the node has two or more; on one GPU, two
     NCCL ranks must fail with NCCL's own error and end (no hang);
  6. throughput of the training step against PyTorch's Python front end on the same GPU
     (bench/pytorch_peer.py), interleaved A/B, medians: reported, not asserted;
  7. ResNet-18 and MobileNetV2 (the worker's CIFAR forms): each trains three epochs on the
     GPU with checkpoints and its training loss falls, and its training step is timed against
     PyTorch's torchvision model (when the node's python3 has torchvision).
  8. the gradient noise scale (noise_meter.h) in those runs: every epoch of the fp32 and
     bf16 runs (one rank: the differenced estimator) and of the two-rank run (K = 2) carries
     a finite, positive B_simple with its estimator; and its cost, the step timed with and
     without it (`bench --noise-scale true|false`), interleaved: reported, not asserted.

--sections seed,models picks what runs (default both): seed is 1-6 and 8, on the seed CNN;
noise is 8's cost alone.

--device cpu runs the same checks, smaller, on the CPU (Gloo; no NCCL check), so that
this script itself can be tested on a machine without a GPU.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []
port = [29800]


def next_port():
    port[0] += 1
    return port[0]


def check(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    if not ok:
        failures.append(name)


def events(text, kind=None):
    """The bodies of the WorkerEvent lines (proto/scalelab/v1/worker.proto) of `kind`:
    {"epoch": {...}} gives {...}. Numbers of type int64 arrive as strings."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if len(e) == 1 and (kind is None or kind in e):
                out.append(next(iter(e.values())))
    return out


def run_ranks(commands, timeout, envs=None):
    """Starts one process per command (rank 0 first), each in its own process group and
    with envs[i] if given; returns [(returncode, stdout, stderr)], or None after killing
    every one still running at timeout."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=envs[i] if envs else None, start_new_session=True)
             for i, c in enumerate(commands)]
    deadline = time.monotonic() + timeout
    results = []
    try:
        for p in procs:
            left = max(1.0, deadline - time.monotonic())
            out, err = p.communicate(timeout=left)
            results.append((p.returncode, out, err))
    except subprocess.TimeoutExpired:
        results = None
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return results


def data_parallel(cmd, world, extra=()):
    rendezvous = f"127.0.0.1:{next_port()}"
    return [cmd + ["--rank", str(r), "--world-size", str(world), "--rendezvous", rendezvous] + list(extra)
            for r in range(world)]


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return sum(1 for line in out.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        return 0


def bench(cmd_scalelab, cmd_peer, args, repeats):
    """Median images/s of each side's training step, interleaved A/B; NaN for a side
    that failed (its error printed), and for the peer when cmd_peer is None (not run)."""
    sides = {"scalelab": [], "pytorch": []}
    for _ in range(repeats):
        for side, cmd in (("scalelab", cmd_scalelab), ("pytorch", cmd_peer)):
            if cmd is None:
                continue
            r = subprocess.run(cmd + args, capture_output=True, text=True, timeout=300)
            b = events(r.stdout, "bench")
            sides[side].append(b[0]["images_per_second"] if b else float("nan"))
            if not b:
                print(f"  {side} bench failed: {r.stderr.strip()[-300:]}", flush=True)
    return tuple(statistics.median(v) if v else float("nan") for v in (sides["scalelab"], sides["pytorch"]))


def report(title, columns, table, path):
    """Prints a bench table (text columns, then images/s, then the ratio) and saves it as JSON."""
    print(f"\n{title}")
    print(" ".join(f"{c:>12}" for c in columns))
    for row in table:
        print(" ".join(f"{v:>12.3f}" if i == len(row) - 1 else f"{v:>12.0f}" if isinstance(v, float)
                       else f"{v:>12}" for i, v in enumerate(row)))
    with open(path, "w") as f:
        json.dump([dict(zip(columns, row)) for row in table], f, indent=1)


def noise_of(per_epoch, ranks):
    """Check 8's verdict on a run's epochs: (ok, detail). Every epoch must carry the noise
    scale with the estimator a run of `ranks` ranks uses (worker.proto's EpochMetrics)."""
    noise = [e.get("gradient_noise", {}) for e in per_epoch]
    b = [n.get("b_simple", 0.0) for n in noise]
    k = {n.get("batches_per_step", 0) for n in noise}
    differenced = {bool(n.get("differenced", False)) for n in noise}
    ok = (bool(noise) and all(x == x and 0 < x < float("inf") for x in b) and k == {ranks}
          and differenced == {ranks == 1})
    return ok, (f"B_simple per epoch {[round(x, 1) for x in b]}, K {sorted(k)}, "
                f"{'differenced' if True in differenced else 'across ranks'}")


def noise_cost(a, worker, on):
    """Check 8's cost: the seed CNN's step with and without the noise scale, interleaved."""
    size, steps, warmup = (256, 50, 10) if a.device == "cuda" else (64, 5, 2)
    table = []
    for precision in ("fp32", "bf16"):
        args = ["--device", a.device, "--batch-size", str(size), "--threads", "1", "--steps", str(steps),
                "--warmup-steps", str(warmup), "--precision", precision, "--channels-last", "on"]
        without, with_ = bench(worker + ["bench", "--noise-scale", "false"],
                               worker + ["bench", "--noise-scale", "true"], args, a.repeats)
        check(f"bench {precision} with and without the noise scale, both ran", without == without and with_ == with_,
              f"{without:.0f} img/s without, {with_:.0f} img/s with")
        table.append((size, precision, without, with_, with_ / without if without else float("nan")))
    report(f"the gradient noise scale's cost on {on}, one rank, images/s (median of {a.repeats} interleaved runs)",
           ("batch", "precision", "without", "with", "ratio"), table, os.path.join(a.out, "gpu-noise-cost.json"))


def seed_checks(a, worker, peer, data, work, train, gpus, on, batch, epochs):
    """Checks 1-6, on the seed CNN."""
    whole = None  # the uninterrupted fp32 run's weights_sha256
    # 1 + 2: one rank, fp32 then bf16, with checkpoints.
    for precision in ("fp32", "bf16"):
        ck = os.path.join(work, f"ck-{precision}")
        (rc, out, err), = run_ranks([train + ["--epochs", str(epochs), "--precision", precision,
                                              "--checkpoint-dir", ck]], 600)
        started, per_epoch, fin = events(out, "started"), events(out, "epoch"), events(out, "finished")
        device = started[0].get("device") if started else None
        acc = fin[0]["final_test_accuracy"] if fin else 0.0
        ips = statistics.median(e["images_per_second"] for e in per_epoch[1:]) if len(per_epoch) > 1 else 0
        check(f"train {precision} on {on}", rc == 0 and device == ("cuda:0" if a.device == "cuda" else "cpu")
              and acc > 0.5 and len(events(out, "checkpoint")) == epochs,
              f"rc {rc}, device {device}, test accuracy per epoch "
              f"{[round(e['test_accuracy'], 3) for e in per_epoch]}, {ips:.0f} img/s {err.strip()[-300:]}")
        if precision == "fp32":
            whole = fin[0].get("weights_sha256") if fin else None
        ok, detail = noise_of(per_epoch, 1)
        check(f"noise scale of the {precision} run on {on}", rc == 0 and ok, detail)

    # 3: stop after epoch k, resume to the end.
    ck = os.path.join(work, "ck-resume")
    k = epochs - 2
    (rc1, out1, err1), = run_ranks([train + ["--epochs", str(k), "--checkpoint-dir", ck]], 600)
    (rc2, out2, err2), = run_ranks([train + ["--epochs", str(epochs), "--checkpoint-dir", ck, "--resume", "on"]],
                                   600)
    started = events(out2, "started")
    resumed = started[0].get("resumed_from_epoch") if started else None
    done = [e["epoch"] for e in events(out2, "epoch")]
    fin = events(out2, "finished")
    check(f"resume on {on}", rc1 == 0 and rc2 == 0 and resumed == k and done == [k + 1, k + 2] and bool(fin),
          f"rc {rc1}/{rc2}, resumed after epoch {resumed}, then epochs {done}, final accuracy "
          f"{fin[0]['final_test_accuracy'] if fin else float('nan'):.3f}; "
          f"weights {'equal to' if fin and fin[0].get('weights_sha256') == whole else 'differ from'} "
          f"the uninterrupted run's (bitwise equality is promised for 1 CPU thread only, and "
          f"tst_trainer_resume asserts it there) {err2.strip()[-300:]}")

    # 4: two ranks share the GPU (or the CPU's cores) over Gloo, at the same global batch.
    half = train[:train.index("--batch-size")] + ["--batch-size", str(batch // 2)]
    results = run_ranks(data_parallel(half + ["--epochs", str(epochs), "--backend", "gloo"], 2), 900)
    ok = results is not None and all(rc == 0 for rc, _, _ in results)
    fin = events(results[0][1], "finished") if results else []
    check(f"2 ranks on {on} over Gloo", ok and bool(fin) and fin[0]["final_test_accuracy"] > 0.5,
          "timed out" if results is None else
          f"rc {[rc for rc, _, _ in results]}, final accuracy {fin[0]['final_test_accuracy'] if fin else None}"
          f"; {results[0][2].strip()[-300:]}")
    ok, detail = noise_of(events(results[0][1], "epoch"), 2) if results else (False, "timed out")
    check(f"noise scale of 2 ranks on {on} over Gloo", ok, detail)
    gc = worker + ["gradient-check", "--data-dir", data, "--device", a.device, "--backend", "gloo",
                   "--batch-size", "32"]
    results = run_ranks(data_parallel(gc, 2), 300)
    g = events(results[0][1], "gradient_check") if results else []
    if g:
        diff, grad = g[0]["max_abs_diff"], g[0]["max_abs_grad"]
        check(f"gradients of 2 ranks = 1 rank on the whole batch ({a.device}, Gloo)", diff <= 1e-4 * max(grad, 1e-12) + 1e-6,
              f"max |averaged - whole| = {diff:.3g}, max |grad| = {grad:.3g}")
    else:
        check(f"gradients of 2 ranks = 1 rank on the whole batch ({a.device}, Gloo)", False,
              "no result" if not results else results[0][2].strip()[-400:])

    # 5: NCCL.
    if a.device == "cpu":
        print("SKIP  NCCL: --device cpu", flush=True)
    elif gpus >= 2:
        # As the agent places ranks: each sees one GPU, as cuda:0.
        envs = [dict(os.environ, CUDA_VISIBLE_DEVICES=str(i)) for i in range(2)]
        results = run_ranks(data_parallel(half + ["--epochs", str(epochs), "--backend", "nccl"], 2), 900, envs)
        fin = events(results[0][1], "finished") if results else []
        check("2 ranks on 2 GPUs over NCCL", results is not None and all(rc == 0 for rc, _, _ in results)
              and bool(fin) and fin[0]["final_test_accuracy"] > 0.5,
              "timed out" if results is None else
              f"rc {[rc for rc, _, _ in results]}, final accuracy {fin[0]['final_test_accuracy'] if fin else None}"
              f"; {results[0][2].strip()[-300:]}")
    else:
        start = time.monotonic()
        results = run_ranks(data_parallel(train + ["--epochs", "1", "--backend", "nccl",
                                                   "--collective-timeout-s", "60"], 2), 240)
        took = time.monotonic() - start
        if results is None:
            check("2 NCCL ranks on one GPU fail and end", False, "hung: killed after 240 s")
        else:
            errors = [e.get("message", "") for _, out, _ in results for e in events(out, "error")]
            stderr = " | ".join(err.strip().splitlines()[-1] for _, _, err in results if err.strip())
            check("2 NCCL ranks on one GPU fail and end",
                  all(rc != 0 for rc, _, _ in results) and any("NCCL" in m or "nccl" in m for m in errors + [stderr]),
                  f"both ended in {took:.0f} s, rc {[rc for rc, _, _ in results]}: {(errors or [stderr])[0][:300]}")

    # 6: throughput against PyTorch on the same GPU.
    size, steps, warmup = (256, 50, 10) if a.device == "cuda" else (64, 5, 2)
    rows = [(size, "fp32", "off"), (size, "fp32", "on"), (size, "bf16", "off"), (size, "bf16", "on")]
    table = []
    for batch, precision, cl in rows:
        args = ["--device", a.device, "--batch-size", str(batch), "--threads", "1", "--steps", str(steps),
                "--warmup-steps", str(warmup), "--precision", precision, "--channels-last", cl]
        s, t = bench(worker + ["bench"], peer, args, a.repeats)
        check(f"bench {precision}, channels-last {cl}, both sides ran", s == s and t == t,  # NaN: failed
              f"ScaleLab {s:.0f} img/s, PyTorch {t:.0f} img/s")
        table.append((batch, precision, cl, s, t, s / t))
    report(f"training step on {on}, images/s (median of {a.repeats} interleaved runs each)",
           ("batch", "precision", "channels_last", "scalelab", "pytorch", "ratio"), table,
           os.path.join(a.out, "gpu-bench.json"))


def model_checks(a, worker, peer, data, work, on):
    """Check 7: ResNet-18 and MobileNetV2 train on the device and are timed against PyTorch."""
    has_torchvision = subprocess.run([a.python, "-c", "import torchvision"], capture_output=True).returncode == 0
    batch, epochs = (128, 3) if a.device == "cuda" else (32, 3)
    images = [] if a.device == "cuda" else ["--max-train-images", "640", "--max-test-images", "128"]
    size, steps, warmup = (128, 30, 10) if a.device == "cuda" else (16, 3, 1)
    table = []
    for model in a.models.split(","):
        ck = os.path.join(work, f"ck-{model}")
        (rc, out, err), = run_ranks([worker + ["train", "--data-dir", data, "--device", a.device, "--model", model,
                                               "--batch-size", str(batch), "--epochs", str(epochs),
                                               "--channels-last", "on", "--checkpoint-dir", ck] + images], 900)
        started, per_epoch = events(out, "started"), events(out, "epoch")
        device = started[0].get("device") if started else None
        losses = [e.get("train_loss", float("nan")) for e in per_epoch]
        ips = [round(e.get("images_per_second", 0)) for e in per_epoch]
        check(f"{model} trains on {on}", rc == 0 and device == ("cuda:0" if a.device == "cuda" else "cpu")
              and len(losses) == epochs and all(x == x for x in losses) and losses[-1] < losses[0]
              and len(events(out, "checkpoint")) == epochs,
              f"rc {rc}, device {device}, training loss per epoch {[round(x, 3) for x in losses]}, "
              f"test accuracy {[round(e.get('test_accuracy', 0), 3) for e in per_epoch]}, img/s {ips} "
              f"{err.strip()[-300:]}")
        for precision in a.precisions.split(","):
            args = ["--device", a.device, "--model", model, "--batch-size", str(size), "--threads", "1",
                    "--steps", str(steps), "--warmup-steps", str(warmup), "--precision", precision,
                    "--channels-last", "on"]
            # Why the peer cannot run this row, if it cannot.
            no_peer = ("no torchvision for " + a.python if not has_torchvision else
                       "PyTorch 1.13 has no bf16 hardtanh backward on the CPU" if a.device == "cpu"
                       and model == "mobilenet_v2" and precision == "bf16" else "")
            s, t = bench(worker + ["bench"], None if no_peer else peer, args, a.repeats)
            check(f"bench {model} {precision}, ScaleLab ran", s == s,
                  f"ScaleLab {s:.0f} img/s, PyTorch " + (f"not run ({no_peer})" if no_peer else f"{t:.0f} img/s"))
            table.append((model, size, precision, s, t, s / t if t == t and t else float("nan")))
    report(f"models, training step on {on}, channels-last, images/s (median of {a.repeats} interleaved runs each)",
           ("model", "batch", "precision", "scalelab", "pytorch", "ratio"), table,
           os.path.join(a.out, "gpu-bench-models.json"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--python", default=sys.executable, help="the interpreter with PyTorch, for the peer")
    p.add_argument("--sections", default="seed,models",
                   help="seed (checks 1-6 and 8), models (check 7), noise (check 8's cost alone), comma-separated")
    p.add_argument("--models", default="resnet18,mobilenet_v2", help="check 7's models, comma-separated")
    p.add_argument("--precisions", default="fp32,bf16", help="check 7's bench precisions, comma-separated")
    a = p.parse_args()
    sections = set(a.sections.split(","))
    if not sections <= {"seed", "models", "noise"}:
        p.error(f"--sections takes seed, models and noise, comma-separated (got '{a.sections}')")
    os.makedirs(a.out, exist_ok=True)
    worker = [os.path.abspath(a.worker)]
    gpus = gpu_count() if a.device == "cuda" else 0
    on = "the GPU" if a.device == "cuda" else "the CPU"
    # On the CPU: tst_trainer_recipe's learnable set and batch, and a short benchmark.
    images, tests, batch, epochs = (8000, 2000, 128, 4) if a.device == "cuda" else (2000, 500, 64, 3)
    print(f"scalelab-worker {a.worker}; {gpus} GPU(s) by nvidia-smi", flush=True)
    work = tempfile.mkdtemp(prefix="scalelab-gpu-check-")
    data = os.path.join(work, "data")
    r = subprocess.run(worker + ["generate-synthetic", "--out", data, "--train", str(images), "--test", str(tests)],
                       capture_output=True, text=True, timeout=120)
    check("synthetic data set", r.returncode == 0, (r.stdout + r.stderr).strip()[:200])
    train = worker + ["train", "--data-dir", data, "--device", a.device, "--batch-size", str(batch)]
    peer = [a.python, os.path.join(ROOT, "bench", "pytorch_peer.py")]
    if "seed" in sections:
        seed_checks(a, worker, peer, data, work, train, gpus, on, batch, epochs)
    if sections & {"seed", "noise"}:
        noise_cost(a, worker, on)
    if "models" in sections:
        model_checks(a, worker, peer, data, work, on)

    shutil.rmtree(work, ignore_errors=True)
    print(f"\n{len(failures)} failure(s){': ' + ', '.join(failures) if failures else ''}")
    return len(failures)


if __name__ == "__main__":
    sys.exit(main())
