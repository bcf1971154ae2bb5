#include "study_view.h"

#include "chart_controls.h"
#include "report.h"
#include "run_details.h"
#include "study_charts.h"
#include "study_plan.h"
#include "study_results.h"
#include "tune_charts.h"
#include "tune_plan.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStyle>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace scalelab::app {

using namespace scalelab::core;

StudyView::StudyView(QWidget *parent)
    : QWidget(parent)
    , m_host(&m_journal)
{
    buildUi();
    connect(&m_host, &StudyRunnerHost::changed, this, [this] { m_dirty = true; });
    connect(
        &m_host, &StudyRunnerHost::message, this, [this](const QString &line) { m_status->setText(line); });
    connect(&m_host, &StudyRunnerHost::fatal, this,
        [this](const QString &e) { m_status->setText(tr("Stopped: %1").arg(e)); });
    connect(&m_host, &StudyRunnerHost::finished, this, [this](const QString &state) {
        m_dirty = true;
        m_status->setText(tr("Study %1 ended: %2").arg(m_studyId, state));
        refreshStudyList();
        Q_EMIT studyFinished(state);
    });
    m_redraw.setInterval(250); // coalesces bursts of events into one redraw
    connect(&m_redraw, &QTimer::timeout, this, [this] {
        if (m_dirty && !m_reading)
            refresh();
    });
    m_redraw.start();
}

StudyView::~StudyView()
{
    m_host.shutDown(); // before the journal whose file it writes, and the widgets, go
}

void StudyView::buildUi()
{
    m_designer = new StudyDesigner;
    connect(m_designer, &StudyDesigner::changed, this, &StudyView::preview);
    connect(m_designer, &StudyDesigner::loadRequested, this, &StudyView::loadPlan);
    connect(m_designer, &StudyDesigner::saveRequested, this, &StudyView::savePlan);
    connect(m_designer, &StudyDesigner::launchRequested, this, [this] {
        if (const Status launched = launch(); !launched)
            m_designer->showMessage(launched.error());
    });

    auto *studyBar = new QHBoxLayout;
    m_studies = new QComboBox;
    m_studies->setMinimumContentsLength(30);
    auto *openButton = new QPushButton(tr("Open"));
    m_cancel = new QPushButton(tr("Cancel study"));
    m_cancel->setObjectName(QStringLiteral("cancelStudy"));
    m_cancel->setToolTip(tr("Stop every run of the open study (its journal keeps what was done)"));
    m_cancel->setEnabled(false); // no study is open yet
    m_export = new QPushButton(tr("Export report…"));
    m_export->setObjectName(QStringLiteral("exportReport"));
    m_export->setToolTip(tr("Write the open study's report: HTML, PDF, JSON or CSV"));
    m_export->setEnabled(false);
    studyBar->addWidget(new QLabel(tr("Study")));
    studyBar->addWidget(m_studies, 1);
    studyBar->addWidget(openButton);
    studyBar->addWidget(m_cancel);
    studyBar->addWidget(m_export);
    connect(openButton, &QPushButton::clicked, this, [this] {
        if (const Status opened = open(m_studies->currentData().toString()); !opened)
            m_status->setText(opened.error());
    });
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_studyId.isEmpty())
            return;
        if (const Status recorded = StudyRunner::requestCancel(&m_journal, m_studyId, {}); !recorded)
            m_status->setText(recorded.error());
    });
    connect(m_export, &QPushButton::clicked, this, &StudyView::exportReport);

    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_runs = new RunsTable(this);
    auto *filterBar = new QHBoxLayout;
    filterBar->addWidget(m_runs->filter(), 1);
    filterBar->addWidget(m_runs->stateFilter());
    QTableWidget *table = m_runs->table();
    connect(table, &QTableWidget::customContextMenuRequested, this, &StudyView::showRunMenu);
    connect(table, &QTableView::doubleClicked, this, [this](const QModelIndex &index) {
        if (const QString id = runIdAt(index.row()); !id.isEmpty() && !m_studyId.isEmpty())
            showRunDetails(id);
    });

    auto *tablePane = new QWidget;
    auto *top = new QVBoxLayout(tablePane);
    top->setContentsMargins(0, 0, 0, 0);
    top->addLayout(studyBar);
    top->addWidget(m_status);
    top->addLayout(filterBar);
    top->addWidget(table, 1);
    // Why a speedup may mislead (a baseline that did not learn), or why there is none.
    m_resultsNote = new QLabel;
    m_resultsNote->setObjectName(QStringLiteral("resultsNote"));
    m_resultsNote->setWordWrap(true);
    m_resultsNote->setTextFormat(Qt::PlainText);
    m_resultsNote->hide();
    top->addWidget(m_resultsNote);
    m_charts = new app::StudyCharts;
    m_tune = new app::TuneCharts; // in the charts' place while a tune is open
    m_tune->hide();
    connect(m_tune, &app::TuneCharts::trialActivated, this, [this](const QString &runId) {
        if (!m_studyId.isEmpty())
            showRunDetails(runId);
    });
    m_split = new QSplitter(Qt::Vertical);
    m_split->setObjectName(QStringLiteral("studySplit"));
    m_split->addWidget(tablePane);
    m_split->addWidget(m_charts);
    m_split->addWidget(m_tune);
    m_split->setStretchFactor(0, 2);
    m_split->setStretchFactor(1, 3);
    // The designer scrolls instead of squeezing its rows when the window is short: a long
    // "Cannot launch" list or the data set's note would otherwise overlap their neighbours.
    auto *designerScroll = new QScrollArea;
    designerScroll->setObjectName(QStringLiteral("designerScroll"));
    designerScroll->setWidget(m_designer);
    designerScroll->setWidgetResizable(true);
    designerScroll->setFrameShape(QFrame::NoFrame);
    designerScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    designerScroll->setMinimumWidth(
        m_designer->sizeHint().width() + designerScroll->style()->pixelMetric(QStyle::PM_ScrollBarExtent));
    auto *layout = new QHBoxLayout(this);
    layout->addWidget(designerScroll);
    layout->addWidget(m_split, 1);
}

Status StudyView::openJournal(const QString &stateDir)
{
    if (Status opened = m_reader.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
        return opened;
    if (Status opened = m_journal.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
        return opened;
    refreshStudyList();
    return Status::success();
}

void StudyView::setAgents(const QList<AgentEndpoint> &agents)
{
    m_agents = agents;
    QStringList names;
    for (const auto &a : agents)
        names << a.name;
    for (const QString &gone : m_inventories.keys())
        if (!names.contains(gone))
            m_inventories.remove(gone);
    m_designer->setAgents(agents);
    m_designer->setInventories(m_inventories);
    m_host.setAgents(agents);
    preview();
}

void StudyView::setInventory(const QString &agent, const v1::DescribeResponse &inventory)
{
    m_inventories.insert(agent, inventory);
    m_designer->setInventories(m_inventories);
    preview();
}

void StudyView::setDefaultDataset(const QString &dataset)
{
    m_designer->setDefaultDataset(dataset);
}

v1::StudyPlan StudyView::planFromForm(QStringList *problems) const
{
    return m_designer->planFromForm(problems);
}

void StudyView::setForm(const v1::StudyPlan &plan)
{
    m_designer->setForm(plan);
}

// Before launch: the runs the plan makes, where each would go, which cannot be placed.
void StudyView::preview()
{
    // While a study runs the table shows it; the designer is still checked and summarised
    // below it, so an edit is answered at once, and Launch starts the edited plan.
    const bool studyShown = !m_studyId.isEmpty() && m_host.hasRunner();
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    m_designer->setLaunchEnabled(problems.isEmpty());
    m_designer->showProblems(problems);
    // What launching would need of the agents (a data set), said as a hint below the
    // summary: beside a study opened to read, it is no error about that study. Launch says
    // it as an error.
    const QStringList needs = launchNeeds(plan);
    const auto hintNeeds = [&] {
        if (!needs.isEmpty())
            m_designer->showHint(tr("Launching would need:\n") + needs.join(QLatin1Char('\n')));
    };
    if (!problems.isEmpty()) {
        if (!studyShown) {
            m_runs->clear(); // not the last valid plan's runs: this one has none yet
            m_status->setText(tr("Preview: the plan cannot be launched as it is"));
        }
        return;
    }
    QList<NodeCapacity> nodes;
    for (const auto &a : m_agents) {
        NodeCapacity n;
        n.agent = a.name;
        v1::DescribeResponse d;
        // Inventories come from the Agents tab (its watches, off this thread; setInventory
        // previews again). Asking here would block the GUI thread on every edit, up to the
        // call's deadline for an agent slow to answer.
        if (const auto known = m_inventories.constFind(a.name); known != m_inventories.constEnd()) {
            d = *known;
            n.reachable = true;
        } else {
            n.error = tr("its inventory has not arrived yet; the Agents tab asks for it");
        }
        n.host = QString::fromStdString(d.hostname());
        n.cpuCores = d.cpu_cores();
        n.freeSlots = d.free_slots();
        n.gpus = d.gpus_size();
        for (const auto &dataset : d.datasets())
            n.datasets << QString::fromStdString(dataset.name());
        nodes << n;
    }
    const auto runs = expandPlan(plan, QStringLiteral("new"));
    QList<Placement> placements;
    int infeasible = 0;
    for (const auto &r : runs) {
        placements << placeRun(r.config, nodes,
            plan.placement() == "spread" ? PlacementPolicy::Spread : PlacementPolicy::Pack, false,
            QString::fromStdString(plan.dataset()));
        infeasible += placements.last().infeasible ? 1 : 0;
    }
    if (studyShown) {
        m_designer->showSummary(
            (isTune(plan) ? tr("The designer's plan: a tune of %n trial(s)", nullptr, int(runs.size()))
                          : tr("The designer's plan: %n run(s)", nullptr, int(runs.size())))
            + (infeasible ? tr(", %1 cannot be placed").arg(infeasible) : QString())
            + tr(". The table shows study %1; Launch starts the designer's plan as a new study.")
                  .arg(m_studyId));
        hintNeeds();
        return;
    }
    m_runs->showPlan(runs, placements);
    m_designer->showSummary(
        (isTune(plan)
                ? tr("A tune of %n trial(s); scheduler %1", nullptr, int(runs.size()))
                      .arg(QString::fromStdString(
                          plan.tune().scheduler().kind().empty() ? "none" : plan.tune().scheduler().kind()))
                : tr("%n run(s)", nullptr, int(runs.size())))
        + (infeasible ? tr("; %1 cannot be placed on the agents (they wait, PENDING, with the reason)")
                            .arg(infeasible)
                      : QString()));
    hintNeeds();
    m_status->setText(tr("Preview of the plan — not launched"));
}

// What launching `plan` needs that the connected agents lack: a data set no agent has would
// leave every run waiting.
QStringList StudyView::launchNeeds(const v1::StudyPlan &plan) const
{
    const auto anyAgentHas = [this](const std::string &name) {
        for (const auto &inventory : std::as_const(m_inventories))
            for (const auto &d : inventory.datasets())
                if (d.name() == name)
                    return true;
        return false;
    };
    QStringList needs;
    if (!m_inventories.isEmpty() && !plan.dataset().empty() && !anyAgentHas(plan.dataset()))
        needs << tr("• dataset: no connected agent has a data set '%1' (pick one of theirs, or create a "
                    "synthetic set on one: Run tab, New synthetic set)")
                     .arg(QString::fromStdString(plan.dataset()));
    return needs;
}

Status StudyView::launch()
{
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    if (problems.isEmpty())
        problems = launchNeeds(plan);
    if (!problems.isEmpty()) {
        const QString why = tr("Cannot launch:\n") + problems.join(QLatin1Char('\n'));
        m_designer->showMessage(why);
        return Status::failure(why);
    }
    if (!m_journal.isOpen())
        return Status::failure(tr("No study journal is open"));
    if (plan.agents_size() > 0)
        Q_EMIT agentsNamed(core::planAgentSpecs(plan), m_planDir);
    StudyRunner creator(&m_journal);
    creator.setAgents(m_agents);
    const auto created = creator.createStudy(plan, m_planDir); // a module named by file is the plan's
    if (!created)
        return Status::failure(created.error());
    refreshStudyList();
    return open(created.value(), false); // the designer holds that plan already
}

Status StudyView::open(const QString &studyId, bool takePlan)
{
    if (studyId.isEmpty() || !m_journal.hasStudy(studyId))
        return Status::failure(tr("No study %1 in the journal").arg(studyId));
    m_host.stop();
    if (studyId != m_studyId) {
        ++m_shownStudy; // a read of the study shown before is not drawn
        m_shown = {};
        m_charts->clear();
        m_tune->clear();
        m_host.clearProgress();
        // The designer beside a study holds its plan, ready to run again or to change,
        // not whatever plan it held before.
        if (takePlan)
            setForm(StudyState::replay(m_journal.events(studyId)).plan());
    }
    m_studyId = studyId;
    m_host.start(studyId, m_agents);
    m_studies->setCurrentIndex(m_studies->findData(studyId));
    m_dirty = true;
    return Status::success();
}

StudySnapshot StudyView::snapshot() const
{
    return m_shown;
}

void StudyView::refresh()
{
    if (m_studyId.isEmpty() || !m_reader.isOpen())
        return;
    m_dirty = false;
    m_reading = true;
    // Replaying the study, its results and its runs' new events: on the reader's thread.
    // A change meanwhile sets m_dirty again, and the tick after this read's answer reads it.
    m_reader.read(
        this,
        [studyId = m_studyId, positions = m_charts->feedPositions()](const Journal &journal) {
            StudyRead read;
            read.snapshot = buildSnapshot(StudyState::replay(journal.events(studyId)), journal);
            read.results = computeStudyResults(read.snapshot);
            if (!read.snapshot.tune)
                read.events = StudyCharts::newEvents(journal, read.snapshot, positions);
            return read;
        },
        [this, shownStudy = m_shownStudy](const StudyRead &read) {
            m_reading = false;
            if (shownStudy == m_shownStudy)
                show(read);
        });
}

void StudyView::show(const StudyRead &read)
{
    m_shown = read.snapshot;
    const StudySnapshot &s = m_shown;
    const StudyResults &results = read.results;
    m_runs->showStudy(s, results, m_studyId, [this](const QString &runId) { return m_host.progress(runId); });
    const QString note = !results.baselineWarning.isEmpty() ? tr("Warning: %1").arg(results.baselineWarning)
                                                            : results.baselineNote;
    m_resultsNote->setText(note);
    m_resultsNote->setStyleSheet(
        results.baselineWarning.isEmpty() ? QString() : QStringLiteral("color: #b45309; font-weight: 600;"));
    m_resultsNote->setVisible(!note.isEmpty() && !s.tune); // a tune has no baseline by design
    // A tune has no speedups: its trials, their metric and hyperparameters instead.
    m_charts->setVisible(!s.tune);
    m_tune->setVisible(s.tune);
    if (s.tune)
        m_tune->update(s);
    else
        m_charts->update(s, results, read.events);
    m_cancel->setEnabled(!m_studyId.isEmpty() && s.state == QLatin1String("RUNNING"));
    m_export->setEnabled(!m_studyId.isEmpty());
    if (s.synthetic)
        m_status->setText(m_status->text().startsWith(QLatin1String("SYNTHETIC"))
                ? m_status->text()
                : tr("SYNTHETIC DATA — ") + m_status->text());
}

QString StudyView::selectedRun() const
{
    if (m_studyId.isEmpty())
        return {};
    return m_runs->selectedRunId();
}

QString StudyView::runIdAt(int row) const
{
    return m_runs->runIdAt(row);
}

void StudyView::setRunColumnVisible(int column, bool visible)
{
    m_runs->setColumnVisible(column, visible);
}

void StudyView::showRunMenu(const QPoint &position)
{
    const QString runId = selectedRun();
    if (runId.isEmpty())
        return;
    QMenu menu;
    menu.addAction(tr("Details and logs…"), this, [this, runId] { showRunDetails(runId); });
    menu.addSeparator();
    const auto report = [this](const Status &done) {
        if (!done)
            m_status->setText(done.error());
    };
    menu.addAction(tr("Retry run"), this, [this, runId, report] { report(retryRun(runId)); });
    menu.addAction(tr("Cancel run"), this, [this, runId, report] { report(cancelRun(runId)); });
    const auto shown = std::find_if(m_shown.runs.cbegin(), m_shown.runs.cend(),
        [&runId](const RunResult &r) { return r.runId == runId; });
    if (shown != m_shown.runs.cend() && shown->trial) {
        menu.addSeparator();
        menu.addAction(tr("Continue trial for more epochs…"), this, [this, runId, report] {
            bool ok = false;
            const int more = QInputDialog::getInt(this, tr("Continue trial"),
                tr("Train %1 this many more epochs, from its last checkpoint:").arg(runId), 3, 1, 1000, 1,
                &ok);
            if (!ok)
                return;
            report(continueTrial(runId, more));
        });
    }
    menu.exec(m_runs->table()->viewport()->mapToGlobal(position));
}

Status StudyView::continueTrial(const QString &runId, int moreEpochs)
{
    const bool ended = StudyState::replay(m_journal.events(m_studyId)).ended();
    if (Status recorded = StudyRunner::requestContinue(&m_journal, m_studyId, runId, moreEpochs); !recorded)
        return recorded;
    m_status->setText(
        tr("%1 continues for %2 more epoch(s) from its last checkpoint").arg(runId).arg(moreEpochs));
    m_dirty = true;
    return ended || !m_host.hasRunner() ? open(m_studyId) : Status::success();
}

RunDetails *StudyView::showRunDetails(const QString &runId)
{
    auto *details = new RunDetails(
        m_reader, runId,
        [this, runId](RunResult *out) {
            for (const RunResult &r : m_shown.runs)
                if (r.runId == runId) {
                    *out = r;
                    return true;
                }
            return false;
        },
        this);
    details->setProgressSource(
        [this, runId]() -> std::optional<core::ProgressView> { return m_host.progress(runId); });
    connect(details, &RunDetails::retryRequested, this, [this, details](const QString &id) {
        if (const Status recorded = retryRun(id); !recorded)
            QMessageBox::warning(details, tr("Retry run"), recorded.error());
        details->refresh();
    });
    connect(details, &RunDetails::cancelRequested, this, [this, details](const QString &id) {
        if (const Status recorded = cancelRun(id); !recorded)
            QMessageBox::warning(details, tr("Cancel run"), recorded.error());
        details->refresh();
    });
    details->show();
    return details;
}

Status StudyView::retryRun(const QString &runId)
{
    const bool ended = StudyState::replay(m_journal.events(m_studyId)).ended();
    if (Status recorded = StudyRunner::requestRetry(&m_journal, m_studyId, runId); !recorded)
        return recorded;
    m_status->setText(tr("Retry of %1 recorded: it resumes from its last checkpoint").arg(runId));
    m_dirty = true;
    // A runner that saw the study end has stopped: start one again to drive the retry.
    return ended || !m_host.hasRunner() ? open(m_studyId) : Status::success();
}

Status StudyView::cancelRun(const QString &runId)
{
    if (Status recorded = StudyRunner::requestCancel(&m_journal, m_studyId, runId); !recorded)
        return recorded;
    m_dirty = true;
    return Status::success();
}

QString StudyView::unfinishedStudy(const QString &preferred) const
{
    const auto unfinished = [this](const QString &id) {
        return m_journal.hasStudy(id) && !StudyState::replay(m_journal.events(id)).ended();
    };
    if (!preferred.isEmpty() && unfinished(preferred))
        return preferred;
    const QStringList ids = m_journal.studyIds();
    for (auto it = ids.crbegin(); it != ids.crend(); ++it)
        if (unfinished(*it))
            return *it;
    return {};
}

void StudyView::saveSettings(QSettings &settings) const
{
    settings.setValue(QStringLiteral("study/split"), m_split->saveState());
    settings.setValue(QStringLiteral("study/lastStudy"), m_studyId);
    settings.setValue(QStringLiteral("study/chartTab"), m_charts->tabs()->currentIndex());
    settings.setValue(QStringLiteral("study/tuneTab"), m_tune->tabs()->currentIndex());
    m_charts->controls()->save(settings, QStringLiteral("studyCharts"));
    settings.setValue(QStringLiteral("study/plan"), QString::fromUtf8(planToJson([this] {
        QStringList ignored;
        return planFromForm(&ignored);
    }())));
    settings.setValue(QStringLiteral("study/planDir"), m_planDir);
    m_runs->saveColumns(settings);
}

void StudyView::restoreSettings(const QSettings &settings)
{
    m_split->restoreState(settings.value(QStringLiteral("study/split")).toByteArray());
    m_charts->tabs()->setCurrentIndex(settings.value(QStringLiteral("study/chartTab"), 0).toInt());
    m_tune->tabs()->setCurrentIndex(settings.value(QStringLiteral("study/tuneTab"), 0).toInt());
    m_charts->controls()->restore(settings, QStringLiteral("studyCharts"));
    if (const auto plan = parsePlanJson(settings.value(QStringLiteral("study/plan")).toString().toUtf8()))
        setForm(*plan);
    m_planDir = settings.value(QStringLiteral("study/planDir")).toString();
    m_runs->restoreColumns(settings);
}

void StudyView::refreshStudyList()
{
    const QSignalBlocker blocker(m_studies);
    m_studies->clear();
    for (const QString &id : m_journal.studyIds()) {
        const StudyState state = StudyState::replay(m_journal.events(id));
        m_studies->addItem(QStringLiteral("%1 — %2 — %3").arg(id, state.name(), state.state()), id);
    }
    if (const int current = m_studies->findData(m_studyId); current >= 0)
        m_studies->setCurrentIndex(current);
}

void StudyView::exportReport()
{
    if (m_studyId.isEmpty())
        return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Export report"),
        m_studyId + QStringLiteral(".html"), tr("Reports (*.html *.pdf *.json *.csv)"));
    if (path.isEmpty())
        return;
    const auto format = reportFormatForPath(path);
    if (!format) {
        QMessageBox::warning(
            this, tr("Export report"), tr("Use a name ending in .html, .pdf, .json or .csv"));
        return;
    }
    m_openExported = true;
    exportReportTo(*format, path);
}

void StudyView::exportReportTo(ReportFormat format, const QString &path)
{
    // Rendered (a PDF takes a while) and written on the thread pool, from the study as shown.
    m_export->setEnabled(false);
    auto *watcher = new QFutureWatcher<Result<QStringList>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher] {
        watcher->deleteLater();
        m_export->setEnabled(!m_studyId.isEmpty());
        const Result<QStringList> written = watcher->result();
        Q_EMIT reportExported(written ? written->first() : QString());
        if (!written) {
            QMessageBox::warning(this, tr("Export report"), written.error());
            return;
        }
        if (std::exchange(m_openExported, false))
            QDesktopServices::openUrl(QUrl::fromLocalFile(written->first())); // show what was written
    });
    watcher->setFuture(QtConcurrent::run(
        [snapshot = m_shown, format, path] { return writeReport(snapshot, format, path); }));
}

void StudyView::loadPlan()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Load plan"), {}, tr("Study plans (*.json)"));
    if (path.isEmpty())
        return;
    if (const Status loaded = loadPlanFile(path); !loaded)
        m_designer->showMessage(loaded.error());
}

Status StudyView::loadPlanFile(const QString &path)
{
    const auto plan = core::loadPlan(path);
    if (!plan)
        return Status::failure(tr("Cannot load %1:\n%2").arg(path, plan.error().join(QLatin1Char('\n'))));
    m_planDir = QFileInfo(path).absolutePath();
    setForm(*plan);
    if (plan->agents_size() > 0)
        Q_EMIT agentsNamed(core::planAgentSpecs(*plan), m_planDir);
    return Status::success();
}

void StudyView::savePlan()
{
    QStringList problems;
    const v1::StudyPlan plan = planFromForm(&problems);
    if (!problems.isEmpty()) {
        m_designer->showMessage(tr("Cannot save:\n") + problems.join(QLatin1Char('\n')));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save plan"), QStringLiteral("plan.json"), tr("Study plans (*.json)"));
    if (path.isEmpty())
        return;
    if (const Status saved = core::savePlan(plan, path); !saved)
        m_designer->showMessage(saved.error());
}

} // namespace scalelab::app
