// Pieces the `study` subcommands and `probe` share: the agents, the journal options,
// opening a study, parsing.
#include "study_cli.h"

#include "agent_addresses.h"
#include "cli_common.h"
#include "study_state.h"

#include <QFile>
#include <QStandardPaths>

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

bool openSnapshot(const QCommandLineParser &parser, StudySnapshot *snapshot, QString *id)
{
    Journal journal;
    if (!openJournal(parser, &journal))
        return false;
    *id = parser.positionalArguments().at(0);
    if (journal.hasStudy(*id)) {
        *snapshot = buildSnapshot(StudyState::replay(journal.events(*id)), journal);
        return true;
    }
    for (const SingleRunEntry &entry : journal.singleRuns())
        if (entry.runId == *id) {
            *snapshot = singleRunSnapshot(journal, entry);
            return true;
        }
    badInput(QStringLiteral("no study or run %1 in %2 (see `scalelab-cli study list`; runs started with "
                            "`scalelab-cli run` are there too)")
                 .arg(*id, journal.path()));
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
        out() << commandHelp(parser, arguments) << environmentHelp();
        *code = Ok;
        return false;
    }
    return true;
}

void addAgentOptions(QCommandLineParser &parser)
{
    parser.addOption({ QStringLiteral("agent"),
        QStringLiteral("Agent address HOST:PORT; repeat for several. Without any agent given (here, "
                       "--agents-file or --agents), local agents are started on 127.0.0.1 (see "
                       "--local-agents) and stop when this command ends."),
        QStringLiteral("host:port") });
    parser.addOption({ QStringLiteral("agents-file"),
        QStringLiteral("File of agent addresses, one HOST:PORT per line, '#' comments (the Slurm "
                       "launcher writes one); repeatable."),
        QStringLiteral("file") });
    parser.addOption({ QStringLiteral("agents"),
        QStringLiteral("dns:NAME:PORT: every address NAME resolves to (a Kubernetes headless Service); "
                       "file:PATH and HOST:PORT work too, as in a plan's \"agents\"; repeatable. Agents "
                       "given here replace the plan's."),
        QStringLiteral("dns:name:port") });
    parser.addOption({ QStringLiteral("token-file"),
        QStringLiteral("File with the agents' token (or set SCALELAB_TOKEN)."), QStringLiteral("path") });
    parser.addOption({ QStringLiteral("local-agents"),
        QStringLiteral("How many local agents to start when no --agent is given (default 1)."),
        QStringLiteral("n"), QStringLiteral("1") });
    parser.addOption({ QStringLiteral("data-dir"), QStringLiteral("Data folder of the local agents."),
        QStringLiteral("dir") });
}

AgentAddresses givenAgents(const QCommandLineParser &parser)
{
    return gatherAgentAddresses(parser.values(QStringLiteral("agent")),
        parser.values(QStringLiteral("agents-file")), parser.values(QStringLiteral("agents")));
}

bool agentsGiven(const QCommandLineParser &parser)
{
    return parser.isSet(QStringLiteral("agent")) || parser.isSet(QStringLiteral("agents-file"))
        || parser.isSet(QStringLiteral("agents"));
}

int setUpAgents(const QCommandLineParser &parser, Agents *agents, const QStringList &planAgents)
{
    QString token;
    if (const int rc = readToken(parser, &token); rc != Ok)
        return rc;
    const AgentAddresses given = givenAgents(parser);
    if (!given.ok())
        return badInput(given.error());
    for (const QString &address : given->isEmpty() ? planAgents : *given)
        agents->endpoints << AgentEndpoint { address, address, token };
    if (!agents->endpoints.isEmpty())
        return Ok;
    bool ok = false;
    const int count = parser.value(QStringLiteral("local-agents")).toInt(&ok);
    if (!ok || count < 1 || count > 16)
        return badInput(QStringLiteral("--local-agents must be between 1 and 16 (got '%1')")
                            .arg(parser.value(QStringLiteral("local-agents"))));
    const QString stateDir = parser.isSet(QStringLiteral("state-dir"))
        ? parser.value(QStringLiteral("state-dir"))
        : defaultStateDir();
    for (int i = 1; i <= count; ++i) {
        auto agent = std::make_unique<LocalAgent>();
        LocalAgentOptions options;
        options.dataDir = parser.value(QStringLiteral("data-dir"));
        // A fixed folder per local agent: a restarted one finds its runs and checkpoints.
        options.stateDir = stateDir + QStringLiteral("/agents/local-%1").arg(i);
        if (const Status started = agent->start(options); !started) {
            err() << "scalelab-cli: " << started.error() << "\n";
            return agent->refusedConfiguration() ? BadInput : AgentError;
        }
        err() << "started local agent local-" << i << " at " << agent->endpoint() << "\n";
        agents->endpoints << AgentEndpoint { QStringLiteral("local-%1").arg(i), agent->endpoint(),
            agent->token() };
        agents->local.push_back(std::move(agent));
    }
    err().flush();
    return Ok;
}

} // namespace scalelab::app
