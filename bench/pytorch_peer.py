#!/usr/bin/env python3
"""The peer ScaleLab's worker is measured against: the same model (the seed CNN, or
torchvision's ResNet-18 and MobileNetV2 in the CIFAR forms the worker builds, --model),
step and settings in PyTorch's Python front end (Debian's python3-torch, or a GPU node's CUDA PyTorch),
DistributedDataParallel over Gloo (or NCCL, --backend) for several ranks. Prints one
JSON line like `scalelab-worker bench` (rank 0)."""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25))


class SeedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(block(3, 64), block(64, 128), block(128, 256))
        self.fc1 = nn.Linear(256 * 4 * 4, 512)
        self.fc2 = nn.Linear(512, 10)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = self.features(x).flatten(1)
        return self.fc2(self.drop(F.relu(self.fc1(x))))


# The worker's models (remote-agent/trainer/model_zoo.h), from torchvision (python3-torchvision),
# with the parameter counts the worker reports: the same architecture, layer for layer.
def build_model(name):
    if name == "seed-cnn":
        return SeedNet(), 3_249_994
    import torchvision
    if name == "resnet18":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # the CIFAR stem: 3x3, stride 1
        m.maxpool = nn.Identity()
        return m, 11_173_962
    if name == "mobilenet_v2":
        m = torchvision.models.mobilenet_v2(num_classes=10)
        m.features[0][0].stride = (1, 1)  # the stem and the second stage keep 32x32 longer
        m.features[2].conv[1][0].stride = (1, 1)
        return m, 2_236_682
    raise SystemExit(f"--model: unknown model {name}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="seed-cnn", choices=["seed-cnn", "resnet18", "mobilenet_v2"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--channels-last", choices=["on", "off"], default="off")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--rendezvous", default="")
    p.add_argument("--bucket-mb", type=int, default=4)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    # DDP's default broadcasts rank 0's buffers (BatchNorm statistics) at every forward;
    # the worker copies them only where they are read or kept (data_parallel.h).
    p.add_argument("--broadcast-buffers", choices=["on", "off"], default="on")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    fmt = torch.channels_last if a.channels_last == "on" else torch.contiguous_format
    device = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    model, parameters = build_model(a.model)
    model = model.to(device=device, memory_format=fmt)
    assert sum(p.numel() for p in model.parameters()) == parameters
    if a.world_size > 1:
        host, port = a.rendezvous.rsplit(":", 1)
        store = dist.TCPStore(host, int(port), a.world_size, a.rank == 0)
        dist.init_process_group(a.backend, store=store, rank=a.rank, world_size=a.world_size)
        model = nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=a.bucket_mb, device_ids=[0] if a.device == "cuda" else None,
            broadcast_buffers=a.broadcast_buffers == "on")
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch_size, 3, 32, 32).to(device).contiguous(memory_format=fmt)
    y = torch.randint(0, 10, (a.batch_size,)).to(device)
    # The worker's phases, measured the same way: forward; backward until its last
    # gradient; from then until backward returns (DDP's unhidden all-reduces); optimizer.
    last_gradient = [0.0]

    def mark(_):
        last_gradient[0] = time.perf_counter()

    for p in model.parameters():
        p.register_hook(mark)
    times, phases = [], {"forward": [], "backward": [], "gradient_wait": [], "optimizer": []}
    for i in range(a.warmup_steps + a.steps):
        if a.world_size > 1:
            dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(model(x).float(), y)
        forward_end = time.perf_counter()
        loss.backward()
        backward_end = time.perf_counter()
        opt.step()
        loss.item()
        if device.type == "cuda":
            torch.cuda.synchronize()  # as the worker: the optimizer step may still be queued
        if i >= a.warmup_steps:
            end = time.perf_counter()
            times.append(end - start)
            phases["forward"].append(forward_end - start)
            phases["backward"].append(last_gradient[0] - forward_end)
            phases["gradient_wait"].append(backward_end - last_gradient[0])
            phases["optimizer"].append(end - backward_end)
    median = statistics.median(times)
    if a.rank == 0:
        # The shape of scalelab-worker's bench event (worker.proto's WorkerEvent), so that
        # one reader takes both; "peer" says which side wrote it.
        result = {"images_per_second": a.batch_size * a.world_size / median,
                  "median_step_seconds": median, "peer": "pytorch-python " + torch.__version__}
        if device.type != "cuda":  # host-side times: on a GPU only the whole step counts
            result.update({f"median_{k}_seconds": statistics.median(v) for k, v in phases.items()})
        print(json.dumps({"bench": result}))
    if a.world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
