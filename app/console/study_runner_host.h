// Where the console's StudyRunner works: a thread of its own (its gRPC calls block), with
// at most one runner on it, driving the open study to its end. The host makes the runner,
// moves it to that thread, hands it calls there (drive, new agents) as queued calls, and
// deletes it there when the study panel opens another study or closes. The runner's
// signals arrive on the GUI thread and are passed on by the host's own; its run events
// become each run's live progress (the attempt it measures, and how far), kept here.
//
// The runner writes through a connection to the journal of its own, opened by start() on
// the file of the journal the host is given and used on the runner's thread alone: a
// connection is one thread's (journal.h), and the GUI thread's reads never wait behind
// the runner's commits (synchronous=FULL) on a shared one.
//
// StudyView owns the host (a member, made after and destroyed before the journal it is
// given). Every member function: GUI thread only.
#pragma once

#include "agent_endpoint.h"
#include "journal.h"
#include "progress_meter.h"

#include <QObject>
#include <QPointer>
#include <QThread>

#include <map>
#include <optional>

namespace scalelab::core {
class StudyRunner;
} // namespace scalelab::core

namespace scalelab::app {

class StudyRunnerHost : public QObject {
    Q_OBJECT
public:
    // The runner writes the study into the file `journal` has open; it must outlive the host.
    explicit StudyRunnerHost(core::Journal *journal, QObject *parent = nullptr);
    ~StudyRunnerHost() override; // shutDown()

    // A runner on the thread, with `agents`, driving `studyId` to its end; when its
    // connection to the journal cannot be opened, `message` says why and there is none.
    // Stop the one before first.
    void start(const QString &studyId, const QList<core::AgentEndpoint> &agents);
    // Deletes the runner on its thread (it joins its stream threads); blocks until done.
    void stop();
    // stop(), then ends the thread and waits for it.
    void shutDown();
    bool hasRunner() const { return !m_runner.isNull(); }
    // A reconnected agent may have a new address: the runner is told.
    void setAgents(const QList<core::AgentEndpoint> &agents);

    // The run's live progress, from its latest attempt's events; none before any came.
    std::optional<core::ProgressView> progress(const QString &runId) const;
    void clearProgress();

Q_SIGNALS:
    void changed(); // the study's state, or a run's progress, changed: time to redraw
    void message(const QString &line); // what happens, or why the study cannot be driven
    void fatal(const QString &error); // the journal cannot be written
    void finished(const QString &studyState);

private:
    core::Journal *m_journal; // StudyView's: which file
    core::Journal m_runnerJournal; // the runner's, used on its thread while it exists
    QThread m_thread;
    QPointer<core::StudyRunner> m_runner;
    // Live progress per run, from the runner's events: the attempt it measures, and how far.
    std::map<QString, std::pair<int, core::ProgressMeter>> m_progress;
};

} // namespace scalelab::app
