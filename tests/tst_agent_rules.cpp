// The agent's pure rules and file formats, without an agent process: which address ranks
// of other hosts reach us at, how a rank's exit is classified, what a RunSpec may ask of
// the model and its schedule, which StartWorkers requests are well formed and which GPUs
// each rank gets, that unpacking refuses paths leaving its folder, and that a run's event
// log survives a torn tail. (Moved out of tst_agent, which starts real agents.)
#include "advertise.h"
#include "dataset_fetcher.h"
#include "net_address.h"
#include "rank_exit.h"
#include "run_event_log.h"
#include "run_supervisor.h"
#include "spec_rules.h"
#include "start_request.h"
#include "test_support.h"
#include "verify_ok.h"
#include "worker_command.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <map>

using namespace scalelab;

class TestAgentRules : public QObject {
    Q_OBJECT
    QTemporaryDir m_tmp;
    QString path(const QString &name) const { return m_tmp.filePath(name); }

private Q_SLOTS:
    // The address ranks of other hosts reach ours at: never guessed from the host name
    // when that is loopback; an operator's unusable setting is refused by name.
    void advertiseAddressIsChosenNotGuessed()
    {
        using agent::chooseAdvertiseAddress;
        auto c = chooseAdvertiseAddress("127.0.0.1", "", "", "node1");
        VERIFY_OK(c);
        QCOMPARE(QString::fromStdString(c->address), QStringLiteral("127.0.0.1"));
        QVERIFY(c->warning.empty());
        c = chooseAdvertiseAddress("0.0.0.0", "10.9.8.7", "", "node1");
        VERIFY_OK(c);
        QCOMPARE(QString::fromStdString(c->address), QStringLiteral("10.9.8.7"));
        c = chooseAdvertiseAddress("0.0.0.0", "", "lo", "node1");
        VERIFY_OK(c);
        QCOMPARE(QString::fromStdString(c->address), QStringLiteral("127.0.0.1"));
        QVERIFY2(QString::fromStdString(c->warning).contains(QLatin1String("other hosts will fail")),
            c->warning.c_str());
        c = chooseAdvertiseAddress("0.0.0.0", "", "nosuch0", "node1");
        QVERIFY(!c.ok());
        QVERIFY2(QString::fromStdString(c.error()).contains(QLatin1String("'nosuch0' has no address here")),
            c.error().c_str());
        c = chooseAdvertiseAddress("0.0.0.0", "no-such-host.invalid", "", "node1");
        QVERIFY(!c.ok());
        // Every address, host name on loopback (stock Debian): an interface's address, or a
        // warning that says nothing but loopback was found.
        c = chooseAdvertiseAddress("0.0.0.0", "", "", "localhost");
        VERIFY_OK(c);
        bool anyInterface = false;
        for (const auto &a : trainer::net::interfaceAddresses())
            anyInterface = anyInterface || (!a.loopback && a.up);
        if (anyInterface) {
            QVERIFY2(!trainer::net::isLoopback(c->address), c->address.c_str());
            QVERIFY2(
                QString::fromStdString(c->how).contains(QLatin1String("host name localhost resolves to")),
                c->how.c_str());
        } else {
            QVERIFY(!c->warning.empty());
        }

        QVERIFY(trainer::net::isLoopback("127.0.1.1"));
        QVERIFY(trainer::net::isLoopback("::1"));
        QVERIFY(trainer::net::isLoopback("localhost"));
        QVERIFY(!trainer::net::isLoopback("127.evil")); // a name, resolving to nothing: not loopback
        QVERIFY(!trainer::net::isLoopback("10.0.0.1"));
        QCOMPARE(trainer::net::splitInterfaces("eth0,,ib0"), (std::vector<std::string> { "eth0", "ib0" }));
        const auto towards = trainer::net::localAddressTowards("127.0.0.1", 80);
        VERIFY_OK(towards);
        QCOMPARE(QString::fromStdString(towards.value()), QStringLiteral("127.0.0.1"));
    }

    void exitClassificationRules()
    {
        using agent::classifyExit;
        const int exited0 = 0, exited2 = 2 << 8, killed = SIGKILL, terminated = SIGTERM;
        QCOMPARE(classifyExit(0, exited0, false, {}, true, 0).kind(), v1::EXIT_SUCCEEDED);
        QCOMPARE(classifyExit(0, exited0, false, {}, false, 0).kind(), v1::EXIT_FAILED);
        QCOMPARE(classifyExit(1, exited2, false, "boom", false, 0).kind(), v1::EXIT_FAILED);
        QCOMPARE(
            classifyExit(1, exited2, false, "CUDA out of memory", false, 0).kind(), v1::EXIT_OUT_OF_MEMORY);
        QCOMPARE(classifyExit(1, killed, false, {}, false, 1).kind(), v1::EXIT_OUT_OF_MEMORY);
        QCOMPARE(classifyExit(1, killed, false, {}, false, 0).kind(), v1::EXIT_KILLED);
        QCOMPARE(classifyExit(1, killed, false, {}, false, -1).kind(), v1::EXIT_KILLED);
        QCOMPARE(classifyExit(1, terminated, true, {}, false, 0).kind(), v1::EXIT_STOPPED);
        QCOMPARE(classifyExit(1, terminated, false, {}, false, 0).kind(), v1::EXIT_KILLED);
    }

    // StartWorkers' own checks, in order, each naming its field; a good request passes.
    void startRequestsAreCheckedByField()
    {
        const auto good = [] {
            v1::StartWorkersRequest r;
            r.set_run_id("st-1-r01");
            r.set_attempt(1);
            r.set_world_size(2);
            r.add_ranks(0);
            r.add_ranks(1);
            r.mutable_spec()->set_dataset("syn");
            r.mutable_spec()->set_epochs(1);
            r.mutable_spec()->set_batch_size(32);
            return r;
        };
        VERIFY_OK(agent::checkStartRequest(good()));
        const auto refusal = [](const v1::StartWorkersRequest &r) {
            const common::Status s = agent::checkStartRequest(r);
            return s ? QString() : QString::fromStdString(s.error());
        };
        struct Case {
            const char *what;
            std::function<void(v1::StartWorkersRequest &)> change;
            const char *says;
        };
        const std::vector<Case> cases = {
            { "run id with a slash", [](auto &r) { r.set_run_id("../x"); },
                "run_id '../x' is not valid: use 1-64 characters" },
            { "attempt 0", [](auto &r) { r.set_attempt(0); }, "attempt must be 1 or more (got 0)" },
            { "world size 0", [](auto &r) { r.set_world_size(0); }, "world_size must be 1 or more (got 0)" },
            { "no ranks", [](auto &r) { r.clear_ranks(); }, "ranks is empty" },
            { "rank outside", [](auto &r) { r.set_ranks(1, 2); },
                "ranks contains 2, outside [0, world_size=2)" },
            { "rank twice", [](auto &r) { r.set_ranks(1, 0); }, "ranks contains 0 twice" },
            { "world too large", [](auto &r) { r.set_world_size(rules::kMaxWorkers + 1); },
                "world_size must be at most 1024" },
            { "bad spec", [](auto &r) { r.mutable_spec()->set_epochs(-1); }, "spec.epochs" },
            { "data set with a slash", [](auto &r) { r.mutable_spec()->set_dataset("a/b"); },
                "spec.dataset 'a/b' is not a data set name" },
            { "host without port", [](auto &r) { r.mutable_rendezvous()->set_host("10.0.0.1"); },
                "rendezvous needs both host and port" },
            { "port out of range",
                [](auto &r) {
                    r.mutable_rendezvous()->set_host("10.0.0.1");
                    r.mutable_rendezvous()->set_port(70000);
                },
                "rendezvous.port must be in 1..65535" },
            { "host that is an option",
                [](auto &r) {
                    r.mutable_rendezvous()->set_host("--evil");
                    r.mutable_rendezvous()->set_port(29500);
                },
                "rendezvous.host '--evil' is not a host name or address" },
            { "empty rendezvous without rank 0",
                [](auto &r) {
                    r.clear_ranks();
                    r.add_ranks(1);
                },
                "rendezvous is empty but rank 0 is not on this agent" },
        };
        for (const auto &c : cases) {
            auto r = good();
            c.change(r);
            const QString said = refusal(r);
            QVERIFY2(said.contains(QLatin1String(c.says)),
                qPrintable(QLatin1String(c.what) + QStringLiteral(": ") + said));
        }
        // One world of one: no rendezvous needed, none checked (whatever it holds).
        auto single = good();
        single.set_world_size(1);
        single.clear_ranks();
        single.add_ranks(0);
        single.mutable_rendezvous()->set_host("--evil");
        VERIFY_OK(agent::checkStartRequest(single));
        // Rank 1 alone is fine once rank 0's agent has reported the rendezvous.
        auto second = good();
        second.clear_ranks();
        second.add_ranks(1);
        second.mutable_rendezvous()->set_host("10.0.0.1");
        second.mutable_rendezvous()->set_port(29500);
        VERIFY_OK(agent::checkStartRequest(second));
    }

    // Whole GPUs each, or 1/g ranks sharing one; too few GPUs refused with the count.
    void gpusAreAssignedWholeOrShared()
    {
        using Assignment = std::map<int, std::vector<int>>;
        const std::vector<int> four = { 0, 1, 2, 3 };
        // CPU training: nothing assigned, even on a node with no GPU.
        auto none = agent::assignGpus(0, { 0, 1 }, {}, "no NVML");
        QVERIFY(none);
        QVERIFY(none->empty());
        // One each, in the order the ranks are listed (ranks 2 and 3 of a world of 4 here).
        auto one = agent::assignGpus(1, { 2, 3 }, four, {});
        QVERIFY(one);
        QCOMPARE(*one, (Assignment { { 2, { 0 } }, { 3, { 1 } } }));
        // Two each: consecutive blocks.
        auto two = agent::assignGpus(2, { 0, 1 }, four, {});
        QVERIFY(two);
        QCOMPARE(*two, (Assignment { { 0, { 0, 1 } }, { 1, { 2, 3 } } }));
        // Device indices are the node's, not positions: a node listing 5 and 7.
        auto indices = agent::assignGpus(1, { 0, 1 }, { 5, 7 }, {});
        QVERIFY(indices);
        QCOMPARE(*indices, (Assignment { { 0, { 5 } }, { 1, { 7 } } }));
        // Halves: ranks 0 and 1 share GPU 0, ranks 2 and 3 share GPU 1.
        auto halves = agent::assignGpus(0.5, { 0, 1, 2, 3 }, four, {});
        QVERIFY(halves);
        QCOMPARE(*halves, (Assignment { { 0, { 0 } }, { 1, { 0 } }, { 2, { 1 } }, { 3, { 1 } } }));
        // Thirds: three ranks fit one GPU (1/3 * 3 is not rounded up to 2).
        auto thirds = agent::assignGpus(1.0 / 3, { 0, 1, 2 }, { 0 }, {});
        QVERIFY2(thirds, thirds.error().c_str());
        QCOMPARE(*thirds, (Assignment { { 0, { 0 } }, { 1, { 0 } }, { 2, { 0 } } }));
        // Too few: says how many are needed and how many there are.
        auto tooFew = agent::assignGpus(2, { 0, 1, 2 }, four, "unused");
        QVERIFY(!tooFew);
        QCOMPARE(QString::fromStdString(tooFew.error()),
            QStringLiteral("spec.gpus_per_worker 2 x 3 rank(s) needs 6 GPU(s) but this node has 4; use 0 "
                           "for CPU training or place fewer ranks here"));
        // None at all: the GPU monitor's reason is added.
        auto noGpu = agent::assignGpus(0.5, { 0 }, {}, "NVML not found");
        QVERIFY(!noGpu);
        QVERIFY2(
            QString::fromStdString(noGpu.error()).contains(QLatin1String("this node has 0 (NVML not found)")),
            noGpu.error().c_str());
    }

    // What a rank runs with on top of the agent's environment: its threads, its GPUs (none for
    // a CPU rank), and idle OpenMP threads that sleep instead of spinning, unless the agent's
    // own environment chose a policy (or an interface for NCCL).
    void workerEnvironmentSharesTheCores()
    {
        const QByteArray saved = qgetenv("OMP_WAIT_POLICY");
        qunsetenv("OMP_WAIT_POLICY");
        agent::RunLaunch launch;
        launch.threadsPerRank = 3;
        launch.gpus = { { 1, { 2, 5 } } };
        launch.networkInterface = "veth-a";
        auto has = [](const std::vector<std::string> &environment, const std::string &entry) {
            return std::find(environment.begin(), environment.end(), entry) != environment.end();
        };
        const auto cpuRank = agent::workerEnvironment(launch, 0);
        QVERIFY(has(cpuRank, "OMP_NUM_THREADS=3"));
        QVERIFY(has(cpuRank, "OPENBLAS_NUM_THREADS=3"));
        QVERIFY(has(cpuRank, "CUDA_VISIBLE_DEVICES="));
        QVERIFY(has(cpuRank, "OMP_WAIT_POLICY=PASSIVE"));
        QCOMPARE(has(cpuRank, "NCCL_SOCKET_IFNAME=veth-a"), qgetenv("NCCL_SOCKET_IFNAME").isEmpty());
        QVERIFY(has(agent::workerEnvironment(launch, 1), "CUDA_VISIBLE_DEVICES=2,5"));
        qputenv("OMP_WAIT_POLICY", "ACTIVE");
        for (const auto &entry : agent::workerEnvironment(launch, 0))
            QVERIFY2(!entry.starts_with("OMP_WAIT_POLICY="), entry.c_str());
        if (saved.isNull())
            qunsetenv("OMP_WAIT_POLICY");
        else
            qputenv("OMP_WAIT_POLICY", saved);
    }

    // Workers get transparent huge pages for malloc's memory, on top of any tunables of the
    // agent's own, unless the agent's environment chose for glibc.malloc.hugetlb itself.
    void workerMallocUsesHugePagesUnlessTheAgentChose()
    {
        const QByteArray saved = qgetenv("GLIBC_TUNABLES");
        const auto tunablesOf = [](const std::vector<std::string> &environment) {
            QStringList found;
            for (const auto &entry : environment)
                if (entry.starts_with("GLIBC_TUNABLES="))
                    found << QString::fromStdString(entry);
            return found;
        };
        const agent::RunLaunch launch;
        qunsetenv("GLIBC_TUNABLES");
        QCOMPARE(tunablesOf(agent::workerEnvironment(launch, 0)),
            QStringList { QStringLiteral("GLIBC_TUNABLES=glibc.malloc.hugetlb=1") });
        qputenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2");
        QCOMPARE(tunablesOf(agent::workerEnvironment(launch, 0)),
            QStringList { QStringLiteral("GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1") });
        qputenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0");
        QVERIFY(tunablesOf(agent::workerEnvironment(launch, 0)).isEmpty()); // the agent's own stands
        QCOMPARE(agent::workerMallocTunables(), std::string());
        if (saved.isNull())
            qunsetenv("GLIBC_TUNABLES");
        else
            qputenv("GLIBC_TUNABLES", saved);
    }

    // Dropout rates are probabilities below 1 (0 turns dropout off), and a run stops after
    // an epoch of its own schedule or not at all: refused by field, in both namings.
    void runSpecBoundsDropoutAndStopAfterEpochs()
    {
        const auto problems = [](const v1::RunSpec &spec, const rules::SpecContext &context) {
            QStringList all;
            const rules::SpecStatus checked = rules::checkRunSpec(spec, context);
            for (const auto &p : checked.error())
                all << QString::fromStdString(p.text());
            return all;
        };
        const rules::SpecContext agent { "spec.", false, false };
        v1::RunSpec spec;
        spec.set_batch_size(32);
        spec.set_epochs(3);
        QCOMPARE(problems(spec, agent), QStringList());
        spec.set_block_dropout(0);
        spec.set_dense_dropout(0);
        spec.set_stop_after_epochs(3); // the whole schedule: allowed
        QCOMPARE(problems(spec, agent), QStringList());
        spec.set_block_dropout(1);
        spec.set_dense_dropout(std::nan(""));
        spec.set_stop_after_epochs(4);
        QCOMPARE(problems(spec, agent),
            (QStringList { QStringLiteral("spec.block_dropout: must be a number in [0, 1) (got 1)"),
                QStringLiteral("spec.dense_dropout: must be a number in [0, 1) (got NaN)"),
                QStringLiteral(
                    "spec.stop_after_epochs: must be 0 (train every epoch) or between 1 and the run's 3 "
                    "epochs (got 4)") }));
        // The model: a built-in's name, or empty for the default.
        {
            v1::RunSpec withModel;
            withModel.set_batch_size(32);
            withModel.set_epochs(3);
            for (const char *model : { "", "seed-cnn", "resnet18", "mobilenet_v2", "mini-cnn" }) {
                withModel.set_model(model);
                QCOMPARE(problems(withModel, agent), QStringList());
            }
            withModel.set_model("resnet50");
            QCOMPARE(problems(withModel, agent),
                QStringList { QStringLiteral(
                    "spec.model: must be one of seed-cnn, resnet18, mobilenet_v2, mini-cnn, or "
                    "sha256:HEX of a TorchScript module stored on the agent (got 'resnet50')") });
            // A stored module by its sum (64 lower-case hex digits), and nothing else of the kind.
            withModel.set_model("sha256:" + std::string(64, 'a'));
            QCOMPARE(problems(withModel, agent), QStringList());
            withModel.set_initial_weights("sha256:" + std::string(63, 'a'));
            QCOMPARE(problems(withModel, agent),
                QStringList {
                    QStringLiteral("spec.initial_weights: must be sha256:HEX of a TorchScript module stored "
                                   "on the agent, or empty (got 'sha256:%1')")
                        .arg(QString(63, QLatin1Char('a'))) });
            withModel.clear_initial_weights();
            withModel.set_model("resnet50");
            // The agent hands it to the worker as --model.
            agent::RunLaunch launch;
            launch.request.set_world_size(1);
            *launch.request.mutable_spec() = withModel;
            launch.request.mutable_spec()->set_model("resnet18");
            const v1::WorkerLaunch worker = agent::workerLaunch(launch, 0);
            QCOMPARE(worker.model(), std::string("resnet18"));
            // A stored module reaches the worker as the agent's file of it.
            agent::RunLaunch stored = launch;
            stored.request.mutable_spec()->set_model("sha256:" + std::string(64, 'b'));
            stored.request.mutable_spec()->set_initial_weights("sha256:" + std::string(64, 'c'));
            stored.modelFile = "/state/models/" + std::string(64, 'b') + ".pt";
            stored.initialWeightsFile = "/state/models/" + std::string(64, 'c') + ".pt";
            const v1::WorkerLaunch storedWorker = agent::workerLaunch(stored, 0);
            QCOMPARE(storedWorker.model(), "file:/state/models/" + std::string(64, 'b') + ".pt");
            QCOMPARE(storedWorker.initial_weights(), "/state/models/" + std::string(64, 'c') + ".pt");
            const auto command = agent::workerCommand(launch, worker);
            const auto at = std::find(command.begin(), command.end(), std::string("--model"));
            QVERIFY(at != command.end() && at + 1 != command.end() && *(at + 1) == "resnet18");
        }
        // Fine-tuning's phases: within the run's epochs, a rate like learning_rate's, a module's
        // name; the worker gets them as --head-epochs, --head-lr and --head.
        {
            v1::RunSpec tuned;
            tuned.set_batch_size(32);
            tuned.set_epochs(3);
            tuned.mutable_finetune()->set_head_epochs(1);
            tuned.mutable_finetune()->set_head_learning_rate(0.05);
            tuned.mutable_finetune()->set_head("classifier.1");
            QCOMPARE(problems(tuned, agent), QStringList());
            // Warm-up counts the whole-model epochs: 2 of them, so the default one epoch.
            QCOMPARE(rules::withDefaults(tuned).warmup_epochs(), 1.0);
            agent::RunLaunch launch;
            launch.request.set_world_size(1);
            *launch.request.mutable_spec() = tuned;
            const v1::WorkerLaunch worker = agent::workerLaunch(launch, 0);
            QCOMPARE(worker.head_epochs(), 1);
            QCOMPARE(worker.head_lr(), 0.05);
            QCOMPARE(worker.head(), std::string("classifier.1"));
            tuned.mutable_finetune()->set_head_epochs(4);
            tuned.mutable_finetune()->set_head_learning_rate(0);
            tuned.mutable_finetune()->set_head("fc; rm -rf /");
            QCOMPARE(problems(tuned, agent),
                (QStringList {
                    QStringLiteral("spec.finetune.head_epochs: must be 0 (one phase) or between 1 and the "
                                   "run's 3 epochs (got 4)"),
                    QStringLiteral("spec.finetune.head_learning_rate: must be a number in (0, 10] (got 0)"),
                    QStringLiteral(
                        "spec.finetune.head: must name a module as state_dict keys do (letters, digits, "
                        "'_' and '.', as \"fc\" or \"classifier.1\"; got 'fc; rm -rf /')") }));
            tuned.mutable_finetune()->set_head_epochs(0);
            tuned.mutable_finetune()->set_head_learning_rate(0.05);
            tuned.mutable_finetune()->set_head("fc");
            QCOMPARE(problems(tuned, agent),
                QStringList {
                    QStringLiteral("spec.finetune.head_epochs: must be 1 or more when a head or its "
                                   "learning rate is given: the epochs that train the head alone") });
        }
        spec.set_block_dropout(-0.125);
        spec.set_dense_dropout(HUGE_VAL);
        spec.set_stop_after_epochs(-1);
        QCOMPARE(problems(spec, agent).size(), 3);
        // In a plan's training the grid decides the epochs: bounded by the most a run may have.
        const rules::SpecContext plan { "training.", true, true };
        v1::RunSpec training;
        training.set_stop_after_epochs(rules::kMaxEpochs + 1);
        training.set_dense_dropout(1);
        QCOMPARE(problems(training, plan),
            (QStringList { QStringLiteral("training.denseDropout: must be a number in [0, 1) (got 1)"),
                QStringLiteral(
                    "training.stopAfterEpochs: must be 0 (train every epoch) or between 1 and 10000 (got "
                    "10001)") }));
        // Unset rates run as the seed CNN always has; zero stays zero.
        v1::RunSpec unset;
        unset.set_epochs(3);
        const v1::RunSpec filled = rules::withDefaults(unset);
        QCOMPARE(filled.block_dropout(), 0.25);
        QCOMPARE(filled.dense_dropout(), 0.5);
        QCOMPARE(filled.stop_after_epochs(), 0);
        unset.set_block_dropout(0);
        QVERIFY(rules::withDefaults(unset).has_block_dropout()
            && rules::withDefaults(unset).block_dropout() == 0);
    }

    void unpackRefusesPathsLeavingTheFolder()
    {
        const QString inner = path(QStringLiteral("evil/inner"));
        QVERIFY(QDir().mkpath(inner));
        QVERIFY(test::writeFile(path(QStringLiteral("evil/escape.txt")), "outside\n"));
        const QString tarball = path(QStringLiteral("evil.tar.gz"));
        const QString problem = test::runTool(QStringLiteral("tar"),
            { QStringLiteral("-czPf"), tarball, QStringLiteral("-C"), inner,
                QStringLiteral("../escape.txt") });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        QVERIFY(QFile::remove(path(QStringLiteral("evil/escape.txt"))));
        const QString into = path(QStringLiteral("evil/inner/unpacked"));
        const std::string error = agent::unpackTarGz(tarball.toStdString(), into.toStdString(), {}).error();
        QVERIFY2(QString::fromStdString(error).contains(QStringLiteral("unsafe path '../escape.txt'")),
            error.c_str());
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("evil/escape.txt"))));
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("evil/inner/escape.txt"))));
    }

    void eventLogSurvivesATornTail()
    {
        const std::filesystem::path dir = path(QStringLiteral("torn")).toStdString();
        std::filesystem::create_directories(dir);
        {
            agent::RunEventLog log(dir / "events.log");
            VERIFY_OK(log.opened());
            for (int i = 0; i < 3; ++i) {
                v1::RunEvent e;
                e.mutable_log()->set_text("line " + std::to_string(i));
                QCOMPARE(log.append(e, i == 2), qint64(i + 1));
            }
        }
        {
            QFile f(QString::fromStdString((dir / "events.log").string()));
            QVERIFY(f.open(QIODevice::Append));
            f.write("\x20\x08\x04"); // a record cut short by a crash
        }
        agent::RunEventLog reopened(dir / "events.log");
        VERIFY_OK(reopened.opened());
        QCOMPARE(reopened.lastSeq(), qint64(3));
        QCOMPARE(reopened.droppedOnOpen(), std::size_t(3));
        v1::RunEvent e;
        e.mutable_log()->set_text("after");
        QCOMPARE(reopened.append(e), qint64(4));
        std::vector<v1::RunEvent> all;
        QVERIFY(reopened.read(1, 100, std::chrono::milliseconds(0), &all));
        QCOMPARE(all.size(), std::size_t(4));
        QCOMPARE(all[3].log().text(), std::string("after"));
    }
};

QTEST_GUILESS_MAIN(TestAgentRules)
#include "tst_agent_rules.moc"
