#!/usr/bin/python3
"""Writes the TorchScript modules tst_torchscript trains and refuses, with Debian's PyTorch 1.13
(python3-torch, python3-torchvision):

  resnet18.pt        torchvision's ResNet-18 in the CIFAR form (3x3 stride-1 stem, no max-pool),
                     10 classes: the same architecture as the worker's built-in resnet18
  small_cnn.pt       a two-convolution network with BatchNorm, scripted from Python source
  imagenet_head.pt   torchvision's ResNet-18 as it comes: 1000 outputs
  detached.pt        a forward whose output is detached (no gradient reaches the weights)
  no_parameters.pt   a forward with nothing to train
  wrong_input.pt     a forward that expects 100 features, not an image
  pickled.pt         torch.save of a plain nn.Module (a PyTorch archive, not TorchScript)
  empty.pt           no bytes
  random.pt          bytes that are not an archive
  truncated.pt       the first half of resnet18.pt

usage: make_modules.py OUT_DIR
"""
import os
import sys

import torch
import torch.nn as nn
import torchvision


def cifar_resnet18():
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    m.maxpool = nn.Identity()
    return m


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(torch.max_pool2d(x, 2)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Detached(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 32 * 32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(x, 1)).detach()


class NoParameters(nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)[:, :10]


class WrongInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(100, 10)

    def forward(self, x):
        return self.fc(x)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    path = lambda name: os.path.join(out, name)
    torch.manual_seed(1)
    torch.jit.script(cifar_resnet18()).save(path("resnet18.pt"))
    torch.jit.script(SmallCnn()).save(path("small_cnn.pt"))
    torch.jit.script(torchvision.models.resnet18()).save(path("imagenet_head.pt"))
    torch.jit.script(Detached()).save(path("detached.pt"))
    torch.jit.script(NoParameters()).save(path("no_parameters.pt"))
    torch.jit.script(WrongInput()).save(path("wrong_input.pt"))
    torch.save(Detached(), path("pickled.pt"))
    open(path("empty.pt"), "wb").close()
    with open(path("random.pt"), "wb") as f:
        f.write(bytes(range(256)) * 40)
    with open(path("resnet18.pt"), "rb") as f:
        whole = f.read()
    with open(path("truncated.pt"), "wb") as f:
        f.write(whole[: len(whole) // 2])


if __name__ == "__main__":
    main()
