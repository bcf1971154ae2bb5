// The events of one run attempt: gap-free sequence numbers from 1, appended to
// runs/<run_id>/<attempt>/events.log (length-delimited RunEvent protobufs). Thread-safe:
// one appender (the run's supervisor) and any number of readers. The file is fsync'ed at
// epoch boundaries and on terminal events, so what a console saw acknowledged survives a
// power loss. Opening an existing log (after an agent restart) indexes its records and
// cuts a torn last record, so numbering goes on without a gap.
//
// Memory stays flat however long the run: readers are served from the file (an index of
// record offsets is all that is kept per event), except events a failed write (a full
// disk) left in memory. Those are written, in order, by the next append that succeeds, so
// the file never has a gap or a torn record in the middle; the first failure is said as a
// log event, so watchers hear of it.
#pragma once

#include "scalelab/v1/agent.pb.h"
#include "status.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

namespace scalelab::agent {

class RunEventLog {
public:
    // Opens (creating) the log file and indexes the records already in it. Check opened()
    // afterwards.
    explicit RunEventLog(std::filesystem::path file);
    ~RunEventLog();
    RunEventLog(const RunEventLog &) = delete;
    RunEventLog &operator=(const RunEventLog &) = delete;

    // Success when the log was opened and its torn end (if any) cut, else why not (the file
    // and the OS error).
    const common::Status &opened() const { return m_opened; }

    // Stamps seq and unix_ms, stores and wakes followers. Returns the sequence number.
    std::int64_t append(v1::RunEvent event, bool durable = false);

    // No more events will come (the run reached a terminal state).
    void close();

    std::int64_t lastSeq() const;
    bool closed() const;
    // Records dropped when the log was opened (a torn tail after a crash).
    std::size_t droppedOnOpen() const { return m_dropped; }

    // Copies events with seq >= fromSeq into `out` (at most `max`). Waits up to
    // `timeout` when there are none yet and the log is open. Returns false when the
    // log is closed and fromSeq is past its end (the reader is done).
    bool read(std::int64_t fromSeq, std::size_t max, std::chrono::milliseconds timeout,
        std::vector<v1::RunEvent> *out);

private:
    // Writes m_pending to the end of the file; on failure cuts what was written and
    // keeps them. Caller holds m_mutex.
    bool flushPending(bool durable);
    std::int64_t persistedCount() const { return std::int64_t(m_offsets.size()); }

    std::filesystem::path m_file;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<off_t> m_offsets; // m_offsets[seq - 1]: where record seq starts in the file
    off_t m_fileSize = 0; // end of the last whole record
    std::deque<v1::RunEvent> m_pending; // seq persistedCount()+1 ..., not on disk yet
    bool m_closed = false;
    int m_fd = -1;
    common::Status m_opened;
    std::string m_writeError; // why the last write failed ("" = every event is on disk)
    std::size_t m_dropped = 0;
};

} // namespace scalelab::agent
