// scalelab-cli study …: durable scale-up studies through core's StudyRunner.
#include "cli_common.h"
#include "interrupts.h"
#include "progress_display.h"
#include "study_cli.h"
#include "study_output.h"
#include "tensorboard_output.h"

#include "agent_addresses.h"
#include "agent_client.h"
#include "journal.h"
#include "local_agent.h"
#include "model_upload.h"
#include "plan_models.h"
#include "report.h"
#include "scaling_model.h"
#include "study_plan.h"
#include "study_results.h"
#include "study_runner.h"
#include "tune_plan.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QSet>
#include <QStandardPaths>

#include <memory>

namespace scalelab::app {
namespace {

using namespace scalelab::core;

// Creates the plan's synthetic data set on every agent that lacks it.
int ensureSyntheticDataset(
    const QList<AgentEndpoint> &agents, const QString &name, int train, int test, const QString &kind)
{
    for (const auto &a : agents) {
        AgentClient client(a.address, a.token);
        v1::DescribeResponse d;
        if (const auto r = client.describe(&d); !r.ok()) {
            err() << "scalelab-cli: " << r.error() << "\n";
            return AgentError;
        }
        bool present = false;
        for (const auto &ds : d.datasets())
            present = present || QString::fromStdString(ds.name()) == name;
        if (present)
            continue;
        v1::CreateSyntheticDatasetRequest request;
        request.set_name(name.toStdString());
        request.set_train_images(train);
        request.set_test_images(test);
        request.set_seed(1);
        request.set_kind(kind.toStdString());
        v1::Dataset created;
        if (const auto r = client.createSyntheticDataset(request, &created); !r.ok()) {
            err() << "scalelab-cli: " << r.error() << "\n";
            return r.isInvalidArgument() ? BadInput : AgentError;
        }
        err() << "created SYNTHETIC data set " << name << " (" << kind << ") on " << a.name << " (" << train
              << " train / " << test << " test images)\n";
    }
    return Ok;
}

// What Ctrl-C does to `study run`, `rerun`, `watch` and `continue` (their --help).
const char *const kLeavesTheStudy
    = "leaves the study as it is in the journal, for `study watch` to continue, and exits 1 (runs on local "
      "agents stop with them; runs on other agents go on)";

// Drives a study until it ends or the user interrupts (`interrupts`: Ctrl-C or SIGTERM),
// returns the exit code. With --tensorboard, its event files are written as the runs train.
int driveStudy(Journal *journal, const QString &studyId, const QList<AgentEndpoint> &agents, bool json,
    TensorBoardOutput *tensorBoard, InterruptGuard *interrupts)
{
    // What the journal holds already goes first; the runner's events follow.
    if (const Status started = tensorBoard->startStudy(*journal, studyId); !started) {
        err() << "scalelab-cli: --tensorboard: " << started.error()
              << "\nthe study is kept; continue it with: "
              << "scalelab-cli study watch " << studyId << " [--tensorboard ANOTHER_DIR]\n";
        return BadInput;
    }
    StudyRunner runner(journal);
    runner.setAgents(agents);
    int code = Ok;
    ProgressDisplay progress(ProgressDisplay::stdoutIsTerminal());
    const auto stamp = [] { return QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss ")); };
    QObject::connect(&runner, &StudyRunner::message, [&, json](const QString &line) {
        if (!json)
            progress.print(stamp() + line);
    });
    QObject::connect(&runner, &StudyRunner::runEvents,
        [&, json, studyId](const QString &runId, int attempt, const std::vector<v1::RunEvent> &events) {
            tensorBoard->apply(runId, attempt, events);
            if (json)
                return;
            // A retried or resized attempt: when it trains again (its first step).
            static QSet<QString> training;
            for (const auto &e : events)
                if (e.has_step() && attempt > 1
                    && !training.contains(runId + QLatin1Char('#') + QString::number(attempt))) {
                    training.insert(runId + QLatin1Char('#') + QString::number(attempt));
                    progress.print(QStringLiteral("%1%2 attempt %3 training again at step %4")
                                       .arg(stamp(), runId)
                                       .arg(attempt)
                                       .arg(e.step().step()));
                }
            for (const auto &e : events)
                if (e.has_epoch())
                    progress.print(
                        QStringLiteral("%1%2 attempt %3 epoch %4: test accuracy %5, %6 img/s")
                            .arg(stamp(), runId)
                            .arg(attempt)
                            .arg(e.epoch().epoch())
                            .arg(pct(e.epoch().test_accuracy()), num(e.epoch().images_per_second(), 1)));
            // "r01": the study's id is on every line above.
            const QString label
                = runId.startsWith(studyId + QLatin1Char('-')) ? runId.mid(studyId.size() + 1) : runId;
            progress.apply(runId, label, events);
        });
    // A tune: the trials table again after each decision of its scheduler.
    QObject::connect(&runner, &StudyRunner::stateChanged, [&, json](const JournalEvent &event) {
        // In a terminal; a log gets the decisions (messages) and the table at the end.
        if (json || !event.event.has_trial_decision() || !ProgressDisplay::stdoutIsTerminal())
            return;
        for (const QString &line : tuneTable(runner.snapshot()))
            progress.print(line);
    });
    QObject::connect(&runner, &StudyRunner::finished, [&](const QString &state) {
        code = state == QLatin1String("SUCCEEDED") ? Ok : RunFailed;
        QCoreApplication::exit(0);
    });
    QObject::connect(&runner, &StudyRunner::fatal, [&](const QString &error) {
        err() << "scalelab-cli: " << error << "\n";
        code = AgentError;
        QCoreApplication::exit(0);
    });
    if (const Status driven = runner.drive(studyId); !driven) {
        err() << "scalelab-cli: " << driven.error() << "\n";
        return BadInput;
    }
    // Ctrl-C leaves the study as it is in the journal: `study watch` continues it.
    bool interrupted = false;
    interrupts->onInterrupt([&](int) {
        interrupted = true;
        QCoreApplication::exit(0);
    });
    QCoreApplication::exec();
    if (interrupted) {
        progress.clear();
        tensorBoard->close();
        err() << "scalelab-cli: interrupted; the study is kept in " << journal->path()
              << "; continue it with: scalelab-cli study watch " << studyId << "\n";
        err().flush(); // before local agents are stopped, which takes a while
        return RunFailed;
    }
    progress.clear();
    const StudySnapshot snapshot = runner.snapshot();
    if (code == AgentError)
        tensorBoard->close(); // the journal failed: what was written stays, the end is unknown
    else
        tensorBoard->finish(snapshot);
    if (json)
        out() << QJsonDocument(studyJson(snapshot)).toJson(QJsonDocument::Compact) << "\n";
    else
        printStudy(snapshot);
    out().flush();
    return code;
}

// The plan inside a JSON report (its "plan" member), checked like a plan file.
Checked<v1::StudyPlan> planFromReport(const QString &path, QJsonObject *report)
{
    using Plan = Checked<v1::StudyPlan>;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return Plan::failure(
            { QStringLiteral("cannot read the report %1: %2").arg(path, file.errorString()) });
    QJsonParseError error {};
    const QJsonDocument document = QJsonDocument::fromJson(file.readAll(), &error);
    if (error.error != QJsonParseError::NoError || !document.isObject()
        || document.object().value(QLatin1String("format")).toString()
            != QLatin1String("scalelab-study-report")) {
        return Plan::failure({ QStringLiteral(
            "%1 is not a ScaleLab JSON report (scalelab-cli report ID --format json writes one)")
                                   .arg(path) });
    }
    *report = document.object();
    const QJsonObject plan = report->value(QLatin1String("plan")).toObject();
    if (plan.isEmpty())
        return Plan::failure(
            { QStringLiteral("%1 carries no plan: it was written by a ScaleLab older than 0.2; "
                             "rerun its study from the plan file instead (scalelab-cli study run "
                             "PLAN.json)")
                    .arg(path) });
    auto parsed = parsePlanJson(QJsonDocument(plan).toJson(QJsonDocument::Compact));
    if (!parsed)
        return parsed;
    if (const CheckStatus valid = checkPlan(*parsed); !valid)
        return valid;
    return parsed;
}

// Says so when an agent's copy of the data set is not the one the report's runs used.
void compareDatasets(const QJsonObject &report, const QList<AgentEndpoint> &agents)
{
    QString name, sha;
    for (const auto &run : report.value(QLatin1String("runs")).toArray()) {
        const QJsonObject recipe = run.toObject().value(QLatin1String("recipe")).toObject();
        name = recipe.value(QLatin1String("dataset")).toString();
        sha = recipe.value(QLatin1String("dataset_sha256")).toString();
        if (!sha.isEmpty())
            break;
    }
    if (sha.isEmpty())
        return;
    for (const auto &a : agents) {
        AgentClient client(a.address, a.token);
        v1::DescribeResponse d;
        if (!client.describe(&d).ok())
            continue;
        for (const auto &ds : d.datasets())
            if (QString::fromStdString(ds.name()) == name && !ds.content_sha256().empty()
                && QString::fromStdString(ds.content_sha256()) != sha)
                err() << "WARNING: data set " << name << " on " << a.name
                      << " is not the one the report's runs "
                      << "used (sha256 " << QString::fromStdString(ds.content_sha256()).left(12)
                      << "…, the report's " << sha.left(12) << "…): results will differ\n";
    }
}

int runStudy(const QStringList &arguments, bool fromReport)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    addAgentOptions(parser);
    parser.addOptions(
        { { QStringLiteral("synthetic"),
              QStringLiteral(
                  "Create the plan's data set as a SYNTHETIC CIFAR-format set on agents that lack it.") },
            { QStringLiteral("synthetic-train"), QStringLiteral("Train images of a created synthetic set."),
                QStringLiteral("n"), QStringLiteral("2000") },
            { QStringLiteral("synthetic-test"), QStringLiteral("Test images of a created synthetic set."),
                QStringLiteral("n"), QStringLiteral("500") },
            { QStringLiteral("synthetic-kind"),
                QStringLiteral(
                    "Kind of a created synthetic set: patterns (easy: learnt to ~100 % in an epoch) or "
                    "shapes (ten shapes in random colours and places: closer to real data)."),
                QStringLiteral("kind"), QStringLiteral("patterns") } });
    addTensorBoardOption(parser);
    parser.addPositionalArgument(fromReport ? QStringLiteral("report") : QStringLiteral("plan"),
        fromReport ? QStringLiteral(
            "A JSON report of the study to run again (scalelab-cli report ID --format json).")
                   : QStringLiteral("Study plan (JSON; see `study plan --example`)."));
    int code = Ok;
    if (!parse(parser, arguments,
            (fromReport
                    ? QStringLiteral("Run a study again from its JSON report: the same plan, as a new study.")
                    : QStringLiteral("Run a study plan to its end: baseline and distributed runs, "
                                     "retried from checkpoints, recorded in the journal."))
                + interruptHelp(QString::fromLatin1(kLeavesTheStudy)),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(fromReport ? QStringLiteral("give one report: scalelab-cli study rerun REPORT.json")
                                   : QStringLiteral("give one plan file: scalelab-cli study run PLAN.json"));
    const QString kind = parser.value(QStringLiteral("synthetic-kind"));
    if (kind != QLatin1String("patterns") && kind != QLatin1String("shapes"))
        return badInput(QStringLiteral("--synthetic-kind must be patterns or shapes (got %1)").arg(kind));
    QJsonObject report;
    const QString source = parser.positionalArguments().at(0);
    const auto plan = fromReport ? planFromReport(source, &report) : loadPlan(source);
    if (!plan)
        return badInput(QStringLiteral("%1:\n  %2").arg(source, plan.error().join(QLatin1String("\n  "))));
    // Before the agents: stopping local ones stays within the guard's reach.
    InterruptGuard interrupts;
    Journal journal;
    if (!openJournal(parser, &journal))
        return BadInput;
    // The plan's agents, unless the command line names its own.
    QStringList planAgents;
    if (const QStringList specs = planAgentSpecs(*plan); !specs.isEmpty()) {
        if (agentsGiven(parser)) {
            err() << "the plan's agents (" << specs.join(QLatin1String(", "))
                  << ") are replaced by the command line's\n";
        } else {
            const AgentAddresses named = resolveAgentSpecs(specs, QFileInfo(source).absolutePath());
            if (!named.ok())
                return badInput(QStringLiteral("%1: agents: %2").arg(source, named.error()));
            planAgents = *named;
            err() << "agents from the plan: " << planAgents.join(QLatin1String(", ")) << "\n";
        }
    }
    Agents agents;
    if (int rc = setUpAgents(parser, &agents, planAgents); rc != Ok)
        return rc;
    if (parser.isSet(QStringLiteral("synthetic")))
        if (int rc = ensureSyntheticDataset(agents.endpoints, QString::fromStdString(plan->dataset()),
                parser.value(QStringLiteral("synthetic-train")).toInt(),
                parser.value(QStringLiteral("synthetic-test")).toInt(), kind);
            rc != Ok)
            return rc;
    if (fromReport)
        compareDatasets(report, agents.endpoints);
    if (interrupts.requested()) {
        err() << "scalelab-cli: interrupted before the study was created: nothing was started\n";
        return RunFailed;
    }
    StudyRunner creator(&journal);
    creator.setAgents(agents.endpoints);
    const auto created = creator.createStudy(*plan, QFileInfo(source).absolutePath());
    if (!created)
        return badInput(created.error());
    const QString studyId = created.value();
    err() << "study " << studyId
          << (fromReport ? QStringLiteral(" created from %1 (study %2)")
                               .arg(source, report.value(QLatin1String("study_id")).toString())
                         : QStringLiteral(" created"))
          << "; if this command stops, continue with: scalelab-cli study watch " << studyId << "\n";
    err().flush();
    TensorBoardOutput tensorBoard(parser);
    return driveStudy(
        &journal, studyId, agents.endpoints, parser.isSet(QStringLiteral("json")), &tensorBoard, &interrupts);
}

int watchStudy(const QStringList &arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    addAgentOptions(parser);
    addTensorBoardOption(parser);
    parser.addPositionalArgument(QStringLiteral("id"), QStringLiteral("Study id (see `study list`)."));
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral("Reattach to a study and drive it to its end.")
                + interruptHelp(QString::fromLatin1(kLeavesTheStudy)),
            &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(QStringLiteral("give one study id: scalelab-cli study watch ID"));
    InterruptGuard interrupts; // before the agents, as in runStudy
    Journal journal;
    QString studyId;
    if (!openStudy(parser, &journal, &studyId))
        return BadInput;
    const StudyState state = StudyState::replay(journal.events(studyId));
    Agents agents;
    // Agents named in the journal are reached at their address, unless they were local.
    bool local = false;
    for (const QString &name : state.agents())
        local = local || name.startsWith(QLatin1String("local-"));
    if (local && !agentsGiven(parser)) {
        QStringList args = arguments;
        args << QStringLiteral("--local-agents") << QString::number(state.agents().size());
        QCommandLineParser again;
        addJournalOptions(again);
        addAgentOptions(again);
        addTensorBoardOption(again);
        again.addHelpOption();
        again.parse(args);
        if (int rc = setUpAgents(again, &agents); rc != Ok)
            return rc;
    } else if (agentsGiven(parser)) { // else the journal's agents, reached below: no local one to start
        if (int rc = setUpAgents(parser, &agents); rc != Ok)
            return rc;
    }
    if (!local && !agentsGiven(parser))
        agents.endpoints.clear(); // the journal's addresses; only the token is needed
    if (!local) {
        QString token;
        if (const int rc = readToken(parser, &token); rc != Ok)
            return rc;
        for (const QString &name : state.agents())
            if (std::none_of(agents.endpoints.begin(), agents.endpoints.end(),
                    [&](const AgentEndpoint &e) { return e.name == name; }))
                agents.endpoints << AgentEndpoint { name, name, token };
    }
    TensorBoardOutput tensorBoard(parser);
    return driveStudy(
        &journal, studyId, agents.endpoints, parser.isSet(QStringLiteral("json")), &tensorBoard, &interrupts);
}

int listStudies(const QStringList &arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    int code = Ok;
    if (!parse(parser, arguments, QStringLiteral("List the studies in the journal."), &code))
        return code;
    Journal journal;
    if (!openJournal(parser, &journal))
        return BadInput;
    QJsonArray all;
    for (const QString &id : journal.studyIds()) {
        const StudyState state = StudyState::replay(journal.events(id));
        int done = 0;
        for (const auto &r : state.runs())
            done += isTerminal(r.phase) ? 1 : 0;
        if (parser.isSet(QStringLiteral("json"))) {
            all.append(QJsonObject { { QStringLiteral("studyId"), id },
                { QStringLiteral("name"), state.name() }, { QStringLiteral("state"), state.state() },
                { QStringLiteral("runs"), int(state.runs().size()) }, { QStringLiteral("runsEnded"), done },
                { QStringLiteral("createdUnixMs"), double(state.createdUnixMs()) } });
            continue;
        }
        out() << id << "  " << state.name() << "  " << state.state() << "  " << done << "/"
              << state.runs().size() << " runs ended  created "
              << QDateTime::fromMSecsSinceEpoch(state.createdUnixMs()).toString(Qt::ISODate) << "\n";
    }
    if (parser.isSet(QStringLiteral("json")))
        out() << QJsonDocument(all).toJson(QJsonDocument::Compact) << "\n";
    else if (journal.studyIds().isEmpty())
        out() << "no studies in " << journal.path()
              << " (start one with: scalelab-cli study run PLAN.json)\n";
    return Ok;
}

int showStudy(const QStringList &arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    parser.addPositionalArgument(QStringLiteral("id"), QStringLiteral("Study id."));
    int code = Ok;
    if (!parse(parser, arguments, QStringLiteral("Show a study's runs and results."), &code))
        return code;
    if (parser.positionalArguments().size() != 1)
        return badInput(QStringLiteral("give one study id: scalelab-cli study show ID"));
    StudySnapshot snapshot;
    QString studyId;
    if (!openSnapshot(parser, &snapshot, &studyId))
        return BadInput;
    if (parser.isSet(QStringLiteral("json")))
        out() << QJsonDocument(studyJson(snapshot)).toJson(QJsonDocument::Compact) << "\n";
    else
        printStudy(snapshot);
    return Ok;
}

// `study cancel ID [--run RUN]` and `study retry ID --run RUN`: both are requests written
// to the journal, which the process driving the study acts on.
int requestStudyChange(const QStringList &arguments, bool retry)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("run"),
        retry ? QStringLiteral("The FAILED or CANCELLED run to retry.")
              : QStringLiteral("Cancel only this run."),
        QStringLiteral("id") });
    parser.addPositionalArgument(QStringLiteral("id"), QStringLiteral("Study id."));
    int code = Ok;
    const QString what = retry
        ? QStringLiteral("Retry a FAILED or CANCELLED run: one more attempt, from its last checkpoint.")
        : QStringLiteral("Cancel a study (or one run): its runs are stopped.");
    if (!parse(parser, arguments, what, &code))
        return code;
    const QString usage = retry ? QStringLiteral("scalelab-cli study retry ID --run RUN")
                                : QStringLiteral("scalelab-cli study cancel ID [--run RUN]");
    if (parser.positionalArguments().size() != 1)
        return badInput(QStringLiteral("give one study id: %1").arg(usage));
    const QString runId = parser.value(QStringLiteral("run"));
    if (retry && runId.isEmpty())
        return badInput(QStringLiteral("say which run to retry: %1").arg(usage));
    Journal journal;
    if (!openJournal(parser, &journal))
        return BadInput;
    const QString studyId = parser.positionalArguments().at(0);
    // A retry may go to agents the study did not have.
    const AgentAddresses given = givenAgents(parser);
    if (!given.ok())
        return badInput(given.error());
    const QStringList addAgents = *given;
    const Status recorded = retry ? StudyRunner::requestRetry(&journal, studyId, runId, addAgents)
                                  : StudyRunner::requestCancel(&journal, studyId, runId);
    if (!recorded)
        return badInput(recorded.error());
    out() << (retry ? "retry of " : "cancel of ") << (runId.isEmpty() ? studyId : runId)
          << " recorded; the process driving the study acts on it (or `study watch " << studyId
          << "` does, if none is)\n";
    return Ok;
}

// `study continue ID --run RUN|best --epochs N`: one more stretch of a tune's trial,
// recorded, then driven to its end as `study watch` would.
int continueTrial(const QStringList &arguments)
{
    QCommandLineParser parser;
    addJournalOptions(parser);
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("run"),
        QStringLiteral("The trial to continue (a run id), or \"best\" for the best so far."),
        QStringLiteral("id") });
    parser.addOption({ QStringLiteral("epochs"), QStringLiteral("How many more epochs to train it."),
        QStringLiteral("n") });
    parser.addPositionalArgument(QStringLiteral("id"), QStringLiteral("Tune (study) id."));
    int code = Ok;
    if (!parse(parser, arguments,
            QStringLiteral("Continue a tune's trial for more epochs, from its last checkpoint, and drive the "
                           "tune to its end.")
                + interruptHelp(QString::fromLatin1(kLeavesTheStudy)),
            &code))
        return code;
    const QString usage = QStringLiteral("scalelab-cli study continue ID --run RUN|best --epochs N");
    if (parser.positionalArguments().size() != 1 || !parser.isSet(QStringLiteral("run"))
        || !parser.isSet(QStringLiteral("epochs")))
        return badInput(QStringLiteral("give a tune, a trial and a number of epochs: %1").arg(usage));
    bool ok = false;
    const int more = parser.value(QStringLiteral("epochs")).toInt(&ok);
    if (!ok)
        return badInput(QStringLiteral("--epochs: \"%1\" is not a whole number")
                            .arg(parser.value(QStringLiteral("epochs"))));
    Journal journal;
    QString studyId;
    if (!openStudy(parser, &journal, &studyId))
        return BadInput;
    QString runId = parser.value(QStringLiteral("run"));
    if (runId == QLatin1String("best")) {
        const StudySnapshot s = buildSnapshot(StudyState::replay(journal.events(studyId)), journal);
        const int best = bestTrialIndex(s);
        if (best < 0)
            return badInput(QStringLiteral("tune %1 has no trial with a result yet").arg(studyId));
        runId = s.runs[best].runId;
    } else if (!runId.startsWith(studyId)) {
        runId = studyId + QLatin1Char('-') + runId; // "t03"
    }
    if (const Status recorded = StudyRunner::requestContinue(&journal, studyId, runId, more); !recorded)
        return badInput(recorded.error());
    out() << "continuing " << runId << " for " << more << " more epoch(s)\n";
    out().flush();
    // Then as `study watch ID`, without this command's own options.
    QStringList rest;
    for (int i = 0; i < arguments.size(); ++i) {
        const QString &a = arguments[i];
        if (a == QLatin1String("--run") || a == QLatin1String("--epochs")) {
            ++i;
            continue;
        }
        if (a.startsWith(QLatin1String("--run=")) || a.startsWith(QLatin1String("--epochs=")))
            continue;
        rest << a;
    }
    return watchStudy(rest);
}

} // namespace

int studyCommand(QStringList arguments)
{
    const char *usage = R"(usage: scalelab-cli study SUBCOMMAND [options]

  run PLAN.json   create a study from a plan and drive it to its end
  rerun REPORT.json  run a study again from its JSON report (the plan it carries)
  watch ID        reattach to a study (after a crash or Ctrl-C) and drive it to its end
  list            the studies in the journal
  show ID         a study's runs and results
  predict ID [--workers 8,16,64] [--batch-size B] [--bandwidth 10Gbit]  step time, images/s,
                       speedup and efficiency at other worker counts, from the study's own
                       step anatomy and network probes, with a 95 % band; with a target
                       accuracy (--target 0.9, or the study's), epochs and time to it
  recommend ID [--target 0.9] [--max-workers N] [--deadline 30m]  the workers x batch x lr
                       rule that reaches the target soonest (or in time with the fewest workers)
  cancel ID       cancel a study (--run RUN for one run)
  retry ID --run RUN [--agent HOST:PORT]  one more attempt of a FAILED or CANCELLED run, from
                       its checkpoint (also on agents the study did not have, via the
                       console's copy of the checkpoint)
  continue ID --run RUN|best --epochs N  train a tune's trial N more epochs from its last
                       checkpoint (its schedule stretched to the new length), then drive the tune
  plan            print an example plan (--example, --example-tune) or check one (--check FILE)
)";
    if (arguments.size() < 2 || arguments[1] == QLatin1String("--help")
        || arguments[1] == QLatin1String("-h")) {
        out() << usage << environmentHelp();
        return arguments.size() < 2 ? BadInput : Ok;
    }
    const QString sub = arguments.takeAt(1);
    arguments[0] = QStringLiteral("scalelab-cli study ") + sub;
    if (sub == QLatin1String("run"))
        return runStudy(arguments, false);
    if (sub == QLatin1String("rerun"))
        return runStudy(arguments, true);
    if (sub == QLatin1String("watch"))
        return watchStudy(arguments);
    if (sub == QLatin1String("list"))
        return listStudies(arguments);
    if (sub == QLatin1String("show"))
        return showStudy(arguments);
    if (sub == QLatin1String("predict"))
        return predictStudy(arguments);
    if (sub == QLatin1String("recommend"))
        return recommendStudy(arguments);
    if (sub == QLatin1String("cancel"))
        return requestStudyChange(arguments, false);
    if (sub == QLatin1String("retry"))
        return requestStudyChange(arguments, true);
    if (sub == QLatin1String("plan"))
        return planCommand(arguments);
    if (sub == QLatin1String("continue"))
        return continueTrial(arguments);
    return badInput(QStringLiteral("unknown study command '%1'; see `scalelab-cli study --help`").arg(sub));
}

} // namespace scalelab::app
