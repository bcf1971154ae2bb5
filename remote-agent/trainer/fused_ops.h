// Fused CPU kernels for the seed CNN: work that ATen does in several passes over memory,
// done in one. Only trainer sources include this header (it pulls in libtorch).
#pragma once

#include <torch/optim/sgd.h>
#include <torch/types.h>

namespace scalelab::trainer {

// dropout(max_pool2d(relu(x), 2), p, training), the end of every block of the seed CNN,
// as one pass forward and one backward.
//
// ReLU is monotone, so max(relu(a), relu(b), ...) = relu(max(a, b, ...)): the ReLU is
// applied to the pooled quarter instead of the whole tensor. Forward writes the output and
// one byte per output (which of the four inputs won, or none: negative or dropped), and
// backward scatters the gradient through those bytes. ATen's path writes the ReLU output,
// the pool's int64 indices, a float dropout mask and the product (each a full pass), and
// its max-pool kernel alone took 6 % of a step; this one takes about 1 %.
//
// Values and gradients equal ATen's composition (ties go to the first of the window in
// row order, NaN propagates), except that the dropout mask is drawn differently: from a
// counter-based hash seeded by one draw from the default CPU generator, so it is
// reproducible from the generator's state (which checkpoints keep) and independent of the
// thread count. Each element is kept with probability 1 - p (to 2^-32) and scaled by
// 1 / (1 - p).
//
// The fused path takes float or bfloat16 CPU tensors [N, C, H, W] with even H and W,
// contiguous or channels-last; anything else (a GPU tensor, odd sizes) goes through ATen.
torch::Tensor maxPoolReluDropout(const torch::Tensor &x, double p, bool training);

// AVX2 kernels are used where the CPU has them (float tensors); `false` forces the
// portable loops, which give the same bits. For tests and benchmarks.
void setFusedVectorKernels(bool enabled);

// The same through ATen's own operators, for comparison (tests, benchmarks).
torch::Tensor maxPoolReluDropoutReference(const torch::Tensor &x, double p, bool training);

// torch::optim::SGD::step(): d = g + wd * w; v = momentum * v + (1 - dampening) * d (v = d on
// a parameter's first step); w -= lr * v (lr * (d + momentum * v) with Nesterov momentum).
// The momentum buffers stay in the optimizer's state, where checkpoints find them.
//
// Float CPU parameters whose gradients share their layout (contiguous or channels-last) take
// one pass over memory per parameter instead of libtorch's four. The sum is rounded as
// ATen's CPU kernels round it, so results match torch's step to the last bit only where the
// compiler makes the same fused-multiply-add choices; runs are deterministic either way.
// Everything else (a GPU, Nesterov momentum) takes sgdStepMultiTensor.
void sgdStep(torch::optim::SGD &optimizer);

// Whether sgdStep takes the one-pass CPU path for the gradients the parameters hold now.
bool sgdStepIsFused(torch::optim::SGD &optimizer);

// The same step with ATen's multi-tensor (_foreach_) operators, as PyTorch's SGD takes it on
// a GPU (foreach=True, its default there): a few kernel launches for all parameters instead
// of four per parameter, which for ResNet-18's 62 tensors is ~250 small kernels a step.
void sgdStepMultiTensor(torch::optim::SGD &optimizer);

} // namespace scalelab::trainer
