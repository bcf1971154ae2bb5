// A study plan as JSON: read with every problem named at once (protobuf's parser stops at the
// first, and says neither where nor what was meant), and written back.
#include "study_plan.h"

#include "qt_text.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <algorithm>

namespace scalelab::core {
namespace {
// "line 3, column 14" of a byte offset into `json`.
QString position(const QByteArray &json, int offset)
{
    int line = 1, column = 1;
    for (int i = 0; i < offset && i < json.size(); ++i) {
        if (json[i] == '\n') {
            ++line;
            column = 1;
        } else if ((json[i] & 0xC0) != 0x80) { // count characters, not UTF-8 bytes
            ++column;
        }
    }
    return QStringLiteral("line %1, column %2").arg(line).arg(column);
}

// The closest field name (edit distance at most 3), for "did you mean".
QString closestField(const google::protobuf::Descriptor *type, const QString &name)
{
    const auto distance = [](const QString &a, const QString &b) {
        QList<int> row(b.size() + 1);
        for (int j = 0; j <= b.size(); ++j)
            row[j] = j;
        for (int i = 1; i <= a.size(); ++i) {
            int diagonal = row[0];
            row[0] = i;
            for (int j = 1; j <= b.size(); ++j) {
                const int up = row[j];
                row[j] = std::min({ row[j] + 1, row[j - 1] + 1,
                    diagonal + (a[i - 1].toLower() == b[j - 1].toLower() ? 0 : 1) });
                diagonal = up;
            }
        }
        return row[b.size()];
    };
    QString best;
    int bestDistance = 4;
    for (int i = 0; i < type->field_count(); ++i) {
        const QString candidate = str(type->field(i)->json_name());
        if (const int d = distance(name, candidate); d < bestDistance) {
            bestDistance = d;
            best = candidate;
        }
    }
    return best;
}

// Every field of `object` that `type` does not have, and every value of the wrong JSON
// kind, at any depth: protobuf's parser stops at the first.
void checkShape(const QJsonObject &object, const google::protobuf::Descriptor *type, const QString &path,
    QStringList *problems)
{
    using FD = google::protobuf::FieldDescriptor;
    for (auto it = object.begin(); it != object.end(); ++it) {
        const QString key = it.key();
        const std::string name = key.toStdString();
        const FD *field = type->FindFieldByName(name);
        for (int i = 0; !field && i < type->field_count(); ++i)
            if (type->field(i)->json_name() == name)
                field = type->field(i);
        const QString where = path.isEmpty() ? key : path + QLatin1Char('.') + key;
        if (!field) {
            const QString near = closestField(type, key);
            *problems << QStringLiteral("%1: unknown field%2")
                             .arg(where,
                                 near.isEmpty()
                                     ? QStringLiteral(" (see proto/scalelab/v1/study.proto for the fields)")
                                     : QStringLiteral("; did you mean \"%1\"?").arg(near));
            continue;
        }
        const QJsonValue value = it.value();
        if (value.isNull())
            continue; // JSON null: the field's default
        if (field->is_map()) { // an object whose values are of the map's value type
            if (!value.isObject()) {
                *problems << QStringLiteral("%1: must be an object ({\"name\": ...})").arg(where);
                continue;
            }
            const FD *valueField = field->message_type()->map_value();
            const QJsonObject entries = value.toObject();
            for (auto e = entries.begin(); e != entries.end(); ++e) {
                const QString at = where + QLatin1Char('.') + e.key();
                if (valueField->cpp_type() != FD::CPPTYPE_MESSAGE)
                    continue; // protobuf's parser names a scalar of the wrong kind
                if (!e.value().isObject())
                    *problems << QStringLiteral("%1: must be an object ({...})").arg(at);
                else
                    checkShape(e.value().toObject(), valueField->message_type(), at, problems);
            }
            continue;
        }
        const auto kindOf = [&](const QJsonValue &v, const QString &at) {
            switch (field->cpp_type()) {
            case FD::CPPTYPE_MESSAGE:
                if (field->message_type()->full_name() == "google.protobuf.Value")
                    break; // any JSON value
                if (!v.isObject())
                    *problems << QStringLiteral("%1: must be an object ({...})").arg(at);
                else
                    checkShape(v.toObject(), field->message_type(), at, problems);
                break;
            case FD::CPPTYPE_STRING:
                if (!v.isString())
                    *problems << QStringLiteral("%1: must be a string (in quotes)").arg(at);
                break;
            case FD::CPPTYPE_BOOL:
                if (!v.isBool())
                    *problems << QStringLiteral("%1: must be true or false").arg(at);
                break;
            case FD::CPPTYPE_ENUM:
                if (!v.isString() && !v.isDouble())
                    *problems << QStringLiteral("%1: must be one of the names of %2")
                                     .arg(at, str(field->enum_type()->name()));
                break;
            default: // numbers; protobuf's JSON also takes them as strings ("1e-7", "NaN")
                if (!v.isDouble() && !v.isString())
                    *problems << QStringLiteral("%1: must be a number").arg(at);
            }
        };
        if (field->is_repeated()) {
            if (!value.isArray()) {
                *problems << QStringLiteral("%1: must be a list ([...])").arg(where);
                continue;
            }
            const QJsonArray list = value.toArray();
            for (int i = 0; i < list.size(); ++i)
                kindOf(list[i], QStringLiteral("%1[%2]").arg(where).arg(i));
        } else {
            kindOf(value, where);
        }
    }
}

} // namespace

namespace {

// {"min": 2, "max": 4} in grid.workers is the plan's way of writing an elastic run (a repeated
// int32 cannot hold an object): each moves to grid.workerRanges, where protobuf reads it.
void moveWorkerRanges(QJsonObject *root, QStringList *problems)
{
    QJsonObject grid = root->value(QLatin1String("grid")).toObject();
    const QJsonArray workers = grid.value(QLatin1String("workers")).toArray();
    QJsonArray numbers, ranges = grid.value(QLatin1String("workerRanges")).toArray();
    for (int i = 0; i < workers.size(); ++i) {
        if (!workers[i].isObject()) {
            numbers.append(workers[i]);
            continue;
        }
        const QJsonObject range = workers[i].toObject();
        if (range.keys() != QStringList { QStringLiteral("max"), QStringLiteral("min") })
            *problems << QStringLiteral(
                "grid.workers[%1]: an elastic run is {\"min\": M, \"max\": N} (the fewest "
                "workers it goes on with, and its planned size), nothing else")
                             .arg(i);
        ranges.append(range);
    }
    if (ranges.isEmpty())
        return;
    if (numbers.isEmpty())
        grid.remove(QStringLiteral("workers"));
    else
        grid.insert(QStringLiteral("workers"), numbers);
    grid.insert(QStringLiteral("workerRanges"), ranges);
    root->insert(QStringLiteral("grid"), grid);
}

} // namespace

Checked<v1::StudyPlan> parsePlanJson(const QByteArray &json)
{
    using Plan = Checked<v1::StudyPlan>;
    // Syntax first, with where: protobuf's own message has no position.
    QJsonParseError syntax {};
    const QJsonDocument document = QJsonDocument::fromJson(json, &syntax);
    if (syntax.error != QJsonParseError::NoError) {
        return Plan::failure({ QStringLiteral("not valid JSON at %1: %2")
                                   .arg(position(json, syntax.offset), syntax.errorString()) });
    }
    if (!document.isObject()) {
        return Plan::failure(
            { QStringLiteral("a study plan is a JSON object ({ \"name\": ..., \"dataset\": ... })") });
    }
    // "learningRate": "auto" is the plan's way of saying learningRateAuto (a double field
    // cannot hold a word).
    QJsonObject root = document.object();
    QJsonObject training = root.value(QLatin1String("training")).toObject();
    for (const char *key : { "learningRate", "learning_rate" })
        if (training.value(QLatin1String(key)).toString() == QLatin1String("auto")) {
            training.remove(QLatin1String(key));
            root.insert(QStringLiteral("training"), training);
            root.insert(QStringLiteral("learningRateAuto"), true);
        }
    QStringList problems;
    moveWorkerRanges(&root, &problems);
    checkShape(root, v1::StudyPlan::descriptor(), QString(), &problems);
    // An empty list would read as "not given", and the axis' default would run silently.
    const QJsonObject grid = root.value(QLatin1String("grid")).toObject();
    for (auto it = grid.begin(); it != grid.end(); ++it)
        if (it.value().isArray() && it.value().toArray().isEmpty())
            problems << QStringLiteral(
                "grid.%1: an empty list; give the values to compare (e.g. [1, 2]), or leave "
                "the key out for its default")
                            .arg(it.key());
    if (!problems.isEmpty())
        return Plan::failure(problems);
    const QByteArray normalised = QJsonDocument(root).toJson(QJsonDocument::Compact);
    v1::StudyPlan plan;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto status = google::protobuf::util::JsonStringToMessage(normalised.toStdString(), &plan, options);
    if (!status.ok()) {
        return Plan::failure(
            { QStringLiteral("not a valid study plan: %1 (see proto/scalelab/v1/study.proto for the fields)")
                    .arg(str(std::string(status.message()))) });
    }
    return plan;
}

Checked<v1::StudyPlan> loadPlan(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return Checked<v1::StudyPlan>::failure(
            { QStringLiteral("cannot read the plan %1: %2").arg(path, file.errorString()) });
    auto plan = parsePlanJson(file.readAll());
    if (!plan)
        return plan;
    if (const CheckStatus valid = checkPlan(*plan); !valid)
        return valid;
    return plan;
}

QByteArray planToJson(const v1::StudyPlan &plan)
{
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = false;
    // Ignored as it cannot fail: printing fails only on an Any (a plan has none) or on text
    // that is not UTF-8, and a plan's text comes from QStrings or from parsed JSON.
    (void)google::protobuf::util::MessageToJsonString(plan, &out, options);
    return QByteArray::fromStdString(out);
}

Status savePlan(const v1::StudyPlan &plan, const QString &path)
{
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(planToJson(plan)) < 0 || !file.commit())
        return Status::failure(QStringLiteral("cannot write the plan %1: %2").arg(path, file.errorString()));
    return Status::success();
}

} // namespace scalelab::core
