// The node agent as a process, who may use it and how: token, TLS and mutual-TLS refusals, its
// configuration (file, environment, command line, and their limits), the bad-input matrix,
// and oversized fields. The loopback rule and the words of TLS
// failures are tst_agent_security's; the agent's pure rules tst_agent_rules'. After every test
// no process it started is left.
#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "agent_test_bench.h"
#include "checkpoint_copy.h"
#include "cifar10.h"
#include "run_watch.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"
#include "worker_channel.h"

#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <grpcpp/grpcpp.h>

#include <csignal>
#include <set>
#include <sys/wait.h>
#include <thread>

using namespace scalelab;
using namespace scalelab::core;
using test::lastStateName;
using test::runRequest;
using test::watchRun;
using test::withSyn;
using test::writeFile;

class TestAgentAccess : public QObject, public test::AgentBench {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { setUpBench(/*withCertificates=*/true); }

    void cleanup() { checkNothingLeft(); }

    void refusesNetworkAddressWithoutTokenAndTls_data()
    {
        QTest::addColumn<bool>("token");
        QTest::addColumn<bool>("tls");
        QTest::addColumn<QString>("message");
        QTest::newRow("neither") << false << false << "without a token and TLS";
        QTest::newRow("token only") << true << false << "without TLS";
        QTest::newRow("TLS only") << false << true << "without a token";
    }

    void refusesNetworkAddressWithoutTokenAndTls()
    {
        QFETCH(bool, token);
        QFETCH(bool, tls);
        QFETCH(QString, message);
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options = withSyn();
        options.listen = QStringLiteral("0.0.0.0");
        options.withToken = token;
        if (tls)
            options.extraArguments = { QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
                QStringLiteral("--tls-key"), path(QStringLiteral("server.key")) };
        const Status started = agent.start(options);
        QVERIFY(!started);
        QVERIFY(agent.agent().refusedConfiguration());
        QVERIFY2(started.error().contains(message), qPrintable(started.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void tlsWithTokenOffLoopback()
    {
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options
            = withSyn({ QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
                QStringLiteral("--tls-key"), path(QStringLiteral("server.key")) });
        options.listen = QStringLiteral("0.0.0.0");
        VERIFY_OK(agent.start(options));
        const QString endpoint = QStringLiteral("127.0.0.1:") + agent.address().section(u':', -1);
        const AgentTls trusted { path(QStringLiteral("ca.pem")), {}, {}, {} };

        AgentClient good(endpoint, agent.token(), trusted);
        v1::DescribeResponse inventory;
        auto r = good.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));

        AgentClient wrongToken(endpoint, QStringLiteral("guess"), trusted);
        QCOMPARE(wrongToken.describe(&inventory).code(), Status::Code::Unauthenticated);
        AgentClient noToken(endpoint, QString(), trusted);
        QCOMPARE(noToken.describe(&inventory).code(), Status::Code::Unauthenticated);
        QTRY_VERIFY_WITH_TIMEOUT(agent.log().contains(QStringLiteral("wrong token")), 5000);
        QVERIFY(agent.log().contains(QStringLiteral("no token")));

        AgentClient plaintext(endpoint, agent.token(), AgentTls {});
        QCOMPARE(plaintext.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient untrusted(
            endpoint, agent.token(), AgentTls { path(QStringLiteral("other-ca.pem")), {}, {}, {} });
        QCOMPARE(untrusted.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient missingCa(
            endpoint, agent.token(), AgentTls { path(QStringLiteral("nope.pem")), {}, {}, {} });
        QVERIFY(missingCa.setup().error().contains(QStringLiteral("nope.pem")));
        QCOMPARE(missingCa.describe(&inventory).code(), Status::Code::FailedPrecondition);
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void mutualTlsNeedsClientCertificate()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
            QStringLiteral("--tls-key"), path(QStringLiteral("server.key")),
            QStringLiteral("--tls-client-ca"), path(QStringLiteral("ca.pem")) })));
        v1::DescribeResponse inventory;
        AgentClient anonymous(
            agent.address(), agent.token(), AgentTls { path(QStringLiteral("ca.pem")), {}, {}, {} });
        QCOMPARE(anonymous.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient known(agent.address(), agent.token(),
            AgentTls { path(QStringLiteral("ca.pem")), path(QStringLiteral("client.pem")),
                path(QStringLiteral("client.key")), {} });
        const auto r = known.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void configFileAndEnvironmentAreRead()
    {
        // A value from the config file is used, checked, and its origin named.
        QVERIFY(
            writeFile(path(QStringLiteral("agent.conf")), "# test\nlog-level = debug\nheartbeat-ms = 5\n"));
        test::AgentFixture agent(m_tmp.path()); // started four times on the same state
        Status started
            = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("agent.conf")) }));
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("--heartbeat-ms must be a whole number from 100"))
                && started.error().contains(QStringLiteral("agent.conf:3")),
            qPrintable(started.error()));
        // The command line wins over the file.
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("agent.conf")),
            QStringLiteral("--heartbeat-ms"), QStringLiteral("500") })));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
        // An unknown key names the file and line.
        QVERIFY(writeFile(path(QStringLiteral("bad.conf")), "port = 0\nlisen = 0.0.0.0\n"));
        started = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("bad.conf")) }));
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("bad.conf:2: unknown option 'lisen'")),
            qPrintable(started.error()));
        // The environment wins over the file, and is named too.
        QVERIFY(writeFile(path(QStringLiteral("good.conf")), "heartbeat-ms = 1000\n"));
        qputenv("SCALELAB_AGENT_HEARTBEAT_MS", "5");
        started = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("good.conf")) }));
        qunsetenv("SCALELAB_AGENT_HEARTBEAT_MS");
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("from SCALELAB_AGENT_HEARTBEAT_MS")),
            qPrintable(started.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Consoles take a stream silent for RunWatch::kSilenceMs (10 s) as a cut link, so an idle
    // stream's heartbeat comes at least twice in that time: at most every 5 s. Before bf8f0cc
    // the agent took up to 60 s, and every idle stream of such an agent was cut and reconnected.
    void heartbeatsAreAtMostFiveSeconds()
    {
        QVERIFY(RunWatch::kSilenceMs >= 2 * 5'000);
        test::AgentFixture agent(m_tmp.path());
        Status started = agent.start(withSyn({ QStringLiteral("--heartbeat-ms"), QStringLiteral("5001") }));
        QVERIFY(!started);
        QVERIFY2(started.error().contains(
                     QStringLiteral("--heartbeat-ms must be a whole number from 100 to 5000")),
            qPrintable(started.error()));
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--heartbeat-ms"), QStringLiteral("5000") })));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void badInputIsRefusedNamingTheField()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        const auto invalid = Status::Code::InvalidArgument;
        const auto precondition = Status::Code::FailedPrecondition;
        struct Case {
            const char *name;
            Status::Code code;
            QString mention;
            std::function<void(v1::StartWorkersRequest &)> change;
        };
        const std::vector<Case> starts = {
            { "world size 0", invalid, QStringLiteral("world_size"), [](auto &r) { r.set_world_size(0); } },
            { "no ranks", invalid, QStringLiteral("ranks"), [](auto &r) { r.clear_ranks(); } },
            { "negative rank", invalid, QStringLiteral("ranks"), [](auto &r) { r.set_ranks(0, -1); } },
            { "rank twice", invalid, QStringLiteral("ranks"),
                [](auto &r) { r.set_world_size(2), r.add_ranks(0); } },
            { "path-like run id", invalid, QStringLiteral("run_id"), [](auto &r) { r.set_run_id("../x"); } },
            { "absolute run id", invalid, QStringLiteral("run_id"), [](auto &r) { r.set_run_id("/tmp/x"); } },
            { "negative batch", invalid, QStringLiteral("spec.batch_size"),
                [](auto &r) { r.mutable_spec()->set_batch_size(-4); } },
            { "negative threads", invalid, QStringLiteral("spec.threads_per_worker"),
                [](auto &r) { r.mutable_spec()->set_threads_per_worker(-1); } },
            { "negative max images", invalid, QStringLiteral("spec.max_train_images"),
                [](auto &r) { r.mutable_spec()->set_max_train_images(-10); } },
            { "more GPUs than the node has", precondition, QStringLiteral("spec.gpus_per_worker"),
                [](auto &r) { r.mutable_spec()->set_gpus_per_worker(2); } },
            { "fraction of GPUs above one", invalid, QStringLiteral("spec.gpus_per_worker"),
                [](auto &r) { r.mutable_spec()->set_gpus_per_worker(1.5); } },
            { "unknown data set", precondition, QStringLiteral("spec.dataset"),
                [](auto &r) { r.mutable_spec()->set_dataset("imagenet"); } },
            { "path-like data set", invalid, QStringLiteral("spec.dataset"),
                [](auto &r) { r.mutable_spec()->set_dataset("../../etc"); } },
            { "unknown schedule", invalid, QStringLiteral("spec.schedule"),
                [](auto &r) { r.mutable_spec()->set_schedule("random"); } },
            // NaN, infinities, out-of-range numbers and unknown enum values: the plan's rules.
            { "NaN learning rate", invalid,
                QStringLiteral("spec.learning_rate: must be a number in (0, 10] (got NaN)"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(std::nan("")); } },
            { "infinite learning rate", invalid, QStringLiteral("spec.learning_rate"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(HUGE_VAL); } },
            { "zero learning rate", invalid, QStringLiteral("spec.learning_rate"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(0); } },
            { "momentum 1", invalid, QStringLiteral("spec.momentum"),
                [](auto &r) { r.mutable_spec()->set_momentum(1); } },
            { "NaN weight decay", invalid, QStringLiteral("spec.weight_decay"),
                [](auto &r) { r.mutable_spec()->set_weight_decay(std::nan("")); } },
            { "unknown precision", invalid,
                QStringLiteral("spec.precision: must be FP32 or BF16 (got the unknown value 99)"),
                [](auto &r) { r.mutable_spec()->set_precision(v1::Precision(99)); } },
            { "a billion epochs", invalid, QStringLiteral("spec.epochs: must be between 1 and 10000"),
                [](auto &r) { r.mutable_spec()->set_epochs(1'000'000'000); } },
            { "warm-up longer than the run", invalid, QStringLiteral("spec.warmup_epochs"),
                [](auto &r) { r.mutable_spec()->set_warmup_epochs(5); } },
            { "world of 100000", invalid, QStringLiteral("world_size must be at most 1024"),
                [](auto &r) { r.set_world_size(100000); } },
            { "rendezvous host like an option", invalid, QStringLiteral("rendezvous.host"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.mutable_rendezvous()->set_host("--evil");
                    r.mutable_rendezvous()->set_port(4000);
                } },
            { "rendezvous port only", invalid, QStringLiteral("rendezvous"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.mutable_rendezvous()->set_port(4000);
                } },
            { "no rendezvous and no rank 0", invalid, QStringLiteral("rendezvous"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.set_ranks(0, 1);
                } },
        };
        for (const auto &c : starts) {
            auto request = runRequest("bad-input", 1, 1, { 0 });
            c.change(request);
            v1::StartWorkersResponse response;
            const auto r = client.startWorkers(request, &response);
            QVERIFY2(r.code() == c.code,
                qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(c.name), r.error())));
            QVERIFY2(r.error().contains(c.mention),
                qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(c.name), r.error())));
        }
        // The other calls.
        const auto expect = [](const char *name, const Status &r, Status::Code code, const QString &mention) {
            QVERIFY2(r.code() == code && r.error().contains(mention),
                qPrintable(QStringLiteral("%1: [%2] %3")
                               .arg(QLatin1String(name))
                               .arg(int(r.code()))
                               .arg(r.error())));
        };
        {
            // The same (run, attempt) again: idempotent when identical, refused when not.
            auto first = runRequest("same-attempt", 1, 1, { 0 });
            first.mutable_spec()->set_max_train_images(32);
            v1::StartWorkersResponse response;
            QVERIFY(client.startWorkers(first, &response).ok());
            QVERIFY(client.startWorkers(first, &response).ok());
            QVERIFY(response.already_running());
            auto changed = first;
            changed.mutable_spec()->set_momentum(0);
            expect("StartWorkers, same attempt, other spec", client.startWorkers(changed, &response),
                Status::Code::AlreadyExists, QStringLiteral("different spec"));
            v1::StopRunResponse ignored;
            QVERIFY(client.stopRun(QStringLiteral("same-attempt"), &ignored).ok());
        }
        {
            v1::FindLearningRateRequest find;
            find.mutable_spec()->set_dataset("syn");
            find.mutable_spec()->set_batch_size(0);
            expect("FindLearningRate batch 0", client.findLearningRate(find, {}, nullptr), invalid,
                QStringLiteral("spec.batch_size"));
            find.mutable_spec()->set_batch_size(16);
            find.set_steps(5);
            expect("FindLearningRate 5 steps", client.findLearningRate(find, {}, nullptr), invalid,
                QStringLiteral("steps"));
        }
        v1::StopRunResponse stopped;
        expect("StopRun path-like id", client.stopRun(QStringLiteral("../x"), &stopped), invalid,
            QStringLiteral("run_id"));
        {
            grpc::ClientContext context;
            client.connection().prepareStream(&context);
            v1::StopRunRequest request;
            request.set_run_id("x");
            request.set_grace_ms(-1);
            v1::StopRunResponse response;
            expect("StopRun negative grace",
                statusFromGrpc(client.connection().stub->StopRun(&context, request, &response), {}), invalid,
                QStringLiteral("grace_ms"));
        }
        auto watched = watchRun(client, "../x", 1);
        expect(
            "WatchRun path-like id", statusFromGrpc(watched.status, {}), invalid, QStringLiteral("run_id"));
        watched = watchRun(client, "x", -3);
        expect("WatchRun negative from_seq", statusFromGrpc(watched.status, {}), invalid,
            QStringLiteral("from_seq"));
        v1::CreateSyntheticDatasetRequest synthetic;
        synthetic.set_name("../x");
        synthetic.set_train_images(10);
        synthetic.set_test_images(10);
        v1::Dataset dataset;
        expect("synthetic path-like name", client.createSyntheticDataset(synthetic, &dataset), invalid,
            QStringLiteral("name"));
        synthetic.set_name("zero");
        synthetic.set_train_images(0);
        expect("synthetic zero images", client.createSyntheticDataset(synthetic, &dataset), invalid,
            QStringLiteral("train_images"));
        expect("WatchNode interval too short", client.watchNode(5, [](const auto &) { return false; }),
            invalid, QStringLiteral("interval_ms"));
        expect("FetchDataset unknown name", client.fetchDataset(QStringLiteral("../../etc"), {}, &dataset),
            invalid, QStringLiteral("name"));
        // Nothing was written outside the agent's folders.
        for (const QString &name : { agent.path(QStringLiteral("x")), agent.stateDir() + QStringLiteral("/x"),
                 agent.stateDir() + QStringLiteral("/runs/x"),
                 agent.stateDir() + QStringLiteral("/runs/bad-input"),
                 agent.dataDir() + QStringLiteral("/zero"), agent.path(QStringLiteral("etc")),
                 path(QStringLiteral("x")), path(QStringLiteral("etc")) })
            QVERIFY2(!QFileInfo::exists(name), qPrintable(name));
        QVERIFY(!QFileInfo::exists(QStringLiteral("/tmp/x/1")));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A field far over its limit is refused by name, with a short prefix of the value, not
    // echoed whole (which overflowed the client's metadata limit: RESOURCE_EXHAUSTED).
    void oversizedFieldsAreRefusedByName()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        QVERIFY(agent.agent().processId() > 0);
        AgentClient &client = agent.client();
        v1::StartWorkersRequest big = runRequest(std::string(10'000, 'r'), 1, 1, { 0 });
        v1::StartWorkersResponse response;
        Status result = client.startWorkers(big, &response);
        QCOMPARE(result.code(), Status::Code::InvalidArgument);
        QVERIFY2(result.error().contains(QLatin1String("run_id is 10000 bytes; at most 64")),
            qPrintable(result.error()));
        QVERIFY2(result.error().size() < 400, qPrintable(result.error()));
        big = runRequest("fine", 1, 1, { 0 });
        big.mutable_spec()->set_schedule(std::string(100'000, 'c'));
        result = client.startWorkers(big, &response);
        QCOMPARE(result.code(), Status::Code::InvalidArgument);
        QVERIFY2(result.error().contains(
                     QLatin1String("spec.schedule is 100000 bytes; at most 4096 (it starts with 'ccc")),
            qPrintable(result.error()));
        QVERIFY2(result.error().size() < 400, qPrintable(result.error()));
        // The agent is fine afterwards.
        v1::DescribeResponse d;
        QVERIFY(client.describe(&d).ok());
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }
};

QTEST_GUILESS_MAIN(TestAgentAccess)
#include "tst_agent_access.moc"
