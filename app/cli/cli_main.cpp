// scalelab-cli: the console's actions without a display. Tests and benchmarks drive
// the product through it.
//
// Exit codes: 0 success; 1 the run failed or was cancelled, or Ctrl-C ended the command in
// order; 2 bad input; 3 the agent could not be reached or refused the request; 128 + the
// signal (130, 143) when a second Ctrl-C or SIGTERM ended it at once (interrupts.h). Here:
// the usage and the dispatch to the commands, each in a file of its own (cli_common.h lists them).
#include "cli_common.h"

#include "agent_client.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QTemporaryDir>

#include <memory>
#include <optional>

using namespace scalelab;
using namespace scalelab::app;

namespace {

const char *kUsage = R"(usage: scalelab-cli COMMAND [options]

Commands:
  run        start one training run (a local agent is started unless --agent is given)
             and print its live metrics and a summary line
  describe   show an agent's node, data sets and runs (alias: agents)
  runs       list every run an agent has recorded, finished ones included
  lr-find    learning-rate range test on an agent: loss against lr, and a suggested lr
  gc         free disk space on an agent (and in the console's state) by retention rules
  study      durable scale-up studies: run PLAN, rerun REPORT, watch ID, list, show ID,
             predict ID, recommend ID, cancel ID, retry ID, continue ID, plan
  report     export a study's report: report ID --format json|csv|epoch-csv|html|pdf [-o FILE]
  export     a study's or run's data for other tools: export tensorboard STUDY_ID|RUN_ID DIR
  probe      the network between agents: all-reduce times of 2 ... N ranks on one host and
             across hosts, with the latency and bandwidth fitted to them

Run 'scalelab-cli COMMAND --help' for a command's options.
Ctrl-C (or SIGTERM) in run, study run|rerun|watch|continue, lr-find and probe ends the command in
order: run stops its run and follows it to its end; a study is left in the journal for
'study watch'; lr-find and probe stop their test. A second Ctrl-C exits at once.
Exit codes: 0 success, 1 run failed or cancelled (or ended in order by Ctrl-C), 2 bad input,
3 agent unreachable or refused, 130 a second Ctrl-C ended the command at once (143: SIGTERM).
)";

} // namespace

QString scalelab::app::environmentHelp()
{
    return QStringLiteral("\nEnvironment:\n"
                          "  SCALELAB_TOKEN            the agents' token (--token-file wins)\n")
        + core::AgentTls::environmentHelp()
        + QStringLiteral(
            "  SCALELAB_STATE_DIR        default --state-dir of study and report (the journal, local "
            "agents)\n"
            "  SCALELAB_AGENT_BIN        the scalelab-agent started as a local agent (default: the one\n"
            "                            next to this program, else on PATH)\n");
}

int main(int argc, char **argv)
{
    // Reports paint charts (SVG, PDF) and need a GUI application, not a display.
    const bool painting = argc > 1 && qstrcmp(argv[1], "report") == 0;
    if (painting && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    // Qt's GUI wants a private runtime folder; outside a login session (a batch job, cron)
    // there is none and it warns. One of this process's own, removed at exit.
    std::optional<QTemporaryDir> runtimeDir;
    if (painting && qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR")) {
        runtimeDir.emplace(QDir::tempPath() + QStringLiteral("/scalelab-runtime-XXXXXX"));
        if (runtimeDir->isValid())
            qputenv("XDG_RUNTIME_DIR", QFile::encodeName(runtimeDir->path()));
    }
    std::unique_ptr<QCoreApplication> app = painting ? std::make_unique<QGuiApplication>(argc, argv)
                                                     : std::make_unique<QCoreApplication>(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("scalelab-cli"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SCALELAB_VERSION));
    QStringList arguments = QCoreApplication::arguments();
    if (arguments.size() < 2 || arguments[1] == QLatin1String("--help")
        || arguments[1] == QLatin1String("-h")) {
        out() << kUsage << environmentHelp();
        return arguments.size() < 2 ? BadInput : Ok;
    }
    if (arguments[1] == QLatin1String("--version")) {
        out() << "scalelab-cli " << SCALELAB_VERSION << "\n";
        return Ok;
    }
    const QString command = arguments.takeAt(1);
    arguments[0] = QStringLiteral("scalelab-cli ") + command; // each command's --help names it
    if (command == QLatin1String("run"))
        return runCommand(arguments);
    if (command == QLatin1String("describe") || command == QLatin1String("agents"))
        return describeCommand(arguments);
    if (command == QLatin1String("runs"))
        return runsCommand(arguments);
    if (command == QLatin1String("lr-find"))
        return lrFindCommand(arguments);
    if (command == QLatin1String("gc"))
        return gcCommand(arguments);
    if (command == QLatin1String("study"))
        return studyCommand(arguments);
    if (command == QLatin1String("report"))
        return reportCommand(arguments);
    if (command == QLatin1String("export"))
        return exportCommand(arguments);
    if (command == QLatin1String("probe"))
        return probeCommand(arguments);
    return badInput(QStringLiteral("unknown command '%1'; commands: run, describe, runs, lr-find, gc, study, "
                                   "report, export, probe. See --help.")
                        .arg(command));
}
