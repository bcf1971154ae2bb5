// Journal events for tests that write a study's journal by hand: typed, as the runner writes
// them (journal_events.h), or as JSON, as journals written before the typed events hold them
// (read through the same codec a journal of an earlier release is).
#pragma once

#include "journal.h"
#include "journal_codec.h"
#include "journal_events.h"

#include <QJsonObject>
#include <QString>
#include <QtGlobal>

namespace scalelab::core::testing {

inline v1::StudyEvent testEvent(const QString &type, const QJsonObject &legacyPayload)
{
    auto event = decodeLegacyEvent(type, legacyPayload);
    if (!event || eventType(event.value()) != type)
        qFatal("test event %s does not decode: %s", qPrintable(type), qPrintable(event.error()));
    return std::move(event).value();
}

inline v1::StudyEvent testEvent(const QString &type, const v1::StudyEvent &event)
{
    if (eventType(event) != type)
        qFatal("test event %s is a %s", qPrintable(type), qPrintable(eventType(event)));
    return event;
}

// A journal event with its place in the journal, as Journal::events() returns it.
template <class Payload>
JournalEvent journalEvent(
    qint64 id, const QString &studyId, qint64 unixMs, const QString &type, const Payload &payload)
{
    JournalEvent e;
    e.id = id;
    e.studyId = studyId;
    e.unixMs = unixMs;
    e.event = testEvent(type, payload);
    return e;
}

} // namespace scalelab::core::testing
