// scalelab: the desktop console.
#include "agent_addresses.h"
#include "agent_client.h"
#include "core_status.h"
#include "main_window.h"
#include "theme.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QStandardPaths>
#include <QTimer>

#include <cstdio>
#include <cstring>

namespace {

using scalelab::core::Status;

// --help and --version print and exit: they must work over ssh, with no display.
bool onlyPrints(int argc, char **argv)
{
    for (int i = 1; i < argc; ++i)
        for (const char *flag : { "-h", "--help", "--help-all", "-v", "--version" })
            if (std::strcmp(argv[i], flag) == 0)
                return true;
    return false;
}

// The console's description and options (its --help).
void addOptions(QCommandLineParser &parser)
{
    parser.setApplicationDescription(
        QStringLiteral(
            "ScaleLab console: launch CIFAR-10 training runs on ScaleLab agents and watch them live.\n"
            "Without --agent it starts a local agent on 127.0.0.1.\n"
            "\n"
            "Environment:\n"
            "  SCALELAB_TOKEN            the token of --agent (--token-file wins)\n")
        + scalelab::core::AgentTls::environmentHelp()
        + QStringLiteral(
            "  SCALELAB_STATE_DIR        default --state-dir\n"
            "  SCALELAB_AGENT_BIN        the scalelab-agent started as the local agent (default: the one\n"
            "                            next to this program, else on PATH)\n"
            "An agent of the Agents tab with TLS files of its own uses those instead of SCALELAB_TLS_*."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOptions({
        { QStringLiteral("agent"),
            QStringLiteral("Agent address HOST:PORT for the Run tab; more of them join the Agents tab."),
            QStringLiteral("host:port") },
        { QStringLiteral("agents-file"),
            QStringLiteral("File of agent addresses, one HOST:PORT per line (a Slurm job's agents.txt): "
                           "they join the Agents tab, and the first is the Run tab's."),
            QStringLiteral("file") },
        { QStringLiteral("agents"),
            QStringLiteral("dns:NAME:PORT: every address NAME resolves to joins the Agents tab (a "
                           "Kubernetes headless Service); file:PATH and HOST:PORT work too, as in a plan's "
                           "\"agents\"; repeatable."),
            QStringLiteral("dns:name:port") },
        { QStringLiteral("token-file"), QStringLiteral("File with the agent's token (or SCALELAB_TOKEN)."),
            QStringLiteral("path") },
        { QStringLiteral("data-dir"), QStringLiteral("Data folder for the local agent."),
            QStringLiteral("dir") },
        { QStringLiteral("state-dir"),
            QStringLiteral("State folder: the study journal, and the local agent's runs under agents/local-1 "
                           "(default: $SCALELAB_STATE_DIR or ~/.local/share/scalelab)."),
            QStringLiteral("dir") },
        { QStringLiteral("dataset"), QStringLiteral("Data set to select in the form."),
            QStringLiteral("name") },
        { QStringLiteral("batch-size"),
            QStringLiteral("Batch size per worker in the form (default: as last time, else 64)."),
            QStringLiteral("n") },
        { QStringLiteral("epochs"), QStringLiteral("Epochs in the form (default: as last time, else 2)."),
            QStringLiteral("n") },
        { QStringLiteral("workers"),
            QStringLiteral("Data-parallel workers in the form (default: as last time, else 1)."),
            QStringLiteral("n") },
        { QStringLiteral("launch"), QStringLiteral("Launch a run with the form's values once connected.") },
        { QStringLiteral("open-study"),
            QStringLiteral("Open this study (from the journal) once connected, and drive it if unfinished."),
            QStringLiteral("id") },
        { QStringLiteral("launch-study"),
            QStringLiteral("Launch the study plan given as argument once an agent answers.") },
        { QStringLiteral("theme"), QStringLiteral("Palette: system, light or dark (remembered)."),
            QStringLiteral("name") },
        { QStringLiteral("no-reopen"),
            QStringLiteral("Do not reattach at start-up to the study left unfinished by the last session.") },
        { QStringLiteral("screenshot"),
            QStringLiteral(
                "Save a PNG of the window after --screenshot-after-ms and quit (for docs and checks)."),
            QStringLiteral("png") },
        { QStringLiteral("screenshot-after-ms"), QStringLiteral("Delay before --screenshot."),
            QStringLiteral("ms"), QStringLiteral("3000") },
    });
    parser.addPositionalArgument(QStringLiteral("plan"),
        QStringLiteral("A study plan (.json) to open in the study designer."), QStringLiteral("[plan.json]"));
}

// The options as the window takes them; why not when they do not make sense.
Status readOptions(const QCommandLineParser &parser, scalelab::app::ConsoleOptions *options)
{
    if (parser.positionalArguments().size() > 1)
        return Status::failure(QStringLiteral("give at most one study plan (got %1 arguments); see --help")
                                   .arg(parser.positionalArguments().size()));
    if (parser.isSet(QStringLiteral("launch-study")) && parser.positionalArguments().isEmpty())
        return Status::failure(
            QStringLiteral("--launch-study needs a plan file: scalelab --launch-study plan.json"));

    const QStringList singleAgents = parser.values(QStringLiteral("agent"));
    const scalelab::core::AgentAddresses listed = scalelab::core::gatherAgentAddresses(
        {}, parser.values(QStringLiteral("agents-file")), parser.values(QStringLiteral("agents")));
    const scalelab::core::AgentAddresses given = scalelab::core::gatherAgentAddresses(singleAgents, {}, {});
    if (!listed.ok() || !given.ok())
        return Status::failure(listed.ok() ? given.error() : listed.error());
    options->agentEndpoint = singleAgents.isEmpty() ? listed->value(0) : singleAgents.first();
    options->moreAgents = singleAgents.mid(1) + *listed;
    options->token = QString::fromLocal8Bit(qgetenv("SCALELAB_TOKEN"));
    if (parser.isSet(QStringLiteral("token-file"))) {
        QFile f(parser.value(QStringLiteral("token-file")));
        if (!f.open(QIODevice::ReadOnly))
            return Status::failure(QStringLiteral("cannot read token file %1").arg(f.fileName()));
        options->token = QString::fromUtf8(f.readAll()).trimmed();
    }
    options->localAgent.dataDir = parser.value(QStringLiteral("data-dir"));
    options->stateDir = parser.value(QStringLiteral("state-dir"));
    if (options->stateDir.isEmpty())
        options->stateDir = qEnvironmentVariableIsSet("SCALELAB_STATE_DIR")
            ? qEnvironmentVariable("SCALELAB_STATE_DIR")
            : QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation)
                + QStringLiteral("/scalelab");
    options->localAgent.stateDir = options->stateDir + QStringLiteral("/agents/local-1");

    options->dataset = parser.value(QStringLiteral("dataset"));
    for (const auto &[name, field] : { std::pair { "batch-size", &options->batchSize },
             std::pair { "epochs", &options->epochs }, std::pair { "workers", &options->workers } }) {
        if (!parser.isSet(QLatin1String(name)))
            continue; // 0: as the form was left last time
        bool ok = false;
        *field = parser.value(QLatin1String(name)).toInt(&ok);
        if (!ok || *field < 1)
            return Status::failure(QStringLiteral("--%1 must be a whole number of 1 or more (got '%2')")
                                       .arg(QLatin1String(name), parser.value(QLatin1String(name))));
    }
    options->launchWhenConnected = parser.isSet(QStringLiteral("launch"));
    options->openStudy = parser.value(QStringLiteral("open-study"));
    options->reopenStudies = !parser.isSet(QStringLiteral("no-reopen"));
    options->planFile = parser.positionalArguments().value(0);
    options->theme = parser.value(QStringLiteral("theme"));
    if (scalelab::app::Theme t;
        !options->theme.isEmpty() && !scalelab::app::themeFromName(options->theme, &t))
        return Status::failure(
            QStringLiteral("unknown --theme '%1': use system, light or dark").arg(options->theme));
    options->launchStudyWhenConnected = parser.isSet(QStringLiteral("launch-study"));
    return Status::success();
}
} // namespace

int main(int argc, char **argv)
{
    const bool noDisplay = qEnvironmentVariableIsEmpty("DISPLAY")
        && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
    if (noDisplay && onlyPrints(argc, argv))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    else if (noDisplay) {
        std::fprintf(stderr,
            "scalelab: no display (DISPLAY and WAYLAND_DISPLAY are unset). Run it in a desktop session, "
            "with `ssh -X`, or under `xvfb-run`; for a study without a window use `scalelab-cli study run "
            "PLAN.json`.\n");
        return 2;
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("ScaleLab"));
    QApplication::setOrganizationName(QStringLiteral("ScaleLab"));
    QApplication::setApplicationVersion(QStringLiteral(SCALELAB_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("scalelab"));

    QCommandLineParser parser;
    addOptions(parser);
    parser.process(app);
    scalelab::app::ConsoleOptions options;
    if (const Status read = readOptions(parser, &options); !read) {
        std::fprintf(stderr, "scalelab: %s\n", qPrintable(read.error()));
        return 2;
    }

    scalelab::app::MainWindow window(options);
    window.show();
    if (parser.isSet(QStringLiteral("screenshot"))) {
        const QString path = parser.value(QStringLiteral("screenshot"));
        QTimer::singleShot(
            parser.value(QStringLiteral("screenshot-after-ms")).toInt(), &window, [&window, path] {
                window.grab().save(path);
                QApplication::quit();
            });
    }
    return app.exec();
}
