#include "journal.h"

#include "journal_codec.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>

#include <sqlite3.h>

namespace scalelab::core {
namespace {

// A prepared statement that finalizes itself.
class Statement {
public:
    Statement(sqlite3 *db, const char *sql) { m_rc = sqlite3_prepare_v2(db, sql, -1, &m_stmt, nullptr); }
    ~Statement() { sqlite3_finalize(m_stmt); }
    Statement(const Statement &) = delete;
    Statement &operator=(const Statement &) = delete;

    bool ok() const { return m_rc == SQLITE_OK; }
    void bind(int i, const QString &s)
    {
        const QByteArray utf8 = s.toUtf8();
        sqlite3_bind_text(m_stmt, i, utf8.constData(), utf8.size(), SQLITE_TRANSIENT);
    }
    void bind(int i, qint64 v) { sqlite3_bind_int64(m_stmt, i, v); }
    void bindBlob(int i, const std::string &b)
    {
        sqlite3_bind_blob(m_stmt, i, b.data(), int(b.size()), SQLITE_TRANSIENT);
    }
    int step() { return sqlite3_step(m_stmt); }
    bool isNull(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
    void reset() { sqlite3_reset(m_stmt); }
    qint64 int64(int col) const { return sqlite3_column_int64(m_stmt, col); }
    QString text(int col) const
    {
        return QString::fromUtf8(reinterpret_cast<const char *>(sqlite3_column_text(m_stmt, col)),
            sqlite3_column_bytes(m_stmt, col));
    }
    std::string blob(int col) const
    {
        return std::string(
            static_cast<const char *>(sqlite3_column_blob(m_stmt, col)), sqlite3_column_bytes(m_stmt, col));
    }

private:
    sqlite3_stmt *m_stmt = nullptr;
    int m_rc = SQLITE_ERROR;
};

constexpr const char *kSchema = R"sql(
CREATE TABLE IF NOT EXISTS study_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  study_id TEXT NOT NULL,
  unix_ms INTEGER NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL DEFAULT '',
  body BLOB
);
CREATE INDEX IF NOT EXISTS study_events_by_study ON study_events (study_id, id);
CREATE TABLE IF NOT EXISTS run_events (
  study_id TEXT NOT NULL,
  run_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  agent TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event BLOB NOT NULL,
  PRIMARY KEY (run_id, attempt, agent, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS single_runs (
  run_id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  label TEXT NOT NULL,
  launched_unix_ms INTEGER NOT NULL,
  request BLOB NOT NULL,
  state INTEGER NOT NULL,
  ended_unix_ms INTEGER NOT NULL
);
)sql";

} // namespace

Journal::~Journal()
{
    close();
}

Status Journal::open(const QString &path)
{
    close();
    const QFileInfo info(path);
    if (!QDir().mkpath(info.absolutePath()))
        return Status::failure(
            QStringLiteral("cannot create the folder %1 for the study journal").arg(info.absolutePath()));
    if (sqlite3_open_v2(
            QFile::encodeName(path).constData(), &m_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr)
        != SQLITE_OK) {
        const QString why = QStringLiteral("cannot open the study journal %1: %2").arg(path, lastError());
        close();
        return Status::failure(why);
    }
    m_path = path;
    sqlite3_busy_timeout(m_db, 10'000); // another scalelab process may be writing
    // WAL lets readers (a second console, `study list`) run beside the writer;
    // synchronous=FULL makes every commit durable, not just consistent.
    for (const char *sql : { "PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;", kSchema }) {
        if (const Status done = exec(sql); !done) {
            close();
            return Status::failure(
                QStringLiteral("cannot use %1 as a study journal: %2").arg(path, done.error()));
        }
    }
    if (const Status migrated = addEventBodies(); !migrated) {
        close();
        return Status::failure(
            QStringLiteral("cannot use %1 as a study journal: %2").arg(path, migrated.error()));
    }
    return Status::success();
}

// Journals written before the typed events have no `body` column: it is added, and their
// rows (no body) stay JSON, read as such (journal_codec.h).
Status Journal::addEventBodies()
{
    Statement columns(m_db, "SELECT 1 FROM pragma_table_info('study_events') WHERE name = 'body'");
    if (!columns.ok())
        return Status::failure(lastError());
    if (columns.step() == SQLITE_ROW)
        return Status::success();
    return exec("ALTER TABLE study_events ADD COLUMN body BLOB");
}

void Journal::close()
{
    if (m_db)
        sqlite3_close_v2(m_db);
    m_db = nullptr;
}

QString Journal::lastError() const
{
    return m_db ? QString::fromUtf8(sqlite3_errmsg(m_db)) : QStringLiteral("journal not open");
}

Status Journal::exec(const char *sql)
{
    char *message = nullptr;
    if (sqlite3_exec(m_db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
        const QString why = QString::fromUtf8(message ? message : "unknown SQLite error");
        sqlite3_free(message);
        return Status::failure(why);
    }
    return Status::success();
}

void Journal::rollback()
{
    (void)exec("ROLLBACK"); // the statement's own error is the one to report
}

Result<qint64> Journal::append(const QString &studyId, const v1::StudyEvent &event)
{
    const QString type = eventType(event);
    if (type.isEmpty())
        return Status::failure(QStringLiteral("cannot record an event with no type in %1").arg(m_path));
    // `type` is kept beside the event so that the journal can be queried (and read by a person
    // with sqlite3) without decoding it; `payload` is where earlier releases kept JSON.
    Statement st(
        m_db, "INSERT INTO study_events (study_id, unix_ms, type, payload, body) VALUES (?, ?, ?, '', ?)");
    if (!st.ok())
        return Status::failure(
            QStringLiteral("cannot record %1 in the study journal %2: %3").arg(type, m_path, lastError()));
    st.bind(1, studyId);
    st.bind(2, QDateTime::currentMSecsSinceEpoch());
    st.bind(3, type);
    st.bindBlob(4, encodeEvent(event));
    if (st.step() != SQLITE_DONE)
        return Status::failure(
            QStringLiteral("cannot record %1 in the study journal %2: %3").arg(type, m_path, lastError()));
    return qint64(sqlite3_last_insert_rowid(m_db));
}

QList<JournalEvent> Journal::events(const QString &studyId, qint64 afterId) const
{
    QList<JournalEvent> out;
    Statement st(m_db,
        "SELECT id, unix_ms, type, payload, body FROM study_events WHERE study_id = ? AND id > ? ORDER BY "
        "id");
    st.bind(1, studyId);
    st.bind(2, afterId);
    while (st.step() == SQLITE_ROW) {
        JournalEvent e;
        e.id = st.int64(0);
        e.studyId = studyId;
        e.unixMs = st.int64(1);
        // A row with no body was written by a release before the typed events: JSON.
        auto decoded = st.isNull(4)
            ? decodeLegacyEvent(st.text(2), QJsonDocument::fromJson(st.text(3).toUtf8()).object())
            : decodeEvent(st.blob(4));
        if (decoded)
            e.event = std::move(decoded).value();
        else
            e.unreadable = QStringLiteral("event %1 (%2): %3").arg(e.id).arg(st.text(2), decoded.error());
        out << e;
    }
    return out;
}

QStringList Journal::studyIds() const
{
    QStringList ids;
    Statement st(m_db, "SELECT study_id FROM study_events WHERE type = 'study_created' ORDER BY id");
    while (st.step() == SQLITE_ROW)
        ids << st.text(0);
    return ids;
}

bool Journal::hasStudy(const QString &studyId) const
{
    Statement st(m_db, "SELECT 1 FROM study_events WHERE study_id = ? AND type = 'study_created'");
    st.bind(1, studyId);
    return st.step() == SQLITE_ROW;
}

Status Journal::appendRunEvents(const QString &studyId, const QString &runId, int attempt,
    const QString &agent, const std::vector<v1::RunEvent> &events)
{
    if (events.empty())
        return Status::success();
    if (Status begun = exec("BEGIN IMMEDIATE"); !begun)
        return begun;
    {
        Statement st(m_db,
            "INSERT OR IGNORE INTO run_events (study_id, run_id, attempt, agent, seq, event) VALUES (?, ?, "
            "?, ?, ?, ?)");
        for (const auto &event : events) {
            if (event.seq() <= 0)
                continue; // heartbeats carry no state
            st.bind(1, studyId);
            st.bind(2, runId);
            st.bind(3, qint64(attempt));
            st.bind(4, agent);
            st.bind(5, qint64(event.seq()));
            st.bindBlob(6, event.SerializeAsString());
            if (st.step() != SQLITE_DONE) {
                const QString why = QStringLiteral("cannot store events of run %1 in %2: %3")
                                        .arg(runId, m_path, lastError());
                rollback();
                return Status::failure(why);
            }
            st.reset();
        }
    }
    return exec("COMMIT");
}

qint64 Journal::lastRunEventSeq(const QString &runId, int attempt, const QString &agent) const
{
    Statement st(m_db, "SELECT MAX(seq) FROM run_events WHERE run_id = ? AND attempt = ? AND agent = ?");
    st.bind(1, runId);
    st.bind(2, qint64(attempt));
    st.bind(3, agent);
    return st.step() == SQLITE_ROW ? st.int64(0) : 0;
}

std::vector<v1::RunEvent> Journal::runEvents(
    const QString &runId, int attempt, const QString &agent, qint64 afterSeq) const
{
    std::vector<v1::RunEvent> out;
    Statement st(m_db,
        "SELECT event FROM run_events WHERE run_id = ? AND attempt = ? AND agent = ? AND seq > ? ORDER BY "
        "seq");
    st.bind(1, runId);
    st.bind(2, qint64(attempt));
    st.bind(3, agent);
    st.bind(4, afterSeq);
    while (st.step() == SQLITE_ROW) {
        v1::RunEvent e;
        if (e.ParseFromString(st.blob(0)))
            out.push_back(std::move(e));
    }
    return out;
}

Status Journal::recordSingleRun(const SingleRunEntry &entry)
{
    Statement st(m_db,
        "INSERT INTO single_runs (run_id, agent, label, launched_unix_ms, request, state, ended_unix_ms) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)");
    st.bind(1, entry.runId);
    st.bind(2, entry.agent);
    st.bind(3, entry.label);
    st.bind(4, entry.launchedUnixMs);
    st.bindBlob(5, entry.request.SerializeAsString());
    st.bind(6, qint64(entry.state));
    st.bind(7, entry.endedUnixMs);
    if (!st.ok() || st.step() != SQLITE_DONE)
        return Status::failure(
            QStringLiteral("cannot record run %1 in %2: %3").arg(entry.runId, m_path, lastError()));
    return Status::success();
}

Status Journal::setSingleRunState(const QString &runId, v1::RunState state, qint64 endedUnixMs)
{
    Statement st(m_db, "UPDATE single_runs SET state = ?, ended_unix_ms = ? WHERE run_id = ?");
    st.bind(1, qint64(state));
    st.bind(2, endedUnixMs);
    st.bind(3, runId);
    if (!st.ok() || st.step() != SQLITE_DONE)
        return Status::failure(
            QStringLiteral("cannot record the state of run %1 in %2: %3").arg(runId, m_path, lastError()));
    return Status::success();
}

QList<SingleRunEntry> Journal::singleRuns() const
{
    QList<SingleRunEntry> out;
    Statement st(m_db,
        "SELECT run_id, agent, label, launched_unix_ms, request, state, ended_unix_ms FROM single_runs "
        "ORDER BY launched_unix_ms, run_id");
    while (st.step() == SQLITE_ROW) {
        SingleRunEntry e;
        e.runId = st.text(0);
        e.agent = st.text(1);
        e.label = st.text(2);
        e.launchedUnixMs = st.int64(3);
        e.request.ParseFromString(st.blob(4));
        const qint64 state = st.int64(5);
        e.state = v1::RunState_IsValid(int(state)) ? v1::RunState(state) : v1::PENDING;
        e.endedUnixMs = st.int64(6);
        out << e;
    }
    return out;
}

Status Journal::forgetSingleRun(const QString &runId)
{
    if (Status begun = exec("BEGIN IMMEDIATE"); !begun)
        return begun;
    for (const char *sql : { "DELETE FROM run_events WHERE study_id = '' AND run_id = ?",
             "DELETE FROM single_runs WHERE run_id = ?" }) {
        Statement st(m_db, sql);
        st.bind(1, runId);
        if (!st.ok() || st.step() != SQLITE_DONE) {
            const QString why
                = QStringLiteral("cannot remove run %1 from %2: %3").arg(runId, m_path, lastError());
            rollback();
            return Status::failure(why);
        }
    }
    return exec("COMMIT");
}

} // namespace scalelab::core
