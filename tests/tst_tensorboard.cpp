// TensorBoard export (core/export, `scalelab-cli export tensorboard`, --tensorboard): a
// study written into a journal as the runner would (state events and the run events of
// each attempt, one run retried from a checkpoint), exported, and read back by an
// independent reader, tests/tensorboard/read_events.py (python3 with python3-protobuf:
// struct, a CRC-32C of its own, classes protoc makes from proto/tensorboard), which checks
// the framing, both CRCs of every record and the first event's file_version. Its JSON is
// compared with what the journal says: tags, steps, values, wall times, hparams.
#include "crc32c.h"
#include "journal.h"
#include "journal_test_support.h"
#include "run_events.h"
#include "study_plan.h"
#include "study_results.h"
#include "study_state.h"
#include "tensorboard_export.h"
#include "tensorboard_live.h"
#include "tensorboard_writer.h"
#include "verify_ok.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <map>
#include <vector>

using namespace scalelab;
using namespace scalelab::core;

namespace {

constexpr int kStepsPerEpoch = 5;
constexpr int kEpochs = 2;
const QString kAgent = QStringLiteral("10.0.0.1:7450");

// A scalar as TensorBoard stores it (simple_value is a 32-bit float), then read as a double.
double asStored(double v)
{
    return double(float(v));
}

struct Point {
    qint64 step;
    double value;
    double wall;
};
// Per run folder, per tag: what the export must hold, in order.
using Expected = std::map<QString, std::map<QString, std::vector<Point>>>;

// Writes a study's journal as the runner would: a baseline and runs of 2 and 4 workers,
// two epochs of five steps each; the 4-worker run fails in its second epoch and is retried
// from its epoch-1 checkpoint. Fills `expected` with what survives the folding.
class StudyScript {
public:
    StudyScript(Journal &journal, const QString &studyId)
        : m_journal(journal)
        , m_studyId(studyId)
    { }

    void write(Expected *expected)
    {
        v1::StudyPlan plan;
        plan.set_name("tensorboard");
        plan.set_dataset("synthetic");
        plan.mutable_grid()->add_workers(2);
        plan.mutable_grid()->add_workers(4);
        plan.mutable_grid()->add_batch_size(64);
        plan.mutable_grid()->add_epochs(kEpochs);
        const QList<PlannedRun> runs = expandPlan(plan, m_studyId);
        QCOMPARE(runs.size(), 3);
        add(QStringLiteral("study_created"),
            journal_events::studyCreated(QStringLiteral("tensorboard"), plan, { kAgent }, runs));
        for (const PlannedRun &run : runs) {
            const int w = run.config.workers;
            const QString folder = tensorBoardRunFolder(m_studyId, run.runId, w, run.config.batchSize);
            auto &tags = (*expected)[folder];
            const bool retried = w == 4;
            startAttempt(run.runId, 1, w);
            std::vector<v1::RunEvent> events { started(w, 0) };
            for (int step = 1; step <= kStepsPerEpoch * kEpochs; ++step) {
                const int epoch = (step - 1) / kStepsPerEpoch + 1;
                if (retried && epoch == 2 && step > kStepsPerEpoch + 2)
                    break; // attempt 1 dies after two steps of epoch 2
                const double loss = retried && epoch == 2 ? 9.0 : lossAt(w, step);
                events.push_back(stepEvent(w, epoch, step, loss));
                if (!(retried && epoch == 2))
                    expectStep(tags, events.back());
                if (step % kStepsPerEpoch == 0) {
                    events.push_back(epochEvent(w, epoch));
                    expectEpoch(tags, events.back());
                }
            }
            if (!retried)
                events.push_back(summaryEvent(v1::SUCCEEDED));
            VERIFY_OK(m_journal.appendRunEvents(m_studyId, run.runId, 1, kAgent, events));
            if (retried) {
                endAttempt(run.runId, 1, "FAILED", true);
                startAttempt(run.runId, 2, w);
                std::vector<v1::RunEvent> again { started(w, 1) };
                for (int step = kStepsPerEpoch + 1; step <= kStepsPerEpoch * kEpochs; ++step) {
                    again.push_back(stepEvent(w, 2, step, lossAt(w, step)));
                    expectStep(tags, again.back());
                }
                again.push_back(epochEvent(w, 2));
                expectEpoch(tags, again.back());
                again.push_back(summaryEvent(v1::SUCCEEDED));
                VERIFY_OK(m_journal.appendRunEvents(m_studyId, run.runId, 2, kAgent, again));
                endAttempt(run.runId, 2, "SUCCEEDED", false);
            } else {
                endAttempt(run.runId, 1, "SUCCEEDED", false);
            }
        }
        add(QStringLiteral("study_ended"),
            QJsonObject { { QStringLiteral("state"), QStringLiteral("SUCCEEDED") } });
    }

    static double lossAt(int workers, int step) { return 2.3 - 0.05 * step - 0.01 * workers; }

private:
    template <class Payload> void add(const QString &type, const Payload &payload)
    {
        VERIFY_OK(m_journal.append(m_studyId, testing::testEvent(type, payload)));
    }

    void startAttempt(const QString &runId, int attempt, int workers)
    {
        QList<int> ranks;
        for (int r = 0; r < workers; ++r)
            ranks << r;
        add(QStringLiteral("attempt_starting"),
            journal_events::attemptStarting(runId, attempt, { Portion { kAgent, ranks } }));
        add(QStringLiteral("attempt_running"),
            QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
                { QStringLiteral("rendezvous"), QStringLiteral("10.0.0.1:29500") } });
        m_seq = 0;
    }

    void endAttempt(const QString &runId, int attempt, const char *outcome, bool retry)
    {
        add(QStringLiteral("attempt_ended"),
            QJsonObject { { QStringLiteral("runId"), runId }, { QStringLiteral("attempt"), attempt },
                { QStringLiteral("outcome"), QLatin1String(outcome) },
                { QStringLiteral("reason"), retry ? QStringLiteral("rank 3 exited") : QString() },
                { QStringLiteral("retry"), retry } });
    }

    // `e` as the agent records it: rank 0's, the attempt's next, 1.25 s after the last one.
    v1::RunEvent recorded(v1::RunEvent e = {})
    {
        e.set_seq(++m_seq);
        e.set_rank(0);
        m_clockMs += 1250;
        e.set_unix_ms(m_clockMs);
        return e;
    }

    v1::RunEvent started(int workers, int resumedFrom)
    {
        v1::RunEvent e = recorded(test::startedEvent(kEpochs, kStepsPerEpoch, resumedFrom));
        auto *s = e.mutable_started();
        s->mutable_dataset()->set_name("synthetic");
        s->mutable_dataset()->set_synthetic(true);
        s->set_world_size(workers);
        s->set_global_batch(64 * workers);
        s->set_peak_learning_rate(0.05 * workers);
        auto *spec = s->mutable_effective();
        spec->set_batch_size(64);
        spec->set_learning_rate(0.05);
        spec->set_momentum(0.9);
        spec->set_seed(7);
        spec->set_schedule("cosine");
        return e;
    }

    v1::RunEvent stepEvent(int workers, int epoch, int step, double loss)
    {
        v1::RunEvent e = recorded(test::stepEvent(epoch, step, loss));
        auto *s = e.mutable_step();
        s->set_learning_rate(0.05 * workers * (1.0 - 0.03 * step));
        s->set_images_per_second(400.0 * workers + step);
        s->set_elapsed_seconds(0.5 * step);
        s->set_grad_norm(1.0 + 0.1 * step);
        s->set_step_seconds(0.25 + 0.01 * step);
        s->set_exposed_allreduce_seconds(workers > 1 ? 0.02 * workers : 0.0);
        return e;
    }

    v1::RunEvent epochEvent(int workers, int epoch)
    {
        v1::RunEvent e = recorded(test::epochEvent(epoch, 2.5 * epoch));
        auto *m = e.mutable_epoch();
        m->set_train_loss(1.9 - 0.2 * epoch);
        m->set_train_accuracy(0.3 + 0.1 * epoch);
        m->set_test_loss(2.0 - 0.25 * epoch);
        m->set_test_accuracy(0.25 + 0.12 * epoch + 0.01 * workers);
        m->set_epoch_seconds(2.5);
        m->set_images_per_second(380.0 * workers);
        m->set_test_images(500);
        return e;
    }

    v1::RunEvent summaryEvent(v1::RunState state)
    {
        v1::RunEvent e = recorded();
        e.mutable_summary()->set_state(state);
        e.mutable_summary()->set_wall_seconds(2.5 * kEpochs);
        return e;
    }

    // What event `e` must put in the export: each tag's value at `step`, at the event's time.
    static void expect(std::map<QString, std::vector<Point>> &tags, const v1::RunEvent &e, qint64 step,
        std::initializer_list<std::pair<const char *, double>> values)
    {
        for (const auto &[tag, value] : values)
            tags[QLatin1String(tag)].push_back({ step, asStored(value), double(e.unix_ms()) / 1000.0 });
    }

    static void expectStep(std::map<QString, std::vector<Point>> &tags, const v1::RunEvent &e)
    {
        const auto &s = e.step();
        expect(tags, e, s.step(),
            { { "train/loss", s.loss() }, { "train/lr", s.learning_rate() },
                { "train/grad_norm", s.grad_norm() }, { "train/images_per_second", s.images_per_second() },
                { "step/seconds", s.step_seconds() },
                { "step/compute_seconds", s.step_seconds() - s.exposed_allreduce_seconds() },
                { "step/exposed_allreduce_seconds", s.exposed_allreduce_seconds() } });
    }

    static void expectEpoch(std::map<QString, std::vector<Point>> &tags, const v1::RunEvent &e)
    {
        const auto &m = e.epoch();
        expect(tags, e, m.epoch(),
            { { "epoch/train_loss", m.train_loss() }, { "epoch/train_accuracy", m.train_accuracy() },
                { "epoch/test_loss", m.test_loss() }, { "epoch/test_accuracy", m.test_accuracy() },
                { "epoch/images_per_second", m.images_per_second() },
                { "epoch/seconds", m.epoch_seconds() } });
    }

    Journal &m_journal;
    QString m_studyId;
    qint64 m_seq = 0;
    qint64 m_clockMs = 1'700'000'000'000;
};

// A temporary folder whose journal (state/journal.sqlite) holds study tb1, written by
// StudyScript, and what its export must hold; `logs` is a path in it for the exports.
struct Fixture {
    QTemporaryDir tmp;
    Journal journal;
    Expected expected;
    QString state = tmp.filePath(QStringLiteral("state"));
    QString logs = tmp.filePath(QStringLiteral("logs"));

    Status setUp()
    {
        if (const Status opened = journal.open(state + QStringLiteral("/journal.sqlite")); !opened)
            return opened;
        StudyScript(journal, QStringLiteral("tb1")).write(&expected);
        return Status::success();
    }
};

// A python3 that has Debian's python3-protobuf, or empty.
QString pythonWithProtobuf()
{
    for (const QString &candidate :
        { QStringLiteral("/usr/bin/python3"), QStandardPaths::findExecutable(QStringLiteral("python3")) }) {
        if (candidate.isEmpty() || !QFile::exists(candidate))
            continue;
        QProcess p;
        p.start(candidate, { QStringLiteral("-c"), QStringLiteral("import google.protobuf") });
        if (p.waitForFinished(30'000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0)
            return candidate;
    }
    return {};
}

struct ReaderResult {
    bool ran = false;
    int code = -1;
    QByteArray out;
    QString err;
};

// read_events.py on `logdir` (fails the test when there is no python3-protobuf).
ReaderResult runReader(const QString &logdir)
{
    ReaderResult r;
    const QString python = pythonWithProtobuf();
    if (python.isEmpty()) {
        QTest::qFail("no python3 with python3-protobuf: apt-get install python3-protobuf (scripts/setup.sh "
                     "installs it)",
            __FILE__, __LINE__);
        return r;
    }
    QProcess p;
    p.start(python,
        { QStringLiteral(SCALELAB_SOURCE_DIR "/tests/tensorboard/read_events.py"),
            QStringLiteral("--proto-root"), QStringLiteral(SCALELAB_SOURCE_DIR "/proto"), logdir });
    if (!p.waitForFinished(120'000)) {
        QTest::qFail("read_events.py did not finish in 2 minutes", __FILE__, __LINE__);
        return r;
    }
    r.ran = true;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

// read_events.py's JSON for `logdir`; fails the test (with the reader's words) when it
// refuses the files.
QJsonObject readBack(const QString &logdir)
{
    const ReaderResult r = runReader(logdir);
    if (!r.ran)
        return {};
    if (r.code != 0) {
        QTest::qFail(qPrintable(QStringLiteral("read_events.py refused %1: %2").arg(logdir, r.err)), __FILE__,
            __LINE__);
        return {};
    }
    return QJsonDocument::fromJson(r.out).object();
}

// "" when `actual` (read_events.py's [[step, value, wall], ...]) is `expected`, else the first difference.
QString compareSeries(const QString &what, const QJsonArray &actual, const std::vector<Point> &expected)
{
    if (actual.size() != qsizetype(expected.size()))
        return QStringLiteral("%1: %2 points, expected %3").arg(what).arg(actual.size()).arg(expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const QJsonArray p = actual[qsizetype(i)].toArray();
        const Point &e = expected[i];
        if (p[0].toInteger() != e.step || p[1].toDouble() != e.value || p[2].toDouble() != e.wall)
            return QStringLiteral("%1 point %2: (step %3, %4, wall %5), expected (step %6, %7, wall %8)")
                .arg(what)
                .arg(i)
                .arg(p[0].toInteger())
                .arg(p[1].toDouble(), 0, 'g', 17)
                .arg(p[2].toDouble(), 0, 'f', 3)
                .arg(e.step)
                .arg(e.value, 0, 'g', 17)
                .arg(e.wall, 0, 'f', 3);
    }
    return {};
}

// The cli's exit code, standard output and standard error.
struct CliResult {
    int code = -1;
    QString out;
    QString err;
};

CliResult cli(const QStringList &arguments)
{
    QProcess p;
    p.start(QStringLiteral(SCALELAB_BIN_DIR "/scalelab-cli"), arguments);
    CliResult r;
    if (!p.waitForFinished(60'000))
        return r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

} // namespace

class TestTensorBoard : public QObject {
    Q_OBJECT
private Q_SLOTS:
    // The check value of CRC-32C (Castagnoli) and TFRecord's mask, and a record's framing.
    void crc32cAndTheRecordFraming()
    {
        const QByteArray check("123456789");
        QCOMPARE(crc32c(check.constData(), std::size_t(check.size())), 0xE3069283u);
        QCOMPARE(crc32c("", 0), 0u);
        // In pieces, and past the 8-byte stride, as in one go.
        const QByteArray long_(1000, 'x');
        const std::uint32_t whole = crc32c(long_.constData(), 1000);
        QCOMPARE(crc32c(long_.constData() + 13, 987, crc32c(long_.constData(), 13)), whole);
        QCOMPARE(maskCrc32c(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xA282EAD8u);
        const QByteArray record = TensorBoardWriter::frame(check);
        QCOMPARE(record.size(), 8 + 4 + 9 + 4);
        QCOMPARE(record.left(8), QByteArray("\x09\0\0\0\0\0\0\0", 8));
        QCOMPARE(record.mid(12, 9), check);
        std::uint32_t dataCrc = 0;
        std::memcpy(&dataCrc, record.constData() + 21, 4);
        QCOMPARE(dataCrc, maskCrc32c(0xE3069283u));
    }

    // A study exported from the journal reads back with every tag, step and value the
    // journal holds (a retried run's series as the reports fold them), its hparams, and
    // the study's speedup per worker count.
    void studyExportReadsBackAsTheJournalSays()
    {
        Fixture f;
        VERIFY_OK(f.setUp());
        Journal &journal = f.journal;
        const Expected &expected = f.expected;
        const QString logdir = f.logs;
        const Result<TensorBoardExport> written = exportToTensorBoard(journal, QStringLiteral("tb1"), logdir);
        VERIFY_OK(written);
        QCOMPARE(written->runs, 3);
        QVERIFY(written->synthetic);
        QCOMPARE(written->files.size(), 5); // the experiment, three runs, the study

        const QJsonObject read = readBack(logdir);
        if (QTest::currentTestFailed())
            return;
        const QJsonObject runs = read.value(QLatin1String("runs")).toObject();
        QCOMPARE(runs.keys(),
            QStringList(
                { QStringLiteral("."), QStringLiteral("r01-1worker-b64"), QStringLiteral("r02-2workers-b64"),
                    QStringLiteral("r03-4workers-b64"), QStringLiteral("study") }));
        const StudySnapshot snapshot
            = buildSnapshot(StudyState::replay(journal.events(QStringLiteral("tb1"))), journal);
        const StudyResults results = computeStudyResults(snapshot);
        for (const auto &[folder, tags] : expected) {
            const QJsonObject run = runs.value(folder).toObject();
            QCOMPARE(run.value(QLatin1String("files")).toArray().size(), 1);
            QCOMPARE(run.value(QLatin1String("writer")).toString(), QStringLiteral("scalelab"));
            const QJsonObject scalars = run.value(QLatin1String("scalars")).toObject();
            for (const auto &[tag, points] : tags) {
                const QString difference
                    = compareSeries(folder + QLatin1Char('/') + tag, scalars.value(tag).toArray(), points);
                QVERIFY2(difference.isEmpty(), qPrintable(difference));
            }
            // run/*: what the reports compute for the run, once, at its last step.
            const int i = int(std::distance(expected.begin(), expected.find(folder)));
            const RunResult &result = snapshot.runs[i];
            const QJsonArray wall = scalars.value(QLatin1String("run/wall_seconds")).toArray();
            QCOMPARE(wall.size(), 1);
            QCOMPARE(wall[0].toArray()[0].toInteger(), kStepsPerEpoch * kEpochs);
            QCOMPARE(wall[0].toArray()[1].toDouble(), asStored(result.wallSeconds));
            const QJsonArray speedup = scalars.value(QLatin1String("run/speedup")).toArray();
            QCOMPARE(speedup.size(), 1);
            QCOMPARE(speedup[0].toArray()[1].toDouble(), asStored(results.runs[i].byWallClock.speedup));
            QCOMPARE(scalars.keys().size(), int(tags.size()) + 3); // + run/wall_seconds, speedup, efficiency
            QVERIFY(run.value(QLatin1String("descriptions"))
                        .toObject()
                        .value(QLatin1String("train/loss"))
                        .toString()
                        .contains(QLatin1String("rank 0")));

            // The hparams: what the run trained with, SYNTHETIC said; it succeeded.
            const QJsonObject hparams = run.value(QLatin1String("hparams")).toObject();
            QCOMPARE(hparams.value(QLatin1String("session_start_info_tag")).toString(),
                QStringLiteral("_hparams_/session_start_info"));
            const QJsonObject start = hparams.value(QLatin1String("session_start_info")).toObject();
            const QJsonObject values = start.value(QLatin1String("hparams")).toObject();
            QCOMPARE(values.value(QLatin1String("workers")).toDouble(), double(result.config.workers));
            QCOMPARE(values.value(QLatin1String("batch_size")).toDouble(), 64.0);
            QCOMPARE(values.value(QLatin1String("global_batch")).toDouble(), 64.0 * result.config.workers);
            QCOMPARE(values.value(QLatin1String("baseline")).toBool(), result.config.workers == 1);
            QCOMPARE(
                values.value(QLatin1String("dataset")).toString(), QStringLiteral("synthetic (SYNTHETIC)"));
            QCOMPARE(values.value(QLatin1String("learning_rate")).toDouble(), 0.05);
            QCOMPARE(
                values.value(QLatin1String("peak_learning_rate")).toDouble(), 0.05 * result.config.workers);
            QCOMPARE(values.value(QLatin1String("seed")).toString(), QStringLiteral("7"));
            QVERIFY(!start.value(QLatin1String("group_name")).toString().isEmpty());
            QCOMPARE(hparams.value(QLatin1String("session_end_info"))
                         .toObject()
                         .value(QLatin1String("status"))
                         .toString(),
                QStringLiteral("STATUS_SUCCESS"));
            const QString description = run.value(QLatin1String("texts"))
                                            .toObject()
                                            .value(QLatin1String("run/description"))
                                            .toArray()
                                            .first()
                                            .toString();
            QVERIFY2(description.contains(QLatin1String("SYNTHETIC")), qPrintable(description));
            QVERIFY(run.value(QLatin1String("restarts")).toArray().isEmpty());
        }
        // The retried run: attempt 1's steps after its checkpoint (loss 9) are gone.
        const QJsonArray loss = runs.value(QLatin1String("r03-4workers-b64"))
                                    .toObject()
                                    .value(QLatin1String("scalars"))
                                    .toObject()
                                    .value(QLatin1String("train/loss"))
                                    .toArray();
        QCOMPARE(loss.size(), kStepsPerEpoch * kEpochs);
        for (const QJsonValue &p : loss)
            QVERIFY(p.toArray()[1].toDouble() < 9.0);

        // The experiment in the root run declares the hparams and the metrics.
        const QJsonObject experiment = runs.value(QLatin1String("."))
                                           .toObject()
                                           .value(QLatin1String("hparams"))
                                           .toObject()
                                           .value(QLatin1String("experiment"))
                                           .toObject();
        QStringList hparamNames, metricTags;
        QJsonArray workersDomain;
        for (const QJsonValue &h : experiment.value(QLatin1String("hparam_infos")).toArray()) {
            hparamNames << h.toObject().value(QLatin1String("name")).toString();
            if (hparamNames.last() == QLatin1String("workers")) {
                QCOMPARE(h.toObject().value(QLatin1String("type")).toString(),
                    QStringLiteral("DATA_TYPE_FLOAT64"));
                workersDomain = h.toObject().value(QLatin1String("domain_discrete")).toArray();
            }
        }
        for (const QJsonValue &m : experiment.value(QLatin1String("metric_infos")).toArray())
            metricTags << m.toObject()
                              .value(QLatin1String("name"))
                              .toObject()
                              .value(QLatin1String("tag"))
                              .toString();
        for (const char *name :
            { "workers", "batch_size", "global_batch", "dataset", "learning_rate", "seed" })
            QVERIFY2(hparamNames.contains(QLatin1String(name)), name);
        QCOMPARE(workersDomain, QJsonArray({ 1.0, 2.0, 4.0 }));
        for (const char *tag :
            { "epoch/test_accuracy", "epoch/test_loss", "epoch/train_loss", "run/speedup" })
            QVERIFY2(metricTags.contains(QLatin1String(tag)), tag);
        QVERIFY(
            experiment.value(QLatin1String("description")).toString().contains(QLatin1String("SYNTHETIC")));

        // study/: speedup and efficiency per worker count, the baseline at 1.
        const QJsonObject study
            = runs.value(QLatin1String("study")).toObject().value(QLatin1String("scalars")).toObject();
        const QJsonArray speedup = study.value(QLatin1String("scaling/speedup")).toArray();
        const QJsonArray efficiency = study.value(QLatin1String("scaling/efficiency")).toArray();
        QCOMPARE(speedup.size(), 3);
        QCOMPARE(efficiency.size(), 3);
        QCOMPARE(speedup[0].toArray()[0].toInteger(), 1);
        QCOMPARE(speedup[0].toArray()[1].toDouble(), 1.0);
        QCOMPARE(results.comparisons.size(), 2);
        for (int k = 0; k < 2; ++k) {
            const SeedComparison &c = results.comparisons[k];
            QCOMPARE(speedup[k + 1].toArray()[0].toInteger(), qint64(c.workers));
            QCOMPARE(speedup[k + 1].toArray()[1].toDouble(), asStored(c.speedup));
            QCOMPARE(efficiency[k + 1].toArray()[1].toDouble(), asStored(c.efficiency));
        }
        QVERIFY(!study.contains(QLatin1String("scaling/speedup_to_target"))); // the plan set no target
    }

    // The folder is refused when it is another study's or holds foreign event files, and
    // an export again replaces the study's own files; unknown ids say where to look.
    void foldersAreClaimedAndIdsChecked()
    {
        Fixture f;
        VERIFY_OK(f.setUp());
        Journal &journal = f.journal;
        const QTemporaryDir &tmp = f.tmp;
        Expected other;
        StudyScript(journal, QStringLiteral("tb2")).write(&other);
        const QString logdir = f.logs;
        VERIFY_OK(exportToTensorBoard(journal, QStringLiteral("tb1"), logdir));
        VERIFY_OK(exportToTensorBoard(journal, QStringLiteral("tb1"), logdir)); // again: replaced
        QCOMPARE(QDir(logdir + QStringLiteral("/r02-2workers-b64")).entryList(QDir::Files).size(), 1);
        VERIFY_OK(exportToTensorBoard(journal, QStringLiteral("tb1-r02"), logdir)); // one run of it
        QCOMPARE(QDir(logdir + QStringLiteral("/r02-2workers-b64")).entryList(QDir::Files).size(), 1);

        const auto another = exportToTensorBoard(journal, QStringLiteral("tb2"), logdir);
        QVERIFY(!another.ok());
        QVERIFY(another.isAlreadyExists());
        QVERIFY2(another.error().contains(QLatin1String("holds the TensorBoard export of tb1")),
            qPrintable(another.error()));

        const QString foreign = tmp.filePath(QStringLiteral("foreign"));
        QVERIFY(QDir().mkpath(foreign + QStringLiteral("/run1")));
        QFile someone(foreign + QStringLiteral("/run1/events.out.tfevents.1.host"));
        QVERIFY(someone.open(QIODevice::WriteOnly));
        someone.close();
        const auto refused = exportToTensorBoard(journal, QStringLiteral("tb1"), foreign);
        QVERIFY(refused.isAlreadyExists());
        QVERIFY2(refused.error().contains(QLatin1String("did not write")), qPrintable(refused.error()));

        const auto unknown
            = exportToTensorBoard(journal, QStringLiteral("nope"), tmp.filePath(QStringLiteral("x")));
        QVERIFY(unknown.isNotFound());
        QVERIFY2(
            unknown.error().contains(QLatin1String("no study or run nope")), qPrintable(unknown.error()));
        QVERIFY(!QFileInfo::exists(tmp.filePath(QStringLiteral("x"))));
    }

    // `scalelab-cli export tensorboard`: a study's run by its id, and clear refusals.
    void cliExportsAndSaysWhy()
    {
        Fixture f;
        VERIFY_OK(f.setUp());
        f.journal.close(); // the cli's now
        const QTemporaryDir &tmp = f.tmp;
        const QString state = f.state;
        const QString logdir = f.logs;
        CliResult r
            = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("tb1-r03"),
                logdir, QStringLiteral("--state-dir"), state, QStringLiteral("--json") });
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QJsonObject summary = QJsonDocument::fromJson(r.out.toUtf8()).object();
        QCOMPARE(summary.value(QLatin1String("runs")).toInt(), 1);
        QCOMPARE(summary.value(QLatin1String("owner")).toString(), QStringLiteral("tb1"));
        QVERIFY(summary.value(QLatin1String("synthetic")).toBool());
        QVERIFY(summary.value(QLatin1String("files"))
                    .toArray()
                    .first()
                    .toString()
                    .startsWith(QLatin1String("r03-4workers-b64/events.out.tfevents.")));
        const QJsonObject read = readBack(logdir);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(read.value(QLatin1String("runs")).toObject().keys(),
            QStringList { QStringLiteral("r03-4workers-b64") });

        r = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("tb1"), logdir,
            QStringLiteral("--state-dir"), state });
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QLatin1String("tensorboard --logdir ") + logdir), qPrintable(r.out));
        QVERIFY2(r.out.contains(QLatin1String("SYNTHETIC")), qPrintable(r.out));

        r = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("nope"), logdir,
            QStringLiteral("--state-dir"), state });
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QLatin1String("no study or run nope")), qPrintable(r.err));

        QFile file(tmp.filePath(QStringLiteral("a-file")));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.close();
        r = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("tb1"),
            file.fileName(), QStringLiteral("--state-dir"), state });
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QLatin1String("is a file, not a folder")), qPrintable(r.err));
        r = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("tb1"),
            file.fileName() + QStringLiteral("/logs"), QStringLiteral("--state-dir"), state });
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QLatin1String("cannot create the folder")), qPrintable(r.err));

        r = cli({ QStringLiteral("export"), QStringLiteral("tensorboard"), QStringLiteral("tb1") });
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(QLatin1String("STUDY_ID|RUN_ID DIR")), qPrintable(r.err));
        r = cli({ QStringLiteral("--help") });
        QVERIFY(r.out.contains(QLatin1String("export tensorboard")));
    }

    // The reader is no rubber stamp: a flipped bit in a record's data or in its length's
    // CRC, and a torn last record, are each refused, naming what is wrong.
    void readerRefusesCorruptRecords()
    {
        Fixture f;
        VERIFY_OK(f.setUp());
        const QString logdir = f.logs;
        const Result<TensorBoardExport> written
            = exportToTensorBoard(f.journal, QStringLiteral("tb1-r02"), logdir);
        VERIFY_OK(written);
        QFile file(logdir + QLatin1Char('/') + written->files.first());
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray good = file.readAll();
        file.close();
        QVERIFY(runReader(logdir).code == 0);
        const auto refusedWith = [&](QByteArray bytes, const char *words) {
            QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
            file.write(bytes);
            file.close();
            const ReaderResult r = runReader(logdir);
            QVERIFY2(r.code == 1 && r.err.contains(QLatin1String(words)), qPrintable(r.err));
        };
        QByteArray data = good;
        data[data.size() - 10] = char(data[data.size() - 10] ^ 0x01); // inside the last record's data
        refusedWith(data, "data's CRC");
        data = good;
        data[8] = char(data[8] ^ 0x80); // the first record's length CRC
        refusedWith(data, "length's CRC");
        refusedWith(good.left(good.size() - 3), "runs past the end");
    }

    // The live writer, fed what the runner emits (here: the journal's history at start),
    // writes the same series; the retried attempt opens with a SessionLog START at its
    // first step, and the study's end gives the outcomes and the scaling.
    void liveWritingMatchesTheJournal()
    {
        Fixture f;
        VERIFY_OK(f.setUp());
        Journal &journal = f.journal;
        Expected &expected = f.expected;
        const QString logdir = f.logs;
        {
            TensorBoardLive live(logdir);
            VERIFY_OK(live.startStudy(journal, QStringLiteral("tb1")));
            VERIFY_OK(live.apply(QStringLiteral("unknown-run"), 1, {})); // ignored
            VERIFY_OK(live.finish(
                buildSnapshot(StudyState::replay(journal.events(QStringLiteral("tb1"))), journal)));
            QCOMPARE(live.files().size(), 5);
        }
        const QJsonObject runs = readBack(logdir).value(QLatin1String("runs")).toObject();
        if (QTest::currentTestFailed())
            return;
        for (const QString &folder :
            { QStringLiteral("r01-1worker-b64"), QStringLiteral("r02-2workers-b64") }) {
            const QJsonObject scalars
                = runs.value(folder).toObject().value(QLatin1String("scalars")).toObject();
            for (const auto &[tag, points] : expected[folder]) {
                const QString difference
                    = compareSeries(folder + QLatin1Char('/') + tag, scalars.value(tag).toArray(), points);
                QVERIFY2(difference.isEmpty(), qPrintable(difference));
            }
            QCOMPARE(runs.value(folder)
                         .toObject()
                         .value(QLatin1String("hparams"))
                         .toObject()
                         .value(QLatin1String("session_end_info"))
                         .toObject()
                         .value(QLatin1String("status"))
                         .toString(),
                QStringLiteral("STATUS_SUCCESS"));
        }
        const QJsonObject retried = runs.value(QLatin1String("r03-4workers-b64")).toObject();
        QCOMPARE(retried.value(QLatin1String("restarts")).toArray(), QJsonArray { kStepsPerEpoch + 1 });
        // Both attempts' steps are in the file; TensorBoard drops the first's from step 6 on.
        QCOMPARE(retried.value(QLatin1String("scalars"))
                     .toObject()
                     .value(QLatin1String("train/loss"))
                     .toArray()
                     .size(),
            kStepsPerEpoch * kEpochs + 2);
        QCOMPARE(runs.value(QLatin1String("study"))
                     .toObject()
                     .value(QLatin1String("scalars"))
                     .toObject()
                     .value(QLatin1String("scaling/speedup"))
                     .toArray()
                     .size(),
            3);
    }
};

QTEST_GUILESS_MAIN(TestTensorBoard)
#include "tst_tensorboard.moc"
