// Pieces the `study` subcommands share: the journal options, opening a study, parsing.
#include "study_cli.h"

#include "cli_common.h"

#include <cmath>

namespace scalelab::app {

using namespace scalelab::core;

void addJournalOptions(QCommandLineParser &parser)
{
    parser.addOption({ QStringLiteral("state-dir"),
        QStringLiteral("Folder of the study journal (journal.sqlite) and of local agents' state "
                       "(default: $SCALELAB_STATE_DIR or ~/.local/share/scalelab)."),
        QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Machine-readable output (JSON).") });
}

bool openJournal(const QCommandLineParser &parser, Journal *journal)
{
    const QString dir = parser.isSet(QStringLiteral("state-dir")) ? parser.value(QStringLiteral("state-dir"))
                                                                  : defaultStateDir();
    if (const Status opened = journal->open(dir + QStringLiteral("/journal.sqlite")); !opened) {
        err() << "scalelab-cli: " << opened.error() << "\n";
        return false;
    }
    return true;
}

QString pct(double fraction)
{
    return std::isfinite(fraction) ? QString::number(fraction * 100, 'f', 1) + QLatin1Char('%')
                                   : QStringLiteral("-");
}

QString num(double v, int decimals)
{
    return std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("-");
}

// The journal the options name, and the study given as the one positional argument
// (checked by the caller), which must be in it. False after saying what is wrong.
bool openStudy(const QCommandLineParser &parser, Journal *journal, QString *studyId)
{
    if (!openJournal(parser, journal))
        return false;
    *studyId = parser.positionalArguments().at(0);
    if (journal->hasStudy(*studyId))
        return true;
    badInput(
        QStringLiteral("no study %1 in %2 (see `scalelab-cli study list`)").arg(*studyId, journal->path()));
    return false;
}

bool parse(QCommandLineParser &parser, const QStringList &arguments, const QString &description, int *code)
{
    parser.setApplicationDescription(description);
    parser.addHelpOption();
    if (!parser.parse(arguments)) {
        *code = badInput(parser.errorText() + QStringLiteral("; see --help"));
        return false;
    }
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        *code = Ok;
        return false;
    }
    return true;
}

} // namespace scalelab::app
