// The one way study journal events are written and read: typed messages
// (proto/scalelab/v1/journal.proto), stored binary, and the JSON objects journals written
// before those messages hold, read into the same messages.
#pragma once

#include "core_status.h"
#include "scalelab/v1/journal.pb.h"

#include <QJsonObject>
#include <QString>

#include <string>

namespace scalelab::core {

// The event's type as the journal names it ("attempt_starting": its field name in
// StudyEvent); empty when none is set.
QString eventType(const v1::StudyEvent &event);

// The stored form of an event (deterministic: equal events, equal bytes), and back. An event whose type this
// release does not know (written by a later one) decodes to one with no event set.
std::string encodeEvent(const v1::StudyEvent &event);
[[nodiscard]] Result<v1::StudyEvent> decodeEvent(const std::string &stored);

// An event as a journal written before the typed events stored it: its type and a JSON
// object with the fields' JSON names (lowerCamelCase), a few in shapes of their own (the
// plan as JSON text, the range test's points as [lr, loss] pairs, outcomes by their RunState
// names, null for a value not measured). A type this release does not know gives an event
// with none set; a payload that does not fit its type, an error that says where.
[[nodiscard]] Result<v1::StudyEvent> decodeLegacyEvent(const QString &type, const QJsonObject &payload);

} // namespace scalelab::core
