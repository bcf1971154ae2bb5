// The network probe on demand (`scalelab-cli probe`, issue 37 item 2) against real agents and
// workers: probe-only runs need no data set, report the all-reduce times of their ranks, and
// the CLI fits latency and bandwidth to them; bad input is refused saying what is wrong. The
// probe between two hosts is tst_cluster's (spreadTwoHosts).
#include "agent_client.h"
#include "local_agent.h"
#include "study_driver.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab;
using namespace scalelab::core;

namespace {

const QString kToken = QStringLiteral("probe-test-token-0123456789abcdef");

} // namespace

class TestProbe : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    LocalAgent m_a, m_b;
    QList<AgentEndpoint> m_agents;

    // scalelab-cli ARGS with the agents' token: its exit code, standard output and error.
    int cli(const QStringList &arguments, QByteArray *output, QByteArray *error = nullptr)
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SCALELAB_TOKEN"), kToken);
        p.setProcessEnvironment(env);
        p.start(test::binary("scalelab-cli"), arguments);
        if (!p.waitForFinished(test::endsWithin()))
            return -1;
        *output = p.readAllStandardOutput();
        const QByteArray stderrText = p.readAllStandardError();
        if (error)
            *error = stderrText;
        return p.exitCode();
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        // No data set anywhere: a probe needs none.
        QVERIFY(QDir().mkpath(m_tmp.filePath(QStringLiteral("data"))));
        for (LocalAgent *agent : { &m_a, &m_b })
            VERIFY_OK(test::startStudyAgent(agent, m_tmp.filePath(QStringLiteral("data")),
                m_tmp.filePath(QStringLiteral("agent-%1").arg(m_agents.size() + 1)), kToken, &m_agents));
    }

    void cleanupTestCase()
    {
        m_a.stop();
        m_b.stop();
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }

    // Two agents on this host: each world size is probed with every rank on one host (the
    // host is the same for both, so there is no across-hosts probe), in runs of their own.
    void probeTimesAllReducesAndFitsTheLink()
    {
        QByteArray output, error;
        const int code = cli({ QStringLiteral("probe"), QStringLiteral("--agent"), m_a.endpoint(),
                                 QStringLiteral("--agent"), m_b.endpoint(), QStringLiteral("--world-sizes"),
                                 QStringLiteral("2,3"), QStringLiteral("--json") },
            &output, &error);
        QVERIFY2(code == 0, (output + error).constData());
        const QJsonObject json = QJsonDocument::fromJson(output).object();
        QVERIFY(
            json.value(QLatin1String("definition")).toString().contains(QLatin1String("ring all-reduce")));
        const QJsonArray probes = json.value(QLatin1String("probes")).toArray();
        QCOMPARE(probes.size(), 2);
        for (int i = 0; i < probes.size(); ++i) {
            const QJsonObject p = probes[i].toObject();
            const int ranks = i + 2;
            QCOMPARE(p.value(QLatin1String("world_size")).toInt(), ranks);
            QCOMPARE(p.value(QLatin1String("layout")).toString(), QStringLiteral("one host"));
            QVERIFY2(
                !p.contains(QLatin1String("error")), qPrintable(p.value(QLatin1String("error")).toString()));
            QVERIFY(p.value(QLatin1String("run_id")).toString().startsWith(QLatin1String("probe-")));
            QVERIFY(p.value(QLatin1String("latency_seconds")).toDouble(-1) >= 0);
            QVERIFY(p.value(QLatin1String("bandwidth_bytes_per_second")).toDouble() > 0);
            const QJsonObject network = p.value(QLatin1String("network")).toObject();
            QCOMPARE(network.value(QLatin1String("world_size")).toInt(), ranks);
            QCOMPARE(network.value(QLatin1String("hosts")).toInt(), 1);
            QCOMPARE(network.value(QLatin1String("backend")).toString(), QStringLiteral("gloo"));
            const QJsonArray samples = network.value(QLatin1String("samples")).toArray();
            QVERIFY(samples.size() >= 3);
            // 4 KB, then four times larger each, each timed three times.
            for (int s = 0; s < samples.size(); ++s) {
                const QJsonObject sample = samples[s].toObject();
                QCOMPARE(sample.value(QLatin1String("bytes")).toInteger(), qint64(4096) << (2 * s));
                const QJsonArray seconds = sample.value(QLatin1String("seconds")).toArray();
                QCOMPARE(seconds.size(), 3);
                for (const QJsonValue &t : seconds)
                    QVERIFY(t.toDouble() > 0);
            }
        }
        // The agents recorded each probe as a run that succeeded.
        AgentClient client(m_a.endpoint(), kToken);
        QList<v1::RunInfo> runs;
        VERIFY_OK(client.listAllRuns(&runs));
        int probed = 0;
        for (const v1::RunInfo &r : runs)
            if (QString::fromStdString(r.run_id()).startsWith(QLatin1String("probe-"))) {
                QCOMPARE(r.state(), v1::SUCCEEDED);
                QVERIFY(r.spec().probe_only());
                ++probed;
            }
        QCOMPARE(probed, 2);

        // In words: a row per probe with its latency, bandwidth and times per size.
        QVERIFY2(
            cli({ QStringLiteral("probe"), QStringLiteral("--agent"), m_a.endpoint() }, &output, &error) == 0,
            (output + error).constData());
        const QString text = QString::fromUtf8(output);
        QVERIFY2(text.contains(QLatin1String("2 ranks on ")) && text.contains(QLatin1String("(gloo)")),
            qPrintable(text));
        QVERIFY2(
            text.contains(QLatin1String("MB/s")) && text.contains(QLatin1String("4 KB")), qPrintable(text));
        QVERIFY2(
            text.contains(QRegularExpression(QStringLiteral("study predict ID --bandwidth [0-9.e+]+Gbit\n"))),
            qPrintable(text));
    }

    void badInputIsRefusedSayingWhy()
    {
        QByteArray output, error;
        QCOMPARE(cli({ QStringLiteral("probe"), QStringLiteral("--agent"), m_a.endpoint(),
                         QStringLiteral("--world-sizes"), QStringLiteral("1") },
                     &output, &error),
            2);
        QVERIFY2(error.contains("--world-sizes: '1' is not a number of ranks between 2 and 512"),
            error.constData());
        QCOMPARE(cli({ QStringLiteral("probe"), QStringLiteral("--agent"), m_a.endpoint(),
                         QStringLiteral("--timeout-s"), QStringLiteral("5") },
                     &output, &error),
            2);
        QVERIFY2(error.contains("--timeout-s must be between 10 and 3600"), error.constData());
        // The agent itself: a probe of one rank has nothing to measure.
        AgentClient client(m_a.endpoint(), kToken);
        v1::StartWorkersRequest request;
        request.set_run_id("probe-alone");
        request.set_attempt(1);
        request.set_world_size(1);
        request.add_ranks(0);
        request.mutable_spec()->set_probe_only(true);
        v1::StartWorkersResponse response;
        const Status refused = client.startWorkers(request, &response);
        QVERIFY(refused.isInvalidArgument());
        QVERIFY2(refused.error().contains(QLatin1String("world_size must be 2 or more")),
            qPrintable(refused.error()));
        // And a training run still needs its data set.
        request.set_run_id("no-data");
        request.set_world_size(1);
        request.mutable_spec()->set_probe_only(false);
        QVERIFY(!client.startWorkers(request, &response).ok());
    }
};

QTEST_GUILESS_MAIN(TestProbe)
#include "tst_probe.moc"
