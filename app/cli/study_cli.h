// What the `study` subcommands of scalelab-cli share (study_commands.cpp, study_plan_report.cpp,
// study_predict.cpp), and `probe` (probe_command.cpp): the agents, the journal options,
// opening a study, parsing, number cells.
#pragma once

#include "agent_addresses.h"
#include "agent_endpoint.h"
#include "journal.h"
#include "local_agent.h"
#include "study_model.h"

#include <QCommandLineParser>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

namespace scalelab::app {

// --agent (repeatable), --agents-file, --agents, --token-file, --local-agents, --data-dir.
void addAgentOptions(QCommandLineParser &parser);

// The agents a command runs on: given ones, or local ones this process owns (stopped with it).
struct Agents {
    std::vector<std::unique_ptr<core::LocalAgent>> local;
    QList<core::AgentEndpoint> endpoints;
};

// --agent, --agents-file and --agents, together.
core::AgentAddresses givenAgents(const QCommandLineParser &parser);
// Whether --agent, --agents-file or --agents is given.
bool agentsGiven(const QCommandLineParser &parser);

// The agents the options name; `planAgents` (a plan's addresses) when they name none; else
// --local-agents local agents, started here. Ok, or the exit code after saying why not.
int setUpAgents(const QCommandLineParser &parser, Agents *agents, const QStringList &planAgents = {});

// --state-dir and --json.
void addJournalOptions(QCommandLineParser &parser);
// The journal --state-dir names (else the default state folder); false after saying why not.
bool openJournal(const QCommandLineParser &parser, core::Journal *journal);
// The journal the options name, and the study given as the one positional argument
// (checked by the caller), which must be in it. False after saying what is wrong.
bool openStudy(const QCommandLineParser &parser, core::Journal *journal, QString *studyId);
// The study, or the run started outside a study (`scalelab-cli run`, the console's Run tab),
// that the one positional argument names, as a snapshot. False after saying what is wrong.
bool openSnapshot(const QCommandLineParser &parser, core::StudySnapshot *snapshot, QString *id);
// Parses `arguments`; false when the command should end now with *code (an error, or --help).
bool parse(QCommandLineParser &parser, const QStringList &arguments, const QString &description, int *code);
// "12.3%" and "4.56", or "-" for NaN.
QString pct(double fraction);
QString num(double v, int decimals);

// `study plan`: an example plan, or a plan file checked (study_plan_report.cpp).
int planCommand(const QStringList &arguments);
int predictStudy(const QStringList &arguments);
int recommendStudy(const QStringList &arguments);

} // namespace scalelab::app
