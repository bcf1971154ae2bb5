// The agent's Prometheus metrics against the real thing (issue 38): an agent started with
// --metrics-port trains a run; `promtool check metrics` accepts what it serves; Debian's
// Prometheus scrapes it every second, finds the target up, and its query API shows the run's
// images/s and step counter there and moving; once the run is stopped its state says
// cancelled and the agent counts it. Also the port's refusals, in words.
//
// Needs Debian's prometheus (prometheus and promtool): label prometheus, `ctest -LE prometheus`
// where it is not installed (scripts/setup.sh installs it for the tests).
#include "agent_client.h"
#include "agent_fixture.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QStandardPaths>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QUrlQuery>

#include <csignal>

using namespace scalelab;
using namespace scalelab::core;

namespace {

// GET `url`; the body, or empty when it failed within `timeoutMs`.
QByteArray httpGet(const QUrl &url, int timeoutMs = 5'000)
{
    QNetworkAccessManager manager;
    QNetworkRequest request(url);
    request.setTransferTimeout(timeoutMs);
    QNetworkReply *reply = manager.get(request);
    QEventLoop loop;
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    loop.exec();
    const QByteArray body = reply->error() == QNetworkReply::NoError ? reply->readAll() : QByteArray();
    reply->deleteLater();
    return body;
}

// The value of the sample `series` (a name with its labels, as printed) in Prometheus' text
// format; NaN when absent.
double sampleValue(const QByteArray &text, const QByteArray &series)
{
    for (const QByteArray &line : text.split('\n'))
        if (line.startsWith(series + ' '))
            return line.mid(series.size() + 1).toDouble();
    return std::nan("");
}

// A real Prometheus on loopback with its data in `dir`, scraping `target` every second.
class Prometheus {
public:
    ~Prometheus() { stop(); }

    QString start(const QString &dir, const QString &target)
    {
        const QString config = dir + QStringLiteral("/prometheus.yml");
        QFile file(config);
        if (!file.open(QIODevice::WriteOnly))
            return QStringLiteral("cannot write ") + config;
        file.write(QStringLiteral("global:\n"
                                  "  scrape_interval: 1s\n"
                                  "  scrape_timeout: 1s\n"
                                  "scrape_configs:\n"
                                  "  - job_name: scalelab-agent\n"
                                  "    static_configs:\n"
                                  "      - targets: ['%1']\n")
                       .arg(target)
                       .toUtf8());
        file.close();
        m_port = test::freePort();
        if (m_port == 0)
            return QStringLiteral("no free port on 127.0.0.1 for prometheus");
        m_process.setProcessChannelMode(QProcess::MergedChannels);
        m_process.setStandardOutputFile(dir + QStringLiteral("/prometheus.log"));
        m_process.start(QStandardPaths::findExecutable(QStringLiteral("prometheus")),
            { QStringLiteral("--config.file=") + config,
                QStringLiteral("--storage.tsdb.path=") + dir + "/tsdb",
                QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(m_port) });
        if (!m_process.waitForStarted(10'000))
            return QStringLiteral("prometheus did not start: ") + m_process.errorString();
        m_log = dir + QStringLiteral("/prometheus.log");
        return {};
    }

    void stop()
    {
        if (m_process.state() == QProcess::NotRunning)
            return;
        m_process.terminate();
        if (!m_process.waitForFinished(10'000)) {
            m_process.kill();
            m_process.waitForFinished(5'000);
        }
    }

    QJsonObject api(const QString &path, const QUrlQuery &query = {}) const
    {
        QUrl url(QStringLiteral("http://127.0.0.1:%1/api/v1/%2").arg(m_port).arg(path));
        url.setQuery(query);
        return QJsonDocument::fromJson(httpGet(url)).object();
    }

    // The value of an instant query's only sample; NaN when there is none.
    double query(const QString &expression) const
    {
        QUrlQuery q;
        q.addQueryItem(QStringLiteral("query"), expression);
        const QJsonArray result = api(QStringLiteral("query"), q)[QStringLiteral("data")]
                                      .toObject()[QStringLiteral("result")]
                                      .toArray();
        if (result.size() != 1)
            return std::nan("");
        return result[0].toObject()[QStringLiteral("value")].toArray()[1].toString().toDouble();
    }

    // The scrape target's health ("up", "down", "unknown") and last error.
    QString targetHealth(QString *lastError) const
    {
        const QJsonArray targets = api(QStringLiteral("targets"))[QStringLiteral("data")]
                                       .toObject()[QStringLiteral("activeTargets")]
                                       .toArray();
        if (targets.size() != 1)
            return QStringLiteral("no target");
        *lastError = targets[0].toObject()[QStringLiteral("lastError")].toString();
        return targets[0].toObject()[QStringLiteral("health")].toString();
    }

    QString log() const
    {
        QFile file(m_log);
        return file.open(QIODevice::ReadOnly) ? QString::fromLocal8Bit(file.readAll().right(3000))
                                              : QString();
    }

private:
    QProcess m_process;
    int m_port = 0;
    QString m_log;
};

} // namespace

class TestPrometheus : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        for (const char *tool : { "prometheus", "promtool" })
            QVERIFY2(!QStandardPaths::findExecutable(QLatin1String(tool)).isEmpty(),
                qPrintable(QStringLiteral("%1 is missing: apt-get install prometheus (Debian), or leave this "
                                          "test out with ctest -LE prometheus")
                               .arg(QLatin1String(tool))));
    }

    void prometheusScrapesARunningRun()
    {
        const int metricsPort = test::freePort();
        QVERIFY2(metricsPort > 0, "no free port on 127.0.0.1");
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options;
        options.syntheticSet = QStringLiteral("syn");
        options.extraArguments = { QStringLiteral("--metrics-port=%1").arg(metricsPort) };
        VERIFY_OK(agent.start(options));
        QVERIFY2(agent.log().contains(
                     QStringLiteral("Prometheus metrics, plain HTTP, at http://127.0.0.1:%1/metrics")
                         .arg(metricsPort)),
            qPrintable(agent.log()));
        const QUrl metricsUrl(QStringLiteral("http://127.0.0.1:%1/metrics").arg(metricsPort));

        // Before any run: the node and the agent's counters, no run.
        QByteArray text = httpGet(metricsUrl);
        QVERIFY2(!text.isEmpty(), "the agent does not serve /metrics");
        QCOMPARE(sampleValue(text, "scalelab_agent_runs_active"), 0.0);
        QVERIFY(sampleValue(text, "scalelab_node_cpu_seconds_total{mode=\"busy\"}") > 0);
        QVERIFY(sampleValue(text, "scalelab_node_memory_total_bytes") > 0);
        QVERIFY(!text.contains("scalelab_run_"));

        v1::StartWorkersResponse started;
        VERIFY_OK(
            agent.client().startWorkers(test::runRequest("prom-1", 1000), &started)); // runs until stopped
        // Rank 0 has trained a step: every run metric is served.
        QTRY_VERIFY_WITH_TIMEOUT(
            (text = httpGet(metricsUrl)).contains("scalelab_run_images_per_second"), 60'000);
        QCOMPARE(sampleValue(text, "scalelab_agent_runs_active"), 1.0);
        QCOMPARE(sampleValue(text, "scalelab_run_state{run_id=\"prom-1\",state=\"running\"}"), 1.0);
        QCOMPARE(sampleValue(text, "scalelab_run_state{run_id=\"prom-1\",state=\"starting\"}"), 0.0);
        QCOMPARE(sampleValue(text, "scalelab_run_world_size{run_id=\"prom-1\"}"), 1.0);
        QCOMPARE(sampleValue(text, "scalelab_run_planned_steps{run_id=\"prom-1\"}"),
            1000.0 * 8); // 200 images / 25
        QVERIFY(sampleValue(text, "scalelab_run_images_per_second{run_id=\"prom-1\"}") > 0);
        QVERIFY(sampleValue(text, "scalelab_run_loss{run_id=\"prom-1\"}") > 0);
        QCOMPARE(sampleValue(text, "scalelab_run_images_total{run_id=\"prom-1\"}"),
            25 * sampleValue(text, "scalelab_run_steps_total{run_id=\"prom-1\"}"));
        QVERIFY(sampleValue(text, "scalelab_rank_resident_memory_bytes{run_id=\"prom-1\",rank=\"0\"}") > 1e6);
        QVERIFY(sampleValue(text, "scalelab_rank_cpu_seconds_total{run_id=\"prom-1\",rank=\"0\"}") >= 0);

        // promtool's linter: names, units, types, help, on what an active run makes.
        {
            QProcess promtool;
            promtool.setProcessChannelMode(QProcess::MergedChannels);
            promtool.start(QStandardPaths::findExecutable(QStringLiteral("promtool")),
                { QStringLiteral("check"), QStringLiteral("metrics") });
            QVERIFY(promtool.waitForStarted());
            promtool.write(text);
            promtool.closeWriteChannel();
            QVERIFY(promtool.waitForFinished(30'000));
            const QByteArray said = promtool.readAll();
            QVERIFY2(promtool.exitCode() == 0 && said.trimmed().isEmpty(),
                qPrintable(QStringLiteral("promtool check metrics: exit %1\n%2\n--- on ---\n%3")
                               .arg(promtool.exitCode())
                               .arg(QString::fromUtf8(said), QString::fromUtf8(text))));
        }

        // A real Prometheus scrapes it: the target comes up, and the run's series are there and moving.
        QTemporaryDir prometheusDir(m_tmp.path() + QStringLiteral("/prometheus-XXXXXX"));
        Prometheus prometheus;
        const QString startError
            = prometheus.start(prometheusDir.path(), QStringLiteral("127.0.0.1:%1").arg(metricsPort));
        QVERIFY2(startError.isEmpty(), qPrintable(startError));
        QString lastError;
        QTRY_VERIFY2_WITH_TIMEOUT(prometheus.targetHealth(&lastError) == QLatin1String("up"),
            qPrintable(QStringLiteral("target not up (last error: '%1'); prometheus said:\n%2")
                           .arg(lastError, prometheus.log())),
            60'000);
        const QString steps
            = QStringLiteral("scalelab_run_steps_total{run_id=\"prom-1\",job=\"scalelab-agent\"}");
        double first = 0;
        QTRY_VERIFY_WITH_TIMEOUT((first = prometheus.query(steps)) > 0, 30'000);
        QTRY_VERIFY2_WITH_TIMEOUT(prometheus.query(steps) > first,
            qPrintable(QStringLiteral("the step counter stays at %1").arg(first)), 30'000);
        // Each query below is waited for until it answers, not read once: a scrape that fails on
        // a loaded machine (its 1 s timeout) marks every series stale until the next one succeeds,
        // and a rate needs two scrapes inside its window.
        QTRY_VERIFY_WITH_TIMEOUT(
            prometheus.query(QStringLiteral("scalelab_run_images_per_second{run_id=\"prom-1\"}")) > 0,
            60'000);
        QTRY_VERIFY_WITH_TIMEOUT(
            prometheus.query(QStringLiteral("rate(scalelab_run_images_total{run_id=\"prom-1\"}[10s])")) > 0,
            60'000);
        QTRY_COMPARE_WITH_TIMEOUT(
            prometheus.query(QStringLiteral("up{job=\"scalelab-agent\"}")), 1.0, 60'000);

        // Every query of the Grafana dashboard is one this Prometheus accepts, and every one but the
        // GPU panels' (nothing on a CPU node) finds the run (Grafana's variables as "all", its
        // range as 5 minutes). The run trains until stopped, so each query is waited for until
        // its data is there (a 1m rate: two scrapes; the accuracies: an epoch), not for a time.
        {
            QFile file(QStringLiteral(SCALELAB_SOURCE_DIR "/packaging/grafana/scalelab-agents.json"));
            QVERIFY(file.open(QIODevice::ReadOnly));
            const QJsonArray panels
                = QJsonDocument::fromJson(file.readAll())[QStringLiteral("panels")].toArray();
            int queries = 0, gpuQueries = 0;
            for (const QJsonValue &panel : panels)
                for (const QJsonValue &target : panel[QStringLiteral("targets")].toArray()) {
                    QString expression = target[QStringLiteral("expr")].toString();
                    expression.replace(QStringLiteral("$run_id"), QStringLiteral(".*"))
                        .replace(QStringLiteral("$instance"), QStringLiteral(".*"))
                        .replace(QStringLiteral("$__range"), QStringLiteral("5m"));
                    const QString title = panel[QStringLiteral("title")].toString();
                    QUrlQuery q;
                    q.addQueryItem(QStringLiteral("query"), expression);
                    QJsonObject answer = prometheus.api(QStringLiteral("query"), q);
                    QVERIFY2(answer[QStringLiteral("status")].toString() == QLatin1String("success"),
                        qPrintable(QStringLiteral("panel '%1': %2: %3")
                                       .arg(title, expression, answer[QStringLiteral("error")].toString())));
                    ++queries;
                    if (expression.contains(QLatin1String("scalelab_gpu_"))) {
                        ++gpuQueries;
                        continue;
                    }
                    QTRY_VERIFY2_WITH_TIMEOUT(!(answer = prometheus.api(QStringLiteral("query"),
                                                    q))[QStringLiteral("data")][QStringLiteral("result")]
                                                   .toArray()
                                                   .isEmpty(),
                        qPrintable(
                            QStringLiteral("panel '%1' found no data in 60 s: %2").arg(title, expression)),
                        60'000);
                }
            QVERIFY2(queries >= 20 && gpuQueries == 2,
                qPrintable(
                    QStringLiteral("the dashboard has %1 queries, %2 of GPUs").arg(queries).arg(gpuQueries)));
        }

        // Stopped: the agent counts it, and shows how it ended (for 5 minutes); its rank is gone.
        v1::StopRunResponse stopped;
        VERIFY_OK(agent.client().stopRun(QStringLiteral("prom-1"), &stopped));
        QTRY_VERIFY_WITH_TIMEOUT(sampleValue(text = httpGet(metricsUrl),
                                     "scalelab_agent_attempts_finished_total{state=\"cancelled\"}")
                == 1.0,
            30'000);
        QCOMPARE(sampleValue(text, "scalelab_agent_attempts_started_total"), 1.0);
        QCOMPARE(sampleValue(text, "scalelab_agent_runs_active"), 0.0);
        QCOMPARE(sampleValue(text, "scalelab_run_state{run_id=\"prom-1\",state=\"cancelled\"}"), 1.0);
        QCOMPARE(sampleValue(text, "scalelab_run_state{run_id=\"prom-1\",state=\"running\"}"), 0.0);
        QVERIFY2(!text.contains("scalelab_rank_cpu_seconds_total{run_id=\"prom-1\""), text.constData());

        prometheus.stop();
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void metricsPortRefusalsSayWhatToDo()
    {
        // The agent's own port, the health port, and a port another program holds.
        const struct {
            QStringList arguments;
            QString expected;
        } cases[] = {
            { { QStringLiteral("--port=7460"), QStringLiteral("--metrics-port=7460") },
                QStringLiteral("--metrics-port 7460 is also the agent's --port: pick another") },
            { { QStringLiteral("--health-port=7461"), QStringLiteral("--metrics-port=7461") },
                QStringLiteral("--metrics-port 7461 is also the agent's --health-port: pick another") },
            { { QStringLiteral("--metrics-port=70000") },
                QStringLiteral("--metrics-port must be a whole number from 0 to 65535 (got '70000' from "
                               "command line)") },
        };
        for (const auto &c : cases) {
            QProcess agent;
            agent.setProcessChannelMode(QProcess::MergedChannels);
            agent.start(test::binary("scalelab-agent"),
                QStringList { QStringLiteral("--state-dir"), m_tmp.filePath(QStringLiteral("refused-state")) }
                    + c.arguments);
            QVERIFY(agent.waitForFinished(15'000));
            const QString said = QString::fromLocal8Bit(agent.readAll());
            QCOMPARE(agent.exitCode(), 2);
            QVERIFY2(said.contains(c.expected), qPrintable(said));
        }
        QTcpServer holder;
        QVERIFY(holder.listen(QHostAddress::LocalHost, 0));
        QProcess agent;
        agent.setProcessChannelMode(QProcess::MergedChannels);
        agent.start(test::binary("scalelab-agent"),
            { QStringLiteral("--port=0"), QStringLiteral("--metrics-port=%1").arg(holder.serverPort()),
                QStringLiteral("--state-dir"), m_tmp.filePath(QStringLiteral("refused-state")) });
        QVERIFY(agent.waitForFinished(15'000));
        const QString said = QString::fromLocal8Bit(agent.readAll());
        QCOMPARE(agent.exitCode(), 2);
        QVERIFY2(said.contains(QStringLiteral("cannot serve metrics on port %1 (--metrics-port): ")
                                   .arg(holder.serverPort())),
            qPrintable(said));
    }
};

QTEST_GUILESS_MAIN(TestPrometheus)
#include "tst_prometheus.moc"
