// What the `study` subcommands of scalelab-cli share (study_commands.cpp,
// study_predict.cpp): the journal options, opening a study, parsing, number cells.
#pragma once

#include "journal.h"

#include <QCommandLineParser>
#include <QString>
#include <QStringList>

namespace scalelab::app {

// --state-dir and --json.
void addJournalOptions(QCommandLineParser &parser);
// The journal --state-dir names (else the default state folder); false after saying why not.
bool openJournal(const QCommandLineParser &parser, core::Journal *journal);
// The journal the options name, and the study given as the one positional argument
// (checked by the caller), which must be in it. False after saying what is wrong.
bool openStudy(const QCommandLineParser &parser, core::Journal *journal, QString *studyId);
// Parses `arguments`; false when the command should end now with *code (an error, or --help).
bool parse(QCommandLineParser &parser, const QStringList &arguments, const QString &description, int *code);
// "12.3%" and "4.56", or "-" for NaN.
QString pct(double fraction);
QString num(double v, int decimals);

int predictStudy(const QStringList &arguments);

} // namespace scalelab::app
