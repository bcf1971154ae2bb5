#include "run_tab.h"

#include "model_upload.h"
#include "study_model.h"

#include "agents_view.h"
#include "metric_chart.h"
#include "run_form.h"
#include "run_history.h"
#include "run_request.h"
#include "run_tab_charts.h"

#include <QDateTime>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QThreadPool>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

namespace scalelab::app {

namespace {
constexpr int kRefreshIntervalMs = 40; // ~25 fps at most; events arriving faster are coalesced
const QString kSyntheticName = QStringLiteral("synthetic");
} // namespace

RunTab::RunTab(ConsoleOptions options, AgentsView *agents, QWidget *parent)
    : QWidget(parent)
    , m_options(std::move(options))
    , m_agentsView(agents)
{
    buildUi();
    m_refreshTimer.setSingleShot(true);
    m_refreshTimer.setInterval(kRefreshIntervalMs);
    connect(&m_refreshTimer, &QTimer::timeout, this, &RunTab::refreshRunSummary);
    connect(&m_writer, &JournalWriter::failed, this,
        [this](const QString &error) { setStatus(tr("Run history: %1").arg(error), true); });
}

RunTab::~RunTab()
{
    // Nothing of the tab is left to a stream or a call in flight: they capture `this`.
    m_watch.reset();
    QThreadPool::globalInstance()->waitForDone();
}

void RunTab::buildUi()
{
    // --- left: agent and run form ------------------------------------------------
    auto *agentBox = new QGroupBox(tr("Agent"));
    m_agentEdit = new QLineEdit(m_options.agentEndpoint);
    m_agentEdit->setObjectName(QStringLiteral("agentEdit"));
    m_agentEdit->setPlaceholderText(tr("first agent of the Agents tab, else a local one"));
    m_agentEdit->setToolTip(tr("HOST:PORT of a scalelab-agent; leave empty for the first agent of the "
                               "Agents tab, or (with none there) one started on this computer"));
    m_connectButton = new QPushButton(tr("Connect"));
    connect(m_connectButton, &QPushButton::clicked, this, &RunTab::connectToAgent);
    m_agentLabel = new QLabel(tr("not connected"));
    m_agentLabel->setObjectName(QStringLiteral("agentLabel"));
    m_agentLabel->setWordWrap(true);
    auto *agentRow = new QHBoxLayout;
    agentRow->addWidget(m_agentEdit, 1);
    agentRow->addWidget(m_connectButton);
    auto *agentLayout = new QVBoxLayout(agentBox);
    agentLayout->addLayout(agentRow);
    agentLayout->addWidget(m_agentLabel);

    m_form = new RunForm(m_options);
    connect(m_form, &RunForm::syntheticRequested, this, &RunTab::createSyntheticDataset);
    connect(m_form, &RunForm::launchRequested, this, &RunTab::launchRun);
    connect(m_form, &RunForm::stopRequested, this, &RunTab::stopRun);

    m_runLabel = new QLabel(tr("No run yet."));
    m_runLabel->setObjectName(QStringLiteral("runLabel"));
    m_runLabel->setWordWrap(true);
    m_runLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto *left = new QWidget;
    auto *leftLayout = new QVBoxLayout(left);
    leftLayout->addWidget(agentBox);
    leftLayout->addWidget(m_form);
    leftLayout->addWidget(m_runLabel);
    m_runProgress = new QProgressBar;
    m_runProgress->setObjectName(QStringLiteral("runProgress"));
    m_runProgress->setRange(0, 1000);
    m_runProgress->setTextVisible(true);
    m_runProgress->setToolTip(
        tr("Steps trained of the run's epochs; the ETA comes from the measured step rate "
           "and evaluation time, once 5 steps and 2 s have been measured"));
    m_runProgress->hide();
    leftLayout->addWidget(m_runProgress);
    auto *historyBox = new QGroupBox(tr("History"));
    m_history = new RunHistoryView;
    auto *historyLayout = new QVBoxLayout(historyBox);
    historyLayout->addWidget(m_history);
    connect(m_history, &RunHistoryView::drawnChanged, this, &RunTab::setRunDrawn);
    connect(m_history, &RunHistoryView::openRequested, this, &RunTab::openRun);
    connect(m_history, &RunHistoryView::forgetRequested, this, &RunTab::forgetRun);
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

    m_charts = new RunTabCharts(m_log);
    connect(m_charts, &RunTabCharts::clearEarlierRunsClicked, this, &RunTab::clearOldRuns);
    auto *right = new QWidget;
    auto *rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    rightLayout->addWidget(m_syntheticBanner);
    rightLayout->addWidget(m_charts, 1);

    auto *split = new QSplitter(Qt::Horizontal);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split);
}

void RunTab::openJournal(const QString &stateDir)
{
    const QString path = stateDir + QStringLiteral("/journal.sqlite");
    core::Status history = m_writer.open(path);
    if (history)
        history = m_journal.open(path);
    if (!history)
        m_log->appendPlainText(tr("error: run history: %1").arg(history.error()));
}

void RunTab::readJournal(const std::function<void(const core::Journal &)> &read)
{
    if (!m_journal.isOpen())
        return;
    m_writer.flush(); // what was written for the run is read back
    read(m_journal);
}

void RunTab::appendLog(const QString &line)
{
    m_log->appendPlainText(line);
}

void RunTab::setStatus(const QString &text, bool error)
{
    Q_EMIT statusMessage(text, error, 0);
}

void RunTab::saveRunForm(QSettings &settings) const
{
    m_form->save(settings);
    settings.setValue(QStringLiteral("run/stepChart"), m_charts->stepChart());
}

void RunTab::restoreRunForm(const QSettings &settings)
{
    m_form->restore(settings);
    m_charts->setStepChart(settings.value(QStringLiteral("run/stepChart"), 0).toInt());
}

template <typename Work, typename Done> void RunTab::inBackground(Work work, Done done)
{
    // The client is shared so a call in flight keeps it alive if we reconnect.
    QThreadPool::globalInstance()->start([this, client = m_client, work, done]() mutable {
        auto result = work(*client);
        QMetaObject::invokeMethod(
            this, [done, result]() mutable { done(result); }, Qt::QueuedConnection);
    });
}

void RunTab::unmarkCurrentRun()
{
    if (m_record)
        m_charts->unmarkEpochs(m_record->runId());
}

QString RunTab::agentKey() const
{
    // A local agent gets a new port each time it starts, but keeps its state folder.
    return m_localAgent ? QStringLiteral("local") : (m_client ? m_client->endpoint() : QString());
}

QList<QPointF> RunTab::lossPoints() const
{
    return m_record ? m_charts->lossChart()->drawnPoints(RunLines { m_record->runId() }.loss())
                    : QList<QPointF> {};
}

QList<QPointF> RunTab::testAccuracyPoints() const
{
    return m_record ? m_charts->accuracyChart()->drawnPoints(RunLines { m_record->runId() }.testAccuracy())
                    : QList<QPointF> {};
}

void RunTab::plotEvent(const v1::RunEvent &event)
{
    plotRunEvent(m_charts->charts(), { m_record->runId() }, m_plotState, event);
}

void RunTab::connectToAgent()
{
    m_connected = false;
    m_form->setLaunchEnabled(false);
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
    } else if (const QString problem = core::AgentClient::checkEndpoint(endpoint).error();
               !problem.isEmpty()) {
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

void RunTab::refreshInventory()
{
    struct Result {
        core::Status call;
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
                m_agentLabel->setText(r.call.error());
                setStatus(r.call.error(), true);
                Q_EMIT connectedChanged(false);
                return;
            }
            applyInventory(r.inventory);
        });
}

void RunTab::applyInventory(const v1::DescribeResponse &inventory)
{
    m_connected = true;
    const QString where = m_localAgent ? tr("local agent") : m_client->endpoint();
    m_agentLabel->setText(tr("Connected to %1: %2, %3 cores, %4 GiB, %5 GPU(s)")
                              .arg(where, QString::fromStdString(inventory.hostname()))
                              .arg(inventory.cpu_cores())
                              .arg(double(inventory.memory_bytes()) / (1 << 30), 0, 'f', 1)
                              .arg(inventory.gpus_size()));
    const QString created = std::exchange(m_pendingDataset, QString()); // just created: select it once listed
    m_form->listDatasets(inventory, created);
    m_form->setLaunchEnabled(m_watch == nullptr);
    setStatus(created.isEmpty()
            ? tr("Connected")
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

void RunTab::createSyntheticDataset(int trainImages, int testImages)
{
    if (!m_client)
        return;
    // "synthetic" for the small set (as before), else named by its size: "synthetic-10k".
    const QString name = trainImages == 2000
        ? kSyntheticName
        : QStringLiteral("%1-%2k").arg(kSyntheticName).arg(trainImages / 1000);
    setStatus(tr("Generating SYNTHETIC data set '%1' (%L2 train / %L3 test images) on the agent…")
                  .arg(name)
                  .arg(trainImages)
                  .arg(testImages));
    m_form->setSyntheticEnabled(false);
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
        [this, name, trainImages, testImages](const core::Status &r) {
            m_form->setSyntheticEnabled(true);
            if (!r.ok()) {
                setStatus(tr("Synthetic set '%1' not created: %2").arg(name, r.error()), true);
                return;
            }
            m_log->appendPlainText(
                tr("Created SYNTHETIC data set '%1' (%L2 train / %L3 test images, shapes) on the agent")
                    .arg(name)
                    .arg(trainImages)
                    .arg(testImages));
            m_form->hideError();
            m_pendingDataset = name;
            refreshInventory();
        });
}

void RunTab::launchRun()
{
    if (!m_client || m_watch)
        return;
    core::RunRequest request = m_form->request();
    // A module's file: the run names it by its content, and the agent is sent it first.
    std::optional<core::ModelFile> modelFile;
    if (core::namesModelFile(request.model)) {
        auto file = core::readModelFile(core::modelFilePath(request.model));
        if (!file) {
            m_form->showError(file.error());
            return;
        }
        modelFile = *file;
        request.model = file->model();
    }
    if (const core::CheckStatus valid = request.check(); !valid) {
        m_form->showError(valid.error().join(QLatin1Char('\n')));
        return;
    }
    m_form->hideError();
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
    if (!request.model.isEmpty())
        entry.label
            += QStringLiteral(" · ") + (modelFile ? modelFile->name : core::modelShortName(request.model));
    entry.launchedUnixMs = QDateTime::currentMSecsSinceEpoch();
    entry.request = start;
    // Recorded before it is started: a console killed a moment later still knows the run.
    m_writer.recordSingleRun(entry); // a failure: the run will not be in the history (failed)
    m_runs.insert(runId, entry);
    m_history->setRun(entry, {});
    unmarkCurrentRun();
    m_record = std::make_unique<core::RunRecord>(runId);
    m_meter = core::ProgressMeter();
    m_plotState = {};
    m_charts->addRun(runId, entry.label);
    m_history->setCurrent(runId);
    m_log->clear();
    m_syntheticBanner->hide();
    m_runLabel->setText(tr("%1: starting…").arg(runId));
    setRunning(true);
    m_launching = true;
    inBackground(
        [start, modelFile](core::AgentClient &client) {
            if (modelFile) {
                v1::StoredModel stored;
                if (const core::Status sent = core::sendModel(&client, *modelFile, &stored); !sent.ok())
                    return core::Status::failure(
                        sent.code(), QStringLiteral("%1: %2").arg(modelFile->name, sent.error()));
            }
            v1::StartWorkersResponse response;
            return client.startWorkers(start, &response);
        },
        [this, runId](const core::Status &r) {
            m_launching = false;
            if (!r.ok()) {
                m_form->showError(r.error());
                m_runLabel->setText(tr("%1 was not started.").arg(runId));
                setRunning(false);
                // Never run, so not history: the form says why.
                m_writer.forgetSingleRun(runId); // at worst the history lists it, never started
                m_runs.remove(runId);
                m_history->removeRun(runId);
                return;
            }
            if (m_record && m_record->runId() == runId) // nothing else can be opened meanwhile
                followCurrentRun(1);
        });
}

void RunTab::followCurrentRun(qint64 fromSeq)
{
    if (!m_record || m_watch || !m_client)
        return;
    const QString runId = m_record->runId();
    m_watch = std::make_unique<core::RunWatch>(m_client.get(), runId);
    connect(m_watch.get(), &core::RunWatch::eventsArrived, this, &RunTab::drainEvents);
    connect(m_watch.get(), &core::RunWatch::unreachable, this, [this](const QString &error, qint64 since) {
        setStatus(tr("The agent has not answered since %1: %2 (still trying)")
                      .arg(QDateTime::fromMSecsSinceEpoch(since).toString(QStringLiteral("HH:mm:ss")), error),
            true);
    });
    connect(m_watch.get(), &core::RunWatch::reachable, this,
        [this] { Q_EMIT statusMessage(tr("The agent answers again"), false, 10'000); });
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

void RunTab::stopRun()
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
        [this](const core::Status &r) {
            if (!r.ok())
                setStatus(r.error(), true);
        });
}

void RunTab::setRunning(bool running)
{
    m_form->setLaunchEnabled(!running && m_connected);
    m_form->setStopEnabled(running);
}

void RunTab::drainEvents()
{
    if (!m_watch || !m_record)
        return;
    const std::vector<v1::RunEvent> events = m_watch->takeEvents();
    const QString runId = m_record->runId();
    if (m_runs.contains(runId))
        m_writer.appendRunEvents(runId, m_runs[runId].agent, events);
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
        m_writer.setSingleRunState(runId, entry.state, entry.endedUnixMs);
    }
    if (measured || m_record->state() != before)
        updateHistoryRow(runId);
    m_dirty = true;
    if (!m_refreshTimer.isActive())
        m_refreshTimer.start();
}

void RunTab::applyEvent(const v1::RunEvent &event)
{
    const bool repeated = event.seq() <= m_record->lastSeq(); // counted by the record, not drawn
    m_record->apply(event);
    if (!repeated) {
        plotEvent(event);
        m_meter.apply(event);
    }
    if (event.has_log())
        m_log->appendPlainText(
            QStringLiteral("[rank %1] %2").arg(event.rank()).arg(QString::fromStdString(event.log().text())));
    else if (event.has_state())
        m_log->appendPlainText(QStringLiteral("%1: %2").arg(core::RunRecord::stateName(event.state().state()),
            QString::fromStdString(event.state().message())));
    else if (event.has_stall()) {
        // Rank 0 made no progress for the run's stall_seconds (or does again).
        const QString text = QString::fromStdString(event.stall().message());
        m_log->appendPlainText(text);
        Q_EMIT statusMessage(event.stall().stalled() ? tr("Run %1 %2").arg(m_record->runId(), text) : text,
            false, event.stall().stalled() ? 0 : 10'000);
    }
}

void RunTab::refreshRunSummary()
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
    m_runProgress->setFormat(progress.done
            ? tr("trained: epoch %1/%1").arg(progress.epochs)
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
