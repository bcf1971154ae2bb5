// The scalelab-worker program's interface: its bench's step breakdown adds up, its events and
// options follow worker.proto, the BLAS kernel is the best the CPU allows, bad options are
// refused, and a worker asked for a GPU it cannot use says why.
#include "blas_kernel.h"
#include "cifar10.h"
#include "cpu_features.h"
#include "test_support.h"
#include "trainer_bench.h"
#include "verify_ok.h"
#include "worker_process.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <sched.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "spec_rules.h"
#include "worker_channel.h"
#include "worker_contract.h"

using namespace scalelab;
using test::digest;
using test::heavyTrainingLimitMs;
using test::Worker;

namespace {

// Fields of `descriptor` that `object` lacks: every field without explicit presence is
// printed by the worker, and so are those of the messages inside it.
QStringList missingFields(
    const QJsonObject &object, const google::protobuf::Descriptor *descriptor, const QString &at)
{
    QStringList missing;
    for (int i = 0; i < descriptor->field_count(); ++i) {
        const auto *field = descriptor->field(i);
        const QString name = QString::fromStdString(field->name());
        if (!object.contains(name)) {
            if (!field->has_presence() || field->is_repeated() || field->is_map())
                missing << at + name;
            continue;
        }
        if (field->message_type() && !field->is_repeated() && !field->is_map())
            missing << missingFields(
                object.value(name).toObject(), field->message_type(), at + name + QLatin1Char('.'));
    }
    return missing;
}

} // namespace

class TestTrainerWorker : public QObject, public test::TrainerBench {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { makeSets(); }

    void cleanupTestCase() { checkNothingLeft(); }

    // The bench's step breakdown (forward, backward to the last gradient, the all-reduce
    // wait after it, the optimizer) is what explains a scaling efficiency: its parts must
    // be real, non-negative times that add up to the step.
    void benchBreaksTheStepIntoPartsThatAddUp()
    {
        const int storePort = test::freePort();
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        auto args = [&](int rank) {
            return QStringList { QStringLiteral("bench"), QStringLiteral("--batch-size"),
                QStringLiteral("16"), QStringLiteral("--steps"), QStringLiteral("5"),
                QStringLiteral("--warmup-steps"), QStringLiteral("1"), QStringLiteral("--threads"),
                QStringLiteral("1"), QStringLiteral("--world-size"), QStringLiteral("2"),
                QStringLiteral("--rank"), QString::number(rank), QStringLiteral("--rendezvous"), rendezvous };
        };
        Worker rank0(args(0)), rank1(args(1));
        QVERIFY(rank0.finish(test::endsWithin()) && rank1.finish(test::endsWithin()));
        QCOMPARE(rank0.exitCode(), 0);
        QCOMPARE(rank1.exitCode(), 0);
        const auto bench = rank0.events(QStringLiteral("bench"));
        QCOMPARE(bench.size(), 1);
        QVERIFY(rank1.events(QStringLiteral("bench")).isEmpty()); // rank 0 speaks for the run
        QCOMPARE(bench[0].bench().world_size(), 2);
        const double step = bench[0].bench().median_step_seconds();
        QVERIFY(step > 0);
        double parts = 0;
        const v1::BenchResult &b = bench[0].bench();
        QVERIFY(b.has_median_forward_seconds() && b.has_median_backward_seconds()
            && b.has_median_gradient_wait_seconds() && b.has_median_optimizer_seconds()); // on a CPU
        for (const double seconds : { b.median_forward_seconds(), b.median_backward_seconds(),
                 b.median_gradient_wait_seconds(), b.median_optimizer_seconds() }) {
            QVERIFY2(seconds >= 0 && seconds < step, qPrintable(QString::number(seconds)));
            parts += seconds;
        }
        QVERIFY(bench[0].bench().median_forward_seconds() > 0);
        QVERIFY(bench[0].bench().median_backward_seconds() > 0);
        // Medians of the parts need not add up exactly to the median step.
        QVERIFY2(parts > 0.5 * step && parts < 1.5 * step,
            qPrintable(QStringLiteral("parts %1 s vs step %2 s").arg(parts).arg(step)));
    }

    // The contract with the agent, on a real worker: every line it writes is a WorkerEvent
    // the generated code reads, with every field printed (none missing, none unknown), and
    // every option of WorkerLaunch is one its usage documents.
    void eventsAndOptionsFollowWorkerProto()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("ck-contract"));
        Worker first(small(
            { QStringLiteral("--epochs"), QStringLiteral("1"), QStringLiteral("--checkpoint-dir"), dir }));
        QVERIFY(first.finish(test::endsWithin()));
        QCOMPARE(first.exitCode(), 0);
        Worker resumed(small({ QStringLiteral("--epochs"), QStringLiteral("2"),
            QStringLiteral("--checkpoint-dir"), dir, QStringLiteral("--resume"), QStringLiteral("on") }));
        QVERIFY(resumed.finish(test::endsWithin()));
        QCOMPARE(resumed.exitCode(), 0);
        QSet<QString> kinds;
        for (Worker *w : { &first, &resumed }) {
            QVERIFY2(w->unreadable().isEmpty(), qPrintable(w->unreadable().join(QLatin1Char('\n'))));
            for (const QByteArray &line : w->lines()) {
                const QJsonObject object = QJsonDocument::fromJson(line).object();
                QCOMPARE(object.size(), 1); // one event per line
                const QString kind = object.keys().first();
                kinds << kind;
                const auto *field = v1::WorkerEvent::descriptor()->FindFieldByName(kind.toStdString());
                QVERIFY2(field && field->containing_oneof(), qPrintable(kind));
                const QStringList missing = missingFields(
                    object.value(kind).toObject(), field->message_type(), kind + QLatin1Char('.'));
                QVERIFY2(missing.isEmpty(),
                    qPrintable(missing.join(QStringLiteral(", ")) + QStringLiteral(" in ")
                        + QString::fromUtf8(line)));
            }
        }
        for (const char *kind : { "started", "step", "epoch", "checkpoint", "finished" })
            QVERIFY2(kinds.contains(QLatin1String(kind)), kind);
        const auto started = resumed.events(QStringLiteral("started"));
        QCOMPARE(started.size(), 1);
        QCOMPARE(started[0].started().resumed_from_epoch(), 1);
        QCOMPARE(started[0].started().checkpoint_epoch(), 1);
        QCOMPARE(
            QString::fromStdString(started[0].started().resumed_from()), dir + QStringLiteral("/epoch-0001"));
        QCOMPARE(QString::fromStdString(
                     resumed.events(QStringLiteral("finished")).first().finished().weights_sha256())
                     .size(),
            64);

        QProcess help;
        help.start(test::binary("scalelab-worker"), { QStringLiteral("--help") });
        QVERIFY(help.waitForFinished(30000));
        const QString usage = QString::fromUtf8(help.readAllStandardOutput());
        const auto *launch = v1::WorkerLaunch::descriptor();
        for (int i = 0; i < launch->field_count(); ++i) {
            if (launch->field(i)->number() == v1::WorkerLaunch::kCommandFieldNumber)
                continue;
            const QString option = QString::fromStdString(worker::optionName(launch->field(i)->name()));
            QVERIFY2(usage.contains(QRegularExpression(
                         QRegularExpression::escape(option) + QStringLiteral("(?![-a-z])"))),
                qPrintable(option + QStringLiteral(" is not in the usage")));
        }
    }

    void blasKernelIsTheBestTheCpuAllows()
    {
        const auto blasOf = [](const QString &coreType) {
            QProcess blas;
            QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
            environment.remove(QStringLiteral("OPENBLAS_CORETYPE"));
            if (!coreType.isEmpty())
                environment.insert(QStringLiteral("OPENBLAS_CORETYPE"), coreType);
            blas.setProcessEnvironment(environment);
            blas.start(test::binary("scalelab-worker"), { QStringLiteral("blas") });
            blas.waitForFinished(30000);
            return QJsonDocument::fromJson(blas.readAllStandardOutput()).object();
        };
        const QJsonObject own = blasOf(QString());
        const QString kernel = own.value(QStringLiteral("kernel")).toString();
        const QString detected = own.value(QStringLiteral("detected")).toString();
        QVERIFY2(!kernel.isEmpty(), "OpenBLAS (libopenblas0-pthread) is what libtorch's GEMMs run on");
        QVERIFY(own.value(QStringLiteral("library")).toString().contains(kernel));
        QFile cpuinfo(QStringLiteral("/proc/cpuinfo"));
        QVERIFY(cpuinfo.open(QIODevice::ReadOnly));
        const QString flags = QString::fromLatin1(cpuinfo.readAll())
                                  .section(QStringLiteral("\nflags"), 1, 1)
                                  .section(u'\n', 0, 0)
            + u' ';
        const bool avx2 = flags.contains(QStringLiteral(" avx2 ")) && flags.contains(QStringLiteral(" fma "));
        const bool generic = trainer::isGenericBlasKernel(detected.toStdString());
        QCOMPARE(own.value(QStringLiteral("chosen")).toBool(), generic && avx2);
        if (generic && avx2) {
            QVERIFY2(QStringList({ QStringLiteral("Cooperlake"), QStringLiteral("SkylakeX"),
                                     QStringLiteral("Haswell") })
                         .contains(kernel),
                qPrintable(kernel));
            QVERIFY(own.value(QStringLiteral("how"))
                        .toString()
                        .contains(QStringLiteral("matched a reference product")));
        } else {
            QCOMPARE(kernel, detected);
        }
        const QJsonObject asked = blasOf(QStringLiteral("Prescott"));
        QCOMPARE(asked.value(QStringLiteral("kernel")).toString(), QStringLiteral("Prescott"));
        QCOMPARE(asked.value(QStringLiteral("chosen")).toBool(), false);
        QCOMPARE(asked.value(QStringLiteral("how")).toString(), QStringLiteral("OPENBLAS_CORETYPE=Prescott"));

        // A run's recipe names the kernel it ran: the one this test's own environment leads
        // to (a machine may set OPENBLAS_CORETYPE for every process; the run inherits it).
        const QString inherited = qEnvironmentVariableIsEmpty("OPENBLAS_CORETYPE")
            ? kernel
            : blasOf(qEnvironmentVariable("OPENBLAS_CORETYPE")).value(QStringLiteral("kernel")).toString();
        QVERIFY(!inherited.isEmpty());
        Worker run(small({ QStringLiteral("--epochs"), QStringLiteral("1"),
            QStringLiteral("--max-train-images"), QStringLiteral("32") }));
        QVERIFY(run.finish(test::endsWithin()));
        QCOMPARE(run.exitCode(), 0);
        const auto started = run.events(QStringLiteral("started"));
        QCOMPARE(started.size(), 1);
        const QString recipeBlas = QString::fromStdString(started[0].started().software().at("blas"));
        QVERIFY2(recipeBlas.contains(QStringLiteral("; kernel ") + inherited), qPrintable(recipeBlas));
    }

    void badOptionsAreRefused()
    {
        Worker zero(small({ QStringLiteral("--batch-size"), QStringLiteral("0") }));
        QVERIFY(zero.finish(30000));
        QCOMPARE(zero.exitCode(), 2);
        QVERIFY(zero.stderrText().contains(QStringLiteral("--batch-size must be at least 1")));
        Worker noRendezvous(small({ QStringLiteral("--world-size"), QStringLiteral("2") }));
        QVERIFY(noRendezvous.finish(30000));
        QCOMPARE(noRendezvous.exitCode(), 2);
        QVERIFY(noRendezvous.stderrText().contains(QStringLiteral("--rendezvous HOST:PORT is required")));
        Worker resumeNoDir(small({ QStringLiteral("--resume"), QStringLiteral("on") }));
        QVERIFY(resumeNoDir.finish(30000));
        QCOMPARE(resumeNoDir.exitCode(), 2);
        Worker ncclOnCpu(small({ QStringLiteral("--backend"), QStringLiteral("nccl") }));
        QVERIFY(ncclOnCpu.finish(30000));
        QCOMPARE(ncclOnCpu.exitCode(), 2);
        QVERIFY(ncclOnCpu.stderrText().contains(QStringLiteral("--backend nccl needs --device cuda")));
        Worker certainDropout(small({ QStringLiteral("--block-dropout"), QStringLiteral("1") }));
        QVERIFY(certainDropout.finish(30000));
        QCOMPARE(certainDropout.exitCode(), 2);
        QVERIFY(certainDropout.stderrText().contains(QStringLiteral("--block-dropout must be in [0, 1)")));
        Worker unknownModel(small({ QStringLiteral("--model"), QStringLiteral("resnet50") }));
        QVERIFY(unknownModel.finish(30000));
        QCOMPARE(unknownModel.exitCode(), 2);
        QVERIFY2(unknownModel.stderrText().contains(QStringLiteral(
                     "--model must be one of seed-cnn, resnet18, mobilenet_v2, mini-cnn, or file:PATH "
                     "of a TorchScript module "
                     "(got 'resnet50')")),
            qPrintable(unknownModel.stderrText()));
        Worker stopPastTheEnd(small({ QStringLiteral("--epochs"), QStringLiteral("2"),
            QStringLiteral("--stop-after-epoch"), QStringLiteral("3") }));
        QVERIFY(stopPastTheEnd.finish(30000));
        QCOMPARE(stopPastTheEnd.exitCode(), 2);
        QVERIFY(stopPastTheEnd.stderrText().contains(QStringLiteral("--stop-after-epoch must be 0")));
    }

    // A worker without CUDA, or with no GPU to use, says so before it trains; the agent
    // shows that line as the rank's failure.
    void cudaWithoutAGpuIsRefusedSayingWhy()
    {
#if SCALELAB_WORKER_WITH_CUDA
        // A CUDA build, perhaps on a GPU node: hide the GPUs from the workers.
        const QByteArray visible = qgetenv("CUDA_VISIBLE_DEVICES");
        const bool wasSet = qEnvironmentVariableIsSet("CUDA_VISIBLE_DEVICES");
        qputenv("CUDA_VISIBLE_DEVICES", "");
        const auto restore = qScopeGuard([&] {
            if (wasSet)
                qputenv("CUDA_VISIBLE_DEVICES", visible);
            else
                qunsetenv("CUDA_VISIBLE_DEVICES");
        });
        const QString why = QStringLiteral("no CUDA GPU is usable by this process");
#else
        const QString why = QStringLiteral("this scalelab-worker was built against a CPU-only libtorch; "
                                           "rebuild against a CUDA libtorch to use GPUs");
#endif
        const QStringList cuda { QStringLiteral("--device"), QStringLiteral("cuda") };
        const QList<QStringList> commands { small(cuda),
            QStringList { QStringLiteral("gradient-check"), QStringLiteral("--data-dir"), m_small } + cuda,
            QStringList { QStringLiteral("bench"), QStringLiteral("--steps"), QStringLiteral("1") } + cuda };
        for (const QStringList &args : commands) {
            Worker worker(args);
            QVERIFY(worker.finish(30000));
            QCOMPARE(worker.exitCode(), 2);
            const QString text = worker.stderrText();
            QVERIFY2(text.contains(why), qPrintable(args.first() + QStringLiteral(": ") + text));
            QVERIFY(worker.events().isEmpty()); // refused before it started
        }
    }
};

QTEST_GUILESS_MAIN(TestTrainerWorker)
#include "tst_trainer_worker.moc"
