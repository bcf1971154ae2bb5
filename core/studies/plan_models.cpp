#include "plan_models.h"

#include "model_upload.h"
#include "qt_text.h"
#include "worker_contract.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <functional>

namespace scalelab::core {

namespace {

const QString kFilePrefix = QStringLiteral("file:");
const QString kSumPrefix = QStringLiteral("sha256:");

// Calls `visit(field, value)` on every place a plan names a model; `visit` may change it.
void forEachModel(v1::StudyPlan *plan, const std::function<void(const QString &, std::string *)> &visit)
{
    auto *t = plan->mutable_training();
    if (!t->model().empty())
        visit(QStringLiteral("training.model"), t->mutable_model());
    if (!t->initial_weights().empty())
        visit(QStringLiteral("training.initialWeights"), t->mutable_initial_weights());
    for (int i = 0; i < plan->grid().model_size(); ++i)
        visit(QStringLiteral("grid.model[%1]").arg(i), plan->mutable_grid()->mutable_model(i));
    if (!plan->has_tune()) // asking for a mutable tune would make the plan a tune
        return;
    auto &space = *plan->mutable_tune()->mutable_space();
    if (auto it = space.find("model"); it != space.end())
        for (int i = 0; i < it->second.values_size(); ++i)
            if (it->second.values(i).has_string_value())
                visit(QStringLiteral("tune.space.model.values[%1]").arg(i),
                    it->second.mutable_values(i)->mutable_string_value());
}

} // namespace

QStringList planModelFiles(const v1::StudyPlan &plan)
{
    QStringList files;
    v1::StudyPlan copy = plan;
    forEachModel(&copy, [&](const QString &, std::string *value) {
        if (worker::isModelFile(*value))
            files << str(*value);
    });
    return files;
}

QStringList planModelSums(const v1::StudyPlan &plan)
{
    QStringList sums;
    v1::StudyPlan copy = plan;
    forEachModel(&copy, [&](const QString &, std::string *value) {
        if (worker::isModelSha256(*value) && !sums.contains(str(*value)))
            sums << str(*value);
    });
    return sums;
}

Status resolvePlanModels(v1::StudyPlan *plan, const QString &planDir, const QString &store)
{
    QStringList problems;
    forEachModel(plan, [&](const QString &field, std::string *value) {
        if (!worker::isModelFile(*value))
            return;
        const QString path = QDir(planDir.isEmpty() ? QDir::currentPath() : planDir)
                                 .absoluteFilePath(str(*value).mid(kFilePrefix.size()));
        const auto file = readModelFile(path);
        if (!file) {
            problems << QStringLiteral("%1: %2").arg(field, file.error());
            return;
        }
        const QString stored = QStringLiteral("%1/%2.pt").arg(store, file->sha256);
        if (!QFile::exists(stored)) {
            QFile source(path);
            QSaveFile copy(stored);
            if (!QDir().mkpath(store) || !source.open(QIODevice::ReadOnly) || !copy.open(QIODevice::WriteOnly)
                || copy.write(source.readAll()) != file->size || !copy.commit()) {
                problems << QStringLiteral("%1: cannot copy %2 into %3: %4")
                                .arg(field, path, store, copy.errorString());
                return;
            }
        }
        *value = file->model().toStdString();
        (*plan->mutable_model_names())[file->sha256.toStdString()] = file->name.toStdString();
    });
    if (!problems.isEmpty())
        return Status::failure(Status::Code::InvalidArgument, problems.join(QStringLiteral("\n")));
    return Status::success();
}

Result<QString> storedModelFile(const QString &store, const QString &model)
{
    const QString hex = model.startsWith(kSumPrefix) ? model.mid(kSumPrefix.size()) : model;
    const QString path = QStringLiteral("%1/%2.pt").arg(store, hex);
    if (!QFileInfo(path).isFile())
        return Status::failure(Status::Code::FailedPrecondition,
            QStringLiteral("the module %1 is not in this console's store (%2): put its file there as %3.pt, "
                           "or name it in the plan again as file:PATH")
                .arg(kSumPrefix + hex.left(12) + QStringLiteral("…"), store, hex));
    return path;
}

QString modelDisplayName(const v1::StudyPlan &plan, const QString &model)
{
    if (!model.startsWith(kSumPrefix))
        return model;
    const QString hex = model.mid(kSumPrefix.size());
    if (const auto it = plan.model_names().find(hex.toStdString()); it != plan.model_names().end())
        return str(it->second);
    return QStringLiteral("TorchScript %1").arg(hex.left(8));
}

} // namespace scalelab::core
