#include "journal_codec.h"

#include "study_plan.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <limits>

namespace scalelab::core {
namespace {

namespace pb = google::protobuf;

const pb::OneofDescriptor &eventOneof()
{
    return *v1::StudyEvent::descriptor()->FindOneofByName("event");
}

// A JSON number that a field of integers in [low, high] holds.
bool integral(const QJsonValue &v, double low, double high)
{
    const double d = v.toDouble(std::nan(""));
    return v.isDouble() && std::isfinite(d) && d == std::floor(d) && d >= low && d <= high;
}

// Whether protobuf's JSON parser reads `v` as a value of field `f` (one element of it when
// repeated), as the earlier releases' reader took it: QJsonValue::toInt() and its kin.
bool fits(const pb::FieldDescriptor &f, const QJsonValue &v)
{
    using F = pb::FieldDescriptor;
    switch (f.cpp_type()) {
    case F::CPPTYPE_INT32:
        return integral(v, std::numeric_limits<qint32>::min(), std::numeric_limits<qint32>::max());
    case F::CPPTYPE_UINT32:
        return integral(v, 0, std::numeric_limits<quint32>::max());
    case F::CPPTYPE_INT64: // within ±2^63, as a double can say
        return integral(v, -9.2e18, 9.2e18);
    case F::CPPTYPE_UINT64:
        return integral(v, 0, 1.8e19);
    case F::CPPTYPE_DOUBLE:
    case F::CPPTYPE_FLOAT:
        return v.isDouble() || v.toString() == QLatin1String("NaN");
    case F::CPPTYPE_BOOL:
        return v.isBool();
    case F::CPPTYPE_STRING:
        return v.isString();
    case F::CPPTYPE_ENUM:
        return v.isString() && f.enum_type()->FindValueByName(v.toString().toStdString());
    case F::CPPTYPE_MESSAGE:
        return v.isObject();
    }
    return false;
}

const pb::FieldDescriptor *fieldNamed(const pb::Descriptor &d, const QString &key)
{
    const std::string name = key.toStdString();
    for (int i = 0; i < d.field_count(); ++i)
        if (d.field(i)->json_name() == name || d.field(i)->name() == name)
            return d.field(i);
    return nullptr;
}

void keepWhatFits(QJsonObject *o, const pb::Descriptor &d);

QJsonValue keptValue(const pb::FieldDescriptor &f, QJsonValue v)
{
    if (f.cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE
        && f.message_type() != google::protobuf::Struct::descriptor()) {
        QJsonObject o = v.toObject();
        keepWhatFits(&o, *f.message_type());
        v = o;
    }
    return v;
}

// Earlier releases read each field with a default when it was missing or of another type (a
// string where a number belongs, a number out of range): the same fields are dropped here, so
// that they read as the same defaults and a row they read is not refused as a whole.
void keepWhatFits(QJsonObject *o, const pb::Descriptor &d)
{
    for (const QString &key : o->keys()) {
        const pb::FieldDescriptor *f = fieldNamed(d, key);
        const QJsonValue v = o->value(key);
        if (!f || v.isNull()) {
            o->remove(key); // unknown: no longer recorded; null: the default
        } else if (f->is_map()) {
            QJsonObject entries = v.toObject();
            for (const QString &k : entries.keys())
                if (!fits(*f->message_type()->FindFieldByName("value"), entries.value(k)))
                    entries.remove(k);
            o->insert(key, entries);
        } else if (f->is_repeated()) {
            QJsonArray kept;
            for (const QJsonValue &e : v.toArray())
                if (fits(*f, e))
                    kept.append(keptValue(*f, e));
            o->insert(key, kept);
        } else if (!fits(*f, v)) {
            o->remove(key);
        } else {
            o->insert(key, keptValue(*f, v));
        }
    }
}

// The legacy shapes that protobuf's JSON mapping does not read as they were written, rewritten
// into the mapping's. Each names the release's own format, so this is the whole difference.
QJsonValue nanForNull(const QJsonValue &v)
{
    return v.isNull() ? QJsonValue(QStringLiteral("NaN")) : v; // JSON has no NaN: null was "not measured"
}

void normalizeLegacy(const QString &type, QJsonObject *p)
{
    if (type == QLatin1String("attempt_ended")) {
        // Outcomes were RunState names; they are AttemptOutcome values now.
        const QString outcome = p->value(QLatin1String("outcome")).toString();
        if (!outcome.isEmpty())
            p->insert(QStringLiteral("outcome"), QStringLiteral("ATTEMPT_") + outcome);
    } else if (type == QLatin1String("lr_found")) {
        QJsonArray points;
        for (const QJsonValue &pair : p->value(QLatin1String("points")).toArray())
            points.append(QJsonObject { { QStringLiteral("learningRate"), pair.toArray().at(0) },
                { QStringLiteral("smoothedLoss"), pair.toArray().at(1) } });
        p->insert(QStringLiteral("points"), points);
    } else if (type == QLatin1String("trial_decision")) {
        p->insert(QStringLiteral("value"), nanForNull(p->value(QLatin1String("value"))));
        if (p->contains(QLatin1String("cutoff")))
            p->insert(QStringLiteral("cutoff"), nanForNull(p->value(QLatin1String("cutoff"))));
        QJsonArray seen;
        for (const QJsonValue &v : p->value(QLatin1String("seen")).toArray())
            seen.append(nanForNull(v));
        p->insert(QStringLiteral("seen"), seen);
    }
}

} // namespace

QString eventType(const v1::StudyEvent &event)
{
    const pb::FieldDescriptor *field = event.GetReflection()->GetOneofFieldDescriptor(event, &eventOneof());
    return field ? QString::fromStdString(field->name()) : QString();
}

std::string encodeEvent(const v1::StudyEvent &event)
{
    // Deterministic (maps in key order): the same event is always the same bytes.
    std::string bytes;
    {
        pb::io::StringOutputStream stream(&bytes);
        pb::io::CodedOutputStream coded(&stream);
        coded.SetSerializationDeterministic(true);
        event.SerializeToCodedStream(&coded);
    }
    return bytes;
}

Result<v1::StudyEvent> decodeEvent(const std::string &stored)
{
    v1::StudyEvent event;
    if (!event.ParseFromString(stored))
        return Status::failure(
            QStringLiteral("a journal event does not parse as a StudyEvent (%1 bytes): the "
                           "journal is damaged")
                .arg(stored.size()));
    return event;
}

Result<v1::StudyEvent> decodeLegacyEvent(const QString &type, const QJsonObject &payload)
{
    v1::StudyEvent event;
    const pb::FieldDescriptor *field = eventOneof().containing_type()->FindFieldByName(type.toStdString());
    if (!field || field->containing_oneof() != &eventOneof())
        return event; // a type a later release added: skipped, as a binary event of one is
    QJsonObject p = payload;
    // The plan was its JSON text; it is read as it always was (parsePlanJson accepts what
    // earlier releases wrote) and set as a message.
    std::optional<v1::StudyPlan> plan;
    if (type == QLatin1String("study_created")) {
        auto parsed = parsePlanJson(p.take(QLatin1String("plan")).toString().toUtf8());
        if (!parsed)
            return Status::failure(QStringLiteral("study_created: its plan does not parse: %1")
                                       .arg(parsed.error().join(QStringLiteral("; "))));
        plan = std::move(parsed).value();
    }
    normalizeLegacy(type, &p);
    keepWhatFits(&p, *field->message_type());
    pb::Message *message = event.GetReflection()->MutableMessage(&event, field);
    const std::string json = QJsonDocument(p).toJson(QJsonDocument::Compact).toStdString();
    if (const auto parsed = pb::util::JsonStringToMessage(json, message); !parsed.ok())
        return Status::failure(QStringLiteral("%1: %2 (payload %3)")
                                   .arg(type, QString::fromStdString(std::string(parsed.message())),
                                       QString::fromStdString(json).left(200)));
    if (plan)
        *event.mutable_study_created()->mutable_plan() = std::move(*plan);
    return event;
}

} // namespace scalelab::core
