#include "main_window.h"

#include "agent_addresses.h"
#include "agents_view.h"
#include "chart_controls.h"
#include "metric_chart.h"
#include "run_plot.h"
#include "run_history.h"
#include "run_request.h"
#include "study_view.h"
#include "theme.h"

#include <QAbstractItemView>
#include <QActionGroup>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QMenu>
#include <QSettings>
#include <QTime>
#include <QTreeWidget>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace scalelab::app {

namespace {
constexpr int kRefreshIntervalMs = 40; // ~25 fps at most; events arriving faster are coalesced
const QString kSyntheticName = QStringLiteral("synthetic");
} // namespace

MainWindow::MainWindow(ConsoleOptions options, QWidget *parent)
    : QMainWindow(parent)
    , m_options(std::move(options))
{
    // The theme first: a palette set before the event loop runs reaches only widgets
    // created after it.
    QString theme = m_options.theme;
    if (theme.isEmpty() && !settingsPath().isEmpty() && QFileInfo::exists(settingsPath()))
        theme = QSettings(settingsPath(), QSettings::IniFormat)
                    .value(QStringLiteral("window/theme"))
                    .toString();
    if (!theme.isEmpty() && theme != QLatin1String("system"))
        setTheme(theme);
    buildUi();
    buildMenus();
    restoreSettings();
    loadHistory();
    if (!m_options.planFile.isEmpty()) {
        if (const core::Status loaded = m_studyView->loadPlanFile(m_options.planFile))
            m_tabs->setCurrentWidget(m_studyView);
        else
            setStatus(loaded.error(), true);
    }
    m_refreshTimer.setSingleShot(true);
    m_refreshTimer.setInterval(kRefreshIntervalMs);
    connect(&m_refreshTimer, &QTimer::timeout, this, &MainWindow::refreshRunSummary);
    QTimer::singleShot(0, this, &MainWindow::connectToAgent);
}

MainWindow::~MainWindow()
{
    // The study runner stops before the local agent it drives runs on (the Agents tab
    // owns it), so closing the console is not taken for an agent failure.
    disconnect(m_agentsView, nullptr, this, nullptr);
    delete m_studyView;
    m_studyView = nullptr;
    m_watch.reset();
    QThreadPool::globalInstance()->waitForDone();
}

template <typename Work, typename Done> void MainWindow::inBackground(Work work, Done done)
{
    // The client is shared so a call in flight keeps it alive if we reconnect.
    QThreadPool::globalInstance()->start([this, client = m_client, work, done]() mutable {
        auto result = work(*client);
        QMetaObject::invokeMethod(
            this, [done, result]() mutable { done(result); }, Qt::QueuedConnection);
    });
}

void MainWindow::buildUi()
{
    setWindowTitle(QStringLiteral("ScaleLab"));
    // --- left: agent and run form ------------------------------------------------
    auto *agentBox = new QGroupBox(tr("Agent"));
    m_agentEdit = new QLineEdit(m_options.agentEndpoint);
    m_agentEdit->setObjectName(QStringLiteral("agentEdit"));
    m_agentEdit->setPlaceholderText(tr("first agent of the Agents tab, else a local one"));
    m_agentEdit->setToolTip(tr("HOST:PORT of a scalelab-agent; leave empty for the first agent of the "
                               "Agents tab, or (with none there) one started on this computer"));
    m_connectButton = new QPushButton(tr("Connect"));
    connect(m_connectButton, &QPushButton::clicked, this, &MainWindow::connectToAgent);
    m_agentLabel = new QLabel(tr("not connected"));
    m_agentLabel->setObjectName(QStringLiteral("agentLabel"));
    m_agentLabel->setWordWrap(true);
    auto *agentRow = new QHBoxLayout;
    agentRow->addWidget(m_agentEdit, 1);
    agentRow->addWidget(m_connectButton);
    auto *agentLayout = new QVBoxLayout(agentBox);
    agentLayout->addLayout(agentRow);
    agentLayout->addWidget(m_agentLabel);

    auto *runBox = new QGroupBox(tr("Run"));
    m_datasetCombo = new QComboBox;
    m_datasetCombo->setObjectName(QStringLiteral("datasetCombo"));
    m_syntheticButton = new QPushButton(tr("New synthetic set"));
    m_syntheticButton->setObjectName(QStringLiteral("syntheticButton"));
    m_syntheticButton->setToolTip(tr("Generate a SYNTHETIC CIFAR-format data set on the agent: choose its size"));
    auto *sizes = new QMenu(m_syntheticButton);
    for (const auto &[train, test] : { std::pair { 2000, 500 }, std::pair { 10000, 2000 }, std::pair { 50000, 10000 } })
        sizes->addAction(tr("%L1 train / %L2 test images%3")
                             .arg(train)
                             .arg(test)
                             .arg(train == 50000 ? tr(" (CIFAR-10's size)") : QString()),
            this, [this, train, test] { createSyntheticDataset(train, test); });
    m_syntheticButton->setMenu(sizes);
    m_datasetCombo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_datasetCombo->setMinimumContentsLength(24);
    // A choice made answers the form's complaint about it.
    connect(m_datasetCombo, &QComboBox::currentIndexChanged, this, [this] { m_formError->hide(); });
    m_workersSpin = new QSpinBox;
    m_workersSpin->setObjectName(QStringLiteral("workersSpin"));
    m_workersSpin->setRange(0, 256); // 0 is refused with a message
    m_workersSpin->setValue(m_options.workers > 0 ? m_options.workers : 1);
    m_workersSpin->setToolTip(tr("Data-parallel workers (one process per rank, c10d Gloo); 1 = baseline"));
    m_batchSpin = new QSpinBox;
    m_batchSpin->setObjectName(QStringLiteral("batchSpin"));
    m_batchSpin->setRange(0, 65536); // 0 is refused with a message, not silently clamped
    m_batchSpin->setValue(m_options.batchSize > 0 ? m_options.batchSize : 64);
    m_epochsSpin = new QSpinBox;
    m_epochsSpin->setObjectName(QStringLiteral("epochsSpin"));
    m_epochsSpin->setRange(0, 10000);
    m_epochsSpin->setValue(m_options.epochs > 0 ? m_options.epochs : 2);
    m_lrSpin = new QDoubleSpinBox;
    m_lrSpin->setObjectName(QStringLiteral("lrSpin"));
    m_lrSpin->setDecimals(4);
    m_lrSpin->setRange(0, 10);
    m_lrSpin->setSingleStep(0.01);
    m_lrSpin->setSpecialValueText(tr("default (0.05)"));
    m_threadsSpin = new QSpinBox;
    m_threadsSpin->setObjectName(QStringLiteral("threadsSpin"));
    m_threadsSpin->setRange(0, 1024);
    m_threadsSpin->setSpecialValueText(tr("automatic"));
    auto *form = new QFormLayout;
    form->addRow(tr("Data set"), m_datasetCombo);
    form->addRow(QString(), m_syntheticButton);
    form->addRow(tr("Workers"), m_workersSpin);
    form->addRow(tr("Batch size / worker"), m_batchSpin);
    form->addRow(tr("Epochs"), m_epochsSpin);
    form->addRow(tr("Learning rate"), m_lrSpin);
    form->addRow(tr("Threads / worker"), m_threadsSpin);
    m_formError = new QLabel;
    m_formError->setObjectName(QStringLiteral("formError"));
    m_formError->setWordWrap(true);
    m_formError->setStyleSheet(QStringLiteral("color: #c62828;"));
    m_formError->hide();
    m_launchButton = new QPushButton(tr("Launch"));
    m_launchButton->setObjectName(QStringLiteral("launchButton"));
    m_launchButton->setDefault(true);
    m_launchButton->setEnabled(false);
    connect(m_launchButton, &QPushButton::clicked, this, &MainWindow::launchRun);
    m_stopButton = new QPushButton(tr("Stop"));
    m_stopButton->setEnabled(false);
    connect(m_stopButton, &QPushButton::clicked, this, &MainWindow::stopRun);
    auto *buttons = new QHBoxLayout;
    buttons->addWidget(m_launchButton);
    buttons->addWidget(m_stopButton);
    auto *runLayout = new QVBoxLayout(runBox);
    runLayout->addLayout(form);
    runLayout->addWidget(m_formError);
    runLayout->addLayout(buttons);

    m_runLabel = new QLabel(tr("No run yet."));
    m_runLabel->setObjectName(QStringLiteral("runLabel"));
    m_runLabel->setWordWrap(true);
    m_runLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto *left = new QWidget;
    auto *leftLayout = new QVBoxLayout(left);
    leftLayout->addWidget(agentBox);
    leftLayout->addWidget(runBox);
    leftLayout->addWidget(m_runLabel);
    m_runProgress = new QProgressBar;
    m_runProgress->setObjectName(QStringLiteral("runProgress"));
    m_runProgress->setRange(0, 1000);
    m_runProgress->setTextVisible(true);
    m_runProgress->setToolTip(tr("Steps trained of the run's epochs; the ETA comes from the measured step rate "
                                 "and evaluation time, once 5 steps and 2 s have been measured"));
    m_runProgress->hide();
    leftLayout->addWidget(m_runProgress);
    auto *historyBox = new QGroupBox(tr("History"));
    m_history = new app::RunHistoryView;
    auto *historyLayout = new QVBoxLayout(historyBox);
    historyLayout->addWidget(m_history);
    connect(m_history, &app::RunHistoryView::drawnChanged, this, &MainWindow::setRunDrawn);
    connect(m_history, &app::RunHistoryView::openRequested, this, &MainWindow::openRun);
    connect(m_history, &app::RunHistoryView::forgetRequested, this, &MainWindow::forgetRun);
    leftLayout->addWidget(historyBox, 1);
    left->setMinimumWidth(360);

    // --- right: charts and log ---------------------------------------------------
    m_syntheticBanner = new QLabel(
        tr("SYNTHETIC DATA — generated images, not CIFAR-10: accuracies say nothing about real data."));
    m_syntheticBanner->setObjectName(QStringLiteral("syntheticBanner"));
    m_syntheticBanner->setStyleSheet(
        QStringLiteral("background: #fff3cd; color: #664d03; padding: 4px; font-weight: bold;"));
    m_syntheticBanner->hide();

    m_log = new QPlainTextEdit;
    m_log->setObjectName(QStringLiteral("log"));
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);
    m_log->setPlaceholderText(tr("Worker output and run events appear here."));

    auto *right = new QWidget;
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addWidget(m_syntheticBanner);
    rightLayout->addWidget(buildCharts(), 1);

    auto *split = new QSplitter(Qt::Horizontal);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    // One run in the first tab; studies (baseline + grid, journal, retries) in the second.
    m_studyView = new app::StudyView;
    if (!m_options.stateDir.isEmpty()) {
        if (const core::Status opened = m_studyView->openJournal(m_options.stateDir); !opened)
            m_log->appendPlainText(tr("error: study journal: %1").arg(opened.error()));
        // The Run tab's history lives in the same journal, through a connection of its own.
        else if (const core::Status history = m_journal.open(m_options.stateDir + QStringLiteral("/journal.sqlite"));
                 !history)
            m_log->appendPlainText(tr("error: run history: %1").arg(history.error()));
    }
    // Agents: the saved list (STATE/agents.json), their state and live utilization; the
    // Study tab plans on those that answer.
    m_agentsView = new app::AgentsView;
    m_agentsView->setLocalAgentOptions(m_options.localAgent);
    connect(m_agentsView, &app::AgentsView::agentsChanged, m_studyView, &app::StudyView::setAgents);
    connect(
        m_agentsView, &app::AgentsView::inventoryChanged, m_studyView, &app::StudyView::setInventory);
    // Studies are reopened (or launched) once the agents they run on answer.
    connect(m_agentsView, &app::AgentsView::agentsChanged, this,
        [this](const QList<core::AgentEndpoint> &reachable) {
            if (reachable.isEmpty() || m_studyReopened)
                return;
            // A study launched from the command line is planned on every saved agent that
            // answers: wait for all of them, or 10 s after the first, so a spread study
            // is not placed on whichever agent happened to answer first.
            int enabled = 0;
            for (const auto &a : m_agentsView->registry().agents())
                enabled += a.enabled ? 1 : 0;
            if (m_options.launchStudyWhenConnected && reachable.size() < enabled) {
                if (!m_launchDeadline.isActive())
                    m_launchDeadline.start();
                return;
            }
            reopenStudy();
        });
    m_launchDeadline.setSingleShot(true);
    m_launchDeadline.setInterval(10'000);
    connect(&m_launchDeadline, &QTimer::timeout, this, [this] {
        if (!m_agentsView->reachableAgents().isEmpty())
            reopenStudy();
    });
    // A study that has ended is a record: shown at once, with no agent to wait for (a
    // laptop away from the cluster still opens last week's study).
    if (!m_options.stateDir.isEmpty() && !m_options.launchStudyWhenConnected) {
        const QString named = m_options.openStudy;
        const bool nothingToDrive = !named.isEmpty() ? m_studyView->unfinishedStudy(named) != named
                                                     : m_studyView->unfinishedStudy({}).isEmpty();
        if (nothingToDrive && (!named.isEmpty() || m_options.reopenStudies))
            QTimer::singleShot(0, this, &MainWindow::reopenStudy);
    }
    if (!m_options.stateDir.isEmpty()) {
        if (const core::Status opened = m_agentsView->openRegistry(m_options.stateDir); !opened)
            m_log->appendPlainText(tr("error: agent list: %1").arg(opened.error()));
    }
    addAgentsFromCommandLine();
    connect(m_studyView, &app::StudyView::agentsNamed, this, &MainWindow::addAgentsFromPlan);
    m_tabs = new QTabWidget;
    m_tabs->setObjectName(QStringLiteral("mainTabs"));
    m_tabs->addTab(split, tr("&Run"));
    m_tabs->addTab(m_studyView, tr("&Study"));
    m_tabs->addTab(m_agentsView, tr("A&gents"));
    setCentralWidget(m_tabs);
    resize(1280, 760);
}

void MainWindow::buildMenus()
{
    auto *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open study plan…"), QKeySequence::Open, m_studyView, [this] {
        m_tabs->setCurrentWidget(m_studyView);
        m_studyView->loadPlan();
    });
    file->addAction(tr("&Save study plan…"), QKeySequence::Save, m_studyView, [this] {
        m_tabs->setCurrentWidget(m_studyView);
        m_studyView->savePlan();
    });
    file->addAction(tr("&Export study report…"), QKeySequence(Qt::CTRL | Qt::Key_E), m_studyView,
        &app::StudyView::exportReport);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    auto *view = menuBar()->addMenu(tr("&View"));
    for (int i = 0; i < m_tabs->count(); ++i)
        view->addAction(m_tabs->tabText(i).remove(QLatin1Char('&')), QKeySequence(Qt::CTRL | (Qt::Key_1 + i)),
            this, [this, i] { m_tabs->setCurrentIndex(i); });
    view->addSeparator();
    auto *themes = view->addMenu(tr("&Theme"));
    auto *themeGroup = new QActionGroup(themes);
    for (const auto &[name, label] : { std::pair { QStringLiteral("system"), tr("&System") },
             std::pair { QStringLiteral("light"), tr("&Light") },
             std::pair { QStringLiteral("dark"), tr("&Dark") } }) {
        QAction *a = themes->addAction(label, this, [this, name] { setTheme(name); });
        a->setCheckable(true);
        a->setData(name);
        themeGroup->addAction(a);
    }
    connect(themes, &QMenu::aboutToShow, this, [this, themeGroup] {
        for (QAction *a : themeGroup->actions())
            a->setChecked(a->data().toString() == m_theme);
    });
    view->addAction(tr("&Full screen"), QKeySequence::FullScreen, this,
        [this] { setWindowState(windowState() ^ Qt::WindowFullScreen); });

    auto *runMenu = menuBar()->addMenu(tr("&Run"));
    runMenu->addAction(tr("&Launch"), QKeySequence(Qt::CTRL | Qt::Key_Return), this, &MainWindow::launchRun);
    runMenu->addAction(tr("&Stop"), QKeySequence(Qt::CTRL | Qt::Key_Period), this, &MainWindow::stopRun);

    auto *studyMenu = menuBar()->addMenu(tr("S&tudy"));
    studyMenu->addAction(
        tr("&Launch study"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Return), this, [this] {
            m_tabs->setCurrentWidget(m_studyView);
            if (const core::Status launched = m_studyView->launch(); !launched)
                setStatus(launched.error(), true);
        });
    studyMenu->addAction(tr("&Run details and logs…"), QKeySequence(Qt::CTRL | Qt::Key_L), this, [this] {
        if (const QString selected = m_studyView->selectedRun(); !selected.isEmpty())
            m_studyView->showRunDetails(selected);
        else
            setStatus(tr("Select a run in the Study tab first"));
    });
    studyMenu->addAction(tr("Re&try selected run"), QKeySequence(Qt::CTRL | Qt::Key_R), this, [this] {
        const QString run = m_studyView->selectedRun();
        if (run.isEmpty())
            return;
        if (const core::Status recorded = m_studyView->retryRun(run); !recorded)
            setStatus(recorded.error(), true);
    });

    auto *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Keyboard shortcuts"), QKeySequence::HelpContents, this, [this] {
        QStringList lines;
        for (QAction *menu : menuBar()->actions())
            for (QAction *a : menu->menu()->actions())
                if (!a->shortcut().isEmpty())
                    lines << QStringLiteral("%1\t%2").arg(
                        a->shortcut().toString(QKeySequence::NativeText), a->text().remove(QLatin1Char('&')));
        QMessageBox::information(this, tr("Keyboard shortcuts"), lines.join(QLatin1Char('\n')));
    });
    help->addAction(tr("&About ScaleLab"), this, [this] {
        QMessageBox::about(this, tr("About ScaleLab"),
            tr("ScaleLab %1\nData-parallel training scale-up studies.\nState folder: %2")
                .arg(QStringLiteral(SCALELAB_VERSION), m_options.stateDir));
    });
}

QString MainWindow::settingsPath() const
{
    return m_options.stateDir.isEmpty() ? QString() : m_options.stateDir + QStringLiteral("/console.ini");
}

void MainWindow::saveSettings() const
{
    if (settingsPath().isEmpty())
        return;
    QSettings settings(settingsPath(), QSettings::IniFormat);
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/tab"), m_tabs->currentIndex());
    settings.setValue(QStringLiteral("window/theme"), m_theme);
    m_chartControls->save(settings, QStringLiteral("charts"));
    m_studyView->saveSettings(settings);
    saveRunForm(settings);
}

void MainWindow::setTheme(const QString &name)
{
    Theme theme = Theme::System;
    if (!themeFromName(name, &theme))
        return; // --theme is checked on the command line; a hand-edited settings file is ignored
    m_theme = themeName(theme);
    applyTheme(theme);
}

void MainWindow::restoreSettings()
{
    if (settingsPath().isEmpty() || !QFileInfo::exists(settingsPath()))
        return;
    const QSettings settings(settingsPath(), QSettings::IniFormat);
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    m_tabs->setCurrentIndex(settings.value(QStringLiteral("window/tab"), 0).toInt());
    m_chartControls->restore(settings, QStringLiteral("charts"));
    m_studyView->restoreSettings(settings);
    restoreRunForm(settings);
}

void MainWindow::saveRunForm(QSettings &settings) const
{
    if (m_datasetCombo->currentIndex() >= 0)
        settings.setValue(QStringLiteral("run/dataset"), m_datasetCombo->currentData().toString());
    settings.setValue(QStringLiteral("run/workers"), m_workersSpin->value());
    settings.setValue(QStringLiteral("run/batchSize"), m_batchSpin->value());
    settings.setValue(QStringLiteral("run/epochs"), m_epochsSpin->value());
    settings.setValue(QStringLiteral("run/learningRate"), m_lrSpin->value());
    settings.setValue(QStringLiteral("run/threads"), m_threadsSpin->value());
    settings.setValue(QStringLiteral("run/stepChart"), m_stepCharts->currentIndex());
}

void MainWindow::restoreRunForm(const QSettings &settings)
{
    // The command line's values win; what it leaves out is as the form was left.
    const auto restore = [&settings](const char *key, QSpinBox *spin, int given) {
        if (given <= 0 && settings.contains(QLatin1String(key)))
            spin->setValue(settings.value(QLatin1String(key)).toInt());
    };
    restore("run/workers", m_workersSpin, m_options.workers);
    restore("run/batchSize", m_batchSpin, m_options.batchSize);
    restore("run/epochs", m_epochsSpin, m_options.epochs);
    restore("run/threads", m_threadsSpin, 0);
    m_stepCharts->setCurrentIndex(settings.value(QStringLiteral("run/stepChart"), 0).toInt());
    m_lrSpin->setValue(settings.value(QStringLiteral("run/learningRate"), m_lrSpin->value()).toDouble());
    if (m_options.dataset.isEmpty())
        m_options.dataset = settings.value(QStringLiteral("run/dataset")).toString();
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    saveSettings();
    QMainWindow::closeEvent(event);
}

// Once, when the first agent answers: the study left unfinished (the console was closed
// or killed mid-study) is reattached and driven on; else the last one is shown.
void MainWindow::reopenStudy()
{
    if (m_studyReopened || m_options.stateDir.isEmpty())
        return;
    m_studyReopened = true;
    if (m_options.launchStudyWhenConnected) {
        m_tabs->setCurrentWidget(m_studyView);
        if (const core::Status launched = m_studyView->launch(); !launched)
            setStatus(tr("Could not launch the study: %1").arg(launched.error()), true);
        return;
    }
    QString last = m_options.openStudy;
    if (last.isEmpty() && !m_options.reopenStudies)
        return;
    if (last.isEmpty() && QFileInfo::exists(settingsPath()))
        last = QSettings(settingsPath(), QSettings::IniFormat)
                   .value(QStringLiteral("study/lastStudy"))
                   .toString();
    const QString unfinished = m_options.openStudy.isEmpty() ? m_studyView->unfinishedStudy(last) : last;
    const QString id = unfinished.isEmpty() ? last : unfinished;
    if (id.isEmpty())
        return;
    if (const core::Status opened = m_studyView->open(id); !opened) {
        setStatus(tr("Could not reopen study %1: %2").arg(id, opened.error()), true);
        return;
    }
    if (!m_options.openStudy.isEmpty() && m_studyView->unfinishedStudy(id) != id) {
        m_tabs->setCurrentWidget(m_studyView);
        setStatus(tr("Opened study %1 (it has ended)").arg(id));
    } else if (!unfinished.isEmpty()) {
        m_tabs->setCurrentWidget(m_studyView);
        setStatus(tr("Reattached to study %1, left unfinished: its runs go on from where they were").arg(id));
    }
}

QWidget *MainWindow::buildCharts()
{
    m_lossChart = new MetricChart(tr("Training loss"), tr("loss"));
    m_lossChart->setObjectName(QStringLiteral("lossChart"));
    m_accuracyChart = new MetricChart(tr("Accuracy after each epoch"), tr("accuracy %"));
    m_accuracyChart->setYEmptyRange(0, 100);
    m_accuracyChart->setObjectName(QStringLiteral("accuracyChart"));
    m_throughputChart = new MetricChart(tr("Throughput"), tr("images / s"));
    m_throughputChart->setObjectName(QStringLiteral("throughputChart"));
    m_stepTimeChart = new MetricChart(tr("Step time: compute and exposed all-reduce wait (CPU runs)"), tr("ms / step"));
    m_stepTimeChart->setObjectName(QStringLiteral("stepTimeChart"));
    m_lrChart = new MetricChart(tr("Learning rate"), tr("learning rate"));
    m_lrChart->setObjectName(QStringLiteral("lrChart"));
    m_gradNormChart = new MetricChart(tr("Gradient norm (all ranks, before the step)"), tr("L2 norm"));
    m_gradNormChart->setObjectName(QStringLiteral("gradNormChart"));

    // One set of controls for every chart, as TensorBoard's sidebar.
    m_chartControls = new ChartControls;
    m_chartControls->setObjectName(QStringLiteral("runChartControls"));
    m_chartControls->drive({ m_lossChart, m_accuracyChart, m_throughputChart, m_stepTimeChart, m_lrChart, m_gradNormChart },
        { m_lossChart, m_throughputChart, m_stepTimeChart, m_gradNormChart }, { m_lossChart });
    m_clearRunsButton = new QPushButton(tr("Clear earlier runs"));
    m_clearRunsButton->setToolTip(tr("Remove every run but the current one from the charts"));
    m_clearRunsButton->setEnabled(false);
    connect(m_clearRunsButton, &QPushButton::clicked, this, &MainWindow::clearOldRuns);
    m_chartControls->trailing()->addWidget(m_clearRunsButton);

    auto *top = new QSplitter(Qt::Horizontal);
    top->addWidget(m_lossChart);
    top->addWidget(m_accuracyChart);
    top->setSizes({ 560, 400 });
    // Per-step series share the lower-left place, a tab each.
    m_stepCharts = new QTabWidget;
    m_stepCharts->setObjectName(QStringLiteral("stepCharts"));
    m_stepCharts->setDocumentMode(true);
    m_stepCharts->addTab(m_throughputChart, tr("Throughput"));
    m_stepCharts->addTab(m_stepTimeChart, tr("Step time"));
    m_stepCharts->addTab(m_lrChart, tr("Learning rate"));
    m_stepCharts->addTab(m_gradNormChart, tr("Gradient norm"));
    auto *bottom = new QSplitter(Qt::Horizontal);
    bottom->addWidget(m_stepCharts);
    bottom->addWidget(m_log);
    bottom->setSizes({ 560, 400 });
    auto *rows = new QSplitter(Qt::Vertical);
    rows->addWidget(top);
    rows->addWidget(bottom);
    rows->setSizes({ 420, 300 });

    auto *area = new QWidget;
    auto *layout = new QVBoxLayout(area);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_chartControls);
    layout->addWidget(rows, 1);
    return area;
}

void MainWindow::addRunToCharts(const QString &runId, const QString &label)
{
    // The next colour of the cycle that no drawn run has.
    QColor color = MetricChart::cycleColor(m_runsPlotted++);
    for (int tries = 0; tries < 16 && m_runColors.values().contains(color); ++tries)
        color = MetricChart::cycleColor(m_runsPlotted++);
    addRunLines(runCharts(), { runId }, label, color);
    m_runColors.insert(runId, color);
    m_clearRunsButton->setEnabled(m_runColors.size() > 1);
}

RunCharts MainWindow::runCharts() const
{
    // Epoch boundaries are marked for the current run only: overlaid runs' would crowd it.
    return { m_lossChart, m_accuracyChart, m_throughputChart, m_lrChart, m_gradNormChart, m_stepTimeChart, true };
}

void MainWindow::unmarkCurrentRun()
{
    if (m_record)
        for (MetricChart *chart : { m_lossChart, m_throughputChart })
            chart->removeVerticalMarkers(RunLines { m_record->runId() }.epochMarkers());
}

void MainWindow::clearOldRuns()
{
    const QString current = m_record ? m_record->runId() : QString();
    for (const QString &id : m_runColors.keys())
        if (id != current) {
            setRunDrawn(id, false);
            m_history->setDrawn(id, false);
        }
    m_runsPlotted = current.isEmpty() ? 0 : 1;
    m_clearRunsButton->setEnabled(false);
}

void MainWindow::setRunDrawn(const QString &runId, bool drawn)
{
    if (!drawn) {
        if (m_record && m_record->runId() == runId)
            return; // the current run is always drawn
        removeRunLines(runCharts(), { runId });
        m_runColors.remove(runId);
        m_clearRunsButton->setEnabled(m_runColors.size() > 1);
        return;
    }
    if (m_runColors.contains(runId) || !m_runs.contains(runId))
        return;
    const core::SingleRunEntry &entry = m_runs[runId];
    addRunToCharts(runId, entry.label);
    RunPlotState state;
    RunCharts charts = runCharts();
    charts.epochMarkers = false;
    if (m_journal.isOpen())
        for (const auto &event : m_journal.runEvents(runId, 1, entry.agent))
            plotRunEvent(charts, { runId }, state, event);
}

void MainWindow::forgetRun(const QString &runId)
{
    if ((m_record && m_record->runId() == runId) || m_launching)
        return; // the current run stays
    if (m_journal.isOpen()) {
        if (const core::Status forgotten = m_journal.forgetSingleRun(runId); !forgotten) {
            setStatus(forgotten.error(), true);
            return;
        }
    }
    setRunDrawn(runId, false);
    m_runs.remove(runId);
    m_history->removeRun(runId);
    setStatus(tr("Removed run %1 from the history (its agent still has it)").arg(runId));
}

QString MainWindow::agentKey() const
{
    // A local agent gets a new port each time it starts, but keeps its state folder.
    return m_localAgent ? QStringLiteral("local") : (m_client ? m_client->endpoint() : QString());
}

namespace {

app::RunHistoryResult resultOf(const core::RunRecord &r)
{
    app::RunHistoryResult result;
    if (!r.epochs().empty()) {
        result.testAccuracy = r.epochs().back().test_accuracy();
        result.epochsDone = r.epochs().back().epoch();
    }
    result.imagesPerSecond = r.summary() ? r.summary()->images_per_second() : r.lastImagesPerSecond();
    result.epochs = r.started() ? r.started()->effective().epochs() : 0;
    result.synthetic = r.synthetic();
    return result;
}

} // namespace

void MainWindow::loadHistory()
{
    if (!m_journal.isOpen()) {
        // Nothing to keep runs in: say so rather than list runs that cannot be redrawn.
        m_history->tree()->hide();
        auto *note = new QLabel(tr("Runs are kept, listed and reopened when the console has a state folder "
                                   "(--state-dir or SCALELAB_STATE_DIR)."));
        note->setWordWrap(true);
        m_history->layout()->addWidget(note);
        return;
    }
    for (core::SingleRunEntry entry : m_journal.singleRuns()) {
        core::RunRecord record(entry.runId);
        for (const auto &event : m_journal.runEvents(entry.runId, 1, entry.agent))
            record.apply(event);
        // The events are the truth: a console that died between storing them and the state
        // left the state behind.
        if (record.state() != entry.state && record.lastSeq() > 0) {
            entry.state = record.state();
            entry.endedUnixMs = record.terminal() ? entry.endedUnixMs : 0; // when is not known
            if (const core::Status recorded = m_journal.setSingleRunState(entry.runId, entry.state, entry.endedUnixMs);
                !recorded)
                setStatus(recorded.error(), true);
        }
        m_runs.insert(entry.runId, entry);
        m_history->setRun(entry, resultOf(record));
    }
    // The newest run comes back as it was left: drawn, its log and summary shown.
    if (const QStringList ids = m_history->runIds(); !ids.isEmpty())
        openRun(ids.first());
}

void MainWindow::updateHistoryRow(const QString &runId)
{
    if (m_runs.contains(runId) && m_record && m_record->runId() == runId)
        m_history->setRun(m_runs[runId], resultOf(*m_record));
}

void MainWindow::openRun(const QString &runId)
{
    if (!m_runs.contains(runId) || (m_record && m_record->runId() == runId))
        return;
    if (m_watch || m_launching) {
        setStatus(tr("Run %1 is being followed: open another run once it has ended").arg(m_record->runId()), true);
        return;
    }
    const core::SingleRunEntry entry = m_runs[runId];
    setRunDrawn(runId, false); // drawn again below, from its first event
    unmarkCurrentRun();
    m_record = std::make_unique<core::RunRecord>(runId);
    m_meter = core::ProgressMeter();
    m_plotState = {};
    m_log->clear();
    m_syntheticBanner->hide();
    addRunToCharts(runId, entry.label);
    m_history->setCurrent(runId);
    if (m_journal.isOpen())
        for (const auto &event : m_journal.runEvents(runId, 1, entry.agent))
            applyEvent(event);
    m_dirty = true;
    refreshRunSummary();
    updateHistoryRow(runId);
    if (m_record->terminal())
        return;
    if (m_connected && entry.agent == agentKey())
        followCurrentRun(m_record->lastSeq() + 1);
    else
        setStatus(tr("Run %1 had not ended when last seen; it runs on %2: connect to that agent to follow it")
                      .arg(runId, entry.agent));
}

QList<QPointF> MainWindow::lossPoints() const
{
    return m_record ? m_lossChart->drawnPoints(RunLines { m_record->runId() }.loss()) : QList<QPointF> {};
}

QList<QPointF> MainWindow::testAccuracyPoints() const
{
    return m_record ? m_accuracyChart->drawnPoints(RunLines { m_record->runId() }.testAccuracy())
                    : QList<QPointF> {};
}

void MainWindow::plotEvent(const v1::RunEvent &event)
{
    plotRunEvent(runCharts(), { m_record->runId() }, m_plotState, event);
}

void MainWindow::setStatus(const QString &text, bool error)
{
    statusBar()->showMessage(text);
    if (error)
        m_log->appendPlainText(QStringLiteral("error: ") + text);
}

void MainWindow::addAgentAddresses(const QStringList &addresses, const QString &source)
{
    core::AgentConfig shared;
    shared.token = m_options.token;
    QStringList log;
    m_agentsView->addAddresses(addresses, shared, &log);
    for (const QString &line : log)
        m_log->appendPlainText(QStringLiteral("%1 (%2)").arg(line, source));
}

void MainWindow::addAgentsFromCommandLine()
{
    addAgentAddresses(m_options.moreAgents, tr("from the command line"));
}

void MainWindow::addAgentsFromPlan(const QStringList &specs, const QString &baseDir)
{
    const core::AgentAddresses named = core::resolveAgentSpecs(specs, baseDir);
    if (named.ok())
        addAgentAddresses(named.addresses, tr("named by the plan"));
    else
        m_log->appendPlainText(tr("error: the plan's agents: %1").arg(named.error));
}

void MainWindow::connectToAgent()
{
    m_connected = false;
    m_launchButton->setEnabled(false);
    QString endpoint = m_agentEdit->text().trimmed();
    QString token = m_options.token;
    core::AgentTls tls;
    m_localAgent = nullptr;
    const auto &saved = m_agentsView->registry().agents();
    const auto firstEnabled
        = std::find_if(saved.begin(), saved.end(), [](const core::AgentConfig &a) { return a.enabled; });
    if (endpoint.isEmpty() && firstEnabled != saved.end()) {
        // The first agent of the Agents tab.
        endpoint = firstEnabled->address;
        token = firstEnabled->token;
        tls = firstEnabled->tls;
    } else if (endpoint.isEmpty()) {
        // None configured: the console's own agent, listed in the Agents tab.
        if (!m_agentsView->localAgent())
            setStatus(tr("Starting a local agent…"));
        const auto started = m_agentsView->startLocalAgent();
        if (!started) {
            m_localAgent = nullptr;
            m_agentLabel->setText(tr("Local agent failed: %1").arg(started.error()));
            setStatus(started.error(), true);
            return;
        }
        m_localAgent = started.value();
        endpoint = m_localAgent->endpoint();
        token = m_localAgent->token();
    } else if (const QString problem = core::AgentClient::checkEndpoint(endpoint).error(); !problem.isEmpty()) {
        m_agentLabel->setText(problem);
        setStatus(problem, true);
        return;
    } else {
        // Watched (not saved) in the Agents tab, so the Study tab can use it too.
        m_agentsView->setSessionAgent(tr("Run tab"), { endpoint, endpoint, token, {}, true });
    }
    m_client = std::make_shared<core::AgentClient>(endpoint, token, tls.orEnvironment());
    m_agentLabel->setText(tr("Connecting to %1…").arg(endpoint));
    refreshInventory();
}

void MainWindow::refreshInventory()
{
    struct Result {
        core::CallResult call;
        v1::DescribeResponse inventory;
    };
    inBackground(
        [](core::AgentClient &client) {
            Result r;
            r.call = client.describe(&r.inventory);
            return r;
        },
        [this](const Result &r) {
            if (!r.call.ok()) {
                m_agentLabel->setText(r.call.message);
                setStatus(r.call.message, true);
                Q_EMIT connectedChanged(false);
                return;
            }
            applyInventory(r.inventory);
        });
}

void MainWindow::applyInventory(const v1::DescribeResponse &inventory)
{
    m_connected = true;
    const QString where = m_localAgent ? tr("local agent") : m_client->endpoint();
    m_agentLabel->setText(tr("Connected to %1: %2, %3 cores, %4 GiB, %5 GPU(s)")
                              .arg(where, QString::fromStdString(inventory.hostname()))
                              .arg(inventory.cpu_cores())
                              .arg(double(inventory.memory_bytes()) / (1 << 30), 0, 'f', 1)
                              .arg(inventory.gpus_size()));
    QString previous = m_datasetCombo->count() ? m_datasetCombo->currentData().toString() : m_options.dataset;
    QString created;
    if (!m_pendingDataset.isEmpty()) // just created: select it once it is listed
        previous = created = std::exchange(m_pendingDataset, QString());
    m_datasetCombo->clear();
    for (const auto &d : inventory.datasets()) {
        const QString name = QString::fromStdString(d.name());
        // [SYNTHETIC] right after the name: a narrow box cuts the end, never the warning.
        m_datasetCombo->addItem(tr("%1%4 — %2 train / %3 test")
                                    .arg(name)
                                    .arg(d.train_images())
                                    .arg(d.test_images())
                                    .arg(d.synthetic() ? tr(" [SYNTHETIC]") : QString()),
            name);
    }
    m_datasetCombo->view()->setMinimumWidth(m_datasetCombo->view()->sizeHintForColumn(0) + 24);
    if (inventory.datasets().empty())
        m_datasetCombo->setPlaceholderText(tr("no data set: create a synthetic one or add CIFAR-10"));
    const int index = m_datasetCombo->findData(previous);
    if (index >= 0)
        m_datasetCombo->setCurrentIndex(index);
    m_launchButton->setEnabled(m_watch == nullptr);
    setStatus(created.isEmpty() ? tr("Connected")
                                : tr("Connected; SYNTHETIC data set '%1' created on the agent and selected").arg(created));
    Q_EMIT connectedChanged(true);
    // A run of the history left unfinished on this agent: follow it from where the journal
    // stopped (the console was closed or killed while it ran).
    if (m_record && !m_record->terminal() && !m_watch && m_runs.contains(m_record->runId())
        && m_runs[m_record->runId()].agent == agentKey())
        followCurrentRun(m_record->lastSeq() + 1);
    if (std::exchange(m_options.launchWhenConnected, false))
        launchRun();
}

void MainWindow::createSyntheticDataset(int trainImages, int testImages)
{
    if (!m_client)
        return;
    // "synthetic" for the small set (as before), else named by its size: "synthetic-10k".
    const QString name = trainImages == 2000 ? kSyntheticName
                                             : QStringLiteral("%1-%2k").arg(kSyntheticName).arg(trainImages / 1000);
    setStatus(tr("Generating SYNTHETIC data set '%1' (%L2 train / %L3 test images) on the agent…")
                  .arg(name)
                  .arg(trainImages)
                  .arg(testImages));
    m_syntheticButton->setEnabled(false);
    inBackground(
        [name, trainImages, testImages](core::AgentClient &client) {
            v1::CreateSyntheticDatasetRequest request;
            request.set_name(name.toStdString());
            request.set_train_images(trainImages);
            request.set_test_images(testImages);
            request.set_seed(1);
            request.set_kind("shapes");
            v1::Dataset dataset;
            return client.createSyntheticDataset(request, &dataset);
        },
        [this, name, trainImages, testImages](const core::CallResult &r) {
            m_syntheticButton->setEnabled(true);
            if (!r.ok()) {
                setStatus(tr("Synthetic set '%1' not created: %2").arg(name, r.message), true);
                return;
            }
            m_log->appendPlainText(tr("Created SYNTHETIC data set '%1' (%L2 train / %L3 test images, shapes) on the agent")
                                       .arg(name)
                                       .arg(trainImages)
                                       .arg(testImages));
            m_formError->hide();
            m_pendingDataset = name;
            refreshInventory();
        });
}

void MainWindow::launchRun()
{
    if (!m_client || m_watch)
        return;
    core::RunRequest request;
    request.dataset = m_datasetCombo->currentData().toString();
    request.workers = m_workersSpin->value();
    request.batchSize = m_batchSpin->value();
    request.epochs = m_epochsSpin->value();
    request.learningRate = m_lrSpin->value();
    request.threadsPerWorker = m_threadsSpin->value();
    if (const QStringList problems = request.problems(); !problems.isEmpty()) {
        m_formError->setText(problems.join(QLatin1Char('\n')));
        m_formError->show();
        return;
    }
    m_formError->hide();
    const QString runId = core::newRunId();
    const auto start = request.toStartWorkers(runId);
    // Legend labels that tell overlaid runs apart: the run's number in the history and what
    // it trains.
    int number = 0;
    for (const auto &entry : std::as_const(m_runs))
        number = std::max(number, entry.label.section(QLatin1Char(' '), 0, 0).mid(1).toInt());
    core::SingleRunEntry entry;
    entry.runId = runId;
    entry.agent = agentKey();
    // Short, so that legends with several runs are not cut: when it ran is in the history.
    entry.label = tr("#%1 · %2 · b%3")
                      .arg(number + 1)
                      .arg(request.workers == 1 ? tr("1 worker") : tr("%1 workers").arg(request.workers))
                      .arg(request.batchSize);
    entry.launchedUnixMs = QDateTime::currentMSecsSinceEpoch();
    entry.request = start;
    // Recorded before it is started: a console killed a moment later still knows the run.
    if (m_journal.isOpen())
        if (const core::Status recorded = m_journal.recordSingleRun(entry); !recorded)
            setStatus(tr("The run will not be in the history: %1").arg(recorded.error()), true);
    m_runs.insert(runId, entry);
    m_history->setRun(entry, {});
    unmarkCurrentRun();
    m_record = std::make_unique<core::RunRecord>(runId);
    m_meter = core::ProgressMeter();
    m_plotState = {};
    addRunToCharts(runId, entry.label);
    m_history->setCurrent(runId);
    m_log->clear();
    m_syntheticBanner->hide();
    m_runLabel->setText(tr("%1: starting…").arg(runId));
    setRunning(true);
    m_launching = true;
    inBackground(
        [start](core::AgentClient &client) {
            v1::StartWorkersResponse response;
            return client.startWorkers(start, &response);
        },
        [this, runId](const core::CallResult &r) {
            m_launching = false;
            if (!r.ok()) {
                m_formError->setText(r.message);
                m_formError->show();
                m_runLabel->setText(tr("%1 was not started.").arg(runId));
                setRunning(false);
                // Never run, so not history: the form says why.
                if (m_journal.isOpen())
                    (void)m_journal.forgetSingleRun(runId); // at worst the history lists it, never started
                m_runs.remove(runId);
                m_history->removeRun(runId);
                return;
            }
            if (m_record && m_record->runId() == runId) // nothing else can be opened meanwhile
                followCurrentRun(1);
        });
}

void MainWindow::followCurrentRun(qint64 fromSeq)
{
    if (!m_record || m_watch || !m_client)
        return;
    const QString runId = m_record->runId();
    m_watch = std::make_unique<core::RunWatch>(m_client.get(), runId);
    connect(m_watch.get(), &core::RunWatch::eventsArrived, this, &MainWindow::drainEvents);
    connect(m_watch.get(), &core::RunWatch::unreachable, this, [this](const QString &error, qint64 since) {
        setStatus(tr("The agent has not answered since %1: %2 (still trying)")
                      .arg(QDateTime::fromMSecsSinceEpoch(since).toString(QStringLiteral("HH:mm:ss")), error),
            true);
    });
    connect(m_watch.get(), &core::RunWatch::reachable, this,
        [this] { statusBar()->showMessage(tr("The agent answers again"), 10'000); });
    connect(m_watch.get(), &core::RunWatch::finished, this, [this](const QString &error) {
        drainEvents();
        refreshRunSummary();
        if (!error.isEmpty())
            setStatus(tr("Lost the run's event stream: %1").arg(error), true);
        m_watch.release()->deleteLater();
        setRunning(false);
    });
    m_watch->start(fromSeq);
    setRunning(true);
}

void MainWindow::stopRun()
{
    if (!m_client || !m_record || m_record->terminal())
        return;
    const QString runId = m_record->runId();
    setStatus(tr("Stopping %1…").arg(runId));
    inBackground(
        [runId](core::AgentClient &client) {
            v1::StopRunResponse response;
            return client.stopRun(runId, &response);
        },
        [this](const core::CallResult &r) {
            if (!r.ok())
                setStatus(r.message, true);
        });
}

void MainWindow::setRunning(bool running)
{
    m_launchButton->setEnabled(!running && m_connected);
    m_stopButton->setEnabled(running);
}

void MainWindow::drainEvents()
{
    if (!m_watch || !m_record)
        return;
    const std::vector<v1::RunEvent> events = m_watch->takeEvents();
    const QString runId = m_record->runId();
    if (m_runs.contains(runId) && m_journal.isOpen())
        if (const core::Status stored = m_journal.appendRunEvents(QString(), runId, 1, m_runs[runId].agent, events);
            !stored)
            setStatus(stored.error(), true);
    const v1::RunState before = m_record->state();
    bool measured = false;
    for (const auto &event : events) {
        applyEvent(event);
        measured = measured || event.has_epoch() || event.has_summary();
    }
    if (m_runs.contains(runId) && m_record->state() != before) {
        core::SingleRunEntry &entry = m_runs[runId];
        entry.state = m_record->state();
        entry.endedUnixMs = m_record->terminal() ? QDateTime::currentMSecsSinceEpoch() : 0;
        if (m_journal.isOpen())
            if (const core::Status recorded = m_journal.setSingleRunState(runId, entry.state, entry.endedUnixMs);
                !recorded)
                setStatus(recorded.error(), true);
    }
    if (measured || m_record->state() != before)
        updateHistoryRow(runId);
    m_dirty = true;
    if (!m_refreshTimer.isActive())
        m_refreshTimer.start();
}

void MainWindow::applyEvent(const v1::RunEvent &event)
{
    const bool repeated = event.seq() <= m_record->lastSeq(); // counted by the record, not drawn
    m_record->apply(event);
    if (!repeated) {
        plotEvent(event);
        m_meter.apply(event);
    }
    if (event.has_log())
        m_log->appendPlainText(QStringLiteral("[rank %1] %2")
                                   .arg(event.rank())
                                   .arg(QString::fromStdString(event.log().text())));
    else if (event.has_state())
        m_log->appendPlainText(
            QStringLiteral("%1: %2").arg(core::RunRecord::stateName(event.state().state()),
                QString::fromStdString(event.state().message())));
    else if (event.has_stall()) {
        // Rank 0 made no progress for the run's stall_seconds (or does again).
        const QString text = QString::fromStdString(event.stall().message());
        m_log->appendPlainText(text);
        statusBar()->showMessage(event.stall().stalled() ? tr("Run %1 %2").arg(m_record->runId(), text) : text,
            event.stall().stalled() ? 0 : 10'000);
    }
}

void MainWindow::refreshRunSummary()
{
    if (!m_dirty || !m_record)
        return;
    m_dirty = false;
    const auto &r = *m_record;
    m_syntheticBanner->setVisible(r.synthetic());

    QString text = tr("<b>%1</b> — %2").arg(r.runId(), core::RunRecord::stateName(r.state()));
    if (r.started())
        text += tr("<br>%1 worker(s), global batch %2")
                    .arg(r.started()->world_size())
                    .arg(r.started()->global_batch())
            + tr("<br>%1 train images%2, %3 parameters")
                  .arg(r.started()->dataset().train_images())
                  .arg(r.synthetic() ? tr(" (synthetic)") : QString())
                  .arg(r.started()->parameters());
    const core::ProgressView progress = m_meter.view();
    if (!r.losses().empty())
        text += tr("<br>epoch %1/%2, step %3/%4, loss %5, %6 img/s")
                    .arg(progress.epoch)
                    .arg(progress.epochs)
                    .arg(progress.stepInEpoch)
                    .arg(progress.stepsPerEpoch)
                    .arg(r.losses().back().loss, 0, 'f', 4)
                    .arg(r.lastImagesPerSecond(), 0, 'f', 1);
    const bool running = !r.terminal() && progress.stepsTotal > 0;
    m_runProgress->setVisible(running || (r.terminal() && progress.done));
    m_runProgress->setValue(int(progress.fraction * 1000));
    m_runProgress->setFormat(progress.done ? tr("trained: epoch %1/%1").arg(progress.epochs)
            : tr("%p% · epoch %1/%2 · step %3/%4 · %5")
                  .arg(progress.epoch)
                  .arg(progress.epochs)
                  .arg(progress.stepInEpoch)
                  .arg(progress.stepsPerEpoch)
                  .arg(progress.etaSeconds ? tr("ETA %1").arg(core::formatDuration(*progress.etaSeconds))
                                           : tr("ETA once the step rate is measured")));
    if (!r.epochs().empty())
        text += tr("<br>epoch %1: test accuracy %2%")
                    .arg(r.epochs().back().epoch())
                    .arg(r.epochs().back().test_accuracy() * 100, 0, 'f', 2);
    if (r.summary())
        text += tr("<br>%1 in %2 s, %3 img/s")
                    .arg(QString::fromStdString(r.summary()->message()))
                    .arg(r.summary()->wall_seconds(), 0, 'f', 1)
                    .arg(r.summary()->images_per_second(), 0, 'f', 1);
    m_runLabel->setText(text);
}

} // namespace scalelab::app
