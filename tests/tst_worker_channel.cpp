// The worker channel (proto/scalelab/v1/worker.proto) as both ends use it: the command
// line the agent writes for a rank reads back into the same launch, every option is one
// the worker's usage names, event lines round-trip through protobuf's JSON mapping (NaN
// included) and anything outside the contract is refused. Pure: no process is started.
#include "event_writer.h"
#include "run_supervisor.h"
#include "spec_rules.h"
#include "verify_ok.h"
#include "worker_channel.h"
#include "worker_command.h"

#include <QTest>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <unistd.h>

using namespace scalelab;
using google::protobuf::FieldDescriptor;
using google::protobuf::util::MessageDifferencer;

namespace {

// A launch with every field set to a value unlike its default, so nothing can hide.
v1::WorkerLaunch everyField()
{
    v1::WorkerLaunch launch;
    launch.set_command("train");
    const auto *descriptor = launch.GetDescriptor();
    const auto *r = launch.GetReflection();
    for (int i = 0; i < descriptor->field_count(); ++i) {
        const auto *f = descriptor->field(i);
        if (f->number() == v1::WorkerLaunch::kCommandFieldNumber)
            continue;
        const int n = f->is_repeated() ? 3 : 1;
        for (int k = 0; k < n; ++k) {
            const int v = f->number() * 10 + k + 1;
            switch (f->cpp_type()) {
            case FieldDescriptor::CPPTYPE_INT32:
                f->is_repeated() ? r->AddInt32(&launch, f, v) : r->SetInt32(&launch, f, v);
                break;
            case FieldDescriptor::CPPTYPE_INT64:
                f->is_repeated() ? r->AddInt64(&launch, f, std::int64_t(v) << 33)
                                 : r->SetInt64(&launch, f, std::int64_t(v) << 33);
                break;
            case FieldDescriptor::CPPTYPE_UINT64:
                f->is_repeated() ? r->AddUInt64(&launch, f, ~std::uint64_t(v))
                                 : r->SetUInt64(&launch, f, ~std::uint64_t(v));
                break;
            case FieldDescriptor::CPPTYPE_DOUBLE: // not exact in decimal with few digits
                f->is_repeated() ? r->AddDouble(&launch, f, v / 3.0 * 1e-7)
                                 : r->SetDouble(&launch, f, v / 3.0 * 1e-7);
                break;
            case FieldDescriptor::CPPTYPE_BOOL:
                f->is_repeated() ? r->AddBool(&launch, f, true) : r->SetBool(&launch, f, true);
                break;
            case FieldDescriptor::CPPTYPE_STRING:
                f->is_repeated() ? r->AddString(&launch, f, "s" + std::to_string(v))
                                 : r->SetString(&launch, f, "value " + std::to_string(v) + " with=sign");
                break;
            default:
                qFatal("worker.proto's WorkerLaunch has a field of a type the command line cannot carry: %s",
                    f->name().c_str());
            }
        }
    }
    return launch;
}

std::string difference(const google::protobuf::Message &a, const google::protobuf::Message &b)
{
    std::string report;
    MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&report);
    return differencer.Compare(a, b) ? std::string() : report;
}

} // namespace

class TestWorkerChannel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void launchRoundTripsThroughTheCommandLine()
    {
        const v1::WorkerLaunch launch = everyField();
        const auto arguments = worker::launchArguments(launch);
        QCOMPARE(arguments.front(), std::string("train"));
        const auto back = worker::parseLaunchArguments(arguments);
        VERIFY_OK(back);
        const std::string diff = difference(launch, *back);
        QVERIFY2(diff.empty(), diff.c_str());
        // Option names and forms, as the worker's usage documents them.
        const auto at = [&](const std::string &option) {
            const auto it = std::find(arguments.begin(), arguments.end(), option);
            return it == arguments.end() ? std::string("(missing)") : *(it + 1);
        };
        QCOMPARE(at("--batch-size"), std::to_string(launch.batch_size()));
        QCOMPARE(at("--augment"), std::string("on"));
        QCOMPARE(at("--normalize-mean"),
            worker::exactNumber(launch.normalize_mean(0)) + ","
                + worker::exactNumber(launch.normalize_mean(1)) + ","
                + worker::exactNumber(launch.normalize_mean(2)));
        // --option=value reads as --option value.
        const auto equals = worker::parseLaunchArguments({ "bench", "--steps=7", "--channels-last=off" });
        VERIFY_OK(equals);
        QCOMPARE(equals->steps(), 7);
        QVERIFY(equals->has_channels_last() && !equals->channels_last());
    }

    void unsetFieldsAreNotWritten()
    {
        v1::WorkerLaunch launch;
        launch.set_command("bench");
        launch.set_momentum(0); // zero is a value: written
        QCOMPARE(worker::launchArguments(launch), (std::vector<std::string> { "bench", "--momentum", "0" }));
    }

    void badCommandLinesAreRefused_data()
    {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<QString>("error");
        QTest::newRow("unknown") << QStringList { "train", "--epoch", "2" } << "unknown option --epoch";
        QTest::newRow("command field")
            << QStringList { "train", "--command", "bench" } << "unknown option --command";
        QTest::newRow("underscores") << QStringList { "train", "--batch_size",
            "2" } << "unknown option --batch_size (options are written with dashes: --batch-size)";
        QTest::newRow("not whole") << QStringList { "train", "--epochs", "1.5" }
                                   << "--epochs expects a whole number, got '1.5'";
        QTest::newRow("not a number")
            << QStringList { "train", "--lr", "fast" } << "--lr expects a number, got 'fast'";
        QTest::newRow("flag") << QStringList { "train", "--resume", "maybe" }
                              << "--resume expects on or off, got 'maybe'";
        QTest::newRow("negative seed") << QStringList { "train", "--seed", "-1" }
                                       << "--seed expects a whole number of 0 or more, got '-1'";
        QTest::newRow("list") << QStringList { "train", "--normalize-mean", "0.5,x,0.5" }
                              << "--normalize-mean expects a number, got 'x' (a comma-separated list)";
        QTest::newRow("no value") << QStringList { "train", "--epochs" } << "option --epochs needs a value";
        QTest::newRow("stray") << QStringList { "train", "epochs" } << "unexpected argument 'epochs'";
    }
    void badCommandLinesAreRefused()
    {
        QFETCH(QStringList, arguments);
        QFETCH(QString, error);
        std::vector<std::string> args;
        for (const auto &a : arguments)
            args.push_back(a.toStdString());
        const auto parsed = worker::parseLaunchArguments(args);
        QVERIFY(!parsed);
        QCOMPARE(QString::fromStdString(parsed.error()), error);
    }

    void eventsRoundTripWithNaN()
    {
        v1::WorkerEvent event;
        auto *step = event.mutable_step();
        step->set_epoch(3);
        step->set_step(std::int64_t(1) << 40); // an int64 travels as a JSON string
        step->set_loss(std::nan(""));
        step->set_learning_rate(0.1 + 0.2); // 0.30000000000000004: every digit kept
        const std::string line = worker::eventLine(event);
        QVERIFY(line.back() == '\n');
        QCOMPARE(std::count(line.begin(), line.end(), '\n'), 1);
        QVERIFY2(line.find("\"loss\":\"NaN\"") != std::string::npos, line.c_str());
        QVERIFY2(line.find("\"step\":\"1099511627776\"") != std::string::npos, line.c_str());
        QVERIFY2(
            line.find("\"images_per_second\":0") != std::string::npos, line.c_str()); // printed though zero
        const auto back = worker::parseEventLine(line);
        VERIFY_OK(back);
        QVERIFY(std::isnan(back->step().loss()));
        QCOMPARE(back->step().learning_rate(), 0.1 + 0.2);
        QCOMPARE(back->step().step(), std::int64_t(1) << 40);
    }

    // Text from the system (a path, errno's words) may not be UTF-8; the worker's event still
    // reaches the agent, its bad bytes replaced, instead of being refused whole.
    void workerEventsCarryTextThatIsNotUtf8()
    {
        int fds[2];
        QCOMPARE(::pipe(fds), 0);
        {
            trainer::EventWriter events(fds[1]);
            events.noSpace("no space left on device: /data/\xED\xA0\x80x/\xC0\xAF/\xF5"
                           "ck and caf\xC3\xA9",
                4096);
        }
        ::close(fds[1]);
        char buffer[4096];
        const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
        ::close(fds[0]);
        QVERIFY(n > 0);
        const auto event = worker::parseEventLine(std::string(buffer, std::size_t(n)));
        VERIFY_OK(event);
        QVERIFY(event->has_error());
        QCOMPARE(event->error().bytes_needed(), 4096);
        const QString message = QString::fromStdString(event->error().message());
        QVERIFY2(message.startsWith(QStringLiteral("no space left on device: /data/")), qPrintable(message));
        QVERIFY2(
            message.contains(QChar(0xFFFD)) && message.endsWith(QStringLiteral("café")), qPrintable(message));
    }

    void eventsOutsideTheContractAreRefused_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("error");
        QTest::newRow("unknown field") << R"({"step":{"epoch":1,"loss_value":2}})"
                                       << "loss_value";
        QTest::newRow("unknown event") << R"({"type":"step","epoch":1})"
                                       << "type";
        QTest::newRow("wrong type") << R"({"epoch":{"epoch":"one"}})"
                                    << "epoch";
        QTest::newRow("two events") << R"({"step":{},"epoch":{}})"
                                    << "oneof";
        QTest::newRow("empty") << "{}"
                               << "no event in the line";
        QTest::newRow("not json") << "Segmentation fault"
                                  << "";
    }
    void eventsOutsideTheContractAreRefused()
    {
        QFETCH(QString, line);
        QFETCH(QString, error);
        const auto parsed = worker::parseEventLine(line.toStdString());
        QVERIFY(!parsed);
        QVERIFY2(!parsed.error().empty(), "a refusal says why");
        QVERIFY2(QString::fromStdString(parsed.error()).contains(error), parsed.error().c_str());
    }

    // The agent's launch for a rank: every recipe value explicit and exact, the device
    // and collectives by the spec, and lr-find given only what it takes.
    void agentLaunchesARankExactly()
    {
        agent::RunLaunch run;
        run.request.set_run_id("r1");
        run.request.set_attempt(2);
        run.request.set_world_size(2);
        run.request.mutable_rendezvous()->set_host("10.0.0.1");
        run.request.mutable_rendezvous()->set_port(29500);
        auto *spec = run.request.mutable_spec();
        spec->set_batch_size(32);
        spec->set_epochs(3);
        spec->set_learning_rate(1e-7);
        spec->set_momentum(0);
        spec->set_gpus_per_worker(0.5);
        spec->set_block_dropout(0); // zero is a value: no dropout after the conv blocks
        spec->set_stop_after_epochs(2);
        run.datasetDir = "/data/set";
        run.runDir = "/state/runs/r1/2";
        run.workerBinary = "/bin/scalelab-worker";
        run.threadsPerRank = 3;
        run.bindAddress = "10.0.0.2";
        run.gpus[1] = { 0 };
        const v1::WorkerLaunch rank1 = agent::workerLaunch(run, 1);
        QCOMPARE(rank1.command(), std::string("train"));
        QCOMPARE(rank1.rank(), 1);
        QCOMPARE(rank1.lr(), 1e-7);
        QVERIFY(rank1.has_momentum() && rank1.momentum() == 0);
        QVERIFY(rank1.resume()); // attempt 2 resumes
        QVERIFY(rank1.has_block_dropout() && rank1.block_dropout() == 0);
        QCOMPARE(rank1.dense_dropout(), rules::kDefaultDenseDropout); // unset: the default, explicitly
        QCOMPARE(rank1.stop_after_epoch(), 2);
        QCOMPARE(rank1.rendezvous(), std::string("10.0.0.1:29500"));
        QCOMPARE(rank1.bind_address(), std::string("10.0.0.2"));
        QCOMPARE(rank1.device(), std::string("cuda"));
        QCOMPARE(rank1.backend(), std::string("gloo")); // two ranks share a GPU: NCCL would refuse
        QVERIFY(!agent::workerLaunch(run, 0).has_device()); // no GPU for rank 0: the CPU
        const auto argv = agent::workerCommand(run, rank1);
        QCOMPARE(argv.front(), run.workerBinary);
        QVERIFY(std::find(argv.begin(), argv.end(), "1e-07") != argv.end());
        const auto valueOf = [&](const std::string &option) {
            const auto it = std::find(argv.begin(), argv.end(), option);
            return it == argv.end() || it + 1 == argv.end() ? std::string("(missing)") : *(it + 1);
        };
        QCOMPARE(valueOf("--block-dropout"), std::string("0"));
        QCOMPARE(valueOf("--dense-dropout"), std::string("0.5"));
        QCOMPARE(valueOf("--stop-after-epoch"), std::string("2"));
        // A run that trains its whole schedule says nothing of stopping.
        spec->set_stop_after_epochs(0);
        QVERIFY(!agent::workerLaunch(run, 1).has_stop_after_epoch());
        spec->set_stop_after_epochs(2);

        const v1::WorkerLaunch lrFind = agent::lrFindLaunch(run, 1e-5, 10, 100);
        QCOMPARE(lrFind.command(), std::string("lr-find"));
        QCOMPARE(lrFind.steps(), 100);
        // The range test trains the run's model: with its dropout.
        QVERIFY(lrFind.has_block_dropout() && lrFind.block_dropout() == 0);
        QCOMPARE(lrFind.dense_dropout(), rules::kDefaultDenseDropout);
        for (const char *runOnly : { "epochs", "lr", "rank", "world_size", "checkpoint_dir",
                 "keep_checkpoints", "resume", "schedule", "rendezvous", "stop_after_epoch" }) {
            const auto *field = v1::WorkerLaunch::descriptor()->FindFieldByName(runOnly);
            QVERIFY2(!lrFind.GetReflection()->HasField(lrFind, field), runOnly);
        }
    }

    void gpuRanksAskTheWorkerForCuda()
    {
        const auto place = [](double gpusPerWorker, int worldSize, bool hasGpus) {
            v1::RunSpec spec;
            spec.set_gpus_per_worker(gpusPerWorker);
            v1::WorkerLaunch launch;
            agent::placeOnDevice(&launch, spec, worldSize, hasGpus);
            return worker::launchArguments(launch);
        };
        using Args = std::vector<std::string>;
        QCOMPARE(place(0, 2, false), Args { "" }); // a CPU rank: the worker's default
        QCOMPARE(place(1, 2, true), (Args { "", "--device", "cuda" })); // NCCL
        QCOMPARE(place(2, 1, true), (Args { "", "--device", "cuda" }));
        // Two ranks on one GPU: NCCL would refuse them, Gloo reduces their CUDA tensors.
        QCOMPARE(place(0.5, 2, true), (Args { "", "--device", "cuda", "--backend", "gloo" }));
        QCOMPARE(place(0.5, 1, true), (Args { "", "--device", "cuda" })); // no collectives
    }
};

QTEST_GUILESS_MAIN(TestWorkerChannel)
#include "tst_worker_channel.moc"
