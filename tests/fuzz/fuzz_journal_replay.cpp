// Feeds: a study's journal as rows read back from journal.sqlite, one per line:
// "<type>\t<unix_ms>\t<payload JSON>", as journals written before the typed events hold
// them. Why: a console or `study watch` rebuilds every study by replaying these events
// (StudyState::replay), including journals written by older versions or cut short by a
// crash; whatever is there, the codec that reads them (decodeLegacyEvent), the replay, the
// snapshot built from it and the reports made from that must not crash.
// Checks: each event that decodes, appended to a real journal and read back
// (Journal::append, Journal::events), is the event that was appended; replaying any prefix
// event by event gives the state replay() gives; the study's state is one of
// StudyState::state()'s words.
#include "fuzz_support.h"

#include "journal.h"
#include "journal_codec.h"
#include "report.h"
#include "study_results.h"
#include "study_state.h"

#include <QJsonDocument>
#include <QList>

using namespace scalelab;

namespace {

// A journal on the scratch folder, started afresh every 1000 inputs so it stays small.
// buildSnapshot looks up each attempt's run events in it (there are none).
core::Journal &journal()
{
    static core::Journal journal;
    static int uses = 0;
    if (uses++ % 1000 == 0) {
        journal.close();
        const auto path = fuzz::scratchRoot() / "journal.sqlite";
        for (const char *suffix : { "", "-wal", "-shm" })
            std::filesystem::remove(path.string() + suffix);
        if (const core::Status opened = journal.open(QString::fromStdString(path.string())); !opened)
            fuzz::fail("cannot open a journal: " + opened.error().toStdString());
    }
    return journal;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    const QByteArray input(reinterpret_cast<const char *>(data), static_cast<qsizetype>(size));
    QList<core::JournalEvent> events;
    for (const QByteArray &line : input.split('\n')) {
        const QList<QByteArray> fields = line.split('\t');
        if (fields.size() < 3)
            continue;
        core::JournalEvent e;
        e.id = events.size() + 1;
        e.studyId = QStringLiteral("st-fuzz");
        e.unixMs = fields[1].toLongLong();
        // As Journal::events() reads a row an earlier release wrote.
        auto decoded = core::decodeLegacyEvent(
            QString::fromUtf8(fields[0]), QJsonDocument::fromJson(fields.mid(2).join('\t')).object());
        if (decoded)
            e.event = std::move(decoded).value();
        else
            e.unreadable = decoded.error();
        events << e;
    }
    if (events.size() > 200)
        return 0;

    // What the runner appends is what a console reads back.
    static int studies = 0;
    const QString studyId = QStringLiteral("st-fuzz-%1").arg(++studies);
    core::Journal &stored = journal();
    QList<const core::JournalEvent *> typed; // those with a type this release knows
    for (const auto &e : events) {
        if (e.event.event_case() == v1::StudyEvent::EVENT_NOT_SET)
            continue;
        typed << &e;
        const auto appended = stored.append(studyId, e.event);
        fuzz::check(
            appended.ok() && appended.value() > 0, "Journal::append: " + appended.error().toStdString());
    }
    const QList<core::JournalEvent> readBack = stored.events(studyId);
    fuzz::check(readBack.size() == typed.size(), "Journal::events lost or added events");
    for (qsizetype i = 0; i < typed.size(); ++i)
        fuzz::check(core::encodeEvent(readBack[i].event) == core::encodeEvent(typed[i]->event),
            "Journal: event " + std::to_string(i + 1) + " (" + core::eventType(typed[i]->event).toStdString()
                + ") reads back differently");

    const core::StudyState state = core::StudyState::replay(events);
    core::StudyState stepwise;
    for (const auto &e : events)
        stepwise.apply(e);
    fuzz::check(stepwise.runs().size() == state.runs().size() && stepwise.state() == state.state(),
        "replaying event by event differs from replay()");
    static const QStringList states { QStringLiteral("RUNNING"), QStringLiteral("CANCELLING"),
        QStringLiteral("SUCCEEDED"), QStringLiteral("FAILED"), QStringLiteral("CANCELLED") };
    fuzz::check(states.contains(state.state()) || state.ended(), // an ended study's word is the journal's
        "study state '" + state.state().toStdString() + "' is none of StudyState::state()'s words");

    (void)state.allRunsTerminal();
    (void)state.waitsForLearningRate();
    for (const auto &run : state.runs()) {
        (void)state.shouldRetry(run);
        (void)core::stallText(run, 1'800'000'000'000);
        (void)core::phaseName(run.phase);
    }
    const core::StudySnapshot snapshot = core::buildSnapshot(state, stored);
    (void)core::computeStudyResults(snapshot);
    (void)core::reportJson(snapshot);
    (void)core::reportRunsCsv(snapshot);
    (void)core::reportEpochsCsv(snapshot);
    return 0;
}
