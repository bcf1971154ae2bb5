// The study journal: an append-only, event-sourced record of every study's state
// changes in SQLite (WAL, synchronous=FULL, so a committed event survives power loss),
// plus the raw run events received from agents, keyed by (run, attempt, agent, seq)
// so a restarted console resumes each stream exactly where it stopped.
// Threads: one Journal per thread (the SQLite handle is not shared); several processes
// may open the same file (SQLite locks). Returned lists are copies, valid after close().
#pragma once

#include "core_status.h"
#include "scalelab/v1/agent.pb.h"
#include "scalelab/v1/journal.pb.h"

#include <QJsonObject>
#include <QList>
#include <QString>
#include <QStringList>

#include <vector>

struct sqlite3;

namespace scalelab::core {

// A run launched on its own (the console's Run tab), kept so that it is listed, reopened
// and compared after a restart: what was asked, where, and the last state recorded. Its
// events are stored as a study run's are (runEvents(runId, 1, agent)).
struct SingleRunEntry {
    QString runId;
    QString agent; // HOST:PORT it was started on
    QString label; // what it trains, in words: "2 workers · b64 · syn"
    qint64 launchedUnixMs = 0;
    v1::StartWorkersRequest request;
    v1::RunState state = v1::PENDING; // as last recorded; PENDING until the agent says more
    qint64 endedUnixMs = 0; // 0 while not terminal
};

// One state change of a study (proto/scalelab/v1/journal.proto).
struct JournalEvent {
    qint64 id = 0; // global order of the journal
    QString studyId;
    qint64 unixMs = 0;
    // None set: a type this release does not know (written by a later one), or unreadable.
    v1::StudyEvent event;
    QString unreadable; // why a stored event could not be read; empty when it was
};

class Journal {
public:
    Journal() = default;
    ~Journal();
    Journal(const Journal &) = delete;
    Journal &operator=(const Journal &) = delete;

    // Opens (creating if needed) the journal file, or says why it cannot.
    Status open(const QString &path);
    void close();
    bool isOpen() const { return m_db != nullptr; }
    QString path() const { return m_path; }

    // Appends one state change durably (committed before this returns): its id (> 0).
    [[nodiscard]] Result<qint64> append(const QString &studyId, const v1::StudyEvent &event);
    QList<JournalEvent> events(const QString &studyId, qint64 afterId = 0) const;
    // Every study, oldest first.
    QStringList studyIds() const;
    bool hasStudy(const QString &studyId) const;

    // Stores a batch of events of one run attempt as received from `agent`, in one
    // transaction; events already stored (same seq) are ignored.
    Status appendRunEvents(const QString &studyId, const QString &runId, int attempt, const QString &agent,
        const std::vector<v1::RunEvent> &events);
    qint64 lastRunEventSeq(const QString &runId, int attempt, const QString &agent) const;
    // The stored events of one attempt from one agent, in seq order; with afterSeq only the
    // newer ones (a view that polls reads each event once).
    std::vector<v1::RunEvent> runEvents(
        const QString &runId, int attempt, const QString &agent, qint64 afterSeq = 0) const;

    // Single runs (the Run tab's history). Recording a run id twice is refused.
    Status recordSingleRun(const SingleRunEntry &entry);
    Status setSingleRunState(const QString &runId, v1::RunState state, qint64 endedUnixMs);
    // Every single run recorded, oldest first.
    QList<SingleRunEntry> singleRuns() const;
    // Removes the run and its stored events from the history (not from its agent).
    Status forgetSingleRun(const QString &runId);

    QString lastError() const;

private:
    Status exec(const char *sql);
    Status addEventBodies();
    void rollback();

    sqlite3 *m_db = nullptr;
    QString m_path;
};

} // namespace scalelab::core
