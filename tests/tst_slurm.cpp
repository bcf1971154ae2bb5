// packaging/slurm for real: Debian's slurm-wlm on this machine (munged, slurmctld and one
// slurmd per "node", each node a network namespace with its own address and host name;
// tests/slurm/slurm-cluster.sh), and the batch script submitted with sbatch as a user
// would. The study must end SUCCEEDED with its reports in the job's folder; a requeued
// job continues its study from the journal; scancel stops every worker.
//
// Needs root (namespaces), slurm-wlm and munge: ctest label `slurm`. Where the harness
// cannot run, every case fails with its reason; exclude the label by name there
// (`ctest -LE slurm`). Nothing is skipped silently.
#include "test_support.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cstdio>

using namespace scalelab;

// QVERIFY2 builds its message even when the check passes: this prints the job's output
// only when `condition` fails.
#define VERIFY_JOB(condition, job, what)                                                                     \
    do {                                                                                                     \
        if (!(condition))                                                                                    \
            QFAIL(shown(job, what).constData());                                                             \
    } while (false)

namespace {

const QString kSource = QStringLiteral(SCALELAB_SOURCE_DIR);
const QString kHarness = kSource + QStringLiteral("/tests/slurm/slurm-cluster.sh");
const QString kBatch = kSource + QStringLiteral("/packaging/slurm/scalelab-study.sbatch");

struct Result {
    int code = -1;
    QString output;
};

Result run(const QString &program, const QStringList &args, const QProcessEnvironment &env,
    int timeoutMs = 60'000, const QString &dir = {})
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.setProcessEnvironment(env);
    if (!dir.isEmpty())
        p.setWorkingDirectory(dir);
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
        QString::fromLocal8Bit(p.readAll()) };
}

QString readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

// A study plan on the synthetic set: a baseline (unless `baseline` is false) and one
// 4-worker run spread over the nodes.
QByteArray plan(const char *name, int trainImages, int epochs, bool baseline)
{
    return QStringLiteral(R"({"name":"%1","dataset":"synthetic","training":{"maxTrainImages":"%2",
        "maxTestImages":"128"},"baseline":%3,"grid":{"workers":[4],"batchSize":[32],"epochs":[%4]},
        "maxFailures":2,"placement":"spread"})")
        .arg(QLatin1String(name))
        .arg(trainImages)
        .arg(baseline ? QStringLiteral(R"({"batchSize":32})") : QStringLiteral(R"({"skip":true})"))
        .arg(epochs)
        .toUtf8();
}

} // namespace

class TestSlurm : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_dir { QStringLiteral("/tmp/slslurm-XXXXXX") };
    bool m_up = false;
    QString m_error;
    QProcessEnvironment m_env;

    QString jobsDir() const { return m_dir.path() + QStringLiteral("/jobs"); }
    QString jobDir(const QString &job) const { return jobsDir() + QStringLiteral("/scalelab-job-") + job; }
    QString jobOutput(const QString &job) const
    {
        return readAll(jobsDir() + QStringLiteral("/scalelab-study-%1.out").arg(job));
    }

    // sbatch -N NODES scalelab-study.sbatch PLAN --synthetic ...: the job id.
    QString submit(const QByteArray &planText, int nodes, int trainImages)
    {
        const QString planFile
            = jobsDir() + QStringLiteral("/plan-%1.json").arg(QDateTime::currentMSecsSinceEpoch());
        if (!test::writeFile(planFile, planText)) {
            qWarning("cannot write %s", qPrintable(planFile));
            return {};
        }
        const Result r = run(QStringLiteral("sbatch"),
            { QStringLiteral("--parsable"), QStringLiteral("-N"), QString::number(nodes),
                QStringLiteral("--chdir=") + jobsDir(), kBatch, planFile, QStringLiteral("--synthetic"),
                QStringLiteral("--synthetic-train"), QString::number(trainImages),
                QStringLiteral("--synthetic-test"), QStringLiteral("128") },
            m_env, 60'000, jobsDir()); // submitted from there: the job's folder is made there
        if (r.code != 0) {
            qWarning("sbatch failed: %s", qPrintable(r.output));
            return {};
        }
        return r.output.trimmed().section(QLatin1Char(';'), 0, 0);
    }

    // Qt Test cuts long messages: the job's whole output goes to standard error, and the
    // message says where to look.
    QByteArray shown(const QString &job, const QString &what = {}) const
    {
        std::fprintf(stderr, "---- output of job %s ----\n%s---- end of job %s ----\n", qPrintable(job),
            qPrintable(jobOutput(job)), qPrintable(job));
        return (what + QStringLiteral(" (job %1's output is above)").arg(job)).toLocal8Bit();
    }

    QString jobField(const QString &job, const QString &field) const
    {
        const Result r = run(QStringLiteral("scontrol"),
            { QStringLiteral("show"), QStringLiteral("job"), QStringLiteral("-o"), job }, m_env);
        const QRegularExpression re(QStringLiteral("(?:^| )%1=(\\S*)").arg(field));
        return re.match(r.output).captured(1);
    }

    // Waits until the job is in one of `states`; false (with the state it had) on timeout.
    bool waitForState(const QString &job, const QStringList &states, int timeoutMs, QString *last)
    {
        QDeadlineTimer deadline(test::timeLimit(timeoutMs));
        while (!deadline.hasExpired()) {
            *last = jobField(job, QStringLiteral("JobState"));
            if (states.contains(*last))
                return true;
            QThread::msleep(500);
        }
        return false;
    }

    bool waitForOutput(const QString &job, const QString &text, int timeoutMs)
    {
        QDeadlineTimer deadline(test::timeLimit(timeoutMs));
        while (!deadline.hasExpired()) {
            if (jobOutput(job).contains(text))
                return true;
            QThread::msleep(300);
        }
        return false;
    }

    // Nothing of the job is left: no agent, worker or CLI mentions its folder.
    bool nothingLeft(const QString &job, int timeoutMs, QStringList *left)
    {
        QDeadlineTimer deadline(test::timeLimit(timeoutMs));
        do {
            *left = test::processesMentioning(jobDir(job));
            if (left->isEmpty())
                return true;
            QThread::msleep(300);
        } while (!deadline.hasExpired());
        return false;
    }

    QJsonObject report(const QString &job, QString *studyId)
    {
        const auto files = QDir(jobDir(job) + QStringLiteral("/reports"))
                               .entryList({ QStringLiteral("*.json") }, QDir::Files);
        if (files.size() != 1)
            return {};
        *studyId = files.first().chopped(5);
        return QJsonDocument::fromJson(
            readAll(jobDir(job) + QStringLiteral("/reports/") + files.first()).toUtf8())
            .object();
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        QDir().mkpath(jobsDir());
        m_env = QProcessEnvironment::systemEnvironment();
        // Should this test die without taking its cluster down, the harness does it.
        m_env.insert(
            QStringLiteral("CLUSTER_OWNER_PID"), QString::number(QCoreApplication::applicationPid()));
        m_env.insert(QStringLiteral("SCALELAB_BIN_DIR"), QStringLiteral(SCALELAB_BIN_DIR));
        m_env.insert(QStringLiteral("SCALELAB_AGENT_METRICS_PORT"), QStringLiteral("7452")); // off unless set
        const Result up = run(QStringLiteral("bash"),
            { kHarness, QStringLiteral("up"), m_dir.path(), QStringLiteral("2") }, m_env, 120'000);
        m_up = up.code == 0;
        m_error = up.output;
        m_env.insert(QStringLiteral("SLURM_CONF"), m_dir.path() + QStringLiteral("/slurm/slurm.conf"));
    }

    void cleanupTestCase()
    {
        run(QStringLiteral("bash"), { kHarness, QStringLiteral("down"), m_dir.path() }, m_env, 120'000);
    }

    void init() { QVERIFY2(m_up, qPrintable(QStringLiteral("no Slurm cluster: ") + m_error)); }

    // A baseline and a 4-worker run whose ranks span both nodes, to SUCCEEDED, with its
    // journal and four reports in the job's folder and the agents stopped cleanly.
    void studyOnTwoNodesSucceeds()
    {
        const QString job = submit(plan("slurm-smoke", 512, 1, true), 2, 512);
        QVERIFY(!job.isEmpty());
        QString state;
        VERIFY_JOB(waitForState(job,
                       { QStringLiteral("COMPLETED"), QStringLiteral("FAILED"), QStringLiteral("CANCELLED") },
                       300'000, &state),
            job, state);
        const QString output = jobOutput(job);
        VERIFY_JOB(state == QLatin1String("COMPLETED")
                && jobField(job, QStringLiteral("ExitCode")) == QLatin1String("0:0"),
            job, state);
        VERIFY_JOB(output.contains(QRegularExpression(
                       QStringLiteral("placed on h\\d:7450 \\(2 ranks\\), h\\d:7450 \\(2 ranks\\)"))),
            job, QString());

        const QString dir = jobDir(job);
        QCOMPARE(readAll(dir + QStringLiteral("/agents.txt")), QStringLiteral("h1:7450\nh2:7450\n"));
        QCOMPARE(
            QFileInfo(dir + QStringLiteral("/token")).permissions() & (QFile::ReadGroup | QFile::ReadOther),
            QFileDevice::Permissions());
        const QString attach = readAll(dir + QStringLiteral("/attach.txt"));
        QVERIFY2(attach.contains(QStringLiteral("--agents-file ") + dir), qPrintable(attach));
        // The agents served Prometheus metrics; the job said where, and wrote a file_sd file.
        QVERIFY2(attach.contains(
                     QStringLiteral("Prometheus scrape targets (plain HTTP, /metrics): h1:7452 h2:7452")),
            qPrintable(attach));
        // The job listed its targets while it ran, and emptied the file_sd list when its agents went.
        QCOMPARE(QJsonDocument::fromJson(readAll(dir + QStringLiteral("/prometheus-targets.json")).toUtf8())
                     .array(),
            QJsonArray());
        QString studyId;
        const QJsonObject json = report(job, &studyId);
        QCOMPARE(json.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        QCOMPARE(json.value(QLatin1String("synthetic")).toBool(), true);
        QCOMPARE(json.value(QLatin1String("runs")).toArray().size(), 2);
        for (const char *format : { "csv", "html", "pdf" })
            QVERIFY2(
                QFileInfo(dir + QStringLiteral("/reports/%1.%2").arg(studyId, QLatin1String(format))).size()
                    > 100,
                format);
        // Each agent served metrics, and was asked to stop (SIGTERM to the step), not killed.
        for (const char *node : { "h1", "h2" }) {
            const QString log
                = readAll(dir + QStringLiteral("/agents/%1/agent.log").arg(QLatin1String(node)));
            QVERIFY2(log.contains(QLatin1String("received Terminated")), node);
            QVERIFY2(
                log.contains(QLatin1String("Prometheus metrics, plain HTTP, at http://0.0.0.0:7452/metrics")),
                node);
        }
        QStringList left;
        QVERIFY2(nothingLeft(job, 10'000, &left), qPrintable(left.join(QLatin1Char('\n'))));
    }

    // Requeued after its first epoch (as after a preemption), the job continues the study
    // from its journal: no second study, and the interrupted run resumes from a checkpoint.
    void requeueContinuesFromJournal()
    {
        const QString job = submit(plan("slurm-requeue", 1024, 3, true), 2, 1024);
        QVERIFY(!job.isEmpty());
        // Once epoch 1's checkpoint is committed (the runner copies it after that).
        VERIFY_JOB(
            waitForOutput(job, QStringLiteral("checkpoint of epoch 1 copied"), 180'000), job, QString());
        const Result requeue = run(QStringLiteral("scontrol"), { QStringLiteral("requeue"), job }, m_env);
        QVERIFY2(requeue.code == 0, qPrintable(requeue.output));
        // Slurm holds a requeued job back for a while (BeginTime); a preempted one would wait
        // for nodes anyway. Nothing of the first run may be left meanwhile.
        QStringList left;
        QVERIFY2(nothingLeft(job, 60'000, &left), qPrintable(left.join(QLatin1Char('\n'))));
        QString state;
        VERIFY_JOB(
            waitForState(job, { QStringLiteral("COMPLETED"), QStringLiteral("FAILED") }, 480'000, &state),
            job, state);
        const QString output = jobOutput(job);
        VERIFY_JOB(state == QLatin1String("COMPLETED"), job, QString());
        VERIFY_JOB(jobField(job, QStringLiteral("Restarts")) == QLatin1String("1"), job, QString());
        VERIFY_JOB(output.contains(QStringLiteral("the journal holds study")), job, QString());
        QCOMPARE(output.count(QStringLiteral(" created; if this command stops")), 1);

        QString studyId;
        const QJsonObject json = report(job, &studyId);
        QCOMPARE(json.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        int resumed = 0;
        for (const auto &r : json.value(QLatin1String("runs")).toArray())
            for (const auto &a : r.toObject().value(QLatin1String("attempts")).toArray())
                resumed += a.toObject().value(QLatin1String("resumed_from_epoch")).toInt() > 0 ? 1 : 0;
        VERIFY_JOB(resumed >= 1, job, QString());
    }

    // Issue 55 item 5: a node of the job lost while its ranks train (its agent killed, as when
    // Slurm preempts or fails one node of the allocation): an elastic run ({"min": 2, "max": 4},
    // two ranks a node) goes on with the other node's two ranks at the planned global batch,
    // and the study ends SUCCEEDED, instead of failing the run or waiting for the node.
    void lostNodeShrinksAnElasticRun()
    {
        QByteArray elastic = plan("slurm-elastic", 1024, 4, false);
        elastic.replace(R"("workers":[4])", R"("workers":[{"min":2,"max":4}])");
        const QString job = submit(elastic, 2, 1024);
        QVERIFY(!job.isEmpty());
        VERIFY_JOB(
            waitForOutput(job, QStringLiteral("checkpoint of epoch 1 copied"), 180'000), job, QString());
        QString agent;
        for (const QString &p : test::processesMentioning(jobDir(job) + QStringLiteral("/agents/h2/state")))
            if (p.contains(QLatin1String("scalelab-agent")))
                agent = p.section(QLatin1Char(':'), 0, 0);
        QVERIFY2(!agent.isEmpty(), "h2's agent is running");
        QVERIFY(run(QStringLiteral("kill"), { QStringLiteral("-KILL"), agent }, m_env).code == 0);
        VERIFY_JOB(
            waitForOutput(job, QStringLiteral("shrank from 4 to 2 of 4 workers"), 60'000), job, QString());
        QString state;
        VERIFY_JOB(
            waitForState(job, { QStringLiteral("COMPLETED"), QStringLiteral("FAILED") }, 480'000, &state),
            job, state);
        VERIFY_JOB(state == QLatin1String("COMPLETED"), job, state);
        QString studyId;
        const QJsonObject json = report(job, &studyId);
        QCOMPARE(json.value(QLatin1String("state")).toString(), QStringLiteral("SUCCEEDED"));
        const QJsonArray attempts = json.value(QLatin1String("runs"))
                                        .toArray()
                                        .first()
                                        .toObject()
                                        .value(QLatin1String("attempts"))
                                        .toArray();
        VERIFY_JOB(attempts.size() == 2, job, QString());
        QCOMPARE(attempts[0].toObject().value(QLatin1String("world_size")).toInt(), 4);
        QCOMPARE(attempts[1].toObject().value(QLatin1String("world_size")).toInt(), 2);
        QVERIFY(
            attempts[1].toObject().value(QLatin1String("resize")).toString().contains(QLatin1String("h2")));
        QVERIFY(attempts[1].toObject().value(QLatin1String("resumed_from_epoch")).toInt() >= 1);
    }

    // scancel while ranks train: every worker, agent and the CLI are gone within Slurm's
    // kill wait, and the journal keeps the study.
    void scancelStopsEveryWorker()
    {
        const QString job = submit(plan("slurm-cancel", 4096, 5, false), 2, 4096);
        QVERIFY(!job.isEmpty());
        VERIFY_JOB(waitForOutput(job, QStringLiteral("placed on"), 180'000), job, QString());
        QDeadlineTimer deadline(test::timeLimit(60'000));
        int workers = 0;
        while (!deadline.hasExpired() && workers < 4) {
            workers = 0;
            for (const QString &p : test::processesMentioning(jobDir(job)))
                workers += p.contains(QLatin1String("scalelab-worker")) ? 1 : 0;
            QThread::msleep(200);
        }
        QCOMPARE(workers, 4);
        const Result cancel = run(QStringLiteral("scancel"), { job }, m_env);
        QVERIFY2(cancel.code == 0, qPrintable(cancel.output));
        QStringList left;
        // KillWait is 10 s in the test's slurm.conf: SIGKILL follows SIGTERM after it.
        QVERIFY2(nothingLeft(job, 30'000, &left), qPrintable(left.join(QLatin1Char('\n'))));
        QString state;
        QVERIFY2(waitForState(job, { QStringLiteral("CANCELLED") }, 30'000, &state), qPrintable(state));
        const Result list = run(QStringLiteral(SCALELAB_BIN_DIR "/scalelab-cli"),
            { QStringLiteral("study"), QStringLiteral("list"), QStringLiteral("--state-dir"), jobDir(job) },
            m_env);
        QVERIFY2(list.output.contains(QLatin1String("slurm-cancel")), qPrintable(list.output));
    }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "tst_slurm.moc"
