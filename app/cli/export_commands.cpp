// scalelab-cli export …: a study's (or a run's) data, from the journal, in the formats other
// tools read. `export tensorboard ID DIR`: TensorBoard's event files (core/export).
#include "cli_common.h"

#include "journal.h"
#include "tensorboard_export.h"

#include <QCommandLineParser>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace scalelab::app {
namespace {

using namespace scalelab::core;

int exportTensorBoard(const QStringList &arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Write a study (or one run) from the journal as TensorBoard event files: one folder per run, named "
        "by "
        "its configuration (r02-2workers-b64), with its per-step and per-epoch scalars and its "
        "hyperparameters "
        "(the HParams tab), and study/ with the speedup per worker count. Open with `tensorboard --logdir "
        "DIR`. "
        "Exporting again into the same folder replaces the earlier files; a folder holding another study's "
        "export, or event files ScaleLab did not write, is refused."));
    parser.addHelpOption();
    parser.addOption({ QStringLiteral("state-dir"),
        QStringLiteral("Folder of the study journal (journal.sqlite) (default: $SCALELAB_STATE_DIR or "
                       "~/.local/share/scalelab)."),
        QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Say what was written as JSON.") });
    parser.addPositionalArgument(QStringLiteral("id"),
        QStringLiteral(
            "A study id (see `study list`), one of its runs (see `study show ID`), or a run of the "
            "console's Run tab."));
    parser.addPositionalArgument(
        QStringLiteral("dir"), QStringLiteral("The TensorBoard log folder to write."));
    if (!parser.parse(arguments))
        return badInput(
            parser.errorText() + QStringLiteral("; see 'scalelab-cli export tensorboard --help'"));
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }
    if (parser.positionalArguments().size() != 2)
        return badInput(QStringLiteral(
            "give a study or run id and a folder: scalelab-cli export tensorboard STUDY_ID|RUN_ID DIR"));
    const QString id = parser.positionalArguments().at(0);
    const QString dir = parser.positionalArguments().at(1);
    const QString stateDir = parser.isSet(QStringLiteral("state-dir"))
        ? parser.value(QStringLiteral("state-dir"))
        : defaultStateDir();
    Journal journal;
    if (const Status opened = journal.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
        return badInput(opened.error());
    const Result<TensorBoardExport> written = exportToTensorBoard(journal, id, dir);
    if (!written)
        return badInput(written.error());
    if (parser.isSet(QStringLiteral("json"))) {
        out() << QJsonDocument(QJsonObject { { QStringLiteral("dir"), written->dir },
                                   { QStringLiteral("owner"), written->owner },
                                   { QStringLiteral("files"), QJsonArray::fromStringList(written->files) },
                                   { QStringLiteral("runs"), written->runs },
                                   { QStringLiteral("scalars"), double(written->scalars) },
                                   { QStringLiteral("synthetic"), written->synthetic } })
                     .toJson(QJsonDocument::Compact)
              << "\n";
        return Ok;
    }
    out() << "wrote " << written->runs << " run folder(s), " << written->scalars << " scalars, of "
          << written->owner << " to " << written->dir
          << (written->synthetic
                     ? QStringLiteral(" (SYNTHETIC data, labelled in the hparams and descriptions)")
                     : QString())
          << "\nopen with: tensorboard --logdir " << written->dir << "\n";
    return Ok;
}

} // namespace

int exportCommand(QStringList arguments)
{
    const char *usage = R"(usage: scalelab-cli export FORMAT [options]

  tensorboard STUDY_ID|RUN_ID DIR   a study's (or run's) TensorBoard event files, from the journal
)";
    if (arguments.size() < 2 || arguments[1] == QLatin1String("--help")
        || arguments[1] == QLatin1String("-h")) {
        out() << usage << environmentHelp();
        return arguments.size() < 2 ? BadInput : Ok;
    }
    const QString format = arguments.takeAt(1);
    arguments[0] = QStringLiteral("scalelab-cli export ") + format;
    if (format == QLatin1String("tensorboard"))
        return exportTensorBoard(arguments);
    return badInput(QStringLiteral("unknown export format '%1'; formats: tensorboard").arg(format));
}

} // namespace scalelab::app
