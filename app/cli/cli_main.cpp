// scalelab-cli: the console's actions without a display. Tests and benchmarks drive
// the product through it.
//
// Exit codes: 0 success; 1 the run failed or was cancelled; 2 bad input;
// 3 the agent could not be reached or refused the request.
#include "cli_common.h"
#include "progress_display.h"
#include "tensorboard_output.h"

#include "agent_client.h"
#include "journal.h"
#include "local_agent.h"
#include "model_upload.h"
#include "run_record.h"
#include "run_request.h"
#include "run_watch.h"
#include "study_state.h"

#include <QDateTime>

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QTemporaryDir>
#include <QTextStream>

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <sys/socket.h>
#include <unistd.h>

using namespace scalelab;
using namespace scalelab::core;
using namespace scalelab::app;

namespace {

QString toJson(const google::protobuf::Message &message)
{
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    google::protobuf::util::MessageToJsonString(message, &json, options);
    return QString::fromStdString(json);
}

// Where the CLI talks to: a given agent, or a local one it starts and owns.
struct AgentConnection {
    std::unique_ptr<LocalAgent> local;
    std::unique_ptr<AgentClient> client;
};

void addAgentOptions(QCommandLineParser &parser)
{
    parser.addOption({ QStringLiteral("agent"),
        QStringLiteral("Agent address HOST:PORT. Without it a local agent is started "
                       "on 127.0.0.1 and stopped at the end."),
        QStringLiteral("host:port") });
    parser.addOption({ QStringLiteral("token-file"),
        QStringLiteral("File with the agent's token (or set SCALELAB_TOKEN)."), QStringLiteral("path") });
    parser.addOption({ QStringLiteral("data-dir"),
        QStringLiteral("Data folder for the local agent (ignored with --agent)."), QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("state-dir"),
        QStringLiteral("State folder for the local agent (ignored with --agent)."), QStringLiteral("dir") });
}

int connect(const QCommandLineParser &parser, AgentConnection *connection)
{
    QString endpoint = parser.value(QStringLiteral("agent"));
    QString token;
    if (const int rc = readToken(parser, &token); rc != Ok)
        return rc;
    if (endpoint.isEmpty()) {
        connection->local = std::make_unique<LocalAgent>();
        LocalAgentOptions options;
        options.dataDir = parser.value(QStringLiteral("data-dir"));
        options.stateDir = parser.value(QStringLiteral("state-dir"));
        if (const Status started = connection->local->start(options); !started) {
            err() << "scalelab-cli: " << started.error() << "\n";
            return connection->local->refusedConfiguration() ? BadInput : AgentError;
        }
        endpoint = connection->local->endpoint();
        token = connection->local->token();
        err() << "started a local agent at " << endpoint << " (log: " << connection->local->logFile()
              << ")\n";
        err().flush();
    } else if (const QString problem = AgentClient::checkEndpoint(endpoint).error(); !problem.isEmpty()) {
        return badInput(problem);
    }
    connection->client = std::make_unique<AgentClient>(endpoint, token);
    return Ok;
}

QString percent(double fraction)
{
    return QString::number(fraction * 100.0, 'f', 2) + QLatin1Char('%');
}

// Follows one run until its terminal event, printing as it goes.
class RunFollower : public QObject {
public:
    RunFollower(AgentClient *client, const QString &runId, const RunRequest &request, bool json,
        TensorBoardOutput *tensorBoard)
        : m_watch(client, runId)
        , m_record(runId)
        , m_request(request)
        , m_json(json)
        , m_tensorBoard(tensorBoard)
    {
        if (!json && ProgressDisplay::stdoutIsTerminal())
            m_progress.emplace(true);
        QObject::connect(&m_watch, &RunWatch::eventsArrived, this, [this] { drain(); });
        QObject::connect(&m_watch, &RunWatch::unreachable, this, [this](const QString &error, qint64 since) {
            notice(QStringLiteral("%1: agent unreachable since %2 (%3); still trying for up to a minute")
                       .arg(m_record.runId(), QDateTime::fromMSecsSinceEpoch(since).toString(QStringLiteral("HH:mm:ss")),
                           error));
        });
        QObject::connect(&m_watch, &RunWatch::reachable, this,
            [this] { notice(m_record.runId() + QStringLiteral(": agent answers again")); });
        QObject::connect(&m_watch, &RunWatch::finished, this, [this](const QString &error) {
            drain();
            m_streamError = error;
            QCoreApplication::exit(0);
        });
    }

    int follow()
    {
        m_watch.start(1);
        QCoreApplication::exec();
        return report();
    }

private:
    void drain()
    {
        const std::vector<v1::RunEvent> events = m_watch.takeEvents();
        m_tensorBoard->apply(m_record.runId(), 1, events);
        for (const auto &event : events) {
            m_record.apply(event);
            m_meter.apply(event);
            if (m_json) {
                out() << toJson(event) << "\n";
                continue;
            }
            printHuman(event);
        }
        if (!m_json && m_progress.has_value())
            m_progress->apply(m_record.runId(), m_record.runId(), events);
        out().flush();
    }

    // Connection trouble: on standard error, or above the live line on a terminal (where
    // both streams share the screen, and a line the live line does not know of would be
    // drawn over).
    void notice(const QString &text)
    {
        if (m_progress) {
            m_progress->print(text);
        } else {
            err() << text << "\n";
            err().flush();
        }
    }

    // A line of output, above the live progress line on a terminal.
    void line(const QString &text)
    {
        if (m_progress)
            m_progress->print(text);
        else
            out() << text << "\n";
    }

    void printHuman(const v1::RunEvent &event)
    {
        const QString id = m_record.runId();
        switch (event.kind_case()) {
        case v1::RunEvent::kState:
            line(id + QLatin1Char(' ') + RunRecord::stateName(event.state().state()) + QStringLiteral(": ")
                + QString::fromStdString(event.state().message()));
            break;
        case v1::RunEvent::kStarted: {
            const auto &s = event.started();
            line(QStringLiteral("%1 data set %2%3: %4 train / %5 test images, %6 parameters, %7 thread(s) on %8, "
                                "%9 steps per epoch, %10 worker(s), global batch %11%12")
                     .arg(id, QString::fromStdString(s.dataset().name()),
                         s.dataset().synthetic() ? QStringLiteral(" [SYNTHETIC DATA]") : QString())
                     .arg(s.dataset().train_images())
                     .arg(s.dataset().test_images())
                     .arg(s.parameters())
                     .arg(s.threads())
                     .arg(QString::fromStdString(s.device()))
                     .arg(s.steps_per_epoch())
                     .arg(s.world_size())
                     .arg(s.global_batch())
                     .arg(s.resumed_from_epoch() > 0
                             ? QStringLiteral(", resumed after epoch %1").arg(s.resumed_from_epoch())
                             : QString()));
            m_stepsPerEpoch = s.steps_per_epoch();
            break;
        }
        case v1::RunEvent::kStep: {
            if (m_progress)
                break; // the live line shows it
            // Every 10th step and each epoch's last: live, but readable.
            const auto &s = event.step();
            const bool lastOfEpoch = m_stepsPerEpoch > 0 && s.step() % m_stepsPerEpoch == 0;
            if (s.step() % 10 == 0 || s.step() == 1 || lastOfEpoch)
                line(QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss "))
                    + core::formatProgress(id, m_meter.view(), 0));
            break;
        }
        case v1::RunEvent::kEpoch: {
            const auto &e = event.epoch();
            line(QStringLiteral("%1 epoch %2 done: train loss %3, train acc %4, test loss %5, test acc %6, %7 s, "
                                "%8 img/s")
                     .arg(id)
                     .arg(e.epoch())
                     .arg(QString::number(e.train_loss(), 'f', 4), percent(e.train_accuracy()),
                         QString::number(e.test_loss(), 'f', 4), percent(e.test_accuracy()),
                         QString::number(e.epoch_seconds(), 'f', 1), QString::number(e.images_per_second(), 'f', 1)));
            break;
        }
        case v1::RunEvent::kCheckpoint:
            line(QStringLiteral("%1 checkpoint after epoch %2 committed").arg(id).arg(event.checkpoint().epoch()));
            break;
        case v1::RunEvent::kStall:
            line(id + QLatin1Char(' ') + QString::fromStdString(event.stall().message()));
            break;
        case v1::RunEvent::kLog:
            if (event.log().stream() == "error")
                line(QStringLiteral("%1 rank %2 error: %3")
                         .arg(id)
                         .arg(event.rank())
                         .arg(QString::fromStdString(event.log().text())));
            break;
        default:
            break;
        }
    }

    int report()
    {
        if (m_progress)
            m_progress->clear();
        m_tensorBoard->close();
        const auto &summary = m_record.summary();
        if (!m_record.terminal()) {
            err() << "scalelab-cli: lost the run's event stream: " << m_streamError << "\n";
            return AgentError;
        }
        const double wall = summary ? summary->wall_seconds() : 0;
        const QString line
            = QStringLiteral("run %1 %2 workers=%3 batch=%4 epochs=%5 test_accuracy=%6 "
                             "wall_seconds=%7 images_per_second=%8%9")
                  .arg(m_record.runId(), RunRecord::stateName(m_record.state()))
                  .arg(m_request.workers)
                  .arg(m_request.batchSize)
                  .arg(m_request.epochs)
                  .arg(summary ? percent(summary->final_test_accuracy()) : QStringLiteral("-"))
                  .arg(QString::number(wall, 'f', 2))
                  .arg(summary ? QString::number(summary->images_per_second(), 'f', 1) : QStringLiteral("-"))
                  .arg(m_record.synthetic() ? QStringLiteral(" data=SYNTHETIC") : QString());
        if (m_json) {
            v1::RunSummary s = summary.value_or(v1::RunSummary());
            out() << "{\"final\":" << toJson(s) << ",\"run_id\":\"" << m_record.runId()
                  << "\",\"workers\":" << m_request.workers << ",\"batch_size\":" << m_request.batchSize
                  << ",\"epochs\":" << m_request.epochs
                  << ",\"synthetic\":" << (m_record.synthetic() ? "true" : "false")
                  << ",\"last_seq\":" << m_record.lastSeq() << ",\"gaps\":" << m_record.gaps()
                  << ",\"duplicates\":" << m_record.duplicates() << "}\n";
        } else {
            if (m_record.state() != v1::SUCCEEDED)
                out() << m_record.runId() << " " << m_record.stateMessage() << "\n";
            out() << line << "\n";
        }
        out().flush();
        return m_record.state() == v1::SUCCEEDED ? Ok : RunFailed;
    }

    RunWatch m_watch;
    RunRecord m_record;
    RunRequest m_request;
    bool m_json;
    TensorBoardOutput *m_tensorBoard; // --tensorboard: the run's event files, live
    QString m_streamError;
    qint64 m_stepsPerEpoch = 0;
    core::ProgressMeter m_meter;
    // On a terminal: the live progress line (none with --json, or when not a terminal).
    std::optional<ProgressDisplay> m_progress;
};

// Ctrl-C / SIGTERM while following a run: stop the run on the agent, then exit.
int g_signalPipe[2] = { -1, -1 };
void onSignal(int)
{
    const char c = 1;
    ssize_t ignored = ::write(g_signalPipe[1], &c, 1);
    (void)ignored;
}

int runCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Start one training run and follow it to the end."));
    parser.addHelpOption();
    addAgentOptions(parser);
    parser.addOptions({
        { QStringLiteral("dataset"),
            QStringLiteral("Data set name on the agent (default: cifar-10, "
                           "or 'synthetic' with --synthetic)."),
            QStringLiteral("name") },
        { QStringLiteral("synthetic"),
            QStringLiteral("Create the data set as a SYNTHETIC CIFAR-format set "
                           "if it does not exist.") },
        { QStringLiteral("synthetic-train"), QStringLiteral("Train images of a created synthetic set."),
            QStringLiteral("n"), QStringLiteral("2000") },
        { QStringLiteral("synthetic-test"), QStringLiteral("Test images of a created synthetic set."),
            QStringLiteral("n"), QStringLiteral("500") },
        { QStringLiteral("workers"), QStringLiteral("Data-parallel workers (1 = baseline)."),
            QStringLiteral("n"), QStringLiteral("1") },
        { QStringLiteral("batch-size"), QStringLiteral("Images per step per worker."), QStringLiteral("n"),
            QStringLiteral("64") },
        { QStringLiteral("epochs"), QStringLiteral("Passes over the training split."), QStringLiteral("n"),
            QStringLiteral("1") },
        { QStringLiteral("lr"), QStringLiteral("Learning rate (0 = trainer default)."), QStringLiteral("x"),
            QStringLiteral("0") },
        { QStringLiteral("threads"), QStringLiteral("Threads per worker (0 = automatic)."),
            QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("model"),
            QStringLiteral(
                "Model to train: seed-cnn, resnet18, mobilenet_v2, mini-cnn, or a TorchScript module's file "
                "(FILE.pt, saved by torch.jit.script(model).save): sent to the agent first."),
            QStringLiteral("name"), QStringLiteral("seed-cnn") },
        { QStringLiteral("seed"), QStringLiteral("Seed for weights and shuffling."), QStringLiteral("n"),
            QStringLiteral("1") },
        { QStringLiteral("max-train-images"), QStringLiteral("Use only the first N training images."),
            QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("max-test-images"), QStringLiteral("Use only the first N test images."),
            QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("run-id"), QStringLiteral("Run id (default: generated)."), QStringLiteral("id") },
        { QStringLiteral("json"), QStringLiteral("Print every event and the summary as JSON lines.") },
    });
    addTensorBoardOption(parser);
    if (!parser.parse(arguments))
        return badInput(parser.errorText() + QStringLiteral("; see 'scalelab-cli run --help'"));
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        return Ok;
    }

    RunRequest request;
    QStringList problems;
    auto integer = [&](const char *name, auto *target) {
        bool ok = false;
        const qlonglong v = parser.value(QLatin1String(name)).toLongLong(&ok);
        if (!ok)
            problems << QStringLiteral("--%1 expects a whole number, got '%2'")
                            .arg(QLatin1String(name), parser.value(QLatin1String(name)));
        *target = static_cast<std::remove_pointer_t<decltype(target)>>(v);
    };
    const bool synthetic = parser.isSet(QStringLiteral("synthetic"));
    request.dataset = parser.isSet(QStringLiteral("dataset"))
        ? parser.value(QStringLiteral("dataset"))
        : (synthetic ? QStringLiteral("synthetic") : QStringLiteral("cifar-10"));
    integer("workers", &request.workers);
    integer("batch-size", &request.batchSize);
    integer("epochs", &request.epochs);
    integer("threads", &request.threadsPerWorker);
    integer("seed", &request.seed);
    integer("max-train-images", &request.maxTrainImages);
    integer("max-test-images", &request.maxTestImages);
    request.model = parser.value(QStringLiteral("model"));
    // A module's file: the run names it by its content, and the agent is sent it first.
    std::optional<ModelFile> modelFile;
    if (namesModelFile(request.model)) {
        if (auto file = readModelFile(modelFilePath(request.model)); file) {
            modelFile = *file;
            request.model = file->model();
        } else {
            problems << QStringLiteral("--model: ") + file.error();
        }
    }
    int syntheticTrain = 0, syntheticTest = 0;
    integer("synthetic-train", &syntheticTrain);
    integer("synthetic-test", &syntheticTest);
    bool lrOk = false;
    request.learningRate = parser.value(QStringLiteral("lr")).toDouble(&lrOk);
    if (!lrOk)
        problems << QStringLiteral("--lr expects a number");
    if (const CheckStatus valid = request.check(); !valid)
        problems << valid.error();
    if (!problems.isEmpty())
        return badInput(problems.join(QStringLiteral("\nscalelab-cli: ")));

    const QString runId
        = parser.isSet(QStringLiteral("run-id")) ? parser.value(QStringLiteral("run-id")) : newRunId();
    // The folder is claimed before anything starts: a refused one starts nothing.
    TensorBoardOutput tensorBoard(parser);
    if (const Status claimed = tensorBoard.startRun(request.toStartWorkers(runId)); !claimed)
        return badInput(QStringLiteral("--tensorboard: ") + claimed.error());
    AgentConnection agent;
    if (int rc = connect(parser, &agent); rc != Ok)
        return rc;
    if (modelFile) {
        v1::StoredModel stored;
        bool sent = false;
        if (const Status s = sendModel(agent.client.get(), *modelFile, &stored, &sent); !s.ok()) {
            err() << "scalelab-cli: " << modelFile->path << ": " << s.error() << "\n";
            return s.isInvalidArgument() ? BadInput : AgentError;
        }
        err() << "model " << modelFile->name << " (sha256 " << modelFile->sha256.left(12) << "…, "
              << stored.parameters() << " parameters) " << (sent ? "sent to" : "already on")
              << " the agent\n";
    }
    if (synthetic) {
        v1::CreateSyntheticDatasetRequest create;
        create.set_name(request.dataset.toStdString());
        create.set_train_images(syntheticTrain);
        create.set_test_images(syntheticTest);
        create.set_seed(request.seed);
        v1::Dataset dataset;
        const auto result = agent.client->createSyntheticDataset(create, &dataset);
        if (!result.ok()) {
            err() << "scalelab-cli: " << result.error() << "\n";
            return result.isInvalidArgument() ? BadInput : AgentError;
        }
    }

    v1::StartWorkersResponse started;
    const auto result = agent.client->startWorkers(request.toStartWorkers(runId), &started);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return result.isInvalidArgument() ? BadInput : AgentError;
    }

    // Stop the run if we are interrupted: nothing keeps training unwatched by accident.
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g_signalPipe) == 0) {
        std::signal(SIGINT, onSignal);
        std::signal(SIGTERM, onSignal);
    }
    std::thread([client = agent.client.get(), runId] {
        char c;
        if (::read(g_signalPipe[0], &c, 1) == 1) {
            err() << "\nscalelab-cli: interrupted, stopping run " << runId << "\n";
            err().flush();
            v1::StopRunResponse ignored;
            (void)client->stopRun(runId, &ignored); // the run's end (or its absence) says the rest
        }
    }).detach();

    RunFollower follower(
        agent.client.get(), runId, request, parser.isSet(QStringLiteral("json")), &tensorBoard);
    return follower.follow();
}

QString megabytes(qint64 bytes)
{
    return bytes >= 10'000'000'000 ? QStringLiteral("%1 GB").arg(double(bytes) / 1e9, 0, 'f', 1)
                                   : QStringLiteral("%1 MB").arg(double(bytes) / 1e6, 0, 'f', 1);
}

// `gc`: frees an agent's disk by its retention rule or stricter ones, and the console's
// own copies of checkpoints that no run needs any more.
int gcCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Free disk space: unfinished checkpoint folders, checkpoints of finished runs by the agent's "
        "retention rule (or --finished), and with --include-failed those of FAILED and CANCELLED runs "
        "(a later retry of such a run then starts from epoch 0). Active runs are never touched."));
    parser.addHelpOption();
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("finished"),
        QStringLiteral("What SUCCEEDED runs keep: final (their last checkpoint) or none. Default: the "
                       "agent's rule (see describe)."),
        QStringLiteral("final|none") });
    parser.addOption({ QStringLiteral("older-than-days"),
        QStringLiteral("Only runs that ended at least this many days ago."), QStringLiteral("days") });
    parser.addOption({ QStringLiteral("include-failed"),
        QStringLiteral("Also remove the checkpoints of FAILED and CANCELLED runs.") });
    parser.addOption({ QStringLiteral("dry-run"), QStringLiteral("Say what would be removed; remove nothing.") });
    parser.addOption({ QStringLiteral("console-state-dir"),
        QStringLiteral("Also tidy the console's copies of checkpoints there: the folder of the study "
                       "journal (default: $SCALELAB_STATE_DIR or ~/.local/share/scalelab)."),
        QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Print what was removed as JSON.") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        return Ok;
    }
    v1::CollectGarbageRequest request;
    const QString finished = parser.value(QStringLiteral("finished"));
    if (!finished.isEmpty() && finished != QLatin1String("final") && finished != QLatin1String("none"))
        return badInput(QStringLiteral("--finished must be final or none (got '%1')").arg(finished));
    request.set_finished_runs(finished.toStdString());
    if (parser.isSet(QStringLiteral("older-than-days"))) {
        bool ok = false;
        const double days = parser.value(QStringLiteral("older-than-days")).toDouble(&ok);
        if (!ok || !std::isfinite(days) || days < 0 || days > 36500)
            return badInput(QStringLiteral("--older-than-days must be a number from 0 to 36500 (got '%1')")
                                .arg(parser.value(QStringLiteral("older-than-days"))));
        request.set_older_than_days(days);
    }
    request.set_include_failed(parser.isSet(QStringLiteral("include-failed")));
    request.set_dry_run(parser.isSet(QStringLiteral("dry-run")));
    AgentConnection agent;
    if (int rc = connect(parser, &agent); rc != Ok)
        return rc;
    v1::CollectGarbageResponse response;
    const auto result = agent.client->collectGarbage(request, &response);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return AgentError;
    }
    // The console's copies: runs of studies in this journal that SUCCEEDED keep none (the
    // runner removes them as they end; leftovers of a crash go here), and with
    // --include-failed FAILED and CANCELLED runs' copies go too.
    const QString stateDir = parser.isSet(QStringLiteral("console-state-dir"))
        ? parser.value(QStringLiteral("console-state-dir"))
        : defaultStateDir();
    qint64 localBytes = 0;
    QStringList localRemoved;
    if (QFileInfo::exists(stateDir + QStringLiteral("/journal.sqlite"))) {
        Journal journal;
        if (const Status opened = journal.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
            return badInput(opened.error());
        for (const QString &studyId : journal.studyIds()) {
            const StudyState state = StudyState::replay(journal.events(studyId));
            for (const auto &run : state.runs()) {
                const bool done = run.phase == RunPhase::Succeeded
                    || (request.include_failed() && (run.phase == RunPhase::Failed || run.phase == RunPhase::Cancelled));
                const QString dir = stateDir + QStringLiteral("/checkpoints/") + run.planned.runId;
                if (!done || !QFileInfo::exists(dir))
                    continue;
                QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
                while (it.hasNext()) {
                    it.next();
                    localBytes += it.fileInfo().size();
                }
                localRemoved << dir;
                if (!request.dry_run())
                    QDir(dir).removeRecursively();
            }
        }
    }
    if (parser.isSet(QStringLiteral("json"))) {
        out() << toJson(response) << "\n";
        return Ok;
    }
    const char *verb = request.dry_run() ? "would remove" : "removed";
    for (const auto &r : response.removed())
        out() << verb << " " << QString::fromStdString(r.path()) << " (" << megabytes(r.bytes()) << "): "
              << QString::fromStdString(r.why()) << "\n";
    for (const QString &dir : localRemoved)
        out() << verb << " " << dir << " (the console's copy of a finished run's checkpoint)\n";
    out() << "agent " << agent.client->endpoint() << ": " << verb << " " << response.removed_size()
          << " folder(s), " << megabytes(response.bytes_freed()) << "; "
          << megabytes(response.storage().free_bytes()) << " free now\n";
    if (!localRemoved.isEmpty())
        out() << "console state " << stateDir << ": " << verb << " " << localRemoved.size() << " folder(s), "
              << megabytes(localBytes) << "\n";
    return Ok;
}

int describeCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Show an agent's inventory: node, data sets, runs."));
    parser.addHelpOption();
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Print the inventory as JSON.") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        return Ok;
    }
    AgentConnection agent;
    if (int rc = connect(parser, &agent); rc != Ok)
        return rc;
    v1::DescribeResponse inventory;
    const auto result = agent.client->describe(&inventory);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return AgentError;
    }
    if (parser.isSet(QStringLiteral("json"))) {
        out() << toJson(inventory) << "\n";
        return Ok;
    }
    out() << "agent " << agent.client->endpoint() << ": " << QString::fromStdString(inventory.hostname())
          << ", scalelab-agent " << QString::fromStdString(inventory.agent_version()) << ", "
          << inventory.cpu_cores() << " CPU cores, "
          << QString::number(double(inventory.memory_bytes()) / (1 << 30), 'f', 1) << " GiB, "
          << inventory.gpus_size() << " GPU(s)\n";
    if (!inventory.advertise_address().empty())
        out() << "ranks reached at " << QString::fromStdString(inventory.advertise_address())
              << (inventory.network_interface().empty()
                         ? QString()
                         : QStringLiteral(" on ") + QString::fromStdString(inventory.network_interface()))
              << " (" << QString::fromStdString(inventory.network_note()) << ")\n";
    if (!inventory.network_warning().empty())
        out() << "warning: " << QString::fromStdString(inventory.network_warning()) << "\n";
    if (!inventory.cpu_model().empty())
        out() << "cpu: " << QString::fromStdString(inventory.cpu_model()) << "\n";
    for (const auto &[component, version] : inventory.software())
        out() << component.c_str() << ": " << QString::fromStdString(version) << "\n";
    out() << "data sets in " << QString::fromStdString(inventory.data_dir()) << ":\n";
    if (inventory.datasets().empty())
        out() << "  none (create one with: scalelab-cli run --synthetic, or extract "
                 "cifar-10-binary.tar.gz there)\n";
    for (const auto &d : inventory.datasets()) {
        out() << "  " << QString::fromStdString(d.name()) << ": " << d.train_images() << " train / "
              << d.test_images() << " test images"
              << (d.synthetic() ? QStringLiteral(" [SYNTHETIC, %1]").arg(QString::fromStdString(d.synthetic_kind()))
                                : QString())
              << "\n";
        if (d.channel_mean_size() == 3 && d.channel_std_size() == 3)
            out() << "    normalisation mean " << d.channel_mean(0) << " " << d.channel_mean(1) << " " << d.channel_mean(2)
                  << ", std " << d.channel_std(0) << " " << d.channel_std(1) << " " << d.channel_std(2) << "; sha256 "
                  << QString::fromStdString(d.content_sha256()) << "\n";
    }
    if (inventory.has_storage()) {
        const auto &st = inventory.storage();
        out() << "disk: " << QString::fromStdString(st.state_dir()) << ": " << megabytes(st.free_bytes())
              << " free of " << megabytes(st.total_bytes()) << "; checkpoints " << megabytes(st.checkpoint_bytes())
              << " (" << st.runs_with_checkpoints() << " runs), unfinished " << megabytes(st.temporary_bytes())
              << ", records " << megabytes(st.record_bytes()) << "\n"
              << "retention: " << QString::fromStdString(st.retention()) << " (free space now: scalelab-cli gc)\n";
    }
    out() << "runs: " << inventory.runs_recorded() << " recorded";
    if (inventory.runs_recorded() > inventory.runs_size())
        out() << "; active and latest finished (every run: scalelab-cli runs)";
    out() << "\n";
    for (const auto &r : inventory.runs())
        out() << "  " << QString::fromStdString(r.run_id()) << " attempt " << r.attempt() << " "
              << RunRecord::stateName(r.state()) << "\n";
    return Ok;
}

// `runs`: every run an agent has recorded (ListRuns, a page at a time).
int runsCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "List every run an agent has recorded, active and finished, in run id order: attempt, state, "
        "when it ran, and why it failed."));
    parser.addHelpOption();
    addAgentOptions(parser);
    parser.addOption({ QStringLiteral("limit"), QStringLiteral("At most this many runs (default: all)."),
        QStringLiteral("n") });
    parser.addOption({ QStringLiteral("after"), QStringLiteral("Only runs whose id sorts after this one."),
        QStringLiteral("run-id") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Print the runs as JSON (ListRunsResponse).") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        return Ok;
    }
    qint64 limit = std::numeric_limits<qint64>::max();
    if (parser.isSet(QStringLiteral("limit"))) {
        bool ok = false;
        limit = parser.value(QStringLiteral("limit")).toLongLong(&ok);
        if (!ok || limit < 1)
            return badInput(QStringLiteral("--limit must be a whole number of 1 or more (got '%1')")
                                .arg(parser.value(QStringLiteral("limit"))));
    }
    AgentConnection agent;
    if (int rc = connect(parser, &agent); rc != Ok)
        return rc;
    v1::ListRunsRequest request;
    request.set_page_token(parser.value(QStringLiteral("after")).toStdString());
    v1::ListRunsResponse all;
    for (;;) {
        request.set_page_size(int(std::min<qint64>(1000, limit - all.runs_size())));
        v1::ListRunsResponse page;
        if (const auto result = agent.client->listRuns(request, &page); !result.ok()) {
            err() << "scalelab-cli: " << result.error() << "\n";
            return AgentError;
        }
        all.set_total(page.total());
        for (auto &run : *page.mutable_runs())
            *all.add_runs() = std::move(run);
        if (page.next_page_token().empty() || all.runs_size() >= limit) {
            all.set_next_page_token(page.next_page_token()); // where --after goes on
            break;
        }
        request.set_page_token(page.next_page_token());
    }
    if (parser.isSet(QStringLiteral("json"))) {
        out() << toJson(all) << "\n";
        return Ok;
    }
    for (const auto &r : all.runs()) {
        const auto when = [](qint64 ms) {
            return ms > 0 ? QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"))
                          : QStringLiteral("-");
        };
        out() << QString::fromStdString(r.run_id()) << "  attempt " << r.attempt() << "  "
              << RunRecord::stateName(r.state()) << "  " << when(r.started_unix_ms()) << " .. "
              << when(r.ended_unix_ms())
              << (r.message().empty() || r.state() == v1::SUCCEEDED
                         ? QString()
                         : QStringLiteral("  ") + QString::fromStdString(r.message()))
              << "\n";
    }
    out() << all.runs_size() << " of " << all.total() << " run(s) recorded on " << agent.client->endpoint() << "\n";
    return Ok;
}

// Smoothed loss against log(lr), in characters: what `lr-find` shows on a terminal.
QStringList asciiPlot(const QList<v1::LrFindPoint> &points, double suggested)
{
    constexpr int kWidth = 64, kHeight = 14;
    if (points.size() < 2)
        return {};
    double low = points.first().smoothed_loss(), high = low;
    for (const auto &p : points)
        if (std::isfinite(p.smoothed_loss())) {
            low = std::min(low, p.smoothed_loss());
            high = std::max(high, p.smoothed_loss());
        }
    high = std::min(high, low + 2.5 * (points.first().smoothed_loss() - low) + 1e-9); // keep the fall readable
    const double x0 = std::log10(points.first().learning_rate()), x1 = std::log10(points.last().learning_rate());
    QList<QString> rows(kHeight, QString(kWidth, QLatin1Char(' ')));
    const auto column = [&](double lr) {
        return std::clamp(int(std::lround((std::log10(lr) - x0) / std::max(1e-12, x1 - x0) * (kWidth - 1))), 0, kWidth - 1);
    };
    for (const auto &p : points) {
        if (!std::isfinite(p.smoothed_loss()))
            continue;
        const double y = std::clamp((p.smoothed_loss() - low) / std::max(1e-12, high - low), 0.0, 1.0);
        rows[kHeight - 1 - int(std::lround(y * (kHeight - 1)))][column(p.learning_rate())] = QLatin1Char('*');
    }
    if (suggested > 0)
        for (auto &row : rows)
            if (row[column(suggested)] == QLatin1Char(' '))
                row[column(suggested)] = QLatin1Char('|');
    QStringList lines;
    for (int i = 0; i < kHeight; ++i) {
        const double value = high - (high - low) * i / (kHeight - 1);
        lines << QStringLiteral("%1 |%2").arg(QString::number(value, 'f', 3), 7).arg(rows[i]);
    }
    lines << QStringLiteral("        +%1").arg(QString(kWidth, QLatin1Char('-')));
    lines << QStringLiteral("         lr %1 … %2 (log scale); | = suggested")
                 .arg(QString::number(points.first().learning_rate(), 'g', 3), QString::number(points.last().learning_rate(), 'g', 3));
    return lines;
}

int lrFindCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Learning-rate range test: train a fresh model for a few hundred steps with the learning rate rising "
        "exponentially, and propose a value (the lr at the lowest smoothed loss / 10). Pass the global batch of "
        "the runs the value is for as --batch-size."));
    parser.addHelpOption();
    addAgentOptions(parser);
    parser.addOptions({
        { QStringLiteral("dataset"), QStringLiteral("Data set name on the agent (required)."), QStringLiteral("name") },
        { QStringLiteral("batch-size"), QStringLiteral("Images per step (the runs' global batch)."),
            QStringLiteral("n"), QStringLiteral("64") },
        { QStringLiteral("momentum"), QStringLiteral("SGD momentum (default: the trainer's)."), QStringLiteral("x") },
        { QStringLiteral("weight-decay"), QStringLiteral("Weight decay (default: the trainer's)."), QStringLiteral("x") },
        { QStringLiteral("seed"), QStringLiteral("Seed of the model and the batches."), QStringLiteral("n"),
            QStringLiteral("1") },
        { QStringLiteral("threads"), QStringLiteral("Threads (0 = all cores)."), QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("max-train-images"), QStringLiteral("Use only the first N training images."),
            QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("steps"), QStringLiteral("Steps of the test (10..100000)."), QStringLiteral("n"),
            QStringLiteral("200") },
        { QStringLiteral("min-lr"), QStringLiteral("First learning rate."), QStringLiteral("x"), QStringLiteral("1e-5") },
        { QStringLiteral("max-lr"), QStringLiteral("Last learning rate (at most 1000)."), QStringLiteral("x"),
            QStringLiteral("10") },
        { QStringLiteral("json"), QStringLiteral("Print every point and the result as JSON lines.") },
    });
    if (!parser.parse(arguments))
        return badInput(parser.errorText() + QStringLiteral("; see 'scalelab-cli lr-find --help'"));
    if (parser.isSet(QStringLiteral("help"))) {
        out() << parser.helpText() << environmentHelp();
        return Ok;
    }
    if (!parser.isSet(QStringLiteral("dataset")))
        return badInput(QStringLiteral("--dataset is required: a data set on the agent (see scalelab-cli describe)"));
    v1::FindLearningRateRequest request;
    auto *spec = request.mutable_spec();
    spec->set_dataset(parser.value(QStringLiteral("dataset")).toStdString());
    QString bad;
    const auto number = [&](const char *name, double *value) {
        bool ok = true;
        *value = parser.value(QLatin1String(name)).toDouble(&ok);
        if (!ok)
            bad = QStringLiteral("--%1 expects a number (got '%2')").arg(QLatin1String(name), parser.value(QLatin1String(name)));
        return ok;
    };
    double v = 0;
    if (number("batch-size", &v))
        spec->set_batch_size(int(v));
    if (parser.isSet(QStringLiteral("momentum")) && number("momentum", &v))
        spec->set_momentum(v);
    if (parser.isSet(QStringLiteral("weight-decay")) && number("weight-decay", &v))
        spec->set_weight_decay(v);
    if (number("seed", &v))
        spec->set_seed(quint64(v));
    if (number("threads", &v))
        spec->set_threads_per_worker(int(v));
    if (number("max-train-images", &v))
        spec->set_max_train_images(qint64(v));
    if (number("steps", &v))
        request.set_steps(int(v));
    if (number("min-lr", &v))
        request.set_min_lr(v);
    if (number("max-lr", &v))
        request.set_max_lr(v);
    if (!bad.isEmpty())
        return badInput(bad);
    AgentConnection agent;
    if (int rc = connect(parser, &agent); rc != Ok)
        return rc;
    const bool json = parser.isSet(QStringLiteral("json"));
    QList<v1::LrFindPoint> points;
    err() << "range test on " << agent.client->endpoint() << ": batch " << spec->batch_size() << ", "
          << request.steps() << " steps, lr " << request.min_lr() << " to " << request.max_lr() << "\n";
    err().flush();
    v1::LrFindResult result;
    const Status call = agent.client->findLearningRate(
        request,
        [&](const v1::LrFindProgress &progress) {
            for (const auto &p : progress.points()) {
                points << p;
                if (json)
                    out() << toJson(p) << "\n";
            }
            if (!json && !progress.points().empty()) {
                const auto &p = progress.points(progress.points_size() - 1);
                err() << "  step " << p.step() << ": lr " << QString::number(p.learning_rate(), 'g', 3) << ", smoothed loss "
                      << QString::number(p.smoothed_loss(), 'f', 3) << "\n";
                err().flush();
            }
            out().flush();
            return true;
        },
        &result);
    if (!call.ok()) {
        err() << "scalelab-cli: " << call.error() << "\n";
        return call.isInvalidArgument() || call.isFailedPrecondition() ? BadInput : AgentError;
    }
    if (json) {
        out() << toJson(result) << "\n";
        return Ok;
    }
    for (const QString &line : asciiPlot(points, result.suggested_learning_rate()))
        out() << line << "\n";
    out() << "lowest smoothed loss at lr " << QString::number(result.min_loss_learning_rate(), 'g', 4)
          << ", steepest fall at lr " << QString::number(result.steepest_learning_rate(), 'g', 4)
          << (result.stopped_early() ? ", stopped early (the loss diverged)" : "") << "\n"
          << "suggested learning rate: " << QString::number(result.suggested_learning_rate(), 'g', 4) << " for batch "
          << result.batch_size() << " (" << QString::fromStdString(result.rule()) << ")\n"
          << (result.conclusive() ? QString() : QStringLiteral("WARNING: %1\n").arg(QString::fromStdString(result.note())))
          << "use it: \"training\": { \"learningRate\": " << QString::number(result.suggested_learning_rate(), 'g', 4)
          << " } in a plan, or \"learningRate\": \"auto\" to have a study run this test first\n";
    return Ok;
}

const char *kUsage = R"(usage: scalelab-cli COMMAND [options]

Commands:
  run        start one training run (a local agent is started unless --agent is given)
             and print its live metrics and a summary line
  describe   show an agent's node, data sets and runs (alias: agents)
  runs       list every run an agent has recorded, finished ones included
  lr-find    learning-rate range test on an agent: loss against lr, and a suggested lr
  gc         free disk space on an agent (and in the console's state) by retention rules
  study      durable scale-up studies: run PLAN, watch ID, list, show ID, cancel ID, retry ID, plan
  report     export a study's report: report ID --format json|csv|html|pdf [-o FILE]
  export     a study's or run's data for other tools: export tensorboard STUDY_ID|RUN_ID DIR
  probe      the network between agents: all-reduce times of 2 ... N ranks on one host and
             across hosts, with the latency and bandwidth fitted to them

Run 'scalelab-cli COMMAND --help' for a command's options.
Exit codes: 0 success, 1 run failed or cancelled, 2 bad input, 3 agent unreachable or refused.
)";

} // namespace

QString scalelab::app::environmentHelp()
{
    return QStringLiteral(
               "\nEnvironment:\n"
               "  SCALELAB_TOKEN            the agents' token (--token-file wins)\n")
        + AgentTls::environmentHelp()
        + QStringLiteral(
            "  SCALELAB_STATE_DIR        default --state-dir of study and report (the journal, local agents)\n"
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
