#include "spec_rules.h"

#include "worker_contract.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace scalelab::rules {
namespace {

std::string camel(const std::string &snake)
{
    std::string out;
    bool upper = false;
    for (char c : snake) {
        if (c == '_') {
            upper = true;
            continue;
        }
        out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
        upper = false;
    }
    return out;
}

class Checker {
public:
    explicit Checker(const SpecContext &context)
        : m_context(context)
    { }

    void add(const char *field, std::string message)
    {
        m_problems.push_back({ m_context.prefix + (m_context.jsonNames ? camel(field) : std::string(field)),
            std::move(message) });
    }

    // A finite number in [low, high] (or [low, high) when highOpen); `what` says what the
    // number means.
    void range(const char *field, double value, double low, double high, bool lowOpen, bool highOpen)
    {
        const bool ok = std::isfinite(value) && (lowOpen ? value > low : value >= low)
            && (highOpen ? value < high : value <= high);
        if (ok)
            return;
        std::string got = std::isnan(value) ? "NaN"
            : std::isinf(value)             ? (value > 0 ? "Infinity" : "-Infinity")
                                            : exactNumber(value);
        add(field,
            "must be a number in " + std::string(lowOpen ? "(" : "[") + exactNumber(low) + ", "
                + exactNumber(high) + (highOpen ? ")" : "]") + " (got " + got + ")");
    }

    SpecStatus status()
    {
        return m_problems.empty() ? SpecStatus::success() : SpecStatus::failure(std::move(m_problems));
    }

private:
    const SpecContext &m_context;
    std::vector<FieldProblem> m_problems;
};

// A run that pauses after an epoch of its schedule: never past the schedule's end. In a
// plan the grid decides the epochs; each run's spec is checked again with them.
void checkStopAfter(Checker &c, const v1::RunSpec &s, const SpecContext &context)
{
    const int stop = s.stop_after_epochs();
    const int most = context.gridDecides ? kMaxEpochs : std::max(1, s.epochs());
    if (stop < 0 || stop > most)
        c.add("stop_after_epochs",
            "must be 0 (train every epoch) or between 1 and "
                + (context.gridDecides ? std::to_string(most)
                                       : "the run's " + std::to_string(most) + " epochs")
                + " (got " + std::to_string(stop) + ")");
}

// Fine-tuning's phases: the head's epochs within the run's, a rate like learning_rate's, and
// a module name as state_dict keys spell it.
void checkFinetune(Checker &c, const v1::RunSpec &s, const SpecContext &context)
{
    if (!s.has_finetune())
        return;
    const v1::Finetune &f = s.finetune();
    const int most = context.gridDecides ? kMaxEpochs : std::max(1, s.epochs());
    if (f.head_epochs() < 0 || f.head_epochs() > most)
        c.add("finetune.head_epochs",
            "must be 0 (one phase) or between 1 and "
                + (context.gridDecides ? std::to_string(most)
                                       : "the run's " + std::to_string(most) + " epochs")
                + " (got " + std::to_string(f.head_epochs()) + ")");
    if (f.has_head_learning_rate())
        c.range("finetune.head_learning_rate", f.head_learning_rate(), 0, kMaxLearningRate, true, false);
    const bool nameOk = f.head().size() <= 200 && std::all_of(f.head().begin(), f.head().end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.';
    });
    if (!nameOk)
        c.add("finetune.head",
            "must name a module as state_dict keys do (letters, digits, '_' and '.', as \"fc\" or "
            "\"classifier.1\"; got '"
                + f.head().substr(0, 80) + "')");
    if (f.head_epochs() == 0 && (f.has_head_learning_rate() || !f.head().empty()))
        c.add("finetune.head_epochs",
            "must be 1 or more when a head or its learning rate is given: the "
            "epochs that train the head alone");
}

} // namespace

std::string exactNumber(double value)
{
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, value);
    return std::string(buf, result.ptr);
}

std::string joinProblems(const std::vector<FieldProblem> &problems)
{
    std::string text;
    for (const auto &problem : problems)
        text += (text.empty() ? "" : "; ") + problem.text();
    return text;
}

SpecStatus checkRunSpec(const v1::RunSpec &s, const SpecContext &context)
{
    Checker c(context);
    if (!context.gridDecides) {
        if (s.batch_size() < 1 || s.batch_size() > kMaxBatchSize)
            c.add("batch_size",
                "must be between 1 and " + std::to_string(kMaxBatchSize) + " (got "
                    + std::to_string(s.batch_size()) + ")");
        if (s.epochs() < 1 || s.epochs() > kMaxEpochs)
            c.add("epochs",
                "must be between 1 and " + std::to_string(kMaxEpochs) + " (got " + std::to_string(s.epochs())
                    + ")");
    }
    if (s.accumulation_steps() < 0 || s.accumulation_steps() > kMaxAccumulationSteps)
        c.add("accumulation_steps",
            "must be between 1 and " + std::to_string(kMaxAccumulationSteps) + " (0: 1, no accumulation; got "
                + std::to_string(s.accumulation_steps()) + ")");
    if (s.batches_per_step() < 0 || s.batches_per_step() > kMaxWorkers * kMaxAccumulationSteps)
        c.add("batches_per_step",
            "must be 0 (workers x accumulation_steps) or at most workers x accumulation_steps (got "
                + std::to_string(s.batches_per_step()) + ")");
    if (s.has_learning_rate())
        c.range("learning_rate", s.learning_rate(), 0, kMaxLearningRate, true, false);
    if (s.has_momentum())
        c.range("momentum", s.momentum(), 0, 1, false, true);
    if (s.has_weight_decay())
        c.range("weight_decay", s.weight_decay(), 0, 1, false, true);
    if (!context.gridDecides) {
        if (s.threads_per_worker() < 0 || s.threads_per_worker() > kMaxThreads)
            c.add("threads_per_worker",
                "must be 0 (automatic) or up to " + std::to_string(kMaxThreads) + " (got "
                    + std::to_string(s.threads_per_worker()) + ")");
        if (!v1::Precision_IsValid(s.precision()))
            c.add("precision",
                "must be FP32 or BF16 (got the unknown value " + std::to_string(s.precision()) + ")");
    }
    if (s.checkpoint_every_epochs() < 0 || s.checkpoint_every_epochs() > kMaxEpochs)
        c.add("checkpoint_every_epochs",
            "must be 0 (every epoch) or up to " + std::to_string(kMaxEpochs) + " (got "
                + std::to_string(s.checkpoint_every_epochs()) + ")");
    if (!s.model().empty() && !worker::isModelName(s.model()) && !worker::isModelSha256(s.model()))
        c.add("model",
            "must be one of " + worker::modelNamesText()
                + ", or sha256:HEX of a TorchScript module stored on the agent (got '"
                + s.model().substr(0, 80) + "')");
    if (!s.initial_weights().empty() && !worker::isModelSha256(s.initial_weights()))
        c.add("initial_weights",
            "must be sha256:HEX of a TorchScript module stored on the agent, or empty (got '"
                + s.initial_weights().substr(0, 80) + "')");
    if (s.max_train_images() < 0)
        c.add("max_train_images", "must be 0 (the whole split) or more");
    if (s.max_test_images() < 0)
        c.add("max_test_images", "must be 0 (the whole split) or more");
    if (!context.gridDecides) {
        const double g = s.gpus_per_worker();
        if (!std::isfinite(g) || g < 0 || g > kMaxGpusPerWorker)
            c.range("gpus_per_worker", g, 0, kMaxGpusPerWorker, false, false);
        else if (g > 1 && g != std::floor(g))
            c.add("gpus_per_worker", "above 1 must be a whole number (got " + exactNumber(g) + ")");
        else if (g > 0 && g < 1
            && (1 / g > kMaxWorkersPerGpu + 1e-9 || std::abs(1 / g - std::round(1 / g)) > 1e-9))
            c.add("gpus_per_worker",
                "a fraction of a GPU must divide one GPU evenly, down to 1/"
                    + std::to_string(kMaxWorkersPerGpu) + " (0.5, 0.25, ...; got " + exactNumber(g) + ")");
        if (!s.lr_scaling().empty() && !worker::isLrRule(s.lr_scaling()))
            c.add("lr_scaling",
                "must be " + worker::lrRulesText() + " (got \"" + s.lr_scaling()
                    + "\"; the rules: docs/training-engine.md)");
    }
    if (!s.schedule().empty() && s.schedule() != "cosine" && s.schedule() != "constant")
        c.add("schedule", "must be \"cosine\" or \"constant\" (got \"" + s.schedule() + "\")");
    if (s.has_warmup_epochs()) {
        // In a plan the grid decides the epochs; each run's spec is checked again with them.
        const double most = context.gridDecides ? double(kMaxEpochs) : double(std::max(1, s.epochs()));
        c.range("warmup_epochs", s.warmup_epochs(), 0, most, false, false);
    }
    if (s.has_label_smoothing())
        c.range("label_smoothing", s.label_smoothing(), 0, 1, false, true);
    if (s.collective_timeout_seconds() < 0 || s.collective_timeout_seconds() > 86400)
        c.add("collective_timeout_seconds",
            "must be 0 (120 s) or 1..86400 (got " + std::to_string(s.collective_timeout_seconds()) + ")");
    if (s.stall_seconds() < 0 || s.stall_seconds() > 86400)
        c.add(
            "stall_seconds", "must be 0 (15 s) or 1..86400 (got " + std::to_string(s.stall_seconds()) + ")");
    if (s.has_divergence_factor())
        c.range("divergence_factor", s.divergence_factor(), 1, 1e6, true, false);
    if (s.has_divergence_steps() && (s.divergence_steps() < 1 || s.divergence_steps() > 100000))
        c.add("divergence_steps",
            "must be between 1 and 100000 (got " + std::to_string(s.divergence_steps()) + ")");
    if (s.has_keep_checkpoints() && (s.keep_checkpoints() < 1 || s.keep_checkpoints() > kMaxKeepCheckpoints))
        c.add("keep_checkpoints",
            "must be between 1 and " + std::to_string(kMaxKeepCheckpoints) + " (got "
                + std::to_string(s.keep_checkpoints()) + ")");
    if (s.has_block_dropout())
        c.range("block_dropout", s.block_dropout(), 0, 1, false, true);
    if (s.has_dense_dropout())
        c.range("dense_dropout", s.dense_dropout(), 0, 1, false, true);
    checkStopAfter(c, s, context);
    checkFinetune(c, s, context);
    return c.status();
}

v1::RunSpec withDefaults(const v1::RunSpec &spec)
{
    v1::RunSpec s = spec;
    if (!s.has_learning_rate())
        s.set_learning_rate(kDefaultLearningRate);
    if (!s.has_momentum())
        s.set_momentum(kDefaultMomentum);
    if (!s.has_weight_decay())
        s.set_weight_decay(kDefaultWeightDecay);
    if (!s.has_warmup_epochs()) {
        // Counted in the whole-model epochs, after fine-tuning's head-only ones.
        const int epochs = s.epochs() - s.finetune().head_epochs();
        const int least = s.finetune().head_epochs() > 0 ? 0 : 1;
        s.set_warmup_epochs(epochs >= 2 ? kDefaultWarmupEpochs : double(std::max(least, epochs)) / 2);
    }
    if (!s.has_label_smoothing())
        s.set_label_smoothing(kDefaultLabelSmoothing);
    if (!s.has_divergence_factor())
        s.set_divergence_factor(kDefaultDivergenceFactor);
    if (!s.has_divergence_steps())
        s.set_divergence_steps(kDefaultDivergenceSteps);
    if (!s.has_keep_checkpoints())
        s.set_keep_checkpoints(kDefaultKeepCheckpoints);
    if (!s.has_block_dropout())
        s.set_block_dropout(kDefaultBlockDropout);
    if (!s.has_dense_dropout())
        s.set_dense_dropout(kDefaultDenseDropout);
    if (s.lr_scaling().empty())
        s.set_lr_scaling("none");
    if (s.schedule().empty())
        s.set_schedule("cosine");
    if (s.precision() == v1::PRECISION_UNSPECIFIED)
        s.set_precision(v1::FP32);
    if (s.checkpoint_every_epochs() == 0)
        s.set_checkpoint_every_epochs(1);
    if (s.collective_timeout_seconds() == 0)
        s.set_collective_timeout_seconds(120);
    if (s.stall_seconds() == 0)
        s.set_stall_seconds(15);
    return s;
}

} // namespace scalelab::rules
