// The console's Agents tab, offscreen, against real local agents: the agent list kept
// owner-only on disk, validation in words, a connected node with its inventory and live
// utilization charts, a wrong token and an unreachable address said in words, streams
// that stop when an agent is removed and come back when an agent restarts, and the
// console's default local agent listed when none is configured.
#include "agent_client.h"
#include "agent_dialog.h"
#include "agent_registry.h"
#include "agents_model.h"
#include "agents_view.h"
#include "console_support.h"
#include "local_agent.h"
#include "main_window.h"
#include "metric_chart.h"
#include "study_driver.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStyleFactory>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

using namespace scalelab;

namespace {
int fileMode(const QString &path)
{
    struct stat st { };
    if (::stat(QFile::encodeName(path).constData(), &st) != 0)
        return -1;
    return int(st.st_mode & 07777);
}

using test::writeFile;

bool containsMessage(const QList<core::AgentProblem> &problems, const QString &field, const QString &text)
{
    for (const auto &p : problems)
        if (p.field == field && p.message.contains(text))
            return true;
    return false;
}

QString dump(const QList<core::AgentProblem> &problems)
{
    QStringList lines;
    for (const auto &p : problems)
        lines << p.field + QStringLiteral(": ") + p.message;
    return lines.join(QLatin1Char('\n'));
}

core::AgentConfig agent(const QString &name, const QString &address, const QString &token)
{
    core::AgentConfig a;
    a.name = name;
    a.address = address;
    a.token = token;
    return a;
}
} // namespace

class TestAgentsView : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    core::LocalAgent m_agent;

    core::LocalAgentOptions agentOptions(const QString &stateName) const
    {
        core::LocalAgentOptions options;
        options.agentBinary = test::binary("scalelab-agent");
        options.dataDir = m_tmp.filePath(QStringLiteral("data"));
        options.stateDir = m_tmp.filePath(stateName);
        return options;
    }

private Q_SLOTS:
    // What each cell of the Agents table says, from the model alone: words, tooltips, the
    // state's colour per theme, gauge fractions, and change notifications.
    void modelSaysWhatEachCellShows()
    {
        using M = app::AgentsModel;
        M model;
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        QCOMPARE(model.columnCount(), 8);
        QCOMPARE(model.headerData(M::StateColumn, Qt::Horizontal).toString(), QStringLiteral("Connection"));
        M::Agent a;
        a.label = QStringLiteral("node-a");
        a.address = QStringLiteral("10.0.0.5:7460");
        a.tls = true;
        a.status = { core::AgentStatus::Unreachable, QStringLiteral("unreachable: connection refused"),
            QStringLiteral("Is scalelab-agent running there?"), 2500 };
        QCOMPARE(model.addAgent(a), 0);
        QCOMPARE(model.rowCount(), 1);
        const auto cell = [&](int column, int role = Qt::DisplayRole) {
            return model.data(model.index(0, column), role);
        };
        QCOMPARE(
            cell(M::NameColumn, Qt::ToolTipRole).toString(), QStringLiteral("node-a at 10.0.0.5:7460, TLS"));
        QCOMPARE(cell(M::StateColumn).toString(),
            QStringLiteral("unreachable: connection refused — retrying in 3 s"));
        QVERIFY(cell(M::StateColumn, Qt::ToolTipRole)
                    .toString()
                    .endsWith(QStringLiteral("\nIs scalelab-agent running there?")));
        QVERIFY(cell(M::HostColumn).toString().isEmpty()); // nothing known yet
        QVERIFY(cell(M::CpuColumn, M::GaugeRole).toList().isEmpty());
        // The details pane says the same in sentences, and claims nothing about the node.
        QString details = M::detailsHtml(a, QPalette());
        for (const char *said : { "10.0.0.5:7460 · TLS", "unreachable: connection refused",
                 " (retrying in 3 s)", "Is scalelab-agent running there?" })
            QVERIFY2(details.contains(QString::fromUtf8(said)),
                qPrintable(QStringLiteral("%1 not in %2").arg(said, details)));
        QVERIFY2(
            !details.contains(QStringLiteral("CPU cores")) && !details.contains(QStringLiteral("<b>Now</b>")),
            qPrintable(details));

        a.status = { core::AgentStatus::Connected, QStringLiteral("connected"), {}, 0 };
        v1::DescribeResponse inventory;
        inventory.set_hostname("gpu-7");
        inventory.set_cpu_cores(64);
        inventory.set_memory_bytes(std::int64_t(503) << 30);
        inventory.set_free_slots(62);
        auto *d = inventory.add_datasets();
        d->set_name("cifar-10");
        d = inventory.add_datasets();
        d->set_name("synth");
        d->set_synthetic(true);
        inventory.add_gpus()->set_name("H100");
        inventory.add_gpus()->set_name("H100");
        a.inventory = inventory;
        v1::NodeSample sample;
        sample.set_cpu_percent(52.4);
        sample.set_memory_used_bytes(std::int64_t(128) << 30);
        sample.set_memory_total_bytes(std::int64_t(512) << 30);
        for (int i = 0; i < 2; ++i) {
            auto *g = sample.add_gpus();
            g->set_index(i);
            g->set_utilization_percent(i == 0 ? 90 : 10);
            g->set_memory_used_bytes(std::int64_t(40) << 30);
            g->set_memory_total_bytes(std::int64_t(80) << 30);
        }
        sample.set_cpu_cores(4);
        for (int rank = 0; rank < 2; ++rank) { // two ranks, 1.5 cores between them, of 4
            auto *p = sample.add_processes();
            p->set_run_id("r01");
            p->set_attempt(1);
            p->set_rank(rank);
            p->set_pid(100 + rank);
            p->set_cpu_percent(75);
            p->set_rss_bytes(std::int64_t(3) << 29);
        }
        a.last = sample;
        model.setAgent(0, a);
        QVERIFY(!changed.isEmpty());
        QCOMPARE(cell(M::StateColumn).toString(), QStringLiteral("connected"));
        QCOMPARE(cell(M::HostColumn).toString(), QStringLiteral("gpu-7 · 64 cores · 503 GiB"));
        QCOMPARE(cell(M::DataColumn).toString(), QStringLiteral("cifar-10, synth (synthetic)"));
        QCOMPARE(cell(M::SlotsColumn).toString(), QStringLiteral("62"));
        QCOMPARE(cell(M::CpuColumn).toString(), QStringLiteral("52% · ranks 38%")); // 1.5 of 4 cores
        QCOMPARE(M::ranksMemoryBytes(sample), std::int64_t(3) << 30);
        QVERIFY2(cell(M::CpuColumn, Qt::ToolTipRole)
                     .toString()
                     .contains(QStringLiteral("r01 attempt 1, rank 1 (pid 101): 75% of a core, 1.5 GiB")),
            qPrintable(cell(M::CpuColumn, Qt::ToolTipRole).toString()));
        QCOMPARE(cell(M::CpuColumn, M::GaugeRole).toList().size(), 1);
        QVERIFY(qFuzzyCompare(cell(M::CpuColumn, M::GaugeRole).toList().first().toDouble(), 0.524));
        QCOMPARE(cell(M::MemoryColumn).toString(), QStringLiteral("128/512 GiB"));
        QCOMPARE(cell(M::MemoryColumn, M::GaugeRole).toList(), QVariantList { 0.25 });
        QCOMPARE(cell(M::GpuColumn).toString(), QStringLiteral("50% · 80.0/160 GiB"));
        QCOMPARE(cell(M::GpuColumn, M::GaugeRole).toList(), (QVariantList { 0.9, 0.1 }));
        QCOMPARE(cell(M::GpuColumn, Qt::ToolTipRole).toString(),
            QStringLiteral("GPU 0 H100: 90% busy, 40.0/80.0 GiB\nGPU 1 H100: 10% busy, 40.0/80.0 GiB"));
        details = M::detailsHtml(a, QPalette());
        for (const char *said : { "<b>gpu-7</b>", "64 CPU cores, 503 GiB memory", "62 free slot(s)",
                 "<b>GPUs</b><br>0: H100, 0.0 GiB", "synth: 0 train / 0 test images (SYNTHETIC)",
                 "CPU 52.4%, memory 128 of 512 GiB", "ScaleLab's 2 rank(s): CPU 37.5%, memory 3.0 GiB",
                 "GPU 0: 90% busy, 40.0 of 80.0 GiB" })
            QVERIFY2(details.contains(QString::fromUtf8(said)),
                qPrintable(QStringLiteral("%1 not in %2").arg(said, details)));
        QVERIFY2(!details.contains(QStringLiteral("retrying")), qPrintable(details));

        // The state's colour reads on either theme: lighter on a dark one.
        QPalette light, dark;
        light.setColor(QPalette::Window, Qt::white);
        dark.setColor(QPalette::Window, QColor(0x20, 0x20, 0x20));
        model.setPalette(light);
        const QColor onLight = cell(M::StateColumn, Qt::ForegroundRole).value<QColor>();
        changed.clear();
        model.setPalette(dark);
        QCOMPARE(changed.size(), 1); // the state column repaints
        const QColor onDark = cell(M::StateColumn, Qt::ForegroundRole).value<QColor>();
        QVERIFY(onDark.lightness() > onLight.lightness());
        QVERIFY(!cell(M::HostColumn, Qt::ForegroundRole).isValid());

        QCOMPARE(M::noGpuSentence(
                     "no GPU: NVML (libnvidia-ml.so.1) not found (libnvidia-ml.so.1: cannot open shared "
                     "object file: No such file or directory)"),
            QStringLiteral(
                "No GPUs on this node: it has no NVIDIA driver (libnvidia-ml.so.1 is not installed), so runs "
                "here train on its CPUs."));
        QCOMPARE(M::noGpuSentence("no GPU: nvmlInit failed: Driver Not Loaded"),
            QStringLiteral(
                "No GPUs on this node (nvmlInit failed: Driver Not Loaded): runs here train on its CPUs."));

        model.addAgent({ QStringLiteral("node-b"), QStringLiteral("10.0.0.6:7460"), false, {}, {}, {} });
        model.removeAgent(0);
        QCOMPARE(model.rowCount(), 1);
        QCOMPARE(model.text(0, M::NameColumn), QStringLiteral("node-b"));
        QCOMPARE(
            model.data(model.index(0, M::GpuColumn)).toString(), QString()); // no inventory: nothing claimed
    }

    // The utilization charts mark where each run started and ended on the node.
    void runMarksSayWhereRunsStartAndEnd()
    {
        using M = app::AgentsModel;
        const auto sample = [](std::initializer_list<std::pair<const char *, int>> runs) {
            v1::NodeSample s;
            for (const auto &[id, attempt] : runs) {
                auto *p = s.add_processes();
                p->set_run_id(id);
                p->set_attempt(attempt);
            }
            return s;
        };
        QSet<QString> live;
        QCOMPARE(M::runMarks(&live, sample({})), QStringList {});
        QCOMPARE(M::runMarks(&live, sample({ { "study-1-r01", 1 }, { "study-1-r01", 1 } })),
            QStringList { QStringLiteral("r01 \u25B6") }); // two ranks, one run
        QCOMPARE(M::runMarks(&live, sample({ { "study-1-r01", 1 } })), QStringList {});
        QCOMPARE(M::runMarks(&live, sample({ { "study-1-r01", 2 }, { "run-20261124-220437-872b", 1 } })),
            (QStringList { QStringLiteral("r01 \u25A0"), QStringLiteral("872b \u25B6"),
                QStringLiteral("r01 #2 \u25B6") }));
        QCOMPARE(M::runMarks(&live, sample({})),
            (QStringList { QStringLiteral("872b \u25A0"), QStringLiteral("r01 #2 \u25A0") }));
        QVERIFY(live.isEmpty());
    }

    void initTestCase()
    {
        QVERIFY(QDir().mkpath(m_tmp.filePath(QStringLiteral("data"))));
        VERIFY_OK(m_agent.start(agentOptions(QStringLiteral("agent"))));
        core::AgentClient client(m_agent.endpoint(), m_agent.token());
        VERIFY_OK(test::createSyntheticSet(client, "synth", 64, 32));
    }

    void cleanupTestCase()
    {
        m_agent.stop();
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }

    void registryRoundTripIsOwnerOnly()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("registry"));
        QVERIFY(QDir().mkpath(dir));
        const QString ca = dir + QStringLiteral("/ca.pem"), cert = dir + QStringLiteral("/client.pem"),
                      key = dir + QStringLiteral("/client.key");
        for (const QString &f : { ca, cert, key })
            QVERIFY(writeFile(f, "-----BEGIN TEST-----\n"));
        core::AgentRegistry registry(core::AgentRegistry::defaultPath(dir));
        auto a = agent(
            QStringLiteral("gpu-node-1"), QStringLiteral("gpu-node-1:50051"), QStringLiteral("s3cret"));
        a.tls = { ca, cert, key, QStringLiteral("agent.example") };
        auto b = agent(QStringLiteral("spare"), QStringLiteral("[::1]:7450"), QString());
        b.enabled = false;
        VERIFY_OK(registry.add(a));
        VERIFY_OK(registry.add(b));
        VERIFY_OK(registry.save());
        QCOMPARE(fileMode(registry.path()), 0600);

        core::AgentRegistry again(registry.path());
        VERIFY_OK(again.load());
        QVERIFY2(again.warnings().isEmpty(), qPrintable(again.warnings().join(QLatin1Char('\n'))));
        QCOMPARE(again.agents().size(), 2);
        QVERIFY(again.agents().at(0) == a);
        QVERIFY(again.agents().at(1) == b);
        QCOMPARE(again.agents().at(0).tls.serverName, QStringLiteral("agent.example"));
        QVERIFY(!again.agents().at(1).enabled);
        QVERIFY(again.remove(QStringLiteral("spare")));
        VERIFY_OK(again.save());
        core::AgentRegistry third(registry.path());
        VERIFY_OK(third.load());
        QCOMPARE(third.agents().size(), 1);
    }

    void widePermissionsAreTightened()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("wide"));
        QVERIFY(QDir().mkpath(dir));
        const QString path = core::AgentRegistry::defaultPath(dir);
        // A file that pre-exists readable by everyone.
        QVERIFY(writeFile(path, R"({"version":1,"agents":[{"name":"n","address":"h:1","token":"t"}]})"));
        QVERIFY(::chmod(QFile::encodeName(path).constData(), 0644) == 0);
        core::AgentRegistry saving(path);
        VERIFY_OK(saving.add(agent(QStringLiteral("m"), QStringLiteral("h:2"), QStringLiteral("t2"))));
        VERIFY_OK(saving.save());
        QCOMPARE(fileMode(path), 0600);

        // Loading a wide file tightens it too, and says so.
        QVERIFY(::chmod(QFile::encodeName(path).constData(), 0644) == 0);
        core::AgentRegistry loading(path);
        VERIFY_OK(loading.load());
        QCOMPARE(fileMode(path), 0600);
        QCOMPARE(loading.warnings().size(), 1);
        QVERIFY2(loading.warnings().at(0).contains(QLatin1String("readable by other users (0644)")),
            qPrintable(loading.warnings().at(0)));
        QCOMPARE(loading.agents().size(), 1);
        QCOMPARE(loading.agents().at(0).token, QStringLiteral("t2"));

        // Not JSON: refused with the file named, nothing loaded.
        QVERIFY(writeFile(path, "not json"));
        core::AgentRegistry broken(path);
        const core::Status loaded = broken.load();
        QVERIFY(!loaded);
        QVERIFY2(loaded.error().contains(path)
                && loaded.error().contains(QLatin1String("not a ScaleLab agent list")),
            qPrintable(loaded.error()));
    }

    void validationSpeaksInWords()
    {
        using core::AgentRegistry;
        auto p = AgentRegistry::problemsOf(agent(QStringLiteral("n"), QStringLiteral("foo"), {}));
        QVERIFY2(containsMessage(p, QStringLiteral("address"),
                     QStringLiteral("address 'foo' has no port: write host:port, e.g. gpu-node-1:50051")),
            qPrintable(dump(p)));
        p = AgentRegistry::problemsOf(agent(QStringLiteral("n"), QStringLiteral("foo:70000"), {}));
        QVERIFY2(containsMessage(p, QStringLiteral("address"),
                     QStringLiteral("port '70000' is not a number from 1 to 65535")),
            qPrintable(dump(p)));
        p = AgentRegistry::problemsOf(agent(QStringLiteral("n"), QStringLiteral(":50051"), {}));
        QVERIFY2(containsMessage(p, QStringLiteral("address"), QStringLiteral("has no host")),
            qPrintable(dump(p)));
        p = AgentRegistry::problemsOf(agent(QString(), QStringLiteral("h:1"), {}));
        QVERIFY2(
            containsMessage(p, QStringLiteral("name"), QStringLiteral("name is empty")), qPrintable(dump(p)));
        QVERIFY(AgentRegistry::problemsOf(agent(QStringLiteral("ok"), QStringLiteral("[::1]:50051"), {}))
                    .isEmpty());

        auto tls = agent(QStringLiteral("n"), QStringLiteral("h:1"), QStringLiteral("t"));
        tls.tls.caFile = m_tmp.filePath(QStringLiteral("no-such-ca.pem"));
        tls.tls.keyFile = m_tmp.filePath(QStringLiteral("no-such.key"));
        p = AgentRegistry::problemsOf(tls);
        QVERIFY2(containsMessage(p, QStringLiteral("tls.cert"),
                     QStringLiteral("client key without its client certificate")),
            qPrintable(dump(p)));
        QVERIFY2(containsMessage(p, QStringLiteral("tls.ca"),
                     QStringLiteral("CA file '%1' does not exist").arg(tls.tls.caFile)),
            qPrintable(dump(p)));

        AgentRegistry registry;
        VERIFY_OK(registry.add(agent(QStringLiteral("a"), QStringLiteral("h:1"), {})));
        const core::Status twice = registry.add(agent(QStringLiteral("a"), QStringLiteral("h:2"), {}));
        QVERIFY(!twice);
        QVERIFY2(twice.error().contains(QLatin1String("an agent named 'a' already exists")),
            qPrintable(twice.error()));
        // Editing an agent keeps its own name.
        VERIFY_OK(registry.replace(0, agent(QStringLiteral("a"), QStringLiteral("h:3"), {})));
        QCOMPARE(registry.agents().at(0).address, QStringLiteral("h:3"));
    }

    void dialogShowsProblemsInline()
    {
        core::AgentRegistry registry;
        QString error;
        VERIFY_OK(registry.add(agent(QStringLiteral("taken"), QStringLiteral("h:1"), {})));
        app::AgentDialog dialog(&registry, -1, {});
        auto *address = dialog.findChild<QLineEdit *>(QStringLiteral("addressEdit"));
        auto *name = dialog.findChild<QLineEdit *>(QStringLiteral("nameEdit"));
        auto *addressError = dialog.findChild<QLabel *>(QStringLiteral("error:address"));
        auto *nameError = dialog.findChild<QLabel *>(QStringLiteral("error:name"));
        QVERIFY(address && name && addressError && nameError);
        dialog.show();
        // Untouched fields stay quiet; a typed address is judged as it is typed.
        QVERIFY(!nameError->isVisible());
        QTest::keyClicks(address, QStringLiteral("foo"));
        QVERIFY(addressError->isVisible());
        QVERIFY2(addressError->text().contains(QLatin1String("address 'foo' has no port")),
            qPrintable(addressError->text()));
        QVERIFY(!nameError->isVisible());
        QTest::keyClicks(address, QStringLiteral(":50051"));
        QVERIFY(!addressError->isVisible());
        // OK shows everything left to fix and keeps the dialog open.
        dialog.accept();
        QVERIFY(dialog.isVisible());
        QVERIFY(nameError->isVisible());
        QTest::keyClicks(name, QStringLiteral("taken"));
        QVERIFY2(nameError->text().contains(QLatin1String("already exists")), qPrintable(nameError->text()));
        name->clear();
        QTest::keyClicks(name, QStringLiteral("fresh"));
        QCOMPARE(dialog.validateAll(), 0);
        QCOMPARE(dialog.config().address, QStringLiteral("foo:50051"));
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty()) {
            address->clear();
            QTest::keyClicks(address, QStringLiteral("gpu-node-1"));
            dialog.adjustSize();
            dialog.grab().save(dir + QStringLiteral("/agent_dialog.png"));
            address->setText(QStringLiteral("foo:50051"));
        }
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
    }

    void connectedAgentShowsInventoryAndUtilization()
    {
        app::AgentsView view;
        view.setSampleInterval(200);
        QSignalSpy changed(&view, &app::AgentsView::agentsChanged);
        const QString state = m_tmp.filePath(QStringLiteral("console-live"));
        VERIFY_OK(view.openRegistry(state));
        VERIFY_OK(view.addAgent(agent(QStringLiteral("node-a"), m_agent.endpoint(), m_agent.token())));
        QCOMPARE(fileMode(core::AgentRegistry::defaultPath(state)), 0600);
        QTRY_COMPARE_WITH_TIMEOUT(
            view.stateText(QStringLiteral("node-a")), QStringLiteral("connected"), 10000);
        const QString inventory = view.inventoryText(QStringLiteral("node-a"));
        QVERIFY2(inventory.contains(QSysInfo::machineHostName()) && inventory.contains(QLatin1String("cores"))
                && inventory.contains(QLatin1String("synth (synthetic)")),
            qPrintable(inventory));
        // Utilization samples reach the charts (on the console's wall clock).
        QTRY_VERIFY_WITH_TIMEOUT(
            view.cpuChart(QStringLiteral("node-a"))->pointCount(QStringLiteral("cpu")) >= 2, 10000);
        QVERIFY(view.memoryChart(QStringLiteral("node-a"))->pointCount(QStringLiteral("used")) >= 2);
        QCOMPARE(view.cpuChart(QStringLiteral("node-a"))->xAxis(), app::XAxis::WallClock);
        const auto *memory = view.memoryChart(QStringLiteral("node-a"))->data(QStringLiteral("used"));
        QVERIFY(memory->rawValue(0) > 0.01); // GiB in use: the node has some memory busy
        const auto *model = view.model();
        QVERIFY2(model->text(0, 4).contains(QLatin1String("GiB")), qPrintable(model->text(0, 4)));
        QVERIFY(model->text(0, 3).endsWith(QLatin1Char('%')));
        // Reachable agents go to the Study tab.
        QTRY_VERIFY_WITH_TIMEOUT(!changed.isEmpty(), 30'000);
        const auto reachable = changed.last().at(0).value<QList<core::AgentEndpoint>>();
        QCOMPARE(reachable.size(), 1);
        QCOMPARE(reachable.at(0).name, QStringLiteral("node-a"));
        QCOMPARE(reachable.at(0).token, m_agent.token());
        QCOMPARE(view.reachableAgents().size(), 1);

        // A fresh view on the same state folder has the agent back.
        app::AgentsView reopened;
        VERIFY_OK(reopened.openRegistry(state));
        QCOMPARE(reopened.agentNames(), QStringList { QStringLiteral("node-a") });
        // More rows for the picture: a wrong token and an address nobody answers.
        VERIFY_OK(
            view.addAgent(agent(QStringLiteral("wrong-token"), m_agent.endpoint(), QStringLiteral("x"))));
        const int unanswered = test::freePort();
        QVERIFY2(unanswered > 0, "no free port on 127.0.0.1");
        VERIFY_OK(view.addAgent(
            agent(QStringLiteral("gpu-node-7"), QStringLiteral("127.0.0.1:%1").arg(unanswered), {})));
        QTRY_VERIFY_WITH_TIMEOUT(
            view.stateText(QStringLiteral("gpu-node-7")).startsWith(QLatin1String("unreachable")), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(
            view.stateText(QStringLiteral("wrong-token")).contains(QLatin1String("token rejected")), 10000);
        QCOMPARE(view.reachableAgents().size(), 1);
        view.select(QStringLiteral("node-a"));
        screenshot(view, QStringLiteral("agents_view"));
    }

    void wrongTokenIsRejectedInWords()
    {
        app::AgentsView view;
        VERIFY_OK(view.openRegistry(m_tmp.filePath(QStringLiteral("console-token"))));
        VERIFY_OK(
            view.addAgent(agent(QStringLiteral("bad"), m_agent.endpoint(), QStringLiteral("wrong-token"))));
        QTRY_VERIFY_WITH_TIMEOUT(
            view.stateText(QStringLiteral("bad")).contains(QLatin1String("token rejected")), 10000);
        QVERIFY2(view.stateText(QStringLiteral("bad")).startsWith(QLatin1String("unauthenticated")),
            qPrintable(view.stateText(QStringLiteral("bad"))));
        QVERIFY(view.reachableAgents().isEmpty());
        QCOMPARE(view.samplesReceived(QStringLiteral("bad")), 0);
    }

    void unreachableAddressIsSaidInWords()
    {
        const int port = test::freePort(); // nothing listens there
        QVERIFY2(port > 0, "no free port on 127.0.0.1");
        app::AgentsView view;
        VERIFY_OK(view.openRegistry(m_tmp.filePath(QStringLiteral("console-unreachable"))));
        VERIFY_OK(view.addAgent(agent(QStringLiteral("gone"), QStringLiteral("127.0.0.1:%1").arg(port), {})));
        QTRY_VERIFY_WITH_TIMEOUT(
            view.stateText(QStringLiteral("gone")).startsWith(QLatin1String("unreachable: ")), 15000);
        const QString text = view.stateText(QStringLiteral("gone"));
        QVERIFY2(
            text.contains(QLatin1String("connection refused")) && text.contains(QLatin1String("retrying in")),
            qPrintable(text));
        QVERIFY(view.isWatching(QStringLiteral("gone"))); // it keeps trying
        QVERIFY(view.reachableAgents().isEmpty());
    }

    // "Add…" takes a list too: file:PATH (as the Slurm launcher writes) or dns:NAME:PORT.
    // The name is each address; the file is read (or the name resolved) when OK is pressed,
    // and what cannot be read keeps the dialog open with the reason under the address.
    void dialogAddsAListOfAgents()
    {
        core::AgentRegistry registry;
        app::AgentDialog dialog(&registry, -1, {});
        auto *address = dialog.findChild<QLineEdit *>(QStringLiteral("addressEdit"));
        auto *name = dialog.findChild<QLineEdit *>(QStringLiteral("nameEdit"));
        auto *token = dialog.findChild<QLineEdit *>(QStringLiteral("tokenEdit"));
        auto *addressError = dialog.findChild<QLabel *>(QStringLiteral("error:address"));
        QVERIFY(address && name && token && addressError);
        QVERIFY(dialog.findChild<QPushButton *>(QStringLiteral("agentsFileButton")));
        dialog.show();
        const QString path = m_tmp.filePath(QStringLiteral("dialog-agents.txt"));
        QTest::keyClicks(address, QStringLiteral("file:") + path);
        QVERIFY(dialog.isList());
        QVERIFY(!name->isEnabled()); // each agent is named by its address
        QVERIFY(!addressError->isVisible());
        QTest::keyClicks(token, QStringLiteral("shared-token"));
        dialog.accept(); // the file is not there yet
        QVERIFY(dialog.isVisible());
        QVERIFY2(addressError->isVisible()
                && addressError->text().contains(QLatin1String("cannot read agents file")),
            qPrintable(addressError->text()));
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty()) {
            dialog.adjustSize();
            dialog.grab().save(dir + QStringLiteral("/agent_dialog_list.png"));
        }
        QVERIFY(writeFile(path, "127.0.0.1:8\n127.0.0.1:9\n"));
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
        QCOMPARE(dialog.addresses(),
            QStringList({ QStringLiteral("127.0.0.1:8"), QStringLiteral("127.0.0.1:9") }));

        // Added once each, with the shared token; again, nothing is added twice.
        app::AgentsView view;
        QString error;
        VERIFY_OK(view.openRegistry(m_tmp.filePath(QStringLiteral("console-list"))));
        QStringList log;
        QCOMPARE(view.addAddresses(dialog.addresses(), dialog.config(), &log), 2);
        QCOMPARE(view.addAddresses(dialog.addresses(), dialog.config(), &log), 0);
        QVERIFY2(log.last().contains(QLatin1String("already in the Agents tab")), qPrintable(log.join('\n')));
        QCOMPARE(view.registry().agents().size(), 2);
        QCOMPARE(view.registry().agents().at(1).name, QStringLiteral("127.0.0.1:9"));
        QCOMPARE(view.registry().agents().at(1).token, QStringLiteral("shared-token"));

        // A DNS name: every address it resolves to; a malformed one is said as it is typed.
        app::AgentDialog dns(&registry, -1, {});
        auto *dnsAddress = dns.findChild<QLineEdit *>(QStringLiteral("addressEdit"));
        auto *dnsError = dns.findChild<QLabel *>(QStringLiteral("error:address"));
        dns.show();
        QTest::keyClicks(dnsAddress, QStringLiteral("dns:localhost"));
        QVERIFY2(dnsError->isVisible() && dnsError->text().contains(QLatin1String("dns:NAME:PORT")),
            qPrintable(dnsError->text()));
        QTest::keyClicks(dnsAddress, QStringLiteral(":7450"));
        QVERIFY(!dnsError->isVisible());
        dns.accept();
        QCOMPARE(dns.result(), int(QDialog::Accepted));
        QVERIFY2(dns.addresses().contains(QStringLiteral("127.0.0.1:7450")),
            qPrintable(dns.addresses().join(',')));

        // Editing one agent never turns it into a list.
        app::AgentDialog edit(&registry, 0, agent(QStringLiteral("one"), QStringLiteral("h:1"), {}));
        edit.findChild<QLineEdit *>(QStringLiteral("addressEdit"))
            ->setText(QStringLiteral("dns:localhost:7450"));
        QVERIFY(!edit.isList());
        QVERIFY(!edit.findChild<QPushButton *>(QStringLiteral("agentsFileButton")));
    }

    void removingAnAgentStopsItsStream()
    {
        app::AgentsView view;
        view.setSampleInterval(200);
        const QString state = m_tmp.filePath(QStringLiteral("console-remove"));
        VERIFY_OK(view.openRegistry(state));
        VERIFY_OK(view.addAgent(agent(QStringLiteral("node-a"), m_agent.endpoint(), m_agent.token())));
        VERIFY_OK(view.addAgent(agent(QStringLiteral("node-b"), m_agent.endpoint(), m_agent.token())));
        QTRY_VERIFY_WITH_TIMEOUT(view.samplesReceived(QStringLiteral("node-a")) >= 1, 10000);
        QCOMPARE(view.activeMonitors(), 2);
        QPointer<app::MetricChart> chart = view.cpuChart(QStringLiteral("node-a"));
        QSignalSpy changed(&view, &app::AgentsView::agentsChanged);
        QElapsedTimer clock;
        clock.start();
        VERIFY_OK(view.removeAgent(QStringLiteral("node-a")));
        QVERIFY2(clock.elapsed() < 3000, "stopping a stream must not wait on the network");
        QVERIFY(!view.isWatching(QStringLiteral("node-a")));
        QCOMPARE(view.activeMonitors(), 1);
        QCOMPARE(view.agentNames(), QStringList { QStringLiteral("node-b") });
        QCOMPARE(changed.size(), 1);
        QCOMPARE(changed.at(0).at(0).value<QList<core::AgentEndpoint>>().size(), 1);
        QTRY_VERIFY_WITH_TIMEOUT(chart.isNull(), 30'000); // its charts go with it
        core::AgentRegistry saved(core::AgentRegistry::defaultPath(state));
        VERIFY_OK(saved.load());
        QCOMPARE(saved.agents().size(), 1);
        QCOMPARE(saved.agents().at(0).name, QStringLiteral("node-b"));
    }

    void streamComesBackWhenTheAgentDoes()
    {
        // An agent of its own on a fixed port, so it can go away and come back there.
        const int port = test::freePort();
        QVERIFY2(port > 0, "no free port on 127.0.0.1");
        auto options = agentOptions(QStringLiteral("agent-restart"));
        options.extraArguments = { QStringLiteral("--port"), QString::number(port) };
        options.token = QStringLiteral("restart-token");
        core::LocalAgent restartable;
        VERIFY_OK(restartable.start(options));
        app::AgentsView view;
        view.setSampleInterval(200);
        view.setBackoff(100, 500);
        VERIFY_OK(view.openRegistry(m_tmp.filePath(QStringLiteral("console-restart"))));
        VERIFY_OK(view.addAgent(agent(QStringLiteral("flaky"), restartable.endpoint(), options.token)));
        QTRY_VERIFY_WITH_TIMEOUT(view.samplesReceived(QStringLiteral("flaky")) >= 1, 10000);
        restartable.stop();
        QTRY_VERIFY_WITH_TIMEOUT(
            view.stateText(QStringLiteral("flaky")).startsWith(QLatin1String("unreachable")), 10000);
        QVERIFY(view.reachableAgents().isEmpty());
        const qint64 before = view.samplesReceived(QStringLiteral("flaky"));
        VERIFY_OK(restartable.start(options));
        QTRY_COMPARE_WITH_TIMEOUT(
            view.stateText(QStringLiteral("flaky")), QStringLiteral("connected"), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(view.samplesReceived(QStringLiteral("flaky")) > before, 10000);
        QCOMPARE(view.reachableAgents().size(), 1);
    }

    void consoleStartsALocalAgentWhenNoneIsConfigured()
    {
        const QString state = m_tmp.filePath(QStringLiteral("console-main"));
        qint64 pid = 0;
        {
            app::ConsoleOptions options;
            options.stateDir = state;
            options.localAgent = agentOptions(QStringLiteral("console-main/agents/local-1"));
            app::MainWindow window(options);
            QTRY_VERIFY_WITH_TIMEOUT(window.isConnected(), 20000);
            auto *agents = window.agentsView();
            QCOMPARE(agents->agentNames(), QStringList { QStringLiteral("local-1") });
            QCOMPARE(agents->model()->text(0, 0), QStringLiteral("local-1 (started by the console)"));
            QTRY_COMPARE_WITH_TIMEOUT(
                agents->stateText(QStringLiteral("local-1")), QStringLiteral("connected"), 10000);
            QVERIFY(agents->localAgent());
            pid = agents->localAgent()->processId();
            QVERIFY(pid > 0);
            // The console's own agent is not saved, and cannot be edited or removed.
            QVERIFY(!QFile::exists(core::AgentRegistry::defaultPath(state)));
            QVERIFY(!window.findChild<QPushButton *>(QStringLiteral("removeAgentButton"))->isEnabled());
            QVERIFY(!window.findChild<QPushButton *>(QStringLiteral("startLocalButton"))->isEnabled());
        }
        // Closing the console stops the streams and the agent.
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(state).isEmpty(), 10000);
        QVERIFY(!QFile::exists(QStringLiteral("/proc/%1").arg(pid)));
        QVERIFY(test::childProcesses(QCoreApplication::applicationPid()).size() <= 1); // m_agent only
    }

private:
    void screenshot(app::AgentsView &view, const QString &name)
    {
        const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR");
        view.resize(1400, 800);
        QVERIFY(test::showAndSettle(&view)); // charts redraw on their timer
        const QImage light = view.grab().toImage();
        QVERIFY(!light.isNull());
        if (!dir.isEmpty())
            light.save(dir + QStringLiteral("/%1.png").arg(name));
        // The same in a dark palette (Fusion, as a dark desktop theme would set it).
        QPalette dark;
        dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
        dark.setColor(QPalette::WindowText, QColor(0xe0, 0xe0, 0xe0));
        dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
        dark.setColor(QPalette::AlternateBase, QColor(0x26, 0x26, 0x26));
        dark.setColor(QPalette::Text, QColor(0xe0, 0xe0, 0xe0));
        dark.setColor(QPalette::Button, QColor(0x35, 0x35, 0x35));
        dark.setColor(QPalette::ButtonText, QColor(0xe0, 0xe0, 0xe0));
        dark.setColor(QPalette::Mid, QColor(0x50, 0x50, 0x50));
        dark.setColor(QPalette::Highlight, QColor(0x2f, 0x65, 0xca));
        dark.setColor(QPalette::HighlightedText, Qt::white);
        const QPalette before = QApplication::palette();
        QApplication::setPalette(dark);
        QTRY_VERIFY_WITH_TIMEOUT(test::chartsSettled(&view), 10'000);
        const QImage darkImage = view.grab().toImage();
        QApplication::setPalette(before);
        if (!dir.isEmpty())
            darkImage.save(dir + QStringLiteral("/%1_dark.png").arg(name));
    }
};

QTEST_MAIN(TestAgentsView)
#include "tst_agents_view.moc"
