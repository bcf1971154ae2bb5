// `scalelab-cli run`: one training run on one agent, followed to its end (live progress on a
// terminal, JSON lines with --json, TensorBoard event files with --tensorboard). Ctrl-C or
// SIGTERM stops the run on the agent and follows it to its end (exit 1 once CANCELLED); a
// second one exits at once (interrupts.h).
#include "agent_connection.h"
#include "cli_common.h"
#include "interrupts.h"
#include "progress_display.h"
#include "tensorboard_output.h"

#include "journal.h"
#include "model_upload.h"
#include "run_record.h"
#include "run_request.h"
#include "run_watch.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <optional>

using namespace scalelab;
using namespace scalelab::core;
using namespace scalelab::app;

namespace {

QString percent(double fraction)
{
    return QString::number(fraction * 100.0, 'f', 2) + QLatin1Char('%');
}

// Follows one run until its terminal event, printing as it goes.
class RunFollower : public QObject {
public:
    RunFollower(AgentClient *client, const QString &runId, const RunRequest &request, bool json,
        TensorBoardOutput *tensorBoard, InterruptGuard *interrupts)
        : m_client(client)
        , m_watch(client, runId)
        , m_record(runId)
        , m_request(request)
        , m_json(json)
        , m_tensorBoard(tensorBoard)
    {
        if (!json && ProgressDisplay::stdoutIsTerminal())
            m_progress.emplace(true);
        QObject::connect(&m_watch, &RunWatch::eventsArrived, this, [this] { drain(); });
        QObject::connect(&m_watch, &RunWatch::unreachable, this, [this](const QString &error, qint64 since) {
            notice(
                QStringLiteral("%1: agent unreachable since %2 (%3); still trying for up to a minute")
                    .arg(m_record.runId(),
                        QDateTime::fromMSecsSinceEpoch(since).toString(QStringLiteral("HH:mm:ss")), error));
        });
        QObject::connect(&m_watch, &RunWatch::reachable, this,
            [this] { notice(m_record.runId() + QStringLiteral(": agent answers again")); });
        QObject::connect(&m_watch, &RunWatch::finished, this, [this](const QString &error) {
            drain();
            m_streamError = error;
            QCoreApplication::exit(0);
        });
        interrupts->onInterrupt([this](int) { stopRun(); });
    }

    // Where the run is recorded (its events as they arrive, its end): a journal, or none.
    void recordIn(Journal *journal, const QString &agent)
    {
        m_journal = journal;
        m_agent = agent;
    }

    int follow()
    {
        m_watch.start(1);
        QCoreApplication::exec();
        const v1::RunState end = m_record.state();
        if (m_journal && (end == v1::SUCCEEDED || end == v1::FAILED || end == v1::CANCELLED))
            warnUnrecorded(m_journal->setSingleRunState(
                m_record.runId(), m_record.state(), QDateTime::currentMSecsSinceEpoch()));
        return report();
    }

private:
    // Ctrl-C: the run is stopped on the agent, and followed on to its end (CANCELLED, or what
    // it reached first); nothing keeps training unwatched by accident.
    void stopRun()
    {
        const QString id = m_record.runId();
        notice(QStringLiteral("scalelab-cli: interrupted: stopping run %1 (Ctrl-C again to exit at once)")
                   .arg(id));
        v1::StopRunResponse ignored;
        if (const Status stopped = m_client->stopRun(id, &ignored); !stopped)
            notice(QStringLiteral("scalelab-cli: could not stop run %1: %2").arg(id, stopped.error()));
    }

    // The run goes on when its record cannot be written (a full disk, say): said once.
    void warnUnrecorded(const Status &recorded)
    {
        if (recorded || m_warned)
            return;
        m_warned = true;
        notice(QStringLiteral("scalelab-cli: warning: run %1 is no longer recorded in %2: %3")
                   .arg(m_record.runId(), m_journal->path(), recorded.error()));
    }

    void drain()
    {
        const std::vector<v1::RunEvent> events = m_watch.takeEvents();
        if (m_journal)
            warnUnrecorded(m_journal->appendRunEvents(QString(), m_record.runId(), 1, m_agent, events));
        m_tensorBoard->apply(m_record.runId(), 1, events);
        for (const auto &event : events) {
            m_record.apply(event);
            m_meter.apply(event);
            if (m_json) {
                out() << protoJson(event) << "\n";
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
            line(QStringLiteral(
                "%1 data set %2%3: %4 train / %5 test images, %6 parameters, %7 thread(s) on %8, "
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
            line(QStringLiteral(
                "%1 epoch %2 done: train loss %3, train acc %4, test loss %5, test acc %6, %7 s, "
                "%8 img/s")
                     .arg(id)
                     .arg(e.epoch())
                     .arg(QString::number(e.train_loss(), 'f', 4), percent(e.train_accuracy()),
                         QString::number(e.test_loss(), 'f', 4), percent(e.test_accuracy()),
                         QString::number(e.epoch_seconds(), 'f', 1),
                         QString::number(e.images_per_second(), 'f', 1)));
            break;
        }
        case v1::RunEvent::kCheckpoint:
            line(QStringLiteral("%1 checkpoint after epoch %2 committed")
                     .arg(id)
                     .arg(event.checkpoint().epoch()));
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
                  .arg(m_request.startWorkers > 0 && m_request.startWorkers < m_request.workers
                          ? QStringLiteral("%1/%2").arg(m_request.startWorkers).arg(m_request.workers)
                          : QString::number(m_request.workers))
                  .arg(m_request.batchSize)
                  .arg(m_request.epochs)
                  .arg(summary ? percent(summary->final_test_accuracy()) : QStringLiteral("-"))
                  .arg(QString::number(wall, 'f', 2))
                  .arg(summary ? QString::number(summary->images_per_second(), 'f', 1) : QStringLiteral("-"))
                  .arg(m_record.synthetic() ? QStringLiteral(" data=SYNTHETIC") : QString());
        if (m_json) {
            out() << QJsonDocument(summaryJson()).toJson(QJsonDocument::Compact) << "\n";
        } else {
            if (m_record.state() != v1::SUCCEEDED)
                out() << m_record.runId() << " " << m_record.stateMessage() << "\n";
            out() << line << "\n";
        }
        out().flush();
        return m_record.state() == v1::SUCCEEDED ? Ok : RunFailed;
    }

    // The --json summary line: the agent's summary (protobuf's JSON mapping) and the run's
    // request and stream counts.
    QJsonObject summaryJson() const
    {
        const v1::RunSummary summary = m_record.summary().value_or(v1::RunSummary());
        return QJsonObject { { QStringLiteral("final"),
                                 QJsonDocument::fromJson(protoJson(summary).toUtf8()).object() },
            { QStringLiteral("run_id"), m_record.runId() }, { QStringLiteral("workers"), m_request.workers },
            { QStringLiteral("workers_started"),
                m_request.startWorkers > 0 ? m_request.startWorkers : m_request.workers },
            { QStringLiteral("global_batch"),
                m_request.batchSize * m_request.workers * std::max(1, m_request.accumulationSteps) },
            { QStringLiteral("batch_size"), m_request.batchSize },
            { QStringLiteral("epochs"), m_request.epochs },
            { QStringLiteral("synthetic"), m_record.synthetic() },
            { QStringLiteral("last_seq"), double(m_record.lastSeq()) },
            { QStringLiteral("gaps"), m_record.gaps() },
            { QStringLiteral("duplicates"), m_record.duplicates() } };
    }

    AgentClient *m_client; // the connection's: outlives the follower
    Journal *m_journal = nullptr; // the run's record (runCommand's); none when it cannot be written
    QString m_agent;
    bool m_warned = false;
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

// The run in the journal of --state-dir (or the default state folder) as a single run.
Status recordRun(const QCommandLineParser &parser, Journal *journal, const QString &runId,
    const QString &agent, const RunRequest &request)
{
    const QString dir = parser.isSet(QStringLiteral("state-dir")) ? parser.value(QStringLiteral("state-dir"))
                                                                  : defaultStateDir();
    if (!QDir().mkpath(dir))
        return Status::failure(QStringLiteral("cannot create %1").arg(dir));
    if (const Status opened = journal->open(dir + QStringLiteral("/journal.sqlite")); !opened)
        return opened;
    SingleRunEntry entry;
    entry.runId = runId;
    entry.agent = agent;
    entry.label = QStringLiteral("%1 worker%2 · b%3 · %4")
                      .arg(request.workers)
                      .arg(request.workers == 1 ? "" : "s")
                      .arg(request.batchSize)
                      .arg(request.dataset);
    entry.launchedUnixMs = QDateTime::currentMSecsSinceEpoch();
    entry.request = request.toStartWorkers(runId);
    return journal->recordSingleRun(entry);
}

// `--workers MIN:MAX`: as many workers as the agent has free slots for, at most MAX and at
// least MIN, then the fewest that give as short a step (K micro-batches over the workers:
// K = 4 takes 2 a step on 3 workers as on 2). Says what it chose.
int chooseElasticStart(AgentClient *client, RunRequest *request)
{
    v1::DescribeResponse node;
    if (const Status s = client->describe(&node); !s.ok()) {
        err() << "scalelab-cli: " << s.error() << "\n";
        return AgentError;
    }
    const int k = request->workers * std::max(1, request->accumulationSteps);
    const auto perWorker = [k](int world) { return (k + world - 1) / world; };
    int world = std::min(request->workers, node.free_slots());
    if (world < request->minWorkers) {
        err() << "scalelab-cli: --workers " << request->minWorkers << ":" << request->workers
              << " needs at least " << request->minWorkers << " free worker slots; the agent has "
              << node.free_slots() << "\n";
        return AgentError;
    }
    while (world - 1 >= request->minWorkers && perWorker(world - 1) == perWorker(world))
        --world;
    request->startWorkers = world;
    if (world < request->workers)
        err() << "starting with " << world << " of " << request->workers << " workers (the agent has "
              << node.free_slots() << " free slots): a step still averages " << k << " micro-batches of "
              << request->batchSize << ", " << perWorker(world) << " per worker\n";
    return Ok;
}

// What `run` is asked for, read from its options.
struct RunInput {
    RunRequest request;
    std::optional<ModelFile> modelFile; // --model FILE.pt: sent to the agent first
    bool synthetic = false;
    int syntheticTrain = 0;
    int syntheticTest = 0;
};

void addRunOptions(QCommandLineParser &parser)
{
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
        { QStringLiteral("workers"),
            QStringLiteral(
                "Data-parallel workers (1 = baseline), or MIN:MAX (torchrun's form): start with as many as "
                "the agent has free slots for, at least MIN, at the global batch of MAX (each worker "
                "accumulates more). A study's elastic runs also shrink and grow while they train."),
            QStringLiteral("n"), QStringLiteral("1") },
        { QStringLiteral("batch-size"), QStringLiteral("Images per step per worker (per micro-batch)."),
            QStringLiteral("n"), QStringLiteral("64") },
        { QStringLiteral("accumulation-steps"),
            QStringLiteral(
                "Micro-batches each worker adds up before a step's one all-reduce (the global batch "
                "is workers x batch size x this)."),
            QStringLiteral("n"), QStringLiteral("1") },
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
}

// The request and what comes with it; every problem with the options, one sentence each.
QStringList readRunInput(const QCommandLineParser &parser, RunInput *input)
{
    QStringList problems;
    auto integer = [&](const char *name, auto *target) {
        bool ok = false;
        const qlonglong v = parser.value(QLatin1String(name)).toLongLong(&ok);
        if (!ok)
            problems << QStringLiteral("--%1 expects a whole number, got '%2'")
                            .arg(QLatin1String(name), parser.value(QLatin1String(name)));
        *target = static_cast<std::remove_pointer_t<decltype(target)>>(v);
    };
    input->synthetic = parser.isSet(QStringLiteral("synthetic"));
    input->request.dataset = parser.isSet(QStringLiteral("dataset"))
        ? parser.value(QStringLiteral("dataset"))
        : (input->synthetic ? QStringLiteral("synthetic") : QStringLiteral("cifar-10"));
    if (const QString w = parser.value(QStringLiteral("workers")); w.contains(QLatin1Char(':'))) {
        bool minOk = false, maxOk = false;
        input->request.minWorkers = w.section(QLatin1Char(':'), 0, 0).toInt(&minOk);
        input->request.workers = w.section(QLatin1Char(':'), 1).toInt(&maxOk);
        if (!minOk || !maxOk)
            problems << QStringLiteral("--workers expects N or MIN:MAX, got '%1'").arg(w);
    } else {
        integer("workers", &input->request.workers);
    }
    integer("batch-size", &input->request.batchSize);
    integer("accumulation-steps", &input->request.accumulationSteps);
    integer("epochs", &input->request.epochs);
    integer("threads", &input->request.threadsPerWorker);
    integer("seed", &input->request.seed);
    integer("max-train-images", &input->request.maxTrainImages);
    integer("max-test-images", &input->request.maxTestImages);
    input->request.model = parser.value(QStringLiteral("model"));
    // A module's file: the run names it by its content, and the agent is sent it first.
    if (namesModelFile(input->request.model)) {
        if (auto file = readModelFile(modelFilePath(input->request.model)); file) {
            input->modelFile = *file;
            input->request.model = file->model();
        } else {
            problems << QStringLiteral("--model: ") + file.error();
        }
    }
    integer("synthetic-train", &input->syntheticTrain);
    integer("synthetic-test", &input->syntheticTest);
    bool lrOk = false;
    input->request.learningRate = parser.value(QStringLiteral("lr")).toDouble(&lrOk);
    if (!lrOk)
        problems << QStringLiteral("--lr expects a number");
    if (const CheckStatus valid = input->request.check(); !valid)
        problems << valid.error();
    return problems;
}

} // namespace

int scalelab::app::runCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Start one training run and follow it to the end.")
        + interruptHelp(
            QStringLiteral("stops the run on the agent and follows it to its end (exit 1 once it is "
                           "CANCELLED)")));
    parser.addHelpOption();
    addOneAgentOptions(parser);
    addRunOptions(parser);
    addTensorBoardOption(parser);
    if (!parser.parse(arguments))
        return badInput(parser.errorText() + QStringLiteral("; see 'scalelab-cli run --help'"));
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }

    RunInput input;
    if (const QStringList problems = readRunInput(parser, &input); !problems.isEmpty())
        return badInput(problems.join(QStringLiteral("\nscalelab-cli: ")));
    RunRequest &request = input.request;
    const std::optional<ModelFile> &modelFile = input.modelFile;
    const bool synthetic = input.synthetic;
    const int syntheticTrain = input.syntheticTrain, syntheticTest = input.syntheticTest;

    // Before the agent: its clean-up (a local agent stopped) stays within the guard's reach.
    InterruptGuard interrupts;
    const QString runId
        = parser.isSet(QStringLiteral("run-id")) ? parser.value(QStringLiteral("run-id")) : newRunId();
    // The folder is claimed before anything starts: a refused one starts nothing.
    TensorBoardOutput tensorBoard(parser);
    if (const Status claimed = tensorBoard.startRun(request.toStartWorkers(runId)); !claimed)
        return badInput(QStringLiteral("--tensorboard: ") + claimed.error());
    AgentConnection agent;
    if (int rc = connectAgent(parser, &agent); rc != Ok)
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

    if (interrupts.requested()) {
        err() << "scalelab-cli: interrupted before run " << runId << " started: nothing was started\n";
        return RunFailed;
    }
    if (request.minWorkers > 0)
        if (const int rc = chooseElasticStart(agent.client.get(), &request); rc != Ok)
            return rc;
    v1::StartWorkersResponse started;
    const auto result = agent.client->startWorkers(request.toStartWorkers(runId), &started);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return result.isInvalidArgument() ? BadInput : AgentError;
    }

    RunFollower follower(
        agent.client.get(), runId, request, parser.isSet(QStringLiteral("json")), &tensorBoard, &interrupts);
    // Recorded in the journal, as the console's Run tab records its runs: `study show`,
    // `report` and `export tensorboard` take its id. A journal that cannot be written is
    // said, and the run goes on.
    Journal journal;
    if (const Status recorded = recordRun(parser, &journal, runId, agent.client->endpoint(), request);
        recorded)
        follower.recordIn(&journal, agent.client->endpoint());
    else
        err() << "scalelab-cli: warning: run " << runId << " is not recorded: " << recorded.error() << "\n";
    return follower.follow();
}
