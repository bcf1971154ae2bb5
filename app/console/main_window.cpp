#include "main_window.h"

#include "agent_addresses.h"
#include "agents_view.h"
#include "chart_controls.h"
#include "study_view.h"
#include "theme.h"

#include <QActionGroup>
#include <QCloseEvent>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QThreadPool>

namespace scalelab::app {

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
    m_runTab->loadHistory();
    if (!m_options.planFile.isEmpty()) {
        if (const core::Status loaded = m_studyView->loadPlanFile(m_options.planFile))
            m_tabs->setCurrentWidget(m_studyView);
        else
            setStatus(loaded.error(), true);
    }
    QTimer::singleShot(0, this, &MainWindow::connectToAgent);
}

MainWindow::~MainWindow()
{
    // The study runner stops before the local agent it drives runs on (the Agents tab
    // owns it), so closing the console is not taken for an agent failure; so does the
    // Run tab's watch of its run.
    disconnect(m_agentsView, nullptr, this, nullptr);
    delete m_studyView;
    m_studyView = nullptr;
    delete m_runTab;
    m_runTab = nullptr;
    QThreadPool::globalInstance()->waitForDone();
}

void MainWindow::buildUi()
{
    setWindowTitle(QStringLiteral("ScaleLab"));
    // Agents: the saved list (STATE/agents.json), their state and live utilization; the
    // Run tab connects to one of them, the Study tab plans on those that answer.
    m_agentsView = new app::AgentsView;
    m_agentsView->setLocalAgentOptions(m_options.localAgent);
    // One run in the first tab; studies (baseline + grid, journal, retries) in the second.
    m_runTab = new RunTab(m_options, m_agentsView);
    connect(m_runTab, &RunTab::statusMessage, this, &MainWindow::setStatus);
    connect(m_runTab, &RunTab::connectedChanged, this, &MainWindow::connectedChanged);
    m_studyView = new app::StudyView;
    if (!m_options.stateDir.isEmpty()) {
        if (const core::Status opened = m_studyView->openJournal(m_options.stateDir); !opened)
            m_runTab->appendLog(tr("error: study journal: %1").arg(opened.error()));
        else // the Run tab's history lives in the same journal, through a connection of its own
            m_runTab->openJournal(m_options.stateDir);
    }
    connect(m_agentsView, &app::AgentsView::agentsChanged, m_studyView, &app::StudyView::setAgents);
    connect(m_agentsView, &app::AgentsView::inventoryChanged, m_studyView, &app::StudyView::setInventory);
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
            m_runTab->appendLog(tr("error: agent list: %1").arg(opened.error()));
    }
    addAgentsFromCommandLine();
    connect(m_studyView, &app::StudyView::agentsNamed, this, &MainWindow::addAgentsFromPlan);
    m_tabs = new QTabWidget;
    m_tabs->setObjectName(QStringLiteral("mainTabs"));
    m_tabs->addTab(m_runTab, tr("&Run"));
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
    m_runTab->charts()->controls()->save(settings, QStringLiteral("charts"));
    m_studyView->saveSettings(settings);
    m_runTab->saveRunForm(settings);
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
    m_runTab->charts()->controls()->restore(settings, QStringLiteral("charts"));
    m_studyView->restoreSettings(settings);
    m_runTab->restoreRunForm(settings);
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

void MainWindow::setStatus(const QString &text, bool error, int timeoutMs)
{
    statusBar()->showMessage(text, timeoutMs);
    if (error)
        m_runTab->appendLog(QStringLiteral("error: ") + text);
}

void MainWindow::addAgentAddresses(const QStringList &addresses, const QString &source)
{
    core::AgentConfig shared;
    shared.token = m_options.token;
    QStringList log;
    m_agentsView->addAddresses(addresses, shared, &log);
    for (const QString &line : log)
        m_runTab->appendLog(QStringLiteral("%1 (%2)").arg(line, source));
}

void MainWindow::addAgentsFromCommandLine()
{
    addAgentAddresses(m_options.moreAgents, tr("from the command line"));
}

void MainWindow::addAgentsFromPlan(const QStringList &specs, const QString &baseDir)
{
    const core::AgentAddresses named = core::resolveAgentSpecs(specs, baseDir);
    if (named.ok())
        addAgentAddresses(*named, tr("named by the plan"));
    else
        m_runTab->appendLog(tr("error: the plan's agents: %1").arg(named.error()));
}

// --- the Run tab's, forwarded ------------------------------------------------------

void MainWindow::connectToAgent()
{
    m_runTab->connectToAgent();
}

void MainWindow::launchRun()
{
    m_runTab->launchRun();
}

void MainWindow::stopRun()
{
    m_runTab->stopRun();
}

void MainWindow::openRun(const QString &runId)
{
    m_runTab->openRun(runId);
}

void MainWindow::createSyntheticDataset(int trainImages, int testImages)
{
    m_runTab->createSyntheticDataset(trainImages, testImages);
}

} // namespace scalelab::app
