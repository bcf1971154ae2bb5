// One TensorBoard event file: events.out.tfevents.<seconds>.<host> in a run's folder, the
// format TensorBoard, tf.summary and torch.utils.tensorboard write. Each record is
//   uint64 length, uint32 masked CRC-32C of the length, the bytes, uint32 masked CRC-32C of the bytes
// (little-endian; crc32c.h), and each holds a serialized tensorboard.Event: the first one's
// file_version is "brain.Event:2", the others carry a Summary (scalars, text, the hparams
// plugin's data) or a SessionLog. The messages (proto/tensorboard) stay inside the .cpp.
//
// Conventions kept (TensorBoard reads them so):
// - Scalars are simple_value (a 32-bit float), the form every TensorBoard since 1.0 reads.
//   The first value of a tag in a file carries its description (markdown) in its metadata.
// - Text is a DT_STRING tensor with plugin_name "text".
// - The hparams plugin (plugin_name "hparams", content a serialized HParamsPluginData of
//   version 0, value a length-0 float tensor): the experiment (which hyperparameters and
//   metrics) in the log folder's root run under "_hparams_/experiment"; each session (run
//   folder) its hyperparameters under "_hparams_/session_start_info" and its outcome under
//   "_hparams_/session_end_info".
//
// A value type owning its file; one thread at a time. Every write is checked: a failure
// says which file and why, and the writer stays unusable after it.
#pragma once

#include "core_status.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QJsonValue>
#include <QList>
#include <QSet>
#include <QString>

#include <optional>
#include <utility>

namespace scalelab::core {

// A hyperparameter the experiment declares: a number, string or bool (`type`: Double,
// String or Bool); `discrete` lists its values when there are few, else `interval` bounds
// the numbers; neither: any value.
struct HParamDeclaration {
    QString name;
    QString displayName;
    QString description;
    QJsonValue::Type type = QJsonValue::Double;
    QJsonArray discrete;
    std::optional<std::pair<double, double>> interval;
};

// A metric the experiment declares: the scalar series `tag` of each session's folder.
struct HParamsMetric {
    enum class Dataset { Unknown, Training, Validation };
    QString tag;
    QString displayName;
    QString description;
    Dataset dataset = Dataset::Unknown;
};

struct HParamsExperiment {
    QString name;
    QString description; // markdown
    double timeCreatedSecs = 0;
    QList<HParamDeclaration> hparams;
    QList<HParamsMetric> metrics;
};

struct HParamsSessionStart {
    QJsonObject hparams; // name -> number, string or bool
    QString groupName; // sessions with one group name are repeats of one setting; empty: its own
    double startTimeSecs = 0;
};

enum class HParamsStatus { Unknown, Success, Failure, Running };

class TensorBoardWriter {
public:
    // What TensorBoard's first event says wrote the file (SourceMetadata.writer).
    static constexpr const char *kWriterName = "scalelab";

    TensorBoardWriter() = default;
    ~TensorBoardWriter();
    TensorBoardWriter(const TensorBoardWriter &) = delete;
    TensorBoardWriter &operator=(const TensorBoardWriter &) = delete;

    // Creates `folder` (with its parents) and in it a new events.out.tfevents.<seconds>.<host>
    // (".1", ".2", ... appended when that name is taken), and writes the file_version event
    // at `wallTime` (seconds since the UNIX epoch).
    Status open(const QString &folder, double wallTime);
    bool isOpen() const { return m_file.isOpen(); }
    QString path() const { return m_file.fileName(); }
    int records() const { return m_records; }

    // A scalar at `step`; `description` goes with the tag's first value in this file.
    Status addScalar(
        const QString &tag, qint64 step, double value, double wallTime, const QString &description = {});
    // Markdown, for TensorBoard's Text tab.
    Status addText(const QString &tag, qint64 step, const QString &markdown, double wallTime);
    // The hparams plugin's three summaries (see above).
    Status addHParamsExperiment(const HParamsExperiment &experiment, double wallTime);
    Status addHParamsSessionStart(const HParamsSessionStart &start, double wallTime);
    Status addHParamsSessionEnd(HParamsStatus status, double endTimeSecs, double wallTime);
    // SessionLog START at `step`: a run resumed from a checkpoint trains from `step` again, and
    // TensorBoard's loader drops what the file held from `step` on (purge_orphaned_data).
    Status addRestart(qint64 step, double wallTime);

    // Hands what was written to the operating system.
    Status flush();
    // Flushes and closes; the writer may open another file afterwards.
    Status close();

    // The record framing of `data` (length, masked CRCs), as written to the file.
    static QByteArray frame(const QByteArray &data);

private:
    Status write(const std::string &event);

    QFile m_file;
    QSet<QString> m_described; // tags whose first value went out
    int m_records = 0;
    QString m_failure; // set after a failed write: the writer refuses more
};

} // namespace scalelab::core
