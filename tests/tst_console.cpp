// The console under QT_QPA_PLATFORM=offscreen: it starts a local agent, refuses bad
// form values inline, launches a run and plots its loss as it arrives.
#include "agent_fixture.h"
#include "agents_view.h"
#include "chart_controls.h"
#include "cifar10.h"
#include "main_window.h"
#include "metric_chart.h"
#include "run_history.h"
#include "study_driver.h"
#include "study_plan.h"
#include "study_view.h"
#include "test_support.h"
#include "theme.h"
#include "verify_ok.h"

#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QMenu>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>

using namespace scalelab;

class TestConsole : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    std::unique_ptr<app::MainWindow> m_window;

private Q_SLOTS:
    void initTestCase()
    {
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(
            m_tmp.filePath(QStringLiteral("data/syn")).toStdString(), 200, 50, 1));
        app::ConsoleOptions options;
        options.localAgent.agentBinary = test::binary("scalelab-agent");
        options.localAgent.dataDir = m_tmp.filePath(QStringLiteral("data"));
        options.localAgent.stateDir = m_tmp.filePath(QStringLiteral("state"));
        options.epochs = 1;
        options.batchSize = 25;
        m_window = std::make_unique<app::MainWindow>(options);
        m_window->show();
        QTRY_VERIFY_WITH_TIMEOUT(m_window->isConnected(), 20000);
        auto *datasets = m_window->findChild<QComboBox *>(QStringLiteral("datasetCombo"));
        QTRY_COMPARE_WITH_TIMEOUT(datasets->count(), 1, 30'000);
        QCOMPARE(datasets->currentData().toString(), QStringLiteral("syn"));
        QVERIFY(datasets->currentText().contains(QStringLiteral("SYNTHETIC")));
    }

    void cleanupTestCase()
    {
        m_window.reset(); // stops the local agent and its workers
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 10000);
    }

    void badFormValuesAreRefusedInline()
    {
        auto *batch = m_window->findChild<QSpinBox *>(QStringLiteral("batchSpin"));
        auto *error = m_window->findChild<QLabel *>(QStringLiteral("formError"));
        batch->setValue(0);
        QTest::mouseClick(m_window->findChild<QPushButton *>(QStringLiteral("launchButton")), Qt::LeftButton);
        QVERIFY(error->isVisible());
        QVERIFY2(error->text().contains(QStringLiteral("batch size must be at least 1")),
            qPrintable(error->text()));
        QVERIFY(m_window->currentRun() == nullptr); // nothing was sent
        batch->setValue(25);
    }

    // "New synthetic set" offers sizes, says what it made, and selects it; a complaint about
    // the data set goes once a set is chosen.
    void syntheticSetOfAChosenSizeIsCreatedAndSelected()
    {
        auto *button = m_window->findChild<QPushButton *>(QStringLiteral("syntheticButton"));
        QVERIFY(button && button->menu());
        const auto actions = button->menu()->actions();
        QCOMPARE(actions.size(), 3);
        QVERIFY2(actions[1]->text().contains(QStringLiteral("10,000 train / 2,000 test")),
            qPrintable(actions[1]->text()));
        auto *error = m_window->findChild<QLabel *>(QStringLiteral("formError"));
        error->setText(QStringLiteral("data set: choose one"));
        error->show();
        auto *datasets = m_window->findChild<QComboBox *>(QStringLiteral("datasetCombo"));
        actions[1]->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(datasets->currentData().toString(), QStringLiteral("synthetic-10k"), 30000);
        QVERIFY(
            datasets->currentText().startsWith(QStringLiteral("synthetic-10k [SYNTHETIC] — 10000 train")));
        QVERIFY(!error->isVisible());
        QVERIFY2(m_window->statusBar()->currentMessage().contains(
                     QStringLiteral("SYNTHETIC data set 'synthetic-10k' created on the agent and selected")),
            qPrintable(m_window->statusBar()->currentMessage()));
        // Back to the small set the other tests use.
        datasets->setCurrentIndex(datasets->findData(QStringLiteral("syn")));
    }

    void launchedRunDrawsLossAndAccuracy()
    {
        auto *launch = m_window->findChild<QPushButton *>(QStringLiteral("launchButton"));
        QVERIFY(launch->isEnabled());
        QTest::mouseClick(launch, Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->lossPoints().size() > 0, 60000);
        QTRY_VERIFY_WITH_TIMEOUT(
            m_window->currentRun() && m_window->currentRun()->terminal(), test::endsWithin());
        QCOMPARE(m_window->currentRun()->state(), v1::SUCCEEDED);
        QTRY_COMPARE_WITH_TIMEOUT(
            m_window->lossPoints().size(), 8, 30'000); // ceil(200 / 25) steps, all drawn
        QTRY_COMPARE_WITH_TIMEOUT(m_window->testAccuracyPoints().size(), 1, 30'000);
        // The per-step series: learning rate, gradient norm, and the step's time in compute and
        // in all-reduce wait (none with one worker).
        QTRY_COMPARE_WITH_TIMEOUT(m_window->learningRateChart()->pointCount(
                                      m_window->currentRun()->runId() + QStringLiteral("/lr")),
            8u, 30'000);
        QCOMPARE(m_window->gradNormChart()->pointCount(
                     m_window->currentRun()->runId() + QStringLiteral("/gradnorm")),
            8u);
        const auto *compute
            = m_window->stepTimeChart()->data(m_window->currentRun()->runId() + QStringLiteral("/compute"));
        const auto *wait
            = m_window->stepTimeChart()->data(m_window->currentRun()->runId() + QStringLiteral("/wait"));
        QVERIFY(compute && wait);
        QCOMPARE(compute->size(), 8u);
        QVERIFY(compute->rawValue(0) > 0);
        QCOMPARE(wait->rawValue(7), 0.0);
        // Where the epoch ended, on the step axis.
        QTRY_COMPARE_WITH_TIMEOUT(m_window->lossChart()->shownVerticalMarkers(),
            (QList<std::pair<double, QString>> { { 8.0, QStringLiteral("epoch 1") } }), 30'000);
        QVERIFY(m_window->findChild<QLabel *>(QStringLiteral("syntheticBanner"))->isVisible());
        QCOMPARE(m_window->currentRun()->gaps(), 0);
        QTRY_VERIFY_WITH_TIMEOUT(
            launch->isEnabled(), 30'000); // when the run's stream has ended, just after its last event
        // The run's progress: all of it, said in words on the bar.
        auto *progress = m_window->findChild<QProgressBar *>(QStringLiteral("runProgress"));
        QVERIFY(progress);
        QTRY_COMPARE_WITH_TIMEOUT(progress->value(), 1000, 30'000);
        QVERIFY(progress->isVisible());
        QCOMPARE(progress->text(), QStringLiteral("trained: epoch 1/1"));
        QVERIFY2(m_window->findChild<QLabel *>(QStringLiteral("runLabel"))
                     ->text()
                     .contains(QLatin1String("epoch 1/1, step 8/8")),
            qPrintable(m_window->findChild<QLabel *>(QStringLiteral("runLabel"))->text()));
    }

    // Single runs are kept in the journal: after a restart they are listed newest first, the
    // newest is shown as it was left and followed to its end, an earlier one can be drawn
    // beside it and reopened, and the form is as it was left.
    void runHistorySurvivesARestart()
    {
        test::AgentFixture agent;
        test::AgentFixtureOptions agentOptions;
        agentOptions.syntheticSet = QStringLiteral("syn");
        VERIFY_OK(agent.start(agentOptions));
        app::ConsoleOptions options;
        options.agentEndpoint = agent.agent().endpoint();
        options.token = agent.agent().token();
        options.stateDir = agent.path(QStringLiteral("console-state"));
        options.batchSize = 25;
        QString first, second;
        {
            app::MainWindow window(options);
            window.show();
            QTRY_VERIFY_WITH_TIMEOUT(window.isConnected(), 20000);
            QTRY_COMPARE_WITH_TIMEOUT(
                window.findChild<QComboBox *>(QStringLiteral("datasetCombo"))->count(), 1, 30'000);
            window.findChild<QSpinBox *>(QStringLiteral("epochsSpin"))->setValue(1);
            window.findChild<QSpinBox *>(QStringLiteral("threadsSpin"))->setValue(1);
            auto *launch = window.findChild<QPushButton *>(QStringLiteral("launchButton"));
            QTest::mouseClick(launch, Qt::LeftButton);
            QTRY_VERIFY_WITH_TIMEOUT(
                window.currentRun() && window.currentRun()->terminal(), test::endsWithin());
            QCOMPARE(window.currentRun()->state(), v1::SUCCEEDED);
            first = window.currentRun()->runId();
            QTRY_VERIFY_WITH_TIMEOUT(launch->isEnabled(), 30'000);
            // The second run is left running when the console goes (6 epochs: some seconds,
            // when the console is gone and back in a fraction of one).
            window.findChild<QSpinBox *>(QStringLiteral("epochsSpin"))->setValue(6);
            QTest::mouseClick(launch, Qt::LeftButton);
            QTRY_VERIFY_WITH_TIMEOUT(
                window.currentRun()->runId() != first && !window.lossPoints().isEmpty(), 60000);
            second = window.currentRun()->runId();
            QCOMPARE(window.runHistory()->runIds(), (QStringList { second, first }));
            window.close();
        }
        app::MainWindow again(options);
        again.show();
        // Listed newest first, with their labels; the newest shown at once, from the journal.
        QCOMPARE(again.runHistory()->runIds(), (QStringList { second, first }));
        auto *tree = again.runHistory()->tree();
        QVERIFY2(tree->topLevelItem(1)->text(0).startsWith(QStringLiteral("#1 · 1 worker · b25")),
            qPrintable(tree->topLevelItem(1)->text(0)));
        QVERIFY(tree->topLevelItem(1)->text(0).endsWith(QStringLiteral("[SYNTHETIC]")));
        QCOMPARE(tree->topLevelItem(1)->text(app::RunHistoryView::StateColumn), QStringLiteral("SUCCEEDED"));
        QVERIFY(tree->topLevelItem(1)->text(app::RunHistoryView::AccuracyColumn).endsWith(QLatin1Char('%')));
        QVERIFY(tree->topLevelItem(0)->text(0).startsWith(QStringLiteral("#2 ")));
        QVERIFY(again.currentRun() && again.currentRun()->runId() == second);
        QVERIFY(!again.currentRun()->terminal()); // as the journal had it: still running
        QTRY_VERIFY_WITH_TIMEOUT(!again.lossPoints().isEmpty(), 30'000);
        QCOMPARE(again.runHistory()->current(), second);
        // The form as it was left: the command line gave the batch; epochs and threads were set.
        QCOMPARE(again.findChild<QSpinBox *>(QStringLiteral("threadsSpin"))->value(), 1);
        QCOMPARE(again.findChild<QSpinBox *>(QStringLiteral("epochsSpin"))->value(), 6);
        QCOMPARE(again.findChild<QSpinBox *>(QStringLiteral("batchSpin"))->value(), 25);
        // Followed from where the journal stopped, to its end: every step once.
        QTRY_VERIFY_WITH_TIMEOUT(again.isConnected(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(again.currentRun()->terminal(), test::endsWithin());
        QCOMPARE(again.currentRun()->state(), v1::SUCCEEDED);
        QCOMPARE(again.currentRun()->gaps(), 0);
        QCOMPARE(again.currentRun()->duplicates(), 0);
        QTRY_COMPARE_WITH_TIMEOUT(again.lossPoints().size(), 48, 30'000); // 6 epochs of ceil(200 / 25) steps
        QTRY_COMPARE_WITH_TIMEOUT(tree->topLevelItem(0)->text(app::RunHistoryView::StateColumn),
            QStringLiteral("SUCCEEDED"), 30'000);
        // The first run drawn beside it, from the journal.
        QVERIFY(!again.lossChart()->hasSeries(first + QStringLiteral("/loss")));
        tree->topLevelItem(1)->setCheckState(0, Qt::Checked);
        QTRY_COMPARE_WITH_TIMEOUT(
            again.lossChart()->drawnPoints(first + QStringLiteral("/loss")).size(), 8, 30'000);
        // Reopened: it becomes the run the tab shows.
        Q_EMIT again.runHistory()->openRequested(first);
        QCOMPARE(again.currentRun()->runId(), first);
        QCOMPARE(again.currentRun()->state(), v1::SUCCEEDED);
        QTRY_COMPARE_WITH_TIMEOUT(again.lossPoints().size(), 8, 30'000);
        QVERIFY(again.lossChart()->hasSeries(second + QStringLiteral("/loss"))); // still drawn
        // Forgotten: gone from the list, the charts and the journal.
        Q_EMIT again.runHistory()->forgetRequested(second);
        QCOMPARE(again.runHistory()->runIds(), QStringList { first });
        QVERIFY(!again.lossChart()->hasSeries(second + QStringLiteral("/loss")));
        // The tab's writer commits on its own thread, a moment later.
        core::Journal journal;
        VERIFY_OK(journal.open(options.stateDir + QStringLiteral("/journal.sqlite")));
        QTRY_COMPARE_WITH_TIMEOUT(journal.singleRuns().size(), 1, 30'000);
        QVERIFY(journal.runEvents(second, 1, options.agentEndpoint).empty());
        QVERIFY(!journal.runEvents(first, 1, options.agentEndpoint).empty());
        QCOMPARE(journal.singleRuns().first().state, v1::SUCCEEDED);
    }

    void windowRendersToAnImage()
    {
        const QImage image = m_window->grab().toImage();
        QVERIFY(!image.isNull());
        QVERIFY(image.width() > 600 && image.height() > 400);
        const QString path = qEnvironmentVariable("SCALELAB_TEST_SCREENSHOT");
        if (!path.isEmpty())
            QVERIFY(image.save(path));
    }

    // Layout, chart controls and theme are kept in STATE_DIR/console.ini and come back;
    // the dark palette reaches the charts.
    void layoutAndThemeAreRemembered()
    {
        app::ConsoleOptions options;
        options.agentEndpoint = QStringLiteral("127.0.0.1:1"); // nothing listens: no agent needed here
        options.stateDir = m_tmp.filePath(QStringLiteral("console-state"));
        options.theme = QStringLiteral("dark");
        QVERIFY(QDir().mkpath(options.stateDir));
        {
            app::MainWindow window(options);
            window.show();
            QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
            window.chartControls()->findChild<QSlider *>(QStringLiteral("smoothingSlider"))->setValue(850);
            window.tabs()->setCurrentIndex(1);
            window.resize(1111, 777);
            const QImage chart = window.lossChart()->grab().toImage();
            QVERIFY(QColor(chart.pixel(chart.width() / 2, 4)).lightness() < 100); // dark background
            window.close();
        }
        QVERIFY(QFileInfo::exists(options.stateDir + QStringLiteral("/console.ini")));
        app::applyTheme(app::Theme::Light);
        options.theme.clear(); // as last time
        app::MainWindow again(options);
        QCOMPARE(again.chartControls()->smoothing(), 0.85);
        QCOMPARE(again.tabs()->currentIndex(), 1);
        QCOMPARE(again.size(), QSize(1111, 777));
        QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 80);
        app::applyTheme(app::Theme::System);
    }

    // --agents-file / --agents (a Slurm job's agents.txt): the agents join the Agents tab
    // and its saved list once, with the console's token; saved ones are not duplicated.
    // An ended study is a record: --open-study shows it at once, although no agent answers
    // (a laptop away from the cluster still opens last week's study).
    void anEndedStudyOpensWithNoAgentReachable()
    {
        const QString state = m_tmp.filePath(QStringLiteral("ended"));
        core::LocalAgent *local = m_window->agentsView()->localAgent();
        QVERIFY(local);
        const QList<core::AgentEndpoint> agents { { QStringLiteral("local"), local->endpoint(),
            local->token() } };
        QString studyId;
        {
            core::Journal journal;
            VERIFY_OK(journal.open(state + QStringLiteral("/journal.sqlite")));
            const auto plan
                = core::parsePlanJson(R"({"name": "record", "dataset": "syn", "baseline": {"skip": true},
                "training": {"maxTrainImages": 50, "maxTestImages": 25},
                "grid": {"workers": [1], "batchSize": [25], "epochs": [1], "threadsPerWorker": [1]}})");
            VERIFY_OK(plan);
            const auto created = test::createStudy(&journal, agents, *plan);
            VERIFY_OK(created);
            studyId = created.value();
            QCOMPARE(test::driveStudyToEnd(&journal, studyId, agents, 0), QStringLiteral("SUCCEEDED"));
        }
        app::ConsoleOptions options;
        options.agentEndpoint = QStringLiteral("127.0.0.1:1"); // nothing listens
        options.stateDir = state;
        options.openStudy = studyId;
        app::MainWindow window(options);
        QTRY_COMPARE_WITH_TIMEOUT(window.studyView()->snapshot().studyId, studyId, 10000);
        const core::StudySnapshot shown = window.studyView()->snapshot();
        QCOMPARE(shown.state, QStringLiteral("SUCCEEDED"));
        QCOMPARE(shown.runs.size(), 1);
        QCOMPARE(
            window.findChild<QTabWidget *>(QStringLiteral("mainTabs"))->currentWidget(), window.studyView());
    }

    void agentsFromTheCommandLineJoinTheAgentsTab()
    {
        app::ConsoleOptions options;
        options.agentEndpoint = QStringLiteral("127.0.0.1:1"); // nothing listens
        options.moreAgents = { QStringLiteral("127.0.0.1:2"), QStringLiteral("127.0.0.1:3") };
        options.token = QStringLiteral("job-token");
        options.stateDir = m_tmp.filePath(QStringLiteral("agents-from-file"));
        QVERIFY(QDir().mkpath(options.stateDir));
        for (int start = 0; start < 2; ++start) {
            app::MainWindow window(options);
            const auto &agents = window.agentsView()->registry().agents();
            QCOMPARE(agents.size(), 2);
            QCOMPARE(agents[0].address, QStringLiteral("127.0.0.1:2"));
            QCOMPARE(agents[1].name, QStringLiteral("127.0.0.1:3"));
            QCOMPARE(agents[1].token, QStringLiteral("job-token"));
        }
        QFile saved(options.stateDir + QStringLiteral("/agents.json"));
        QVERIFY(saved.open(QIODevice::ReadOnly));
        QVERIFY(saved.readAll().contains("127.0.0.1:3"));
    }

    // A plan's "agents" (here an agents file next to the plan, and an address) join the
    // Agents tab when the plan is loaded, and stay in the designer to be saved again.
    void agentsNamedByAPlanJoinTheAgentsTab()
    {
        const QString dir = m_tmp.filePath(QStringLiteral("plan-agents"));
        QVERIFY(QDir().mkpath(dir + QStringLiteral("/state")));
        QFile list(dir + QStringLiteral("/agents.txt"));
        QVERIFY(list.open(QIODevice::WriteOnly));
        list.write("# written by the Slurm launcher\n127.0.0.1:6\n127.0.0.1:7\n");
        list.close();
        QFile plan(dir + QStringLiteral("/plan.json"));
        QVERIFY(plan.open(QIODevice::WriteOnly));
        plan.write(R"({"name": "p", "dataset": "syn", "grid": {"workers": [2]},
                      "agents": ["file:agents.txt", "127.0.0.1:5", "127.0.0.1:6"]})");
        plan.close();
        app::ConsoleOptions options;
        options.agentEndpoint = QStringLiteral("127.0.0.1:1"); // nothing listens
        options.token = QStringLiteral("study-token");
        options.stateDir = dir + QStringLiteral("/state");
        options.planFile = plan.fileName();
        app::MainWindow window(options);
        const auto &agents = window.agentsView()->registry().agents();
        QStringList addresses;
        for (const auto &a : agents)
            addresses << a.address;
        QCOMPARE(addresses,
            QStringList({ QStringLiteral("127.0.0.1:6"), QStringLiteral("127.0.0.1:7"),
                QStringLiteral("127.0.0.1:5") }));
        QCOMPARE(agents[2].token, QStringLiteral("study-token"));
        auto *field = window.studyView()->findChild<QLineEdit *>(QStringLiteral("planAgents"));
        QVERIFY(field);
        QCOMPARE(field->text(), QStringLiteral("file:agents.txt, 127.0.0.1:5, 127.0.0.1:6"));
        // A plan whose agents cannot be found loads, and says why in the log.
        QFile broken(dir + QStringLiteral("/broken.json"));
        QVERIFY(broken.open(QIODevice::WriteOnly));
        broken.write(
            R"({"name": "p", "dataset": "syn", "grid": {"workers": [2]}, "agents": ["file:missing.txt"]})");
        broken.close();
        VERIFY_OK(window.studyView()->loadPlanFile(broken.fileName()));
        QCOMPARE(window.agentsView()->registry().agents().size(), 3);
        auto *log = window.findChild<QPlainTextEdit *>(QStringLiteral("log"));
        QVERIFY(log);
        QVERIFY2(log->toPlainText().contains(QLatin1String("the plan's agents: cannot read agents file")),
            qPrintable(log->toPlainText()));
    }
};

QTEST_MAIN(TestConsole)
#include "tst_console.moc"
