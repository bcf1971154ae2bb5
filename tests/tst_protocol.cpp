// The agent protocol against a real scalelab-agent process on port 0: messages round
// trip, health, authentication, the bad-input matrix, idempotent starts, resumable
// event streams and stopping.
#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "local_agent.h"
#include "verify_ok.h"

#include <QElapsedTimer>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>

#include <functional>
#include <memory>
#include <vector>

#include <cmath>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

using namespace scalelab;
using namespace scalelab::core;

class TestProtocol : public QObject {
    Q_OBJECT
private:
    test::AgentFixture m_fixture;
    AgentClient *m_client = nullptr;

    v1::StartWorkersRequest smallRun(const QString &id, int epochs = 1)
    {
        v1::StartWorkersRequest r;
        r.set_run_id(id.toStdString());
        r.set_attempt(1);
        r.set_world_size(1);
        r.add_ranks(0);
        auto *spec = r.mutable_spec();
        spec->set_dataset("syn");
        spec->set_batch_size(25);
        spec->set_epochs(epochs);
        spec->set_threads_per_worker(1);
        return r;
    }

    // The run's events from `from` to its end, or (with `until`) up to the first event for
    // which `until` is true; the stream is then cancelled, and *status is CANCELLED.
    std::vector<v1::RunEvent> watch(const QString &id, qint64 from, grpc::Status *status,
        const std::function<bool(const v1::RunEvent &)> &until = {})
    {
        grpc::ClientContext context;
        m_client->connection().prepareStream(&context);
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        v1::WatchRunRequest request;
        request.set_run_id(id.toStdString());
        request.set_from_seq(from);
        auto reader = m_client->connection().stub->WatchRun(&context, request);
        std::vector<v1::RunEvent> events;
        v1::RunEvent e;
        while (reader->Read(&e)) {
            if (e.has_heartbeat())
                continue;
            events.push_back(e);
            if (until && until(e)) {
                context.TryCancel();
                break;
            }
        }
        *status = reader->Finish();
        return events;
    }

private Q_SLOTS:
    void initTestCase()
    {
        test::AgentFixtureOptions options;
        options.syntheticSet = QStringLiteral("syn");
        options.trainImages = 50;
        options.testImages = 20;
        options.seed = 3;
        VERIFY_OK(m_fixture.start(options));
        QVERIFY(!m_fixture.token().isEmpty());
        m_client = &m_fixture.client();
    }

    void cleanupTestCase()
    {
        m_client = nullptr;
        VERIFY_OK(m_fixture.stopAndCheckNothingLeft());
    }

    // What ScaleLab writes as JSON (scalelab-cli --json, reports, the journal's events)
    // reads back as the same event, a NaN metric included: protobuf's JSON mapping
    // writes it as the string "NaN", which a plain JSON reader would take for text.
    void eventsKeepNaNThroughJson()
    {
        v1::RunEvent event;
        event.set_seq(42);
        event.set_run_id("run-a");
        event.mutable_epoch()->set_epoch(3);
        event.mutable_epoch()->set_test_accuracy(0.625);
        event.mutable_epoch()->set_test_loss(std::nan(""));
        std::string json;
        QVERIFY(google::protobuf::util::MessageToJsonString(event, &json).ok());
        QVERIFY2(json.find("\"testLoss\":\"NaN\"") != std::string::npos, json.c_str());
        QVERIFY2(json.find("\"seq\":\"42\"") != std::string::npos, json.c_str()); // int64 as a string
        v1::RunEvent fromJson;
        QVERIFY(google::protobuf::util::JsonStringToMessage(json, &fromJson).ok());
        QCOMPARE(fromJson.seq(), std::int64_t(42));
        QCOMPARE(fromJson.epoch().test_accuracy(), 0.625);
        QVERIFY(std::isnan(fromJson.epoch().test_loss()));
    }

    void healthAndDescribe()
    {
        const auto health = m_client->checkHealth();
        QVERIFY2(health.ok(), qPrintable(health.error()));
        v1::DescribeResponse inventory;
        const auto r = m_client->describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(inventory.cpu_cores() > 0);
        QVERIFY(inventory.memory_bytes() > 0);
        QCOMPARE(QString::fromStdString(inventory.agent_version()), QStringLiteral(SCALELAB_VERSION));
        QCOMPARE(inventory.datasets_size(), 1);
        QCOMPARE(inventory.datasets(0).name(), std::string("syn"));
        QVERIFY(inventory.datasets(0).synthetic());
        QCOMPARE(inventory.datasets(0).train_images(), 50);
    }

    void tokenIsRequired()
    {
        AgentClient wrong(m_fixture.address(), QStringLiteral("not-the-token"));
        v1::DescribeResponse inventory;
        QCOMPARE(wrong.describe(&inventory).code(), Status::Code::Unauthenticated);
        AgentClient none(m_fixture.address(), QString());
        QCOMPARE(none.describe(&inventory).code(), Status::Code::Unauthenticated);
    }

    // Every RPC the service defines, called by a stranger (no token), is refused before
    // its handler does anything: the list comes from agent.proto's descriptor, so an RPC
    // added later without the check fails here. Called through gRPC's generic stub with
    // an empty request, for unary and streaming RPCs alike (the wire is the same).
    void everyRpcRefusesAStranger()
    {
        const auto *service
            = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("scalelab.v1.Agent");
        QVERIFY(service != nullptr);
        QVERIFY2(service->method_count() >= 12, "agent.proto lost RPCs? the list below would be short");
        const auto channel
            = grpc::CreateChannel(m_fixture.address().toStdString(), grpc::InsecureChannelCredentials());
        grpc::GenericStub generic(channel);
        for (int i = 0; i < service->method_count(); ++i) {
            const std::string method = "/scalelab.v1.Agent/" + service->method(i)->name();
            grpc::CompletionQueue queue;
            grpc::ClientContext context; // no authorization metadata
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
            grpc::Slice empty;
            grpc::ByteBuffer request(&empty, 1);
            grpc::ByteBuffer response;
            grpc::Status status;
            auto call = generic.PrepareCall(&context, method, &queue);
            // However this iteration ends (a failed check returns at once), the call is
            // cancelled and the queue drained before the call, buffers and queue go.
            struct Drain {
                grpc::ClientContext &context;
                grpc::CompletionQueue &queue;
                ~Drain()
                {
                    context.TryCancel();
                    queue.Shutdown();
                    void *tag = nullptr;
                    bool ok = false;
                    while (queue.Next(&tag, &ok)) { }
                }
            } drain { context, queue };
            void *tag = nullptr;
            bool ok = false;
            const auto step = [&](int expected) {
                // Each operation completes before the next starts: the one tag is the one awaited.
                return queue.Next(&tag, &ok)
                    && tag == reinterpret_cast<void *>(static_cast<intptr_t>(expected));
            };
            call->StartCall(reinterpret_cast<void *>(1));
            QVERIFY2(step(1), method.c_str());
            call->Write(request, reinterpret_cast<void *>(2));
            QVERIFY2(step(2), method.c_str()); // ok may be false: the agent may have answered already
            call->WritesDone(reinterpret_cast<void *>(3));
            QVERIFY2(step(3), method.c_str());
            call->Read(&response, reinterpret_cast<void *>(4));
            QVERIFY2(step(4), method.c_str());
            QVERIFY2(
                !ok, qPrintable(QStringLiteral("%1 answered a stranger with a message").arg(method.c_str())));
            call->Finish(&status, reinterpret_cast<void *>(5));
            QVERIFY2(step(5), method.c_str());
            QVERIFY2(status.error_code() == grpc::StatusCode::UNAUTHENTICATED,
                qPrintable(QStringLiteral("%1 answered a stranger with code %2: %3")
                               .arg(method.c_str())
                               .arg(status.error_code())
                               .arg(QString::fromStdString(status.error_message()))));
            QVERIFY2(
                QString::fromStdString(status.error_message()).contains(QLatin1String("requires a token")),
                status.error_message().c_str());
        }
    }

    void unreachableAgentSaysSo()
    {
        AgentClient nobody(QStringLiteral("127.0.0.1:1"), QString());
        v1::DescribeResponse inventory;
        const auto r = nobody.describe(&inventory, 3000);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY2(r.error().contains(QStringLiteral("cannot reach the agent at 127.0.0.1:1")),
            qPrintable(r.error()));
        QVERIFY(!AgentClient::checkEndpoint(QStringLiteral("no-port")).error().isEmpty());
        QVERIFY(!AgentClient::checkEndpoint(QStringLiteral("host:99999")).error().isEmpty());
    }

    // The study runner asks every agent for its capacity before it places runs. Agents that
    // accept a connection and never answer (a stopped or overloaded host) cost one deadline
    // together, not one each: three such, with a 2 s deadline, took 6 s one after the other.
    void describeEachWaitsForTheSlowestOnly()
    {
        std::vector<std::unique_ptr<QTcpServer>> silent;
        std::vector<std::unique_ptr<AgentClient>> owned;
        std::vector<AgentClient *> clients { m_client, nullptr };
        for (int i = 0; i < 3; ++i) {
            silent.push_back(std::make_unique<QTcpServer>());
            QVERIFY(silent.back()->listen(QHostAddress::LocalHost));
            owned.push_back(std::make_unique<AgentClient>(
                QStringLiteral("127.0.0.1:%1").arg(silent.back()->serverPort()), QString()));
            clients.push_back(owned.back().get());
        }
        constexpr int kDeadlineMs = 2000;
        QElapsedTimer took;
        took.start();
        const std::vector<DescribeAnswer> answers = describeEach(clients, kDeadlineMs);
        const qint64 ms = took.elapsed();
        QCOMPARE(answers.size(), clients.size());
        VERIFY_OK(answers[0].status);
        QVERIFY(answers[0].response.cpu_cores() > 0);
        QCOMPARE(answers[1].status.code(), Status::Code::NotFound);
        for (std::size_t i = 2; i < answers.size(); ++i)
            QVERIFY2(answers[i].status.isUnreachable(), qPrintable(answers[i].status.error()));
        // At least the deadline (they were waited for), well under two of them (not in turn).
        QVERIFY2(ms >= kDeadlineMs - 300 && ms < 2 * kDeadlineMs - 500, qPrintable(QString::number(ms)));
    }

    void badInputIsRefusedNamingTheField_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<Status::Code>("code");
        QTest::addColumn<QString>("mention");
        QTest::newRow("batch 0") << "batch" << Status::Code::InvalidArgument << "spec.batch_size";
        QTest::newRow("epochs 0") << "epochs" << Status::Code::InvalidArgument << "spec.epochs";
        QTest::newRow("path-like run id") << "runid" << Status::Code::InvalidArgument << "run_id";
        QTest::newRow("rank outside world") << "rank" << Status::Code::InvalidArgument << "ranks";
        QTest::newRow("attempt 0") << "attempt" << Status::Code::InvalidArgument << "attempt";
        QTest::newRow("unknown data set") << "dataset" << Status::Code::FailedPrecondition << "spec.dataset";
        QTest::newRow("path-like data set")
            << "dataset-path" << Status::Code::InvalidArgument << "spec.dataset";
        QTest::newRow("GPU on CPU node") << "gpu" << Status::Code::FailedPrecondition << "gpus_per_worker";
    }
    void badInputIsRefusedNamingTheField()
    {
        QFETCH(QString, field);
        QFETCH(Status::Code, code);
        QFETCH(QString, mention);
        auto request = smallRun(QStringLiteral("bad-input"));
        if (field == QLatin1String("batch"))
            request.mutable_spec()->set_batch_size(0);
        if (field == QLatin1String("epochs"))
            request.mutable_spec()->set_epochs(0);
        if (field == QLatin1String("runid"))
            request.set_run_id("../x");
        if (field == QLatin1String("rank"))
            request.set_ranks(0, 3);
        if (field == QLatin1String("attempt"))
            request.set_attempt(0);
        if (field == QLatin1String("dataset"))
            request.mutable_spec()->set_dataset("cifar-10");
        if (field == QLatin1String("dataset-path"))
            request.mutable_spec()->set_dataset("../../etc");
        if (field == QLatin1String("gpu"))
            request.mutable_spec()->set_gpus_per_worker(1);
        v1::StartWorkersResponse response;
        const auto r = m_client->startWorkers(request, &response);
        QCOMPARE(r.code(), code);
        QVERIFY2(r.error().contains(mention), qPrintable(r.error()));
        QVERIFY(!QDir(m_fixture.path(QStringLiteral("x"))).exists());
        QVERIFY(!QDir(m_fixture.path(QStringLiteral("state/runs/bad-input"))).exists());
    }

    void startIsIdempotentAndStreamResumes()
    {
        const QString id = QStringLiteral("resume-1");
        v1::StartWorkersResponse first, again;
        auto r = m_client->startWorkers(smallRun(id, 2), &first);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(!first.already_running());
        r = m_client->startWorkers(smallRun(id, 2), &again);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(again.already_running());

        grpc::Status status;
        const auto all = watch(id, 1, &status);
        QVERIFY2(status.ok(), status.error_message().c_str());
        QVERIFY(all.size() > 5);
        for (std::size_t i = 0; i < all.size(); ++i)
            QCOMPARE(all[i].seq(), qint64(i + 1));
        QVERIFY(all.back().has_state());
        QCOMPARE(all.back().state().state(), v1::SUCCEEDED);
        const auto epochs
            = std::count_if(all.begin(), all.end(), [](const auto &e) { return e.has_epoch(); });
        QCOMPARE(epochs, 2);

        // A client that saw up to seq k resumes at k + 1: the same events, none twice.
        const qint64 k = qint64(all.size()) / 2;
        const auto rest = watch(id, k + 1, &status);
        QVERIFY(status.ok());
        QCOMPARE(rest.size(), all.size() - std::size_t(k));
        for (std::size_t i = 0; i < rest.size(); ++i)
            QVERIFY(google::protobuf::util::MessageDifferencer::Equals(rest[i], all[std::size_t(k) + i]));

        // The run is on disk under its folder.
        QVERIFY(QFile::exists(m_fixture.path(QStringLiteral("state/runs/resume-1/1/events.log"))));
        // The worker is gone.
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(
                                     QStringLiteral("scalelab-worker train --data-dir ") + m_fixture.folder())
                                     .isEmpty(),
            5000);
    }

    void stopCancelsWithinBound()
    {
        const QString id = QStringLiteral("stop-1");
        v1::StartWorkersResponse started;
        auto r = m_client->startWorkers(smallRun(id, 1000), &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        // Stopped while it trains: its first step is the proof (not a fixed wait, which a
        // loaded machine can outlast before the worker has even started).
        grpc::Status training;
        const auto first = watch(id, 1, &training, [](const v1::RunEvent &e) { return e.has_step(); });
        QVERIFY2(!first.empty() && first.back().has_step(),
            qPrintable(QStringLiteral("the run ended before its first step: %1").arg(training.error_code())));
        QElapsedTimer timer;
        timer.start();
        v1::StopRunResponse stopped;
        r = m_client->stopRun(id, &stopped);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        grpc::Status status;
        const auto events = watch(id, 1, &status);
        QVERIFY(status.ok());
        QVERIFY(timer.elapsed() < 10000);
        QCOMPARE(events.back().state().state(), v1::CANCELLED);
        v1::StopRunResponse unknown;
        QCOMPARE(m_client->stopRun(QStringLiteral("no-such-run"), &unknown).code(), Status::Code::NotFound);
    }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "tst_protocol.moc"
