// TorchScript modules in the worker (issue 36): a module scripted by PyTorch 1.13
// (tests/torchscript/make_modules.py, Debian's python3-torch and python3-torchvision) trains
// as what the file says, data-parallel like a built-in, and a module that cannot be trained
// is refused before any training, in words that say what to change.
//
// Label torchscript: it needs /usr/bin/python3 with torch and torchvision (scripts/setup.sh
// installs them for the tests; `ctest -LE torchscript` without them).
#include "test_support.h"
#include "verify_ok.h"
#include "worker_channel.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <tuple>

using namespace scalelab;

namespace {

// A python3 with Debian's PyTorch and torchvision, or empty.
QString pythonWithTorchvision()
{
    for (const QString &candidate :
        { QStringLiteral("/usr/bin/python3"), QStandardPaths::findExecutable(QStringLiteral("python3")) }) {
        if (candidate.isEmpty() || !QFile::exists(candidate))
            continue;
        QProcess p;
        p.start(candidate, { QStringLiteral("-c"), QStringLiteral("import torch, torchvision") });
        if (p.waitForFinished(test::endsWithin()) && p.exitStatus() == QProcess::NormalExit
            && p.exitCode() == 0)
            return candidate;
    }
    return {};
}

struct WorkerRun {
    int exitCode = -1;
    QString err;
    QList<v1::WorkerEvent> events;
    QStringList unreadable;
};

// scalelab-worker with `args`, to its end.
WorkerRun runWorker(const QStringList &args, int timeoutMs = test::endsWithin())
{
    QProcess p;
    p.start(test::binary("scalelab-worker"), args);
    WorkerRun run;
    if (!p.waitForFinished(test::timeLimit(timeoutMs))) {
        p.kill();
        p.waitForFinished(5000);
        run.err = QStringLiteral("timed out");
        return run;
    }
    run.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    run.err = QString::fromUtf8(p.readAllStandardError());
    for (const QByteArray &line : p.readAllStandardOutput().split('\n')) {
        if (line.trimmed().isEmpty())
            continue;
        if (auto event = worker::parseEventLine(line.toStdString()))
            run.events << *event;
        else
            run.unreadable << QString::fromUtf8(line);
    }
    return run;
}

QList<double> stepLosses(const WorkerRun &run)
{
    QList<double> losses;
    for (const auto &e : run.events)
        if (e.has_step())
            losses << e.step().loss();
    return losses;
}

} // namespace

class TestTorchScript : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase()
    {
        const QString python = pythonWithTorchvision();
        if (python.isEmpty())
            QFAIL("no python3 with torch and torchvision: apt-get install python3-torch python3-torchvision "
                  "(scripts/setup.sh installs them for the tests; ctest -LE torchscript runs without this "
                  "test)");
        m_modules = m_tmp.filePath(QStringLiteral("modules"));
        const QString problem = test::runTool(
            python, { QStringLiteral(SCALELAB_SOURCE_DIR "/tests/torchscript/make_modules.py"), m_modules });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        m_data = m_tmp.filePath(QStringLiteral("data"));
        const WorkerRun data = runWorker({ QStringLiteral("generate-synthetic"), QStringLiteral("--out"),
            m_data, QStringLiteral("--train"), QStringLiteral("160"), QStringLiteral("--test"),
            QStringLiteral("32"), QStringLiteral("--kind"), QStringLiteral("shapes") });
        QVERIFY2(data.exitCode == 0, qPrintable(data.err));
    }

    void cleanupTestCase()
    {
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 10000);
    }

    // Each module that cannot be trained is refused, saying why and what to do, before any
    // training; the check prints a good module's cost.
    void unfitModulesAreRefusedInWords_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("expected");
        QTest::newRow("1000 outputs")
            << "imagenet_head.pt"
            << "model output has shape [2, 1000], expected [2, 10]: the last layer must "
               "have 10 outputs";
        QTest::newRow("detached output") << "detached.pt"
                                         << "no gradient flows back through the model's forward";
        QTest::newRow("nothing to train") << "no_parameters.pt"
                                          << "the model has no trainable parameters";
        QTest::newRow("forward fails")
            << "wrong_input.pt"
            << "the model's forward failed on a [2, 3, 32, 32] float batch: mat1 and mat2 "
               "shapes cannot be multiplied";
        QTest::newRow("torch.save") << "pickled.pt"
                                    << "is a PyTorch archive but not a TorchScript module (torch.save of an "
                                       "nn.Module?): save it with torch.jit.script(model).save(path)";
        QTest::newRow("empty") << "empty.pt"
                               << "is empty: save the module with torch.jit.script(model).save(path)";
        QTest::newRow("random bytes") << "random.pt"
                                      << "is not a TorchScript archive (not a zip archive, or truncated)";
        QTest::newRow("truncated") << "truncated.pt"
                                   << "is not a TorchScript archive (not a zip archive, or truncated)";
        QTest::newRow("too large") << "huge.pt"
                                   << "over the 512 MiB a model may have";
    }
    void unfitModulesAreRefusedInWords()
    {
        QFETCH(QString, file);
        QFETCH(QString, expected);
        const QString path = m_modules + QLatin1Char('/') + file;
        if (file == QLatin1String("huge.pt")) { // sparse: 513 MiB of nothing, no disk used
            QFile huge(path);
            QVERIFY(huge.open(QIODevice::WriteOnly) && huge.resize(qint64(513) << 20));
        }
        const WorkerRun check = runWorker(
            { QStringLiteral("check-model"), QStringLiteral("--model"), QStringLiteral("file:") + path });
        QCOMPARE(check.exitCode, 1);
        QVERIFY2(check.err.contains(expected), qPrintable(check.err));
        // Training refuses it too, with the same words, before a step.
        const WorkerRun train = runWorker({ QStringLiteral("train"), QStringLiteral("--data-dir"), m_data,
            QStringLiteral("--model"), QStringLiteral("file:") + path, QStringLiteral("--batch-size"),
            QStringLiteral("16"), QStringLiteral("--threads"), QStringLiteral("1") });
        QVERIFY(train.exitCode != 0);
        QVERIFY(stepLosses(train).isEmpty());
        QString said = train.err;
        for (const auto &e : train.events)
            if (e.has_error())
                said += QString::fromStdString(e.error().message());
        QVERIFY2(said.contains(expected), qPrintable(said));

        const WorkerRun good = runWorker({ QStringLiteral("check-model"), QStringLiteral("--model"),
            QStringLiteral("file:") + m_modules + QStringLiteral("/small_cnn.pt") });
        QCOMPARE(good.exitCode, 0);
        QVERIFY2(good.err.isEmpty(), qPrintable(good.err));
    }

    // A ResNet-18 scripted from torchvision, with its weights copied into the built-in
    // resnet18, trains the same 20 steps: the TorchScript path trains what the file says.
    void scriptedResNetTrainsAsTheBuiltInWithItsWeights()
    {
        const QString file = m_modules + QStringLiteral("/resnet18.pt");
        const auto train = [&](const QStringList &model) {
            return runWorker(
                QStringList { QStringLiteral("train"), QStringLiteral("--data-dir"), m_data,
                    QStringLiteral("--epochs"), QStringLiteral("2"), QStringLiteral("--batch-size"),
                    QStringLiteral("16"), QStringLiteral("--threads"), QStringLiteral("2") }
                + model);
        };
        const WorkerRun scripted = train({ QStringLiteral("--model"), QStringLiteral("file:") + file });
        const WorkerRun builtIn = train({ QStringLiteral("--model"), QStringLiteral("resnet18"),
            QStringLiteral("--initial-weights"), file });
        QVERIFY2(scripted.exitCode == 0, qPrintable(scripted.err));
        QVERIFY2(builtIn.exitCode == 0, qPrintable(builtIn.err));
        QVERIFY2(builtIn.err.contains(QStringLiteral("122 of 122 tensors copied")), qPrintable(builtIn.err));
        const QList<double> a = stepLosses(scripted), b = stepLosses(builtIn);
        QCOMPARE(a.size(), 20); // 160 images / 16, two epochs
        QCOMPARE(b.size(), a.size());
        double worst = 0;
        for (int i = 0; i < a.size(); ++i)
            worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1e-6, std::abs(b[i])));
        qInfo("20 steps, largest relative loss difference %.3g (first loss %.6f, last %.6f)", worst,
            a.first(), a.last());
        QVERIFY2(worst < 1e-5, qPrintable(QString::number(worst)));
        for (const auto &e : scripted.events)
            if (e.has_started()) {
                QCOMPARE(e.started().parameters(), qint64(11'173'962));
                QCOMPARE(e.started().gradient_bytes(), qint64(11'173'962) * 4);
                QVERIFY(e.started().forward_flops_per_image() > 1'000'000'000);
            }
    }

    // Two ranks of a scripted module all-reduce the gradient one process computes on the
    // whole batch, as for the built-ins.
    void scriptedGradientsAllReduceLikeOneProcess()
    {
        const int storePort = test::freePort(); // for a TCPStore, freed just before the worker binds it
        QVERIFY2(storePort > 0, "no free port on 127.0.0.1");
        const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
        const auto args = [&](int rank) {
            return QStringList { QStringLiteral("gradient-check"), QStringLiteral("--data-dir"), m_data,
                QStringLiteral("--batch-size"), QStringLiteral("16"), QStringLiteral("--world-size"),
                QStringLiteral("2"), QStringLiteral("--rank"), QString::number(rank),
                QStringLiteral("--rendezvous"), rendezvous, QStringLiteral("--threads"), QStringLiteral("1"),
                QStringLiteral("--model"),
                QStringLiteral("file:") + m_modules + QStringLiteral("/resnet18.pt") };
        };
        QProcess rank1;
        rank1.start(test::binary("scalelab-worker"), args(1));
        const WorkerRun rank0 = runWorker(args(0));
        QVERIFY(rank1.waitForFinished(test::timeLimit(60'000)));
        QVERIFY2(rank0.exitCode == 0, qPrintable(rank0.err));
        QCOMPARE(rank1.exitCode(), 0);
        int checks = 0;
        for (const auto &e : rank0.events)
            if (e.has_gradient_check()) {
                ++checks;
                const auto &g = e.gradient_check();
                QCOMPARE(g.tensors(), 62);
                QVERIFY(g.max_abs_grad() > 1e-4);
                qInfo("TorchScript ResNet-18: max |diff| %.3g, max |grad| %.3g", g.max_abs_diff(),
                    g.max_abs_grad());
                QVERIFY(g.max_abs_diff() <= 1e-5 * std::max(1.0, g.max_abs_grad()));
            }
        QCOMPARE(checks, 1);
    }

    // Through the CLI and an agent: a module's file travels by content (PutModel), is stored
    // once under the agent's state folder, and the run names it by its sum; a module that
    // cannot be trained is refused by the agent in the worker's words, and nothing is stored;
    // a run naming a module the agent lacks is refused, saying how to send it.
    void modulesTravelByContentToTheAgent()
    {
        const QString state = m_tmp.filePath(QStringLiteral("state"));
        const QString data = m_tmp.filePath(QStringLiteral("agent-data"));
        QVERIFY(QDir().mkpath(data));
        const auto cli = [&](const QString &model, int workers) {
            QProcess p;
            p.start(test::binary("scalelab-cli"),
                { QStringLiteral("run"), QStringLiteral("--data-dir"), data, QStringLiteral("--state-dir"),
                    state, QStringLiteral("--synthetic"), QStringLiteral("--dataset"), QStringLiteral("syn"),
                    QStringLiteral("--synthetic-train"), QStringLiteral("64"),
                    QStringLiteral("--synthetic-test"), QStringLiteral("32"), QStringLiteral("--workers"),
                    QString::number(workers), QStringLiteral("--batch-size"), QStringLiteral("16"),
                    QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--model"), model,
                    QStringLiteral("--json") });
            p.waitForFinished(test::endsWithin());
            return std::make_tuple(p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError()));
        };
        const QString file = m_modules + QStringLiteral("/small_cnn.pt");
        const auto [code, out, err] = cli(file, 2);
        QVERIFY2(code == 0, qPrintable(err + out));
        QVERIFY2(err.contains(QStringLiteral("model small_cnn.pt (sha256 "))
                && err.contains(QStringLiteral("sent to")),
            qPrintable(err));
        QFile module(file);
        QVERIFY(module.open(QIODevice::ReadOnly));
        const QString sha = QString::fromLatin1(
            QCryptographicHash::hash(module.readAll(), QCryptographicHash::Sha256).toHex());
        QVERIFY(QFile::exists(state + QStringLiteral("/models/") + sha + QStringLiteral(".pt")));
        QJsonObject started;
        for (const QString &line : out.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
            if (const auto o = QJsonDocument::fromJson(line.toUtf8()).object();
                o.contains(QStringLiteral("started")))
                started = o.value(QStringLiteral("started")).toObject();
        QCOMPARE(
            started.value(QStringLiteral("effective")).toObject().value(QStringLiteral("model")).toString(),
            QStringLiteral("sha256:") + sha);
        QCOMPARE(started.value(QStringLiteral("parameters")).toVariant().toLongLong(), 5450LL);
        QVERIFY2(out.contains(QStringLiteral("SUCCEEDED")), qPrintable(out));

        // The second run sends nothing.
        const auto [again, againOut, againErr] = cli(QStringLiteral("file:") + file, 1);
        QVERIFY2(again == 0, qPrintable(againErr));
        QVERIFY2(againErr.contains(QStringLiteral("already on the agent")), qPrintable(againErr));

        // Refused by the agent, in the worker's words; nothing stored.
        const auto [refused, refusedOut, refusedErr]
            = cli(m_modules + QStringLiteral("/imagenet_head.pt"), 1);
        QCOMPARE(refused, 2);
        QVERIFY2(
            refusedErr.contains(QStringLiteral(
                "model output has shape [2, 1000], expected [2, 10]: the last layer must have 10 outputs; "
                "nothing was stored")),
            qPrintable(refusedErr));
        QCOMPARE(QDir(state + QStringLiteral("/models")).entryList(QDir::Files | QDir::Hidden).size(),
            2); // .pt, .json

        // A sum the agent does not hold.
        const auto [missing, missingOut, missingErr]
            = cli(QStringLiteral("sha256:") + QString(64, QLatin1Char('0')), 1);
        QVERIFY(missing != 0);
        QVERIFY2(missingErr.contains(QStringLiteral("is not stored on this agent: send the module first")),
            qPrintable(missingErr));
        // A file that is not there is the CLI's to say.
        const auto [noFile, noFileOut, noFileErr] = cli(m_modules + QStringLiteral("/none.pt"), 1);
        QCOMPARE(noFile, 2);
        QVERIFY2(noFileErr.contains(QStringLiteral("none.pt: no such file")), qPrintable(noFileErr));
    }

    // A plan that names a module by file, relative to the plan: `study plan --check` reads
    // it and has the worker check it; the study sends it from the console's store, compares
    // it with the seed CNN (each against its own baseline), and its journal and report name
    // it by its sum, with the file's name.
    void aPlanComparesAModuleNamedByFile()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("plan"));
        QVERIFY(QDir().mkpath(dir + QStringLiteral("/data")));
        QVERIFY(QFile::copy(m_modules + QStringLiteral("/small_cnn.pt"), dir + QStringLiteral("/net.pt")));
        QVERIFY(
            QFile::copy(m_modules + QStringLiteral("/imagenet_head.pt"), dir + QStringLiteral("/wide.pt")));
        const auto writePlan = [&](const QString &name, const QString &model) {
            QFile plan(dir + QLatin1Char('/') + name);
            QVERIFY(plan.open(QIODevice::WriteOnly));
            plan.write(QStringLiteral(R"({ "name": "ts", "dataset": "syn",
                "training": { "maxTrainImages": 64, "maxTestImages": 32 },
                "grid": { "workers": [2], "batchSize": [16], "epochs": [1], "threadsPerWorker": [1],
                          "model": ["seed-cnn", "%1"] } })")
                           .arg(model)
                           .toUtf8());
        };
        writePlan(QStringLiteral("plan.json"), QStringLiteral("file:net.pt"));
        writePlan(QStringLiteral("wide.json"), QStringLiteral("file:wide.pt"));
        const auto cli = [&](const QStringList &args) {
            QProcess p;
            p.setWorkingDirectory(m_tmp.path()); // not the plan's folder: paths are the plan's
            p.start(test::binary("scalelab-cli"), args);
            p.waitForFinished(test::endsWithin());
            return std::make_tuple(p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError()));
        };
        const auto [checked, checkOut, checkErr] = cli({ QStringLiteral("study"), QStringLiteral("plan"),
            QStringLiteral("--check"), dir + QStringLiteral("/plan.json") });
        QVERIFY2(checked == 0, qPrintable(checkErr + checkOut));
        QVERIFY2(checkOut.contains(QStringLiteral("model file:net.pt: sha256 "))
                && checkOut.contains(QStringLiteral("5,450 parameters")),
            qPrintable(checkOut));
        const auto [wide, wideOut, wideErr] = cli({ QStringLiteral("study"), QStringLiteral("plan"),
            QStringLiteral("--check"), dir + QStringLiteral("/wide.json") });
        QCOMPARE(wide, 2);
        QVERIFY2(wideErr.contains(QStringLiteral("model output has shape [2, 1000], expected [2, 10]")),
            qPrintable(wideErr));

        const QString state = dir + QStringLiteral("/state");
        const auto [ran, runOut, runErr] = cli({ QStringLiteral("study"), QStringLiteral("run"),
            dir + QStringLiteral("/plan.json"), QStringLiteral("--synthetic"),
            QStringLiteral("--local-agents"), QStringLiteral("1"), QStringLiteral("--state-dir"), state,
            QStringLiteral("--data-dir"), dir + QStringLiteral("/data") });
        QVERIFY2(ran == 0, qPrintable(runErr + runOut));
        QVERIFY2(runOut.contains(QStringLiteral("sent the module net.pt")), qPrintable(runOut));
        QVERIFY2(runOut.contains(QStringLiteral("each run is compared with the baseline of its own model")),
            qPrintable(runOut));
        const QString id = runErr.section(QStringLiteral("study "), 1, 1).section(QLatin1Char(' '), 0, 0);
        const auto [reported, json, reportErr] = cli({ QStringLiteral("report"), id,
            QStringLiteral("--format"), QStringLiteral("json"), QStringLiteral("--state-dir"), state });
        QVERIFY2(reported == 0, qPrintable(reportErr));
        const QJsonObject report = QJsonDocument::fromJson(json.toUtf8()).object();
        QFile module(dir + QStringLiteral("/net.pt"));
        QVERIFY(module.open(QIODevice::ReadOnly));
        const QString sum = QString::fromLatin1(
            QCryptographicHash::hash(module.readAll(), QCryptographicHash::Sha256).toHex());
        QVERIFY(QFile::exists(
            state + QStringLiteral("/models/") + sum + QStringLiteral(".pt"))); // the console's store
        int succeeded = 0;
        for (const auto &r : report.value(QStringLiteral("runs")).toArray()) {
            const QJsonObject run = r.toObject();
            succeeded += run.value(QStringLiteral("state")).toString() == QLatin1String("SUCCEEDED");
        }
        QCOMPARE(succeeded, 4);
        QStringList models;
        for (const auto &c : report.value(QStringLiteral("configurations")).toArray())
            models << c.toObject()
                          .value(QStringLiteral("config"))
                          .toObject()
                          .value(QStringLiteral("model"))
                          .toString();
        QVERIFY2(models.contains(QStringLiteral("sha256:") + sum), qPrintable(models.join(QLatin1Char(' '))));
        // The plan the report carries (`study rerun` runs it) names the module by its sum and keeps its name.
        const QJsonObject plan = report.value(QStringLiteral("plan")).toObject();
        QCOMPARE(plan.value(QStringLiteral("modelNames")).toObject().value(sum).toString(),
            QStringLiteral("net.pt"));
        QVERIFY2(plan.value(QStringLiteral("grid"))
                     .toObject()
                     .value(QStringLiteral("model"))
                     .toArray()
                     .contains(QJsonValue(QStringLiteral("sha256:") + sum)),
            qPrintable(QJsonDocument(plan).toJson()));
    }

    // Fine-tuning as transfer learning does it (issue 36 item 8): a module pretrained on one
    // generated set (its checkpoint is the base's weights), fine-tuned on another by 2 ranks:
    // epoch 1 trains the head alone at its own rate (every other parameter exactly the
    // pretrained one), epoch 2 the whole model on the run's schedule; paused after phase 1
    // and resumed, it ends with the same weights.
    void fineTuningTrainsTheHeadAloneThenTheWholeModel()
    {
        const QString module = QStringLiteral("file:") + m_modules + QStringLiteral("/small_cnn.pt");
        const QString pretrained = m_tmp.filePath(QStringLiteral("pretrained"));
        const WorkerRun pre = runWorker({ QStringLiteral("train"), QStringLiteral("--data-dir"), m_data,
            QStringLiteral("--model"), module, QStringLiteral("--epochs"), QStringLiteral("1"),
            QStringLiteral("--batch-size"), QStringLiteral("32"), QStringLiteral("--threads"),
            QStringLiteral("1"), QStringLiteral("--checkpoint-dir"), pretrained });
        QVERIFY2(pre.exitCode == 0, qPrintable(pre.err));
        const QString base = pretrained + QStringLiteral("/epoch-0001/model.pt");
        const QString other = m_tmp.filePath(QStringLiteral("other"));
        const WorkerRun data = runWorker({ QStringLiteral("generate-synthetic"), QStringLiteral("--out"),
            other, QStringLiteral("--train"), QStringLiteral("128"), QStringLiteral("--test"),
            QStringLiteral("32"), QStringLiteral("--kind"), QStringLiteral("patterns"),
            QStringLiteral("--seed"), QStringLiteral("9") });
        QVERIFY2(data.exitCode == 0, qPrintable(data.err));

        // Two ranks of a fine-tuning run into `checkpoints`, with `extra` options; rank 0's run.
        const auto fineTune = [&](const QString &checkpoints, const QStringList &extra) {
            const int storePort = test::freePort();
            if (storePort == 0) {
                WorkerRun failed;
                failed.err = QStringLiteral("no free port on 127.0.0.1");
                return failed;
            }
            const QString rendezvous = QStringLiteral("127.0.0.1:%1").arg(storePort);
            const auto args = [&](int rank) {
                return QStringList { QStringLiteral("train"), QStringLiteral("--data-dir"), other,
                    QStringLiteral("--model"), module, QStringLiteral("--initial-weights"), base,
                    QStringLiteral("--epochs"), QStringLiteral("2"), QStringLiteral("--head-epochs"),
                    QStringLiteral("1"), QStringLiteral("--head-lr"), QStringLiteral("0.05"),
                    QStringLiteral("--batch-size"), QStringLiteral("32"), QStringLiteral("--threads"),
                    QStringLiteral("1"), QStringLiteral("--world-size"), QStringLiteral("2"),
                    QStringLiteral("--rank"), QString::number(rank), QStringLiteral("--rendezvous"),
                    rendezvous, QStringLiteral("--checkpoint-dir"), checkpoints }
                + extra;
            };
            QProcess rank1;
            rank1.start(test::binary("scalelab-worker"), args(1));
            WorkerRun rank0 = runWorker(args(0));
            if (!rank1.waitForFinished(test::endsWithin()) || rank1.exitCode() != 0)
                rank0.exitCode = -2;
            return rank0;
        };
        const QString whole = m_tmp.filePath(QStringLiteral("finetuned"));
        const WorkerRun run = fineTune(whole, {});
        QVERIFY2(run.exitCode == 0, qPrintable(run.err));
        QVERIFY2(run.err.contains(QStringLiteral("phase 1, the head (fc) alone")), qPrintable(run.err));
        QString finished;
        QList<double> phase1, phase2;
        for (const auto &e : run.events) {
            if (e.has_started()) {
                const auto &f = e.started().effective().finetune();
                QCOMPARE(f.head_epochs(), 1);
                QCOMPARE(f.head(), std::string("fc")); // the classifier: the last [10, ...] weight's module
                QCOMPARE(f.head_learning_rate(), 0.05);
            }
            if (e.has_step())
                (e.step().epoch() == 1 ? phase1 : phase2) << e.step().learning_rate();
            if (e.has_finished())
                finished = QString::fromStdString(e.finished().weights_sha256());
        }
        QCOMPARE(phase1.size(), 2); // 128 images / 2 ranks / 32
        QCOMPARE(phase2.size(), 2);
        for (double lr : phase1)
            QCOMPARE(lr, 0.05); // the head's rate, constant
        QCOMPARE(phase2.first(), 0.002); // the whole model warms up from a tenth of --lr
        QVERIFY(phase2.last() <= 0.02);

        // The parameters, read back by PyTorch: phase 1 moved the head only, phase 2 the rest too.
        const QString compare
            = QStringLiteral("import sys, torch\n"
                             "p = [dict(torch.jit.load(f).named_parameters()) for f in sys.argv[1:4]]\n"
                             "for name in p[0]:\n"
                             "    print(name, int(torch.equal(p[0][name], p[1][name])), "
                             "int(torch.equal(p[1][name], p[2][name])))\n");
        QProcess python;
        python.start(pythonWithTorchvision(),
            { QStringLiteral("-c"), compare, base, whole + QStringLiteral("/epoch-0001/model.pt"),
                whole + QStringLiteral("/epoch-0002/model.pt") });
        QVERIFY(python.waitForFinished(test::endsWithin()));
        const QString table = QString::fromUtf8(python.readAllStandardOutput());
        QVERIFY2(python.exitCode() == 0, qPrintable(python.readAllStandardError()));
        const QStringList lines = table.trimmed().split(u'\n');
        QCOMPARE(lines.size(), 8); // conv1, bn1, conv2, fc: weight and bias
        for (const QString &line : lines) {
            const QStringList cells = line.split(u' ');
            const bool inHead = cells[0].startsWith(QStringLiteral("fc."));
            QVERIFY2(cells[1] == (inHead ? QStringLiteral("0") : QStringLiteral("1")), qPrintable(table));
            QVERIFY2(cells[2] == QStringLiteral("0"), qPrintable(table));
        }

        // Paused after phase 1 and resumed: phase 2 begins where it would have.
        const QString paused = m_tmp.filePath(QStringLiteral("paused"));
        const WorkerRun first
            = fineTune(paused, { QStringLiteral("--stop-after-epoch"), QStringLiteral("1") });
        QVERIFY2(first.exitCode == 0, qPrintable(first.err));
        const WorkerRun resumed = fineTune(paused, { QStringLiteral("--resume"), QStringLiteral("on") });
        QVERIFY2(resumed.exitCode == 0, qPrintable(resumed.err));
        QVERIFY2(
            resumed.err.contains(QStringLiteral("epoch 2: fine-tuning phase 2")), qPrintable(resumed.err));
        QString resumedDigest;
        for (const auto &e : resumed.events)
            if (e.has_finished())
                resumedDigest = QString::fromStdString(e.finished().weights_sha256());
        QCOMPARE(resumedDigest.size(), 64);
        QCOMPARE(resumedDigest, finished);

        // A head the model lacks is refused before any step, with the modules it could be.
        const WorkerRun wrong = runWorker(
            { QStringLiteral("train"), QStringLiteral("--data-dir"), other, QStringLiteral("--model"), module,
                QStringLiteral("--epochs"), QStringLiteral("1"), QStringLiteral("--head-epochs"),
                QStringLiteral("1"), QStringLiteral("--head"), QStringLiteral("head") });
        QCOMPARE(wrong.exitCode, 1);
        QString error;
        for (const auto &e : wrong.events) {
            QVERIFY(!e.has_step());
            if (e.has_error())
                error = QString::fromStdString(e.error().message());
        }
        QVERIFY2(error.contains(QStringLiteral("--head 'head' names no module"))
                && error.contains(QStringLiteral("nearest its output are fc, conv2")),
            qPrintable(error));
    }

private:
    QTemporaryDir m_tmp;
    QString m_modules;
    QString m_data;
};

QTEST_GUILESS_MAIN(TestTorchScript)
#include "tst_torchscript.moc"
