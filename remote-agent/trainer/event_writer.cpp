#include "event_writer.h"

#include "training.h"
#include "worker_channel.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unistd.h>

namespace scalelab::trainer {

std::string EventWriter::escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size() + 2);
    for (char c : text) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += c;
            }
        }
    }
    return out;
}

std::string EventWriter::number(double value)
{
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, value);
    return std::string(buf, result.ptr);
}

namespace {

// Protobuf's strings must be UTF-8; a message from the system (a path, errno's text) may
// not be. Invalid bytes become U+FFFD rather than losing the event.
std::string utf8(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
        // Well-formed UTF-8 only (Unicode 3.9, table 3-7): no overlong forms (C0, C1, E0 80..9F,
        // F0 80..8F), no surrogates (ED A0..BF), nothing above U+10FFFF (F4 90.., F5..).
        const int length = c < 0x80  ? 1
            : c >= 0xC2 && c <= 0xDF ? 2
            : c >= 0xE0 && c <= 0xEF ? 3
            : c >= 0xF0 && c <= 0xF4 ? 4
                                     : 0;
        bool valid = length > 0 && i + length <= text.size();
        for (int k = 1; valid && k < length; ++k)
            valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
        if (valid && length > 1)
            valid = !(c == 0xE0 && next < 0xA0) && !(c == 0xED && next > 0x9F) && !(c == 0xF0 && next < 0x90)
                && !(c == 0xF4 && next > 0x8F);
        if (valid) {
            out.append(text.substr(i, length));
            i += length;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

// The message only once there is a sample.
void setNoise(const std::function<v1::GradientNoise *()> &message, const NoiseReport &noise)
{
    if (noise.samples == 0)
        return;
    v1::GradientNoise *to = message();
    to->set_b_simple(noise.bSimple);
    to->set_grad_squared(noise.gradSquared);
    to->set_trace_sigma(noise.traceSigma);
    to->set_samples(noise.samples);
    to->set_batches_per_step(noise.batchesPerStep);
    to->set_differenced(noise.differenced);
}

} // namespace

void EventWriter::started(const TrainingConfig &config, const StartedReport &report)
{
    v1::WorkerEvent event;
    auto *s = event.mutable_started();
    s->mutable_dataset()->set_synthetic(report.synthetic);
    s->mutable_dataset()->set_train_images(report.trainImages);
    s->mutable_dataset()->set_test_images(report.testImages);
    s->set_parameters(report.parameters);
    s->set_gradient_bytes(report.gradientBytes);
    s->set_forward_flops_per_image(report.forwardFlopsPerImage);
    if (report.network.worldSize > 0) {
        auto *n = s->mutable_network();
        n->set_world_size(report.network.worldSize);
        n->set_backend(report.network.backend);
        n->set_hosts(report.network.hosts);
        for (const auto &[bytes, seconds] : report.network.samples) {
            auto *sample = n->add_samples();
            sample->set_bytes(bytes);
            for (double t : seconds)
                sample->add_seconds(t);
        }
    }
    if (report.machines > 0) {
        auto *share = s->mutable_core_share();
        share->set_machines(report.machines);
        share->set_threads(report.busiestMachineThreads);
        share->set_cores(report.busiestMachineCores);
    }
    s->set_threads(report.threads);
    s->set_device(report.device);
    s->set_steps_per_epoch(report.stepsPerEpoch);
    s->set_world_size(config.worldSize);
    s->set_global_batch(report.globalBatch);
    s->set_peak_learning_rate(report.peakLr);
    s->set_resumed_from_epoch(report.resumedEpoch);
    // A checkpoint holds the epoch it was committed after, which is where training goes on.
    s->set_checkpoint_epoch(report.resumedFrom.empty() ? 0 : report.resumedEpoch);
    s->set_resumed_from(utf8(report.resumedFrom));
    s->set_warmup_steps(report.warmupSteps);
    for (double v : report.normalizeMean)
        s->add_normalize_mean(v);
    for (double v : report.normalizeStd)
        s->add_normalize_std(v);
    s->set_normalize_measured(report.normalizeMeasured);
    (*s->mutable_software())["torch"] = report.torchVersion;
    (*s->mutable_software())["blas"] = report.blas;
    (*s->mutable_software())["compiler"] = report.compiler;
    // The recipe as run, every field that the worker decides set (the agent adds the
    // rest: data set name, GPUs, stall time).
    auto *e = s->mutable_effective();
    e->set_model(config.model);
    e->set_batch_size(config.batchSize);
    e->set_accumulation_steps(config.accumulationSteps);
    e->set_batches_per_step(report.batchesPerStep);
    e->set_epochs(config.epochs);
    e->set_learning_rate(config.learningRate);
    e->set_momentum(config.momentum);
    e->set_weight_decay(config.weightDecay);
    e->set_seed(config.seed);
    e->set_threads_per_worker(report.threads);
    e->set_precision(config.precision == "bf16" ? v1::BF16 : v1::FP32);
    e->set_checkpoint_every_epochs(config.checkpointDir.empty() ? 0 : config.checkpointEvery);
    e->set_max_train_images(config.maxTrainImages);
    e->set_max_test_images(config.maxTestImages);
    e->set_lr_scaling(config.lrScaling);
    e->set_schedule(config.schedule);
    e->set_warmup_epochs(report.warmupEpochs);
    e->set_label_smoothing(config.labelSmoothing);
    e->set_no_augment(!config.augment);
    e->set_channels_last(config.channelsLast);
    e->set_collective_timeout_seconds(config.collectiveTimeoutSeconds);
    e->set_divergence_factor(config.divergenceFactor);
    e->set_divergence_steps(config.divergenceSteps);
    e->set_keep_checkpoints(config.keepCheckpoints);
    e->set_block_dropout(config.blockDropout);
    e->set_dense_dropout(config.denseDropout);
    e->set_stop_after_epochs(config.stopAfterEpoch);
    if (config.headEpochs > 0) {
        auto *f = e->mutable_finetune();
        f->set_head_epochs(config.headEpochs);
        f->set_head_learning_rate(config.headLr.value_or(config.learningRate));
        f->set_head(report.finetuneHead);
    }
    write(worker::eventLine(event));
}

void EventWriter::step(const StepReport &report)
{
    v1::WorkerEvent event;
    auto *s = event.mutable_step();
    s->set_epoch(report.epoch);
    s->set_step(report.step);
    s->set_loss(report.loss);
    s->set_learning_rate(report.lr);
    s->set_images_per_second(report.imagesPerSecond);
    s->set_elapsed_seconds(report.elapsedSeconds);
    s->set_grad_norm(report.gradNorm);
    s->set_step_seconds(report.stepSeconds);
    s->set_exposed_allreduce_seconds(report.exposedAllReduceSeconds);
    s->set_data_seconds(report.dataSeconds);
    s->set_forward_seconds(report.forwardSeconds);
    s->set_backward_seconds(report.backwardSeconds);
    s->set_optimizer_seconds(report.optimizerSeconds);
    setNoise([s] { return s->mutable_gradient_noise(); }, report.noise);
    s->set_lr_gain(report.lrGain);
    write(worker::eventLine(event));
}

void EventWriter::epoch(const EpochReport &report)
{
    v1::WorkerEvent event;
    auto *e = event.mutable_epoch();
    e->set_epoch(report.epoch);
    e->set_train_loss(report.trainLoss);
    e->set_train_accuracy(report.trainAccuracy);
    e->set_test_loss(report.testLoss);
    e->set_test_accuracy(report.testAccuracy);
    e->set_epoch_seconds(report.epochSeconds);
    e->set_images_per_second(report.imagesPerSecond);
    e->set_elapsed_seconds(report.elapsedSeconds);
    e->set_test_images(report.testImages);
    e->set_train_seconds(report.trainSeconds);
    e->set_evaluation_seconds(report.evaluationSeconds);
    for (const RankAnatomy &r : report.ranks) {
        auto *a = e->add_ranks();
        a->set_rank(r.rank);
        a->set_steps(r.steps);
        a->set_data_seconds(r.dataSeconds);
        a->set_forward_seconds(r.forwardSeconds);
        a->set_backward_seconds(r.backwardSeconds);
        a->set_exposed_allreduce_seconds(r.exposedAllReduceSeconds);
        a->set_optimizer_seconds(r.optimizerSeconds);
    }
    setNoise([e] { return e->mutable_gradient_noise(); }, report.noise);
    write(worker::eventLine(event));
}

void EventWriter::checkpoint(int epoch, std::int64_t step, const std::string &path, double seconds)
{
    v1::WorkerEvent event;
    auto *c = event.mutable_checkpoint();
    c->set_epoch(epoch);
    c->set_step(step);
    c->set_path(utf8(path));
    c->set_seconds(seconds);
    write(worker::eventLine(event));
}

void EventWriter::evaluating(int epoch, std::int64_t done, std::int64_t total)
{
    v1::WorkerEvent event;
    auto *p = event.mutable_progress();
    p->set_phase("evaluating");
    p->set_epoch(epoch);
    p->set_done(done);
    p->set_total(total);
    write(worker::eventLine(event));
}

void EventWriter::warning(const std::string &message)
{
    v1::WorkerEvent event;
    event.mutable_warning()->set_message(utf8(message));
    write(worker::eventLine(event));
}

void EventWriter::finished(const FinishedReport &report)
{
    v1::WorkerEvent event;
    auto *f = event.mutable_finished();
    f->set_final_test_accuracy(report.finalTestAccuracy);
    f->set_best_test_accuracy(report.bestTestAccuracy);
    f->set_wall_seconds(report.wallSeconds);
    f->set_images_per_second(report.imagesPerSecond);
    f->set_epochs_completed(report.epochsCompleted);
    f->set_weights_sha256(report.weightsSha256);
    write(worker::eventLine(event));
}

void EventWriter::error(const std::string &message)
{
    v1::WorkerEvent event;
    event.mutable_error()->set_message(utf8(message));
    write(worker::eventLine(event));
}

void EventWriter::noSpace(const std::string &message, std::int64_t bytesNeeded)
{
    v1::WorkerEvent event;
    event.mutable_error()->set_message(utf8(message));
    event.mutable_error()->set_bytes_needed(bytesNeeded);
    write(worker::eventLine(event));
}

void EventWriter::diverged(const std::string &message, std::int64_t step)
{
    v1::WorkerEvent event;
    event.mutable_error()->set_message(utf8(message));
    event.mutable_error()->set_diverged(true);
    event.mutable_error()->set_step(step);
    write(worker::eventLine(event));
}

void EventWriter::gradientCheck(double maxAbsDiff, double maxAbsGrad, int tensors, int worldSize)
{
    v1::WorkerEvent event;
    auto *g = event.mutable_gradient_check();
    g->set_max_abs_diff(maxAbsDiff);
    g->set_max_abs_grad(maxAbsGrad);
    g->set_tensors(tensors);
    g->set_world_size(worldSize);
    write(worker::eventLine(event));
}

void EventWriter::bench(const BenchReport &report)
{
    v1::WorkerEvent event;
    auto *b = event.mutable_bench();
    b->set_images_per_second(report.imagesPerSecond);
    b->set_median_step_seconds(report.medianStepSeconds);
    b->set_batch_size(report.batchSize);
    b->set_threads(report.threads);
    b->set_world_size(report.worldSize);
    b->set_precision(report.precision);
    b->set_channels_last(report.channelsLast);
    b->set_device(report.device);
    b->set_steps(report.steps);
    if (report.medianForwardSeconds)
        b->set_median_forward_seconds(*report.medianForwardSeconds);
    if (report.medianBackwardSeconds)
        b->set_median_backward_seconds(*report.medianBackwardSeconds);
    if (report.medianGradientWaitSeconds)
        b->set_median_gradient_wait_seconds(*report.medianGradientWaitSeconds);
    if (report.medianOptimizerSeconds)
        b->set_median_optimizer_seconds(*report.medianOptimizerSeconds);
    write(worker::eventLine(event));
}

void EventWriter::lrPoint(int step, double lr, double loss, double smoothed)
{
    v1::WorkerEvent event;
    auto *p = event.mutable_lr_point();
    p->set_step(step);
    p->set_learning_rate(lr);
    p->set_loss(loss);
    p->set_smoothed_loss(smoothed);
    write(worker::eventLine(event));
}

void EventWriter::lrFound(const LrFoundReport &report)
{
    v1::WorkerEvent event;
    auto *r = event.mutable_lr_found();
    r->set_suggested_learning_rate(report.suggestedLr);
    r->set_min_loss_learning_rate(report.minLossLr);
    r->set_min_smoothed_loss(report.minSmoothedLoss);
    r->set_steepest_learning_rate(report.steepestLr);
    r->set_steps(report.steps);
    r->set_stopped_early(report.stoppedEarly);
    r->set_conclusive(report.conclusive);
    r->set_note(report.note);
    r->set_batch_size(report.batchSize);
    r->set_rule(report.rule);
    write(worker::eventLine(event));
}

void EventWriter::write(const std::string &line)
{
    std::lock_guard lock(m_mutex);
    const char *p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(m_fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; // the reader is gone; the agent classifies our exit
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

} // namespace scalelab::trainer
