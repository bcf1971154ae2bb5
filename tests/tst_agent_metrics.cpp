// The agent's Prometheus metrics without an agent process (issue 38): how a run's events
// fold into its gauges (rank 0 only; a resumed attempt counts only what it trained), that
// every metric served is in the catalogue and named by Prometheus' rules, with the labels
// the catalogue says, and that the Grafana dashboard (packaging/grafana) asks only for
// metrics the agent serves, and docs/observability.md describes each. tst_prometheus
// scrapes a real agent with a real Prometheus.
#include "agent_metrics.h"
#include "run_events.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSet>
#include <QTest>

#include <map>
#include <set>

using namespace scalelab;
using namespace scalelab::agent;

namespace {

// Rank `rank`'s Started event of a 2-rank run of 6 epochs.
v1::RunEvent startedEvent(
    int rank, int resumedFromEpoch, std::int64_t stepsPerEpoch, std::int64_t globalBatch)
{
    v1::RunEvent event = test::startedEvent(6, stepsPerEpoch, resumedFromEpoch);
    event.set_rank(rank);
    event.mutable_started()->set_world_size(2);
    event.mutable_started()->set_global_batch(globalBatch);
    return event;
}

// Rank `rank`'s step `step` (10 steps an epoch), with every measurement the gauges show.
v1::RunEvent stepEvent(int rank, std::int64_t step, double loss)
{
    v1::RunEvent event = test::stepEvent(int(step / 10) + 1, step, loss);
    event.set_rank(rank);
    auto *s = event.mutable_step();
    s->set_learning_rate(0.05);
    s->set_grad_norm(1.5);
    s->set_images_per_second(800);
    s->set_step_seconds(0.25);
    s->set_exposed_allreduce_seconds(0.125);
    s->mutable_gradient_noise()->set_b_simple(812.5);
    s->mutable_gradient_noise()->set_samples(40);
    return event;
}

// A snapshot with one of everything: a run whose rank 0 is here and has finished an epoch,
// a run whose rank 0 is elsewhere, two ranks, a GPU.
AgentSnapshot fullSnapshot()
{
    AgentSnapshot s;
    s.version = "1.2.3";
    s.startTimeSeconds = 1.7e9;
    s.attemptsStarted = 3;
    s.retries = 1;
    s.succeeded = 1;
    s.failed = 1;
    s.checkpoints = 4;
    s.cpuCores = 2;
    s.cpuBusySeconds = 100;
    s.cpuIdleSeconds = 50;
    s.memoryTotalBytes = 1 << 30;
    s.memoryUsedBytes = 1 << 29;
    s.gpus.push_back({ 0, 0.75, 1 << 28, 1 << 30 });
    RunGauges here;
    here.state = v1::RUNNING;
    here.observe(startedEvent(0, 0, 10, 64));
    here.observe(stepEvent(0, 1, 2.3));
    v1::RunEvent epoch;
    epoch.mutable_epoch()->set_test_accuracy(0.4);
    here.observe(epoch);
    s.runs.emplace_back("here-1", here);
    RunGauges elsewhere;
    elsewhere.state = v1::RUNNING;
    s.runs.emplace_back("elsewhere-1", elsewhere);
    RunGauges ended;
    ended.state = v1::SUCCEEDED;
    ended.endedUnixMs = 1;
    s.runs.emplace_back("ended-1", ended);
    s.ranks.push_back({ "here-1", 0, 12.5, 300 << 20 });
    s.ranks.push_back({ "elsewhere-1", 1, 3, 200 << 20 });
    return s;
}

// name -> label names, of every sample in Prometheus' text format (comments left out).
std::map<QString, QSet<QString>> servedLabels(const QString &text)
{
    std::map<QString, QSet<QString>> served;
    static const QRegularExpression sample(
        QStringLiteral("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([^}]*)\\})? \\S+$"));
    static const QRegularExpression label(QStringLiteral("([a-zA-Z_][a-zA-Z0-9_]*)=\"[^\"]*\""));
    for (const QString &line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        if (line.startsWith(QLatin1Char('#')))
            continue;
        const auto m = sample.match(line);
        if (!m.hasMatch()) {
            served[QStringLiteral("unparseable: ") + line];
            continue;
        }
        auto &labels = served[m.captured(1)];
        for (auto it = label.globalMatch(m.captured(3)); it.hasNext();)
            labels.insert(it.next().captured(1));
    }
    return served;
}

void collectExpressions(const QJsonValue &value, QStringList *out)
{
    if (value.isObject()) {
        const QJsonObject object = value.toObject();
        for (auto it = object.begin(); it != object.end(); ++it) {
            if ((it.key() == QLatin1String("expr") || it.key() == QLatin1String("query"))
                && it.value().isString())
                *out << it.value().toString();
            else
                collectExpressions(it.value(), out);
        }
    } else if (value.isArray()) {
        for (const QJsonValue &element : value.toArray())
            collectExpressions(element, out);
    }
}

} // namespace

class TestAgentMetrics : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void gaugesFollowRankZeroAndCountWhatTheAttemptTrained()
    {
        RunGauges g;
        // Resumed from epoch 2's checkpoint (10 steps an epoch): the first step is 21, of epoch 3.
        g.observe(startedEvent(0, 2, 10, 64));
        QCOMPARE(g.step, std::int64_t(20));
        QCOMPARE(g.epoch, 3);
        QCOMPARE(g.worldSize, 2);
        QCOMPARE(g.epochs, 6);
        g.observe(stepEvent(0, 21, 2.0));
        g.observe(stepEvent(1, 40, 9.0)); // another rank's: not rank 0's measurement
        g.observe(stepEvent(0, 25, 1.5)); // steps reported every few
        QCOMPARE(g.stepsTrained, std::int64_t(5));
        QCOMPARE(g.imagesTrained, std::int64_t(5 * 64));
        QCOMPARE(g.step, std::int64_t(25));
        QCOMPARE(g.loss, 1.5);
        QCOMPARE(g.stepSeconds, 0.25);
        QCOMPARE(g.exposedAllReduceSeconds, 0.125);
        QVERIFY(!g.hasEpoch);
        v1::RunEvent epoch;
        epoch.mutable_epoch()->set_test_accuracy(0.5);
        epoch.mutable_epoch()->set_train_accuracy(0.6);
        g.observe(epoch);
        QVERIFY(g.hasEpoch);
        QCOMPARE(g.testAccuracy, 0.5);
        v1::RunEvent checkpoint;
        checkpoint.mutable_checkpoint()->set_epoch(3);
        g.observe(checkpoint);
        g.observe(checkpoint);
        QCOMPARE(g.checkpoints, std::int64_t(2));
        v1::RunEvent stall;
        stall.mutable_stall()->set_stalled(true);
        g.observe(stall);
        QVERIFY(g.stalled);
        stall.mutable_stall()->set_stalled(false);
        g.observe(stall);
        QVERIFY(!g.stalled);
        QVERIFY(g.active());
        g.state = v1::CANCELLED;
        QVERIFY(!g.active());
    }

    void everyMetricServedIsCataloguedAndNamedByTheRules()
    {
        const QString text = QString::fromStdString(metricsText(fullSnapshot()));
        const auto served = servedLabels(text);
        std::map<QString, MetricDescription> catalogue;
        for (const auto &d : metricCatalogue())
            catalogue[QString::fromStdString(d.name)] = d;
        QCOMPARE(catalogue.size(), metricCatalogue().size()); // no name twice

        for (const auto &[name, labels] : served) {
            QVERIFY2(
                catalogue.count(name), qPrintable(name + QStringLiteral(" is served but not catalogued")));
            const MetricDescription &d = catalogue[name];
            QSet<QString> allowed;
            for (const QString &l :
                QString::fromStdString(d.labels).split(QStringLiteral(", "), Qt::SkipEmptyParts))
                allowed.insert(l);
            QVERIFY2(labels == allowed,
                qPrintable(QStringLiteral("%1 is served with labels {%2}, catalogued with {%3}")
                               .arg(name, QStringList(labels.values()).join(','),
                                   QStringList(allowed.values()).join(','))));
        }
        for (const auto &[name, d] : catalogue) {
            // A full snapshot serves every metric, with the type the catalogue says.
            QVERIFY2(served.count(name), qPrintable(name + QStringLiteral(" is catalogued but not served")));
            QVERIFY2(
                text.contains(QStringLiteral("# TYPE %1 %2\n").arg(name, QString::fromStdString(d.type))),
                qPrintable(name));
            QVERIFY2(name.startsWith(QLatin1String("scalelab_")), qPrintable(name));
            QVERIFY2((d.type == "counter") == name.endsWith(QLatin1String("_total")),
                qPrintable(name + QStringLiteral(": counters, and only they, end in _total")));
            // Base units only: seconds and bytes, ratios 0..1.
            for (const char *unit : { "_ms", "_milliseconds", "_percent", "_kb", "_mb", "_minutes" })
                QVERIFY2(!name.contains(QLatin1String(unit)), qPrintable(name));
            QVERIFY2(!d.help.empty(), qPrintable(name));
        }
        QVERIFY(text.contains(QStringLiteral("scalelab_gpu_utilization_ratio{gpu=\"0\"} 0.75\n")));
        QVERIFY(
            text.contains(QStringLiteral("scalelab_run_step_compute_seconds{run_id=\"here-1\"} 0.125\n")));
        QVERIFY(text.contains(QStringLiteral("scalelab_run_state{run_id=\"here-1\",state=\"running\"} 1\n")));
        QVERIFY(
            text.contains(QStringLiteral("scalelab_run_gradient_noise_scale{run_id=\"here-1\"} 812.5\n")));
        QVERIFY(text.contains(QStringLiteral("scalelab_run_state{run_id=\"here-1\",state=\"failed\"} 0\n")));
        QVERIFY(
            text.contains(QStringLiteral("scalelab_agent_attempts_finished_total{state=\"failed\"} 1\n")));
        // An ended run shows how it ended, and is not active.
        QVERIFY(
            text.contains(QStringLiteral("scalelab_run_state{run_id=\"ended-1\",state=\"succeeded\"} 1\n")));
        QVERIFY(text.contains(QStringLiteral("scalelab_agent_runs_active 2\n")));
    }

    void aRunWhoseRankZeroIsElsewhereServesOnlyWhatThisAgentKnows()
    {
        const QString text = QString::fromStdString(metricsText(fullSnapshot()));
        QVERIFY(text.contains(
            QStringLiteral("scalelab_run_state{run_id=\"elsewhere-1\",state=\"running\"} 1\n")));
        QVERIFY(text.contains(
            QStringLiteral("scalelab_rank_cpu_seconds_total{run_id=\"elsewhere-1\",rank=\"1\"} 3\n")));
        QVERIFY(!text.contains(QStringLiteral("scalelab_run_step{run_id=\"elsewhere-1\"}")));
        QVERIFY(!text.contains(QStringLiteral("scalelab_run_loss{run_id=\"elsewhere-1\"}")));
        // An idle agent: no run series at all, the node and the counters still there.
        AgentSnapshot idle;
        const QString quiet = QString::fromStdString(metricsText(idle));
        QVERIFY(!quiet.contains(QStringLiteral("scalelab_run_")));
        QVERIFY(quiet.contains(QStringLiteral("scalelab_agent_runs_active 0\n")));
    }

    // docs/observability.md's table says what each metric means: none is left out.
    void everyMetricIsDocumented()
    {
        QFile file(QStringLiteral(SCALELAB_SOURCE_DIR "/docs/observability.md"));
        QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(file.fileName()));
        const QString docs = QString::fromUtf8(file.readAll());
        for (const auto &d : metricCatalogue())
            QVERIFY2(docs.contains(QStringLiteral("| `%1` | %2 |")
                                       .arg(QString::fromStdString(d.name), QString::fromStdString(d.type))),
                qPrintable(QString::fromStdString(d.name)
                    + QStringLiteral(" is not in docs/observability.md's table")));
    }

    void grafanaDashboardAsksOnlyForServedMetrics()
    {
        QFile file(QStringLiteral(SCALELAB_SOURCE_DIR "/packaging/grafana/scalelab-agents.json"));
        QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(file.fileName()));
        QJsonParseError error;
        const QJsonDocument dashboard = QJsonDocument::fromJson(file.readAll(), &error);
        QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
        QStringList expressions;
        collectExpressions(dashboard.object(), &expressions);
        QVERIFY2(expressions.size() >= 10, qPrintable(expressions.join('\n')));
        std::set<std::string> names;
        for (const auto &d : metricCatalogue())
            names.insert(d.name);
        static const QRegularExpression metric(QStringLiteral("\\b(scalelab_[a-z0-9_]+)"));
        QSet<QString> used;
        for (const QString &expression : expressions)
            for (auto it = metric.globalMatch(expression); it.hasNext();) {
                const QString name = it.next().captured(1);
                QVERIFY2(names.count(name.toStdString()),
                    qPrintable(QStringLiteral("the dashboard asks for %1, which the agent does not serve: %2")
                                   .arg(name, expression)));
                used.insert(name);
            }
        // The panels a user comes for: throughput, the step split, loss and accuracy, the node.
        for (const char *name :
            { "scalelab_run_images_per_second", "scalelab_run_step_exposed_allreduce_seconds",
                "scalelab_run_loss", "scalelab_run_test_accuracy_ratio", "scalelab_node_cpu_seconds_total",
                "scalelab_rank_cpu_seconds_total", "scalelab_gpu_utilization_ratio" })
            QVERIFY2(used.contains(QLatin1String(name)), name);
        // Its data source is chosen by the user (a variable), not a uid from someone's Grafana.
        QVERIFY(QJsonDocument(dashboard).toJson().contains("${datasource}"));
    }
};

QTEST_GUILESS_MAIN(TestAgentMetrics)
#include "tst_agent_metrics.moc"
