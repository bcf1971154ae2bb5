// scalelab-worker: one process per rank. libtorch only (no Qt, no gRPC).
//
//   scalelab-worker train --data-dir DIR [--batch-size N] [--epochs N] ...
//   scalelab-worker generate-synthetic --out DIR [--train N] [--test N] [--seed S]
//   scalelab-worker inspect --data-dir DIR
//
// Events go to --event-fd (default 1, stdout) as JSON lines; diagnostics to stderr.
#include "blas_kernel.h"
#include "cifar10.h"
#include "event_writer.h"
#include "seed_model.h"
#include "training.h"
#include "worker_contract.h"
#include "worker_options.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <malloc.h>
#include <map>
#include <string>
#include <vector>

using namespace scalelab;

namespace {

const char *kUsage = R"(usage: scalelab-worker COMMAND [options]

Commands:
  train               train a model (--model) on a CIFAR-10 binary data set (one rank)
  generate-synthetic  write a SYNTHETIC data set in the CIFAR-10 binary format
  inspect             check a data set and print its record counts as JSON
  blas                the BLAS kernel training runs with, as JSON: OpenBLAS's own pick
                      ("detected") and, where that is its generic fallback on a CPU it does
                      not know, the better one the worker switched to after checking it
                      (OPENBLAS_CORETYPE set by you is kept)
  parameters          print a model's parameter count (--model NAME, default seed-cnn); with
                      --json on, a JSON line with its gradient bytes per step and forward
                      FLOPs per image as well (model_zoo.h, ModelCost)
  check-model         --model file:PATH: whether a TorchScript module can be trained on
                      CIFAR-10 batches ([N,3,32,32] float in, [N,10] logits out, gradients
                      back to its parameters); prints its cost as JSON (exit 0) or the
                      problem in words (exit 1)
  bench               time the training step on a random (synthetic) batch: --batch-size,
                      --threads, --precision, --channels-last, --device, --backend, --steps,
                      --warmup-steps, and --rank/--world-size/--rendezvous for data-parallel;
                      --noise-scale true adds the gradient noise scale as training measures
                      it (and the gradient norm it reuses), to time what it costs
  lr-find             learning-rate range test: --min-lr (1e-5) to --max-lr (10),
                      exponentially over --steps (200), with the train options; prints
                      the smoothed loss per lr and a suggested learning rate
  gradient-check      compare c10d-averaged gradients of N ranks with one process on
                      the concatenated batch (train options; run one process per rank)
  noise-check         the gradient noise scale measured on a known noise through c10d
                      (linear regression, d = 100, |Delta|^2 = sigma^2 = 1: B_simple 201
                      exactly): --batch-size, --steps, --rank/--world-size/--rendezvous;
                      rank 0 prints the measured and exact values as a JSON line
  compare-weights     --model NAME --checkpoint-dir A --against B: the newest checkpoints of
                      two runs side by side, as JSON: the parameters' and buffers' largest
                      absolute difference and value, and each one's epoch and step
  probe               time all-reduces of 4 KB to 64 MB between --world-size ranks (one
                      process per rank: --rank, --rendezvous, --backend, --threads) and
                      report them as a run's network (RunStarted.network); no data, no model

train options:
  --data-dir DIR        folder with data_batch_1..5.bin and test_batch.bin (required)
  --model NAME          seed-cnn (default), resnet18 or mobilenet_v2 (their CIFAR forms),
                        mini-cnn (26 k parameters, to try a cluster in seconds), or
                        file:PATH, a TorchScript module (torch.jit.script(m).save(PATH)) trained
                        from the weights it holds; also for bench, lr-find and gradient-check
  --initial-weights FILE  start from a TorchScript archive's weights: every parameter and
                        buffer of the same name and shape (a pretrained base; a new head
                        keeps its fresh values); also for lr-find and gradient-check
  --head-epochs K       fine-tune in two phases: epochs 1..K train only the head (every other
                        parameter frozen), the epochs after the whole model at --lr and the
                        schedule (warm-up and cosine over those epochs); default 0: one phase
  --head-lr X           the head's learning rate in phase 1, constant (default: --lr)
  --head NAME           the head, a module by name (fc, classifier.1); default: the classifier,
                        the module of the last weight with one row per class ([10, ...])
  --batch-size N        images per micro-batch on this worker (default 64)
  --accumulation-steps N  micro-batches a rank adds up before the step's one all-reduce
                        (default 1): a global batch of batch size x world size x N
  --batches-per-step K  the micro-batches a step averages over all ranks (default world
                        size x --accumulation-steps); rank r takes r, r + world size, ...,
                        so the planned run's K on fewer ranks keeps its global batch, data
                        order and augmentation (an elastic run that lost ranks)
  --epochs N            passes over the training split (default 1)
  --lr X                learning rate (default 0.02; see docs/results.md, "The default recipe")
  --momentum X          SGD momentum (default 0.9)
  --weight-decay X      L2 weight decay (default 5e-4)
  --seed N              seed for weights and shuffling (default 1)
  --lr-scaling MODE     none (lr as given), linear (lr x global batch / --base-batch),
                        sqrt (lr x the square root of that) or adascale (lr x AdaScale's
                        gain, measured at every step, in [1, global batch / --base-batch];
                        warm-up and decay follow its progress)
  --base-batch N        the batch --lr is given for, which the rules scale from (default 64)
  --schedule NAME       cosine (default) or constant, after the warm-up
  --warmup-epochs X     linear warm-up from lr/10 over X epochs (default 1, or half the
                        run when it has fewer than 2 epochs; 0 = none)
  --label-smoothing X   cross-entropy label smoothing in [0, 1) (default 0)
  --block-dropout X     dropout probability after each conv block, in [0, 1) (default 0.25;
                        0 = none); also for lr-find
  --dense-dropout X     dropout probability before the last dense layer, in [0, 1) (default
                        0.5; 0 = none); also for lr-find
  --normalize-mean R,G,B  per-channel mean of pixels in [0, 1] to subtract (default: measured
                        on the training images loaded; the agent passes the whole set's)
  --normalize-std R,G,B   per-channel standard deviation to divide by (with --normalize-mean)
  --divergence-factor K   fail the run ("diverged", exit code 3) when the loss stays above
  --divergence-steps M    K x its starting value for M steps in a row (default 4 and 20); a
                        non-finite loss fails it at once
  --augment on|off      random crop (4-pixel padding) + horizontal flip (default on)
  --precision P         fp32 (default) or bf16 (autocast; needs AVX-512 BF16 or AMX on
                        the CPU, compute capability 8.0 or newer on a GPU)
  --device D            cpu (default) or cuda: train on the first GPU this process sees
                        (the agent sets CUDA_VISIBLE_DEVICES per rank); needs a worker
                        built against a CUDA libtorch
  --backend B           collectives between ranks: gloo or nccl (default: nccl with
                        --device cuda, gloo with cpu; gloo for ranks that share a GPU)
  --channels-last on|off  NHWC memory format (default off)
  --seed N              seed for weights, shuffling and augmentation (default 1)
  --threads N           intra-op threads, 0 = cores / ranks on this node (default 0)
  --max-train-images N  use the first N training images, 0 = all (default 0)
  --max-test-images N   use the first N test images, 0 = all (default 0)
  --rank N, --world-size N  data-parallel placement (default 0 of 1)
  --rendezvous HOST:PORT  c10d TCPStore (rank 0 hosts it); needed when world size > 1
  --bind-address ADDR   this rank's numeric address for Gloo's pairs and (rank 0) the store;
                        default: the local address on the route to the rendezvous host
  --iface LIST          network interface(s) for Gloo, comma-separated (default:
                        GLOO_SOCKET_IFNAME); NCCL takes NCCL_SOCKET_IFNAME, else the
                        interface of --bind-address
  --bucket-mb N         gradient all-reduce bucket size (default 4)
  --collective-timeout-s N  give up on a silent peer after N seconds (default 120)
  --network-probe on|off  before training, time all-reduces of 4 KB to 64 MB between the
                        ranks (about a second on a fast link; RunStarted.network; default on)
  --checkpoint-dir DIR  write checkpoints there (rank 0)
  --checkpoint-every K  every K epochs, and at the end (default 1)
  --keep-checkpoints K  keep the newest K committed checkpoints (default 2)
  --resume on|off       continue from the newest valid checkpoint in --checkpoint-dir
  --stop-after-epoch N  train epochs 1..N of the --epochs schedule (lr and warm-up those of
                        --epochs), write a checkpoint at N and exit 0; with --resume, go on
                        from the checkpoint to N (0 = to --epochs, the default)
  --event-fd N          file descriptor for JSON-line events (default 1)

generate-synthetic options:
  --out DIR  --train N (default 1000)  --test N (default 200)  --seed N (default 1)
  --kind patterns|shapes  patterns (default): one colour pattern per class, learnt to ~100 %
                        in an epoch; shapes: ten shapes and textures in random colours, sizes
                        and places, which a linear model cannot separate (closer to real data)

inspect options:
  --data-dir DIR  --statistics on  also read every image: per-channel mean and std, and a
                        SHA-256 of the content of all files
)";
// Numbers of the contract that kUsage spells out.
static_assert(worker::kExitDiverged == 3, "kUsage: --divergence-factor's exit code");
static_assert(worker::kLinearRuleBaseBatch == 64, "kUsage: --base-batch's default");

struct Args {
    std::string command;
    std::map<std::string, std::string> options;
    std::string error;
};

Args parse(int argc, char **argv)
{
    Args args;
    int i = 1;
    if (i < argc && argv[i][0] != '-')
        args.command = argv[i++];
    for (; i < argc; ++i) {
        std::string key = argv[i];
        if (key == "--help" || key == "-h") {
            args.command = "help";
            return args;
        }
        if (key.rfind("--", 0) != 0) {
            args.error = "unexpected argument '" + key + "'";
            return args;
        }
        if (auto eq = key.find('='); eq != std::string::npos) {
            args.options[key.substr(2, eq - 2)] = key.substr(eq + 1);
        } else if (i + 1 < argc) {
            args.options[key.substr(2)] = argv[++i];
        } else {
            args.error = "option " + key + " needs a value";
            return args;
        }
    }
    return args;
}

template <typename T> bool take(Args &args, const std::string &key, T &out)
{
    auto it = args.options.find(key);
    if (it == args.options.end())
        return true;
    const std::string text = it->second;
    args.options.erase(it);
    if constexpr (std::is_same_v<T, std::string>) {
        out = text;
        return true;
    } else {
        const auto *end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, out);
        if (ec != std::errc() || ptr != end) {
            args.error = "--" + key + " expects a number, got '" + text + "'";
            return false;
        }
        return true;
    }
}

// on|off, true|false, 1|0
bool takeFlag(Args &args, const std::string &key, bool &out)
{
    std::string text;
    if (!take(args, key, text) || text.empty())
        return args.error.empty();
    if (text == "on" || text == "true" || text == "1")
        out = true;
    else if (text == "off" || text == "false" || text == "0")
        out = false;
    else {
        args.error = "--" + key + " expects on or off, got '" + text + "'";
        return false;
    }
    return true;
}

bool leftovers(Args &args)
{
    if (!args.error.empty())
        return true;
    if (!args.options.empty()) {
        args.error = "unknown option --" + args.options.begin()->first;
        return true;
    }
    return false;
}

int usageError(const std::string &message)
{
    std::cerr << "scalelab-worker: " << message << "\nRun 'scalelab-worker --help' for usage.\n";
    return worker::kExitUsage;
}

// parameters: the count (or with --json on, the cost); check-model: whether a TorchScript
// module can be trained, its cost when it can (exit 0), the problem in words when not (1).
int parametersCommand(Args &args)
{
    const bool check = args.command == "check-model";
    std::string model(check ? "" : worker::kDefaultModel);
    bool json = check;
    take(args, "model", model) && takeFlag(args, "json", json);
    if (leftovers(args))
        return usageError(args.error);
    if (check && !worker::isModelFile(model))
        return usageError("check-model needs --model file:PATH (a TorchScript module)");
    if (!worker::isModelName(model) && !worker::isModelFile(model))
        return usageError("--model must be one of " + worker::modelNamesText()
            + ", or file:PATH of a TorchScript module (got '" + model + "')");
    const trainer::ModelInfo info = trainer::describeModel(model, json);
    if (!info.problem.empty()) {
        std::cerr << "scalelab-worker: " << info.problem << "\n";
        return worker::kExitFailed;
    }
    std::cout << info.text;
    return worker::kExitFinished;
}

// compare-weights: two runs' newest checkpoints, side by side (training.h).
int compareWeightsCommand(Args &args)
{
    std::string model(worker::kDefaultModel), a, b;
    take(args, "model", model) && take(args, "checkpoint-dir", a) && take(args, "against", b);
    if (leftovers(args))
        return usageError(args.error);
    if (a.empty() || b.empty())
        return usageError("compare-weights needs --checkpoint-dir DIR and --against DIR");
    const auto compared = trainer::compareWeights(model, a, b);
    if (!compared) {
        std::cerr << "scalelab-worker: " << compared.error() << "\n";
        return worker::kExitFailed;
    }
    std::cout << *compared;
    return worker::kExitFinished;
}

int generateSyntheticCommand(Args &args)
{
    std::string out, kindName = "patterns";
    std::int64_t train = 1000, test = 200;
    std::uint64_t seed = 1;
    take(args, "out", out) && take(args, "train", train) && take(args, "test", test)
        && take(args, "seed", seed) && take(args, "kind", kindName);
    if (leftovers(args))
        return usageError(args.error);
    if (out.empty())
        return usageError("generate-synthetic needs --out DIR");
    const auto kind = trainer::cifar::parseSyntheticKind(kindName);
    if (!kind)
        return usageError("--kind must be 'patterns' or 'shapes', got '" + kindName + "'");
    if (const common::Status written = trainer::cifar::writeSyntheticDataset(out, train, test, seed, *kind);
        !written) {
        std::cerr << "scalelab-worker: " << written.error() << "\n";
        return worker::kExitFailed;
    }
    std::cout << "wrote SYNTHETIC CIFAR-format data set (" << kindName << ") to " << out << " (" << train
              << " train, " << test << " test images)\n";
    return worker::kExitFinished;
}

int blasCommand(Args &args, const trainer::BlasKernel &blas)
{
    if (leftovers(args))
        return usageError(args.error);
    using trainer::EventWriter;
    std::cout << "{\"library\":\"" << EventWriter::escape(blas.library) << "\",\"kernel\":\""
              << EventWriter::escape(blas.kernel) << "\",\"detected\":\""
              << EventWriter::escape(blas.detected) << "\",\"chosen\":" << (blas.chosen ? "true" : "false")
              << ",\"how\":\"" << EventWriter::escape(blas.how) << "\"}\n";
    return worker::kExitFinished;
}

int inspectCommand(Args &args)
{
    std::string dir;
    bool statistics = false;
    take(args, "data-dir", dir) && takeFlag(args, "statistics", statistics);
    if (leftovers(args))
        return usageError(args.error);
    const auto summary = trainer::cifar::inspectDataset(dir);
    if (!summary) {
        std::cerr << "scalelab-worker: " << summary.error() << "\n";
        return worker::kExitFailed;
    }
    std::cout << "{\"directory\":\"" << trainer::EventWriter::escape(summary->directory)
              << "\",\"synthetic\":" << (summary->synthetic ? "true" : "false")
              << ",\"train_images\":" << summary->trainImages << ",\"test_images\":" << summary->testImages;
    if (statistics) {
        const auto stats = trainer::cifar::measureDataset(dir);
        if (!stats) {
            std::cerr << "scalelab-worker: " << stats.error() << "\n";
            return worker::kExitFailed;
        }
        const auto list = [](const double(&v)[3]) {
            using trainer::EventWriter;
            return "[" + EventWriter::number(v[0]) + "," + EventWriter::number(v[1]) + ","
                + EventWriter::number(v[2]) + "]";
        };
        std::cout << ",\"mean\":" << list(stats->mean) << ",\"std\":" << list(stats->std)
                  << ",\"content_sha256\":\"" << stats->contentSha256 << "\"";
    }
    std::cout << "}\n";
    return worker::kExitFinished;
}

// train, lr-find, gradient-check, bench and noise-check read worker.proto's WorkerLaunch, as
// the agent writes it.
int runCommand(int argc, char **argv)
{
    // train, lr-find, gradient-check, bench and noise-check read worker.proto's WorkerLaunch, as
    // the agent writes it.
    const auto options = trainer::parseWorkerOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (!options)
        return usageError(options.error());
    const trainer::TrainingConfig &config = options->config;
    if (const common::Status valid = trainer::validate(config); !valid)
        return usageError(valid.error());
    if (options->command == "lr-find")
        if (const common::Status valid = trainer::validate(options->lrFind); !valid)
            return usageError(valid.error());
    if (options->command == "bench" && (options->benchWarmupSteps < 0 || options->benchSteps < 1))
        return usageError("--steps must be at least 1 and --warmup-steps at least 0");
    if (options->command == "probe" && config.worldSize < 2)
        return usageError("probe needs --world-size 2 or more (and --rank, --rendezvous): it times "
                          "all-reduces between ranks");
    trainer::EventWriter events(options->eventFd);
    try {
        if (options->command == "bench")
            return trainer::runBench(
                config, options->benchWarmupSteps, options->benchSteps, options->benchNoiseScale, events);
        if (options->command == "lr-find")
            return trainer::runLrFind(config, options->lrFind, events);
        if (options->command == "probe")
            return trainer::runNetworkProbe(config, events);
        if (options->command == "noise-check")
            return trainer::runNoiseCheck(config, options->benchSteps);
        return options->command == "train" ? trainer::runTraining(config, events)
                                           : trainer::runGradientCheck(config, events);
    } catch (const std::exception &e) {
        // libtorch reports shape, memory and device problems as c10::Error.
        std::string what = e.what();
        events.error(what.substr(0, what.find('\n')));
        std::cerr << "scalelab-worker: " << what << "\n";
        return worker::kExitFailed;
    }
}

} // namespace

int main(int argc, char **argv)
{
    // A training step allocates and frees the same large activation and gradient buffers
    // (up to 17 MB at batch 64) every time. With glibc's defaults, blocks that large are
    // mapped and unmapped each time and the heap's top is given back, so every step
    // touches fresh zeroed pages: ~38,000 page faults a step, ~6 % of a one-thread step.
    // They stay in the heap, and the heap stays with the process.
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's upper limit
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
    // Before any BLAS call: the best OpenBLAS kernel this CPU allows (blas_kernel.h).
    const trainer::BlasKernel &blas = trainer::chooseBlasKernel();
    Args args = parse(argc, argv);
    if (!args.error.empty())
        return usageError(args.error);
    if (args.command == "help" || args.command.empty()) {
        std::cout << kUsage;
        return args.command.empty() ? worker::kExitUsage : worker::kExitFinished;
    }

    if (args.command == "parameters" || args.command == "check-model")
        return parametersCommand(args);
    if (args.command == "compare-weights")
        return compareWeightsCommand(args);
    if (args.command == "generate-synthetic")
        return generateSyntheticCommand(args);
    if (args.command == "blas")
        return blasCommand(args, blas);
    if (args.command == "inspect")
        return inspectCommand(args);
    if (trainer::isRunCommand(args.command))
        return runCommand(argc, argv);
    return usageError("unknown command '" + args.command + "'");
}
