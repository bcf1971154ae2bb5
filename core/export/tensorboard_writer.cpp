#include "tensorboard_writer.h"

#include "crc32c.h"

#include "tensorboard/compat/proto/event.pb.h"
#include "tensorboard/compat/proto/summary.pb.h"
#include "tensorboard/plugins/hparams/plugin_data.pb.h"

#include <QDir>
#include <QFileInfo>
#include <QSysInfo>

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <cmath>

namespace scalelab::core {

namespace {

constexpr const char *kFileVersion = "brain.Event:2";
constexpr const char *kHParamsPlugin = "hparams";
constexpr const char *kExperimentTag = "_hparams_/experiment";
constexpr const char *kSessionStartTag = "_hparams_/session_start_info";
constexpr const char *kSessionEndTag = "_hparams_/session_end_info";

void putLittleEndian(char *out, std::uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        out[i] = char((value >> (8 * i)) & 0xFF);
}

tensorboard::Event eventAt(double wallTime, qint64 step)
{
    tensorboard::Event e;
    e.set_wall_time(wallTime);
    e.set_step(step);
    return e;
}

// The hparams plugin's summaries: its data in the metadata, a length-0 float tensor as the
// value (what TensorBoard's own hparams summaries carry, so every loader keeps them).
std::string hparamsEvent(
    const char *tag, const tensorboard::hparams::HParamsPluginData &data, double wallTime)
{
    tensorboard::Event e = eventAt(wallTime, 0);
    auto *value = e.mutable_summary()->add_value();
    value->set_tag(tag);
    auto *plugin = value->mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name(kHParamsPlugin);
    plugin->set_content(data.SerializeAsString());
    auto *tensor = value->mutable_tensor();
    tensor->set_dtype(tensorboard::DT_FLOAT);
    tensor->mutable_tensor_shape()->add_dim()->set_size(0);
    return e.SerializeAsString();
}

// A JSON value as protobuf's Value: number, string or bool (the plugin's three types).
google::protobuf::Value protoValue(const QJsonValue &v)
{
    google::protobuf::Value out;
    if (v.isBool())
        out.set_bool_value(v.toBool());
    else if (v.isDouble())
        out.set_number_value(v.toDouble());
    else
        out.set_string_value(v.toString().toStdString());
    return out;
}

} // namespace

TensorBoardWriter::~TensorBoardWriter()
{
    (void)close(); // best effort: a caller that cares closes and checks first
}

QByteArray TensorBoardWriter::frame(const QByteArray &data)
{
    QByteArray record(int(8 + 4 + data.size() + 4), Qt::Uninitialized);
    char *p = record.data();
    putLittleEndian(p, std::uint64_t(data.size()), 8);
    putLittleEndian(p + 8, maskCrc32c(crc32c(p, 8)), 4);
    std::copy(data.cbegin(), data.cend(), p + 12);
    putLittleEndian(p + 12 + data.size(), maskCrc32c(crc32c(data.constData(), std::size_t(data.size()))), 4);
    return record;
}

Status TensorBoardWriter::open(const QString &folder, double wallTime)
{
    if (const Status closed = close(); !closed)
        return closed;
    m_described.clear();
    m_records = 0;
    m_failure.clear();
    if (!QDir().mkpath(folder))
        return Status::failure(Status::Code::PermissionDenied,
            QStringLiteral("cannot create the folder %1 (is its parent writable?)").arg(folder));
    const QString base = QStringLiteral("%1/events.out.tfevents.%2.%3")
                             .arg(folder)
                             .arg(qint64(std::floor(wallTime)), 10, 10, QLatin1Char('0'))
                             .arg(QSysInfo::machineHostName());
    for (int n = 0; n < 1000; ++n) {
        m_file.setFileName(n == 0 ? base : QStringLiteral("%1.%2").arg(base).arg(n));
        if (m_file.open(QIODevice::WriteOnly | QIODevice::NewOnly))
            break;
        if (!m_file.exists())
            return Status::failure(Status::Code::PermissionDenied,
                QStringLiteral("cannot write %1: %2").arg(m_file.fileName(), m_file.errorString()));
    }
    if (!m_file.isOpen())
        return Status::failure(Status::Code::AlreadyExists,
            QStringLiteral("cannot create an event file in %1: 1000 names taken").arg(folder));
    tensorboard::Event first = eventAt(wallTime, 0);
    first.set_file_version(kFileVersion);
    first.mutable_source_metadata()->set_writer(kWriterName);
    return write(first.SerializeAsString());
}

Status TensorBoardWriter::write(const std::string &event)
{
    if (!m_failure.isEmpty())
        return Status::failure(m_failure);
    if (!m_file.isOpen())
        return Status::failure(Status::Code::FailedPrecondition,
            QStringLiteral("the TensorBoard writer has no open file (open() first)"));
    const QByteArray record = frame(QByteArray::fromRawData(event.data(), qsizetype(event.size())));
    if (m_file.write(record) != record.size()) {
        m_failure = QStringLiteral("cannot write %1: %2").arg(m_file.fileName(), m_file.errorString());
        return Status::failure(Status::Code::ResourceExhausted, m_failure);
    }
    ++m_records;
    return Status::success();
}

Status TensorBoardWriter::addScalar(
    const QString &tag, qint64 step, double value, double wallTime, const QString &description)
{
    tensorboard::Event e = eventAt(wallTime, step);
    auto *v = e.mutable_summary()->add_value();
    v->set_tag(tag.toStdString());
    v->set_simple_value(float(value));
    if (!m_described.contains(tag)) {
        m_described.insert(tag);
        if (!description.isEmpty())
            v->mutable_metadata()->set_summary_description(description.toStdString());
    }
    return write(e.SerializeAsString());
}

Status TensorBoardWriter::addText(const QString &tag, qint64 step, const QString &markdown, double wallTime)
{
    tensorboard::Event e = eventAt(wallTime, step);
    auto *v = e.mutable_summary()->add_value();
    v->set_tag(tag.toStdString());
    auto *metadata = v->mutable_metadata();
    metadata->mutable_plugin_data()->set_plugin_name("text"); // content: TextPluginData version 0, empty
    metadata->set_data_class(tensorboard::DATA_CLASS_TENSOR);
    auto *tensor = v->mutable_tensor();
    tensor->set_dtype(tensorboard::DT_STRING);
    tensor->mutable_tensor_shape(); // a scalar: no dimensions
    tensor->add_string_val(markdown.toStdString());
    return write(e.SerializeAsString());
}

Status TensorBoardWriter::addHParamsExperiment(const HParamsExperiment &experiment, double wallTime)
{
    tensorboard::hparams::HParamsPluginData data;
    data.set_version(0);
    auto *x = data.mutable_experiment();
    x->set_name(experiment.name.toStdString());
    x->set_description(experiment.description.toStdString());
    x->set_time_created_secs(experiment.timeCreatedSecs);
    for (const HParamDeclaration &h : experiment.hparams) {
        auto *info = x->add_hparam_infos();
        info->set_name(h.name.toStdString());
        info->set_display_name(h.displayName.toStdString());
        info->set_description(h.description.toStdString());
        info->set_type(h.type == QJsonValue::Bool ? tensorboard::hparams::DATA_TYPE_BOOL
                : h.type == QJsonValue::Double    ? tensorboard::hparams::DATA_TYPE_FLOAT64
                                                  : tensorboard::hparams::DATA_TYPE_STRING);
        if (h.interval) {
            info->mutable_domain_interval()->set_min_value(h.interval->first);
            info->mutable_domain_interval()->set_max_value(h.interval->second);
        } else if (!h.discrete.isEmpty()) {
            auto *list = info->mutable_domain_discrete();
            for (const QJsonValue &v : h.discrete)
                *list->add_values() = protoValue(v);
        }
    }
    for (const HParamsMetric &m : experiment.metrics) {
        auto *info = x->add_metric_infos();
        info->mutable_name()->set_tag(m.tag.toStdString()); // group "": the session's own folder
        info->set_display_name(m.displayName.toStdString());
        info->set_description(m.description.toStdString());
        info->set_dataset_type(m.dataset == HParamsMetric::Dataset::Training
                ? tensorboard::hparams::DATASET_TRAINING
                : m.dataset == HParamsMetric::Dataset::Validation ? tensorboard::hparams::DATASET_VALIDATION
                                                                  : tensorboard::hparams::DATASET_UNKNOWN);
    }
    return write(hparamsEvent(kExperimentTag, data, wallTime));
}

Status TensorBoardWriter::addHParamsSessionStart(const HParamsSessionStart &start, double wallTime)
{
    tensorboard::hparams::HParamsPluginData data;
    data.set_version(0);
    auto *info = data.mutable_session_start_info();
    for (auto it = start.hparams.constBegin(); it != start.hparams.constEnd(); ++it)
        (*info->mutable_hparams())[it.key().toStdString()] = protoValue(it.value());
    info->set_group_name(start.groupName.toStdString());
    info->set_start_time_secs(start.startTimeSecs);
    return write(hparamsEvent(kSessionStartTag, data, wallTime));
}

Status TensorBoardWriter::addHParamsSessionEnd(HParamsStatus status, double endTimeSecs, double wallTime)
{
    tensorboard::hparams::HParamsPluginData data;
    data.set_version(0);
    auto *info = data.mutable_session_end_info();
    info->set_status(status == HParamsStatus::Success ? tensorboard::hparams::STATUS_SUCCESS
            : status == HParamsStatus::Failure        ? tensorboard::hparams::STATUS_FAILURE
            : status == HParamsStatus::Running        ? tensorboard::hparams::STATUS_RUNNING
                                                      : tensorboard::hparams::STATUS_UNKNOWN);
    info->set_end_time_secs(endTimeSecs);
    return write(hparamsEvent(kSessionEndTag, data, wallTime));
}

Status TensorBoardWriter::addRestart(qint64 step, double wallTime)
{
    tensorboard::Event e = eventAt(wallTime, step);
    e.mutable_session_log()->set_status(tensorboard::SessionLog::START);
    return write(e.SerializeAsString());
}

Status TensorBoardWriter::flush()
{
    if (!m_failure.isEmpty())
        return Status::failure(m_failure);
    if (m_file.isOpen() && !m_file.flush()) {
        m_failure = QStringLiteral("cannot write %1: %2").arg(m_file.fileName(), m_file.errorString());
        return Status::failure(Status::Code::ResourceExhausted, m_failure);
    }
    return Status::success();
}

Status TensorBoardWriter::close()
{
    if (!m_file.isOpen())
        return Status::success();
    const Status flushed = flush();
    m_file.close();
    return flushed;
}

} // namespace scalelab::core
