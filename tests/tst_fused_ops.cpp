// The trainer's fused kernels against ATen's own operators. This test, unlike the rest,
// includes libtorch: it checks tensors bit for bit, in process.
#include "fused_ops.h"

#include <torch/utils.h>

#include <QTest>

using scalelab::trainer::maxPoolReluDropout;
using scalelab::trainer::maxPoolReluDropoutReference;
using scalelab::trainer::setFusedVectorKernels;

namespace {

struct Pass {
    torch::Tensor out, grad;
};

// Forward, then backward of a fixed weighting of the output, so every output's gradient
// differs.
template <typename Op> Pass run(Op op, const torch::Tensor &input, double p, bool training)
{
    torch::Tensor x = input.detach().clone().requires_grad_(true);
    torch::Tensor out = op(x, p, training);
    const torch::Tensor weights
        = torch::linspace(-1.0, 2.0, out.numel()).reshape(out.sizes()).to(out.dtype());
    (out * weights).sum().backward();
    return { out.detach(), x.grad() };
}

bool sameBits(const torch::Tensor &a, const torch::Tensor &b)
{
    return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type()
        && torch::equal(torch::isnan(a), torch::isnan(b))
        && torch::equal(torch::nan_to_num(a.contiguous()), torch::nan_to_num(b.contiguous()));
}

// Shapes of the seed CNN's three pools (batch 4) and a few that stress the edges.
std::vector<std::vector<std::int64_t>> shapes()
{
    return { { 4, 64, 32, 32 }, { 4, 128, 16, 16 }, { 4, 256, 8, 8 }, { 2, 3, 6, 10 }, { 1, 8, 2, 2 },
        { 3, 16, 4, 12 } };
}

} // namespace

class TestFusedOps : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void init()
    {
        setFusedVectorKernels(true);
        torch::set_num_threads(1);
    }

    // Without dropout the fused op is ATen's relu -> max_pool2d -> dropout bit for bit, in
    // values and gradients, on ties (small integers), NaNs and both memory layouts, through
    // the AVX2 kernels and the portable loops.
    void equalsAtenWithoutDropout_data()
    {
        QTest::addColumn<bool>("vector");
        QTest::addColumn<bool>("channelsLast");
        QTest::addColumn<bool>("ties");
        for (bool vector : { true, false })
            for (bool channelsLast : { false, true })
                for (bool ties : { false, true })
                    QTest::addRow("%s %s %s", vector ? "avx2" : "portable", channelsLast ? "NHWC" : "NCHW",
                        ties ? "ties+NaN" : "normal")
                        << vector << channelsLast << ties;
    }
    void equalsAtenWithoutDropout()
    {
        QFETCH(bool, vector);
        QFETCH(bool, channelsLast);
        QFETCH(bool, ties);
        setFusedVectorKernels(vector);
        torch::manual_seed(7);
        for (const auto &shape : shapes()) {
            torch::Tensor x = ties ? torch::randint(-2, 3, shape).to(torch::kFloat) : torch::randn(shape);
            if (ties) // NaNs in some windows, one or two per window, and -inf
                x.view(-1).index_put_({ torch::randint(0, x.numel(), { x.numel() / 7 }) }, NAN);
            if (ties)
                x.view(-1).index_put_({ torch::randint(0, x.numel(), { x.numel() / 11 }) }, -INFINITY);
            if (channelsLast)
                x = x.contiguous(at::MemoryFormat::ChannelsLast);
            for (bool training : { true, false }) {
                const Pass fused = run(maxPoolReluDropout, x, training ? 0.0 : 0.25, training);
                const Pass aten = run(maxPoolReluDropoutReference, x, training ? 0.0 : 0.25, training);
                const QByteArray where = QByteArray::fromStdString(
                    c10::str(" for shape ", x.sizes(), training ? " in training" : " in evaluation"));
                QVERIFY2(sameBits(fused.out, aten.out), ("output differs" + where).constData());
                QVERIFY2(sameBits(fused.grad, aten.grad), ("gradient differs" + where).constData());
                QVERIFY(fused.out.is_contiguous(
                    channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
            }
        }
    }

    // With dropout: every output is 0 or the undropped value times 1 / (1 - p); about p of
    // the live outputs are dropped; the gradient reaches exactly the inputs of kept
    // outputs, scaled the same.
    void dropsWithProbabilityP_data()
    {
        QTest::addColumn<bool>("channelsLast");
        QTest::newRow("NCHW") << false;
        QTest::newRow("NHWC") << true;
    }
    void dropsWithProbabilityP()
    {
        QFETCH(bool, channelsLast);
        torch::manual_seed(3);
        torch::Tensor x = torch::randn({ 8, 64, 16, 16 });
        if (channelsLast)
            x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const Pass plain = run(maxPoolReluDropout, x, 0.0, false);
        for (double p : { 0.25, 0.5 }) {
            const Pass dropped = run(maxPoolReluDropout, x, p, true);
            const float scale = 1.0f / float(1.0 - p);
            const torch::Tensor live = plain.out > 0;
            const torch::Tensor kept = dropped.out != 0;
            QVERIFY(torch::equal(kept & live, kept)); // nothing dead comes back
            QVERIFY(torch::equal(dropped.out.masked_select(kept), (plain.out * scale).masked_select(kept)));
            const double keptFraction = kept.sum().item<double>() / live.sum().item<double>();
            const double n = live.sum().item<double>();
            const double sigma = std::sqrt(p * (1 - p) / n);
            QVERIFY2(std::abs(keptFraction - (1 - p)) < 5 * sigma,
                qPrintable(QString("kept %1 of live outputs with p = %2").arg(keptFraction).arg(p)));
            // Inputs that received gradient: those of kept outputs, with the plain gradient
            // (where the same input won) times the scale.
            const torch::Tensor routed = dropped.grad != 0;
            QVERIFY(
                torch::equal(dropped.grad.masked_select(routed), (plain.grad * scale).masked_select(routed)));
            QCOMPARE(routed.sum().item<std::int64_t>(), kept.sum().item<std::int64_t>());
        }
    }

    // The mask comes from the default generator: the same seed gives the same mask, on any
    // thread count and through either kernel; the next call gives another.
    void maskFollowsTheGenerator()
    {
        torch::Tensor x = torch::randn({ 4, 128, 16, 16 });
        auto draw = [&](bool vector, int threads) {
            setFusedVectorKernels(vector);
            torch::set_num_threads(threads);
            torch::manual_seed(11);
            return run(maxPoolReluDropout, x, 0.25, true);
        };
        const Pass reference = draw(true, 1);
        for (const auto &[vector, threads] :
            { std::pair { true, 2 }, std::pair { false, 1 }, std::pair { false, 2 } }) {
            const Pass again = draw(vector, threads);
            QVERIFY(sameBits(again.out, reference.out));
            QVERIFY(sameBits(again.grad, reference.grad));
        }
        torch::manual_seed(11);
        const torch::Tensor first = maxPoolReluDropout(x, 0.25, true);
        const torch::Tensor second = maxPoolReluDropout(x, 0.25, true);
        QVERIFY(!torch::equal(first, second));
    }

    // bfloat16 (autocast's type) and shapes the kernels do not take (odd sizes, a strided
    // view) still give ATen's answer.
    void otherTypesAndShapes()
    {
        torch::manual_seed(5);
        const torch::Tensor bf16 = torch::randn({ 2, 16, 8, 8 }).to(torch::kBFloat16);
        QVERIFY(sameBits(run(maxPoolReluDropout, bf16, 0.0, true).grad,
            run(maxPoolReluDropoutReference, bf16, 0.0, true).grad));
        QVERIFY(sameBits(maxPoolReluDropout(bf16, 0.0, true), maxPoolReluDropoutReference(bf16, 0.0, true)));
        const torch::Tensor odd = torch::randn({ 2, 4, 7, 9 });
        QVERIFY(sameBits(run(maxPoolReluDropout, odd, 0.0, true).grad,
            run(maxPoolReluDropoutReference, odd, 0.0, true).grad));
        const torch::Tensor strided = torch::randn({ 2, 4, 8, 16 }).slice(3, 0, 16, 2);
        QVERIFY(sameBits(
            maxPoolReluDropout(strided, 0.0, false), maxPoolReluDropoutReference(strided, 0.0, false)));
    }

    // sgdStep and its multi-tensor form are torch's SGD step (weight decay, momentum,
    // dampening, Nesterov) to rounding, over several steps, for contiguous and channels-last
    // parameters, and leave their momentum where torch's own step (and checkpoints) look.
    void sgdStepIsTorchsStep_data()
    {
        QTest::addColumn<bool>("multiTensor");
        QTest::addColumn<bool>("nesterov");
        QTest::addColumn<bool>("channelsLast");
        QTest::newRow("fused") << false << false << false;
        QTest::newRow("fused, channels-last") << false << false << true;
        QTest::newRow("Nesterov (multi-tensor)") << false << true << false;
        QTest::newRow("multi-tensor") << true << false << false;
        QTest::newRow("multi-tensor, channels-last") << true << false << true;
    }

    void sgdStepIsTorchsStep()
    {
        QFETCH(bool, multiTensor);
        QFETCH(bool, nesterov);
        QFETCH(bool, channelsLast);
        torch::manual_seed(9);
        const auto format = channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
        auto make = [&] {
            std::vector<torch::Tensor> params { torch::randn({ 300, 70 }).requires_grad_(true),
                torch::randn({ 17 }).requires_grad_(true), torch::randn({ 5 }).requires_grad_(true),
                torch::randn({ 8, 3, 3, 3 }).contiguous(format).requires_grad_(true),
                torch::randn({ 8, 4, 1, 1 }).requires_grad_(true) };
            return params;
        };
        std::vector<torch::Tensor> ours = make(), theirs;
        for (const auto &p : ours)
            theirs.push_back(p.detach().clone().requires_grad_(true));
        QCOMPARE(ours[3].is_contiguous(), !channelsLast);
        const auto options = torch::optim::SGDOptions(0.05)
                                 .momentum(0.9)
                                 .weight_decay(5e-4)
                                 .dampening(nesterov ? 0.0 : 0.1)
                                 .nesterov(nesterov);
        torch::optim::SGD a(ours, options), b(theirs, options);
        for (int step = 0; step < 5; ++step) {
            for (std::size_t i = 0; i < ours.size(); ++i) {
                if (i == 2 && step % 2 == 1)
                    continue; // a parameter without a gradient is left alone
                if (i == 1 && step == 0)
                    continue; // and one whose momentum starts a step later than the others'
                torch::Tensor g = torch::randn(ours[i].sizes()).contiguous(ours[i].suggest_memory_format());
                if (i == 4 && channelsLast) // as a 1x1 convolution's gradient in a channels-last run
                    g = g.as_strided(g.sizes(), { 4, 1, 4, 4 });
                ours[i].mutable_grad() = g.clone();
                theirs[i].mutable_grad() = g.clone();
            }
            QCOMPARE(scalelab::trainer::sgdStepIsFused(a), !nesterov);
            if (multiTensor)
                scalelab::trainer::sgdStepMultiTensor(a);
            else
                scalelab::trainer::sgdStep(a);
            b.step();
            for (auto &p : ours)
                p.mutable_grad().reset();
            for (auto &p : theirs)
                p.mutable_grad().reset();
            for (std::size_t i = 0; i < ours.size(); ++i)
                QVERIFY2(torch::allclose(ours[i], theirs[i], 1e-6, 1e-6),
                    qPrintable(QString("parameter %1 after step %2").arg(i).arg(step)));
        }
        QCOMPARE(ours[3].is_contiguous(), !channelsLast); // the step kept the layout
        for (std::size_t i = 0; i < ours.size(); ++i) {
            auto buffer = [](torch::optim::SGD &o, const torch::Tensor &p) {
                return static_cast<torch::optim::SGDParamState &>(
                    *o.state().at(c10::guts::to_string(p.unsafeGetTensorImpl())))
                    .momentum_buffer();
            };
            QVERIFY(torch::allclose(buffer(a, ours[i]), buffer(b, theirs[i]), 1e-6, 1e-6));
        }
    }
};

QTEST_APPLESS_MAIN(TestFusedOps)
#include "tst_fused_ops.moc"
