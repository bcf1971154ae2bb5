#include "study_runner_host.h"

#include "study_runner.h"

namespace scalelab::app {

using namespace scalelab::core;

StudyRunnerHost::StudyRunnerHost(Journal *journal, QObject *parent)
    : QObject(parent)
    , m_journal(journal)
{
    qRegisterMetaType<scalelab::core::JournalEvent>();
    qRegisterMetaType<std::vector<scalelab::v1::RunEvent>>();
    m_thread.setObjectName(QStringLiteral("study-runner"));
    m_thread.start();
}

StudyRunnerHost::~StudyRunnerHost()
{
    shutDown();
}

void StudyRunnerHost::start(const QString &studyId, const QList<AgentEndpoint> &agents)
{
    if (const Status opened = m_runnerJournal.open(m_journal->path()); !opened) {
        Q_EMIT message(opened.error());
        return;
    }
    auto *runner = new StudyRunner(&m_runnerJournal);
    runner->setAgents(agents);
    runner->moveToThread(&m_thread);
    m_runner = runner;
    connect(runner, &StudyRunner::stateChanged, this, &StudyRunnerHost::changed);
    connect(runner, &StudyRunner::runEvents, this,
        [this](const QString &runId, int attempt, const std::vector<v1::RunEvent> &events) {
            auto &[measured, meter] = m_progress[runId];
            if (measured != attempt) { // a new attempt measures afresh
                measured = attempt;
                meter = core::ProgressMeter();
            }
            for (const auto &event : events)
                if (event.rank() <= 0) // rank 0 and the run's own; every rank says "started"
                    meter.apply(event);
            Q_EMIT changed();
        });
    connect(runner, &StudyRunner::message, this, &StudyRunnerHost::message);
    connect(runner, &StudyRunner::fatal, this, &StudyRunnerHost::fatal);
    connect(runner, &StudyRunner::finished, this, &StudyRunnerHost::finished);
    QMetaObject::invokeMethod(runner, [this, runner, studyId] {
        if (const Status driven = runner->drive(studyId); !driven)
            QMetaObject::invokeMethod(this, [this, e = driven.error()] { Q_EMIT message(e); });
    });
}

void StudyRunnerHost::stop()
{
    if (!m_runner)
        return;
    // The runner lives on its thread: delete it there (it joins its stream threads).
    StudyRunner *runner = m_runner;
    QMetaObject::invokeMethod(
        runner, [runner] { delete runner; }, Qt::BlockingQueuedConnection);
    m_runner = nullptr;
    m_runnerJournal.close(); // its thread is done with it
}

void StudyRunnerHost::shutDown()
{
    stop();
    m_thread.quit();
    m_thread.wait();
}

void StudyRunnerHost::setAgents(const QList<AgentEndpoint> &agents)
{
    if (StudyRunner *runner = m_runner)
        QMetaObject::invokeMethod(runner, [runner, agents] { runner->setAgents(agents); });
}

std::optional<ProgressView> StudyRunnerHost::progress(const QString &runId) const
{
    const auto live = m_progress.find(runId);
    if (live == m_progress.end())
        return std::nullopt;
    return live->second.second.view();
}

void StudyRunnerHost::clearProgress()
{
    m_progress.clear();
}

} // namespace scalelab::app
