// The study control plane's plans: validation (field by field, the refusal matrix, JSON
// errors), expansion into runs (baseline, cross product, repeats, models), the numbers that
// reach the worker, and placement on agents. The journal's replay is tst_study_journal's.
#include "journal.h"
#include "journal_test_support.h"
#include "placement.h"
#include "plan_models.h"
#include "run_request.h"
#include "spec_rules.h"
#include "study_fixtures.h"
#include "study_model.h"
#include "study_plan.h"
#include "study_state.h"
#include "verify_ok.h"

#include <limits>

#include <QCryptographicHash>
#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab;
using namespace scalelab::core;
using test::validPlan;

namespace {

NodeCapacity node(const QString &name, int cores, int gpus = 0, const QString &host = {})
{
    NodeCapacity n;
    n.agent = name;
    n.host = host.isEmpty() ? name : host;
    n.reachable = true;
    n.cpuCores = cores;
    n.freeSlots = cores;
    n.gpus = gpus;
    return n;
}

} // namespace

class TestStudyPlan : public QObject {
    Q_OBJECT

private Q_SLOTS:

    // The Run tab and `scalelab-cli run` refuse what the agent's StartWorkers refuses, in
    // the form's words, before anything is sent.
    void singleRunRefusesWhatTheAgentRefuses()
    {
        core::RunRequest ok;
        ok.dataset = QStringLiteral("synthetic-1");
        VERIFY_OK(ok.check());
        core::RunRequest big = ok;
        big.batchSize = rules::kMaxBatchSize + 1;
        QCOMPARE(big.check().error(),
            QStringList { QStringLiteral("batch size: must be between 1 and %1 (got %2)")
                              .arg(rules::kMaxBatchSize)
                              .arg(rules::kMaxBatchSize + 1) });
        core::RunRequest long_ = ok;
        long_.epochs = rules::kMaxEpochs + 1;
        QCOMPARE(long_.check().error().size(), 1);
        QVERIFY(long_.check().error().first().startsWith(QStringLiteral("epochs: must be between 1 and")));
        for (const core::RunRequest &r : { big, long_ }) {
            const v1::RunSpec spec = r.toStartWorkers(QStringLiteral("x")).spec();
            QVERIFY(!rules::checkRunSpec(spec, { "spec.", false, false }).ok());
        }
    }

    void runsAreLabelledByWhatDiffers()
    {
        core::RunConfig base;
        base.baseline = true;
        base.batchSize = 64;
        base.threadsPerWorker = 1;
        core::RunConfig a = base, b = base;
        a.baseline = b.baseline = false;
        a.workers = b.workers = 2;
        a.batchSize = 32;
        QCOMPARE(core::distinguishingLabels({ base, a, b }),
            (QStringList { QStringLiteral("baseline · 1 worker · b64"), QStringLiteral("2 workers · b32"),
                QStringLiteral("2 workers · b64") }));
        b.batchSize = 32;
        b.precision = QStringLiteral("bf16");
        b.epochs = 3;
        QCOMPARE(core::distinguishingLabels({ a, b }),
            (QStringList { QStringLiteral("2 workers · 1 epoch · fp32"),
                QStringLiteral("2 workers · 3 epochs · bf16") }));
        QCOMPARE(core::distinguishingLabels({ a }), QStringList { QStringLiteral("2 workers · b32") });
        QVERIFY(core::distinguishingLabels({}).isEmpty());
    }

    void planJsonRoundTrip()
    {
        const QByteArray json = R"({"name":"s1","dataset":"cifar-10-batches-bin",
            "grid":{"workers":[2,4],"batchSize":[32,64],"gpusPerWorker":[0.5]},
            "training":{"learningRate":0.05},"repeats":2,"maxFailures":0,"targetAccuracy":0.6})";
        const auto plan = parsePlanJson(json);
        VERIFY_OK(plan);
        VERIFY_OK(checkPlan(*plan));
        QCOMPARE(plan->grid().workers_size(), 2);
        QVERIFY(plan->has_max_failures());
        QCOMPARE(plan->max_failures(), 0);
        const auto again = parsePlanJson(planToJson(*plan));
        VERIFY_OK(again);
        QCOMPARE(again->SerializeAsString(), plan->SerializeAsString());
    }

    void planRejectsUnknownFieldsAndGarbage()
    {
        const auto misspelt = parsePlanJson(R"({"name":"x","wokers":[2]})");
        QVERIFY(!misspelt);
        QVERIFY2(misspelt.error().join(' ').contains(QLatin1String("wokers")),
            qPrintable(misspelt.error().join(' ')));
        const auto notJson = parsePlanJson("not json");
        QVERIFY(!notJson);
        QCOMPARE(notJson.error().size(), 1);
    }

    void validationListsEveryProblemByField()
    {
        v1::StudyPlan plan = validPlan();
        plan.set_name("../escape");
        plan.set_dataset("");
        plan.mutable_grid()->add_workers(0);
        plan.mutable_grid()->add_workers(2); // twice
        plan.mutable_grid()->add_batch_size(-1);
        plan.mutable_grid()->add_gpus_per_worker(0.3);
        plan.mutable_grid()->add_gpus_per_worker(1.5);
        plan.mutable_grid()->add_precision("fp16");
        plan.mutable_grid()->add_lr_rule("cubic");
        plan.set_repeats(-1);
        plan.set_max_failures(-2);
        plan.set_target_accuracy(70);
        plan.set_placement("random");
        plan.add_agents("node1:7450");
        plan.add_agents("node2"); // no port
        const QStringList p = checkPlan(plan).error();
        const QString all = p.join('\n');
        for (const char *field : { "name:", "dataset:", "grid.workers[2]",
                 "grid.workers[3]: 2 is listed twice", "grid.batchSize[1]", "grid.gpusPerWorker[0]",
                 "grid.gpusPerWorker[1]", "grid.precision[0]", "grid.lrRule[0]", "repeats:", "maxFailures:",
                 "targetAccuracy:", "placement:", "agents[1]: agent address 'node2' is not HOST:PORT" })
            QVERIFY2(all.contains(QLatin1String(field)),
                qPrintable(QStringLiteral("missing %1 in:\n%2").arg(field, all)));
        QCOMPARE(p.size(), 14);
        VERIFY_OK(checkPlan(validPlan()));
    }

    // Every learning-rate rule the worker knows is a grid value, and each reaches the run's
    // spec; an unknown one is refused naming the rules.
    void planAcceptsEveryLrRuleAndRefusesOthers()
    {
        v1::StudyPlan plan = validPlan();
        for (const char *rule : { "none", "linear", "sqrt", "adascale" })
            plan.mutable_grid()->add_lr_rule(rule);
        VERIFY_OK(checkPlan(plan));
        QStringList planned;
        for (const PlannedRun &run : expandPlan(plan, QStringLiteral("s")))
            if (!run.config.baseline)
                planned << run.config.lrRule;
        QCOMPARE(planned.count(QStringLiteral("sqrt")), 2); // one a worker count
        QCOMPARE(planned.count(QStringLiteral("adascale")), 2);
        RunConfig c;
        c.lrRule = QStringLiteral("adascale");
        QCOMPARE(runSpecFor(plan, c).lr_scaling(), std::string("adascale"));
        plan.mutable_grid()->add_lr_rule("cubic");
        const QStringList problems = checkPlan(plan).error();
        QCOMPARE(problems.size(), 1);
        QCOMPARE(problems.first(),
            QStringLiteral(
                "grid.lrRule[4]: must be none, linear, sqrt or adascale (got \"cubic\"; the rules: "
                "docs/training-engine.md)"));
    }

    // A range test's learning rate, found at the baseline's batch, is rescaled to the rules'
    // reference batch as each rule would scale it back.
    void foundLearningRateIsRescaledByTheRule()
    {
        v1::StudyPlan plan = validPlan();
        plan.set_learning_rate_auto(true);
        const FoundLearningRate found { .learningRate = 0.08, .batch = 256 };
        RunConfig c;
        const auto rescaled = [&](const char *rule) {
            c.lrRule = QLatin1String(rule);
            return runSpecFor(plan, c, found).learning_rate();
        };
        QCOMPARE(rescaled("none"), 0.08);
        QCOMPARE(rescaled("linear"), 0.02); // x 64 / 256
        QCOMPARE(rescaled("sqrt"), 0.04); // x sqrt(64 / 256)
        QCOMPARE(rescaled("adascale"), 0.02); // as the linear rule: its gain is S where noise dominates
    }

    // Malformed JSON says where; every unknown field and wrong kind is listed, with a guess.
    void planJsonErrorsSayWhereAndListEveryOne()
    {
        const auto syntax = parsePlanJson("{\n  \"name\": \"x\",\n  \"grid\": { \"workers\": [2,, 4] }\n}");
        QVERIFY(!syntax);
        QCOMPARE(syntax.error().size(), 1);
        QVERIFY2(syntax.error()[0].contains(QLatin1String("line 3, column")), qPrintable(syntax.error()[0]));
        const auto shape
            = parsePlanJson(R"({"name":"x","datset":"s","training":{"lerningRate":0.1,"momentum":"fast"},
                                 "grid":{"workers":2,"bachSize":[64]}})");
        QVERIFY(!shape);
        const QString all = shape.error().join('\n');
        for (const char *expected :
            { "datset: unknown field; did you mean \"dataset\"?",
                "training.lerningRate: unknown field; did you mean \"learningRate\"?",
                "grid.workers: must be a list", "grid.bachSize: unknown field; did you mean \"batchSize\"?" })
            QVERIFY2(all.contains(QLatin1String(expected)),
                qPrintable(QStringLiteral("missing %1 in:\n%2").arg(expected, all)));
        QCOMPARE(shape.error().size(), 4); // "fast" is a string: protobuf's number-as-string, refused later
        // An empty axis would read as absent and run its default silently (a 2-worker run with
        // the default epochs): refused, naming the key.
        const auto empty = parsePlanJson(R"({"name":"x","dataset":"d","grid":{"workers":[],"epochs":[6]}})");
        QVERIFY(!empty);
        QCOMPARE(empty.error(),
            QStringList {
                "grid.workers: an empty list; give the values to compare (e.g. [1, 2]), or leave the key "
                "out for its default" });
    }

    // NaN, infinities, values out of range and unknown enums: refused by the one rule set,
    // with the field and the limit named, in plans as at the agent.
    void refusalMatrix()
    {
        const auto problemsOf = [](const QByteArray &training) {
            const auto plan = parsePlanJson(
                R"({"name":"x","dataset":"d","grid":{"workers":[2]},"training":)" + training + "}");
            return (plan ? checkPlan(*plan).error() : plan.error()).join('\n');
        };
        struct Case {
            const char *training;
            const char *expected;
        };
        const Case cases[] = {
            { R"({"learningRate":"NaN"})", "training.learningRate: must be a number in (0, 10] (got NaN)" },
            { R"({"learningRate":"Infinity"})",
                "training.learningRate: must be a number in (0, 10] (got Infinity)" },
            { R"({"learningRate":1e308})", "training.learningRate: must be a number in (0, 10]" },
            { R"({"learningRate":0})", "training.learningRate: must be a number in (0, 10] (got 0)" },
            { R"({"momentum":"NaN"})", "training.momentum: must be a number in [0, 1) (got NaN)" },
            { R"({"momentum":1})", "training.momentum: must be a number in [0, 1) (got 1)" },
            { R"({"weightDecay":-1e-9})", "training.weightDecay: must be a number in [0, 1)" },
            { R"({"labelSmoothing":"-Infinity"})",
                "training.labelSmoothing: must be a number in [0, 1) (got -Infinity)" },
            { R"({"divergenceFactor":1})", "training.divergenceFactor: must be a number in (1, 1e+06]" },
            { R"({"divergenceSteps":0})", "training.divergenceSteps: must be between 1 and 100000" },
            { R"({"warmupEpochs":3})",
                "training.warmupEpochs: 3 is longer than the shortest run (1 epoch(s))" },
        };
        for (const Case &c : cases) {
            const QString all = problemsOf(c.training);
            QVERIFY2(all.contains(QLatin1String(c.expected)),
                qPrintable(QStringLiteral("%1: expected \"%2\" in:\n%3").arg(c.training, c.expected, all)));
        }
        v1::StudyPlan plan = validPlan();
        plan.mutable_grid()->add_epochs(1'000'000'000);
        plan.mutable_grid()->add_batch_size(100'000);
        QVERIFY(checkPlan(plan).error().join('\n').contains(
            QLatin1String("grid.epochs[1]: must be between 1 and 10000")));
        QVERIFY(checkPlan(plan).error().join('\n').contains(
            QLatin1String("grid.batchSize[1]: must be between 1 and 65536")));
        // The agent's names for the same rule, and an unknown enum value.
        v1::RunSpec spec;
        spec.set_batch_size(64);
        spec.set_epochs(2);
        spec.set_precision(v1::Precision(99));
        spec.set_learning_rate(std::numeric_limits<double>::quiet_NaN());
        spec.set_warmup_epochs(3);
        QStringList agent;
        const rules::SpecStatus checked = rules::checkRunSpec(spec, { "spec.", false, false });
        for (const auto &problem : checked.error())
            agent << QString::fromStdString(problem.text());
        const QString all = agent.join('\n');
        QVERIFY2(all.contains(QLatin1String("spec.learning_rate: must be a number in (0, 10] (got NaN)")),
            qPrintable(all));
        QVERIFY2(
            all.contains(QLatin1String("spec.precision: must be FP32 or BF16 (got the unknown value 99)")),
            qPrintable(all));
        QVERIFY2(all.contains(QLatin1String("spec.warmup_epochs: must be a number in [0, 2] (got 3)")),
            qPrintable(all));
    }

    // Zero is a value, and numbers are exact: from the plan's text to the worker's command.
    void numbersReachTheWorkerCommandExactly()
    {
        const auto plan = parsePlanJson(R"({"name":"x","dataset":"d","grid":{"workers":[2]},
            "training":{"learningRate":1e-7,"momentum":0,"weightDecay":2.5e-7,"labelSmoothing":1.25e-5,
                        "divergenceFactor":1.2345678901234567}})");
        VERIFY_OK(plan);
        VERIFY_OK(checkPlan(*plan));
        RunConfig config;
        config.workers = 2;
        config.batchSize = 64;
        config.epochs = 3;
        const v1::RunSpec spec = rules::withDefaults(runSpecFor(*plan, config));
        QCOMPARE(spec.learning_rate(), 1e-7);
        QVERIFY(spec.has_momentum());
        QCOMPARE(spec.momentum(), 0.0);
        QCOMPARE(spec.weight_decay(), 2.5e-7);
        QCOMPARE(spec.label_smoothing(), 1.25e-5);
        QCOMPARE(spec.warmup_epochs(), rules::kDefaultWarmupEpochs); // unset: the default
        QCOMPARE(rules::exactNumber(1e-7), std::string("1e-07"));
        QCOMPARE(rules::exactNumber(1.25e-5), std::string("1.25e-05"));
        QCOMPARE(rules::exactNumber(2.5e-7), std::string("2.5e-07"));
        QCOMPARE(rules::exactNumber(0), std::string("0"));
        QCOMPARE(std::stod(rules::exactNumber(1.2345678901234567)), 1.2345678901234567);
        // A plan saved and read again keeps an explicit zero.
        const auto reread = parsePlanJson(planToJson(*plan));
        QVERIFY(reread && reread->training().has_momentum() && reread->training().momentum() == 0);
        // "learningRate": "auto" is the plan's flag, and refuses a number beside it.
        const auto automatic
            = parsePlanJson(R"({"name":"x","dataset":"d","training":{"learningRate":"auto"}})");
        QVERIFY(automatic && automatic->learning_rate_auto() && !automatic->training().has_learning_rate());
        v1::StudyPlan both = *automatic;
        both.mutable_training()->set_learning_rate(0.1);
        QVERIFY(checkPlan(both).error().join('\n').contains(
            QLatin1String("give a number or \"auto\", not both")));
    }

    void expansionIsBaselinePlusCrossProductTimesRepeats()
    {
        v1::StudyPlan plan = validPlan();
        plan.mutable_grid()->add_precision("fp32");
        plan.mutable_grid()->add_precision("bf16");
        plan.set_repeats(2);
        const auto runs = expandPlan(plan, QStringLiteral("st-x"));
        QCOMPARE(runs.size(), (1 + 2 * 2) * 2);
        QVERIFY(runs[0].config.baseline);
        QCOMPARE(runs[0].config.workers, 1);
        QCOMPARE(runs[0].config.batchSize, 64);
        QCOMPARE(runs[0].config.epochs, 3);
        QCOMPARE(runs[1].repeat, 1);
        QCOMPARE(runs[0].runId, QStringLiteral("st-x-r01"));
        QSet<QString> ids, keys;
        for (const auto &r : runs) {
            ids.insert(r.runId);
            keys.insert(r.config.key() + QString::number(r.repeat));
            QCOMPARE(r.maxFailures, 2); // the default
        }
        QCOMPARE(ids.size(), runs.size());
        QCOMPARE(keys.size(), runs.size());
        // Same plan, same runs.
        const auto again = expandPlan(plan, QStringLiteral("st-x"));
        for (int i = 0; i < runs.size(); ++i)
            QCOMPARE(again[i].config, runs[i].config);

        plan.mutable_baseline()->set_skip(true);
        plan.set_repeats(1);
        plan.set_max_failures(0);
        auto *o = plan.add_overrides();
        o->set_match("w4-b64-e3-cpu-t0-bf16-lr_none");
        o->set_max_failures(5);
        const auto noBaseline = expandPlan(plan, QStringLiteral("s"));
        QCOMPARE(noBaseline.size(), 4);
        QVERIFY(!noBaseline[0].config.baseline);
        QCOMPARE(noBaseline[0].maxFailures, 0);
        QCOMPARE(noBaseline[3].maxFailures, 5);
    }

    // A study compares models (issue 36): grid.model is an axis, every model has its own
    // one-worker baseline, the key and the labels name the model, and each run's spec
    // carries it. The default model keeps the keys and specs of before.
    void modelsAreAnAxisWithABaselineEach()
    {
        v1::StudyPlan plan = validPlan(); // workers [2, 4]
        plan.mutable_grid()->add_model("seed-cnn");
        plan.mutable_grid()->add_model("resnet18");
        VERIFY_OK(checkPlan(plan));
        const auto runs = expandPlan(plan, QStringLiteral("st-m"));
        QCOMPARE(runs.size(), 2 * (1 + 2));
        QStringList keys;
        QList<RunConfig> configs;
        for (const auto &r : runs) {
            keys << r.config.key();
            configs << r.config;
        }
        QCOMPARE(keys,
            (QStringList { QStringLiteral("baseline-w1-b64-e3-cpu-t0-fp32-lr_none"),
                QStringLiteral("baseline-w1-b64-e3-cpu-t0-fp32-lr_none-resnet18"),
                QStringLiteral("w2-b64-e3-cpu-t0-fp32-lr_none"),
                QStringLiteral("w4-b64-e3-cpu-t0-fp32-lr_none"),
                QStringLiteral("w2-b64-e3-cpu-t0-fp32-lr_none-resnet18"),
                QStringLiteral("w4-b64-e3-cpu-t0-fp32-lr_none-resnet18") }));
        QCOMPARE(distinguishingLabels(configs).at(1), QStringLiteral("baseline · 1 worker · resnet18"));
        QCOMPARE(distinguishingLabels(configs).at(2), QStringLiteral("2 workers · seed-cnn"));
        QCOMPARE(runSpecFor(plan, runs[0].config).model(), std::string()); // the default: as before
        QCOMPARE(runSpecFor(plan, runs[5].config).model(), std::string("resnet18"));

        // One model for the whole study: training.model; its name is in every label.
        v1::StudyPlan one = validPlan();
        one.mutable_training()->set_model("mobilenet_v2");
        const auto oneRuns = expandPlan(one, QStringLiteral("st-o"));
        QCOMPARE(oneRuns.size(), 3);
        for (const auto &r : oneRuns) {
            QCOMPARE(r.config.model, QStringLiteral("mobilenet_v2"));
            QCOMPARE(runSpecFor(one, r.config).model(), std::string("mobilenet_v2"));
        }
        QCOMPARE(distinguishingLabels({ oneRuns[1].config }).first(),
            QStringLiteral("2 workers · b64 · mobilenet_v2"));

        // baseline.model: one model's baseline only, and it must be one the grid trains.
        plan.mutable_baseline()->set_model("resnet18");
        VERIFY_OK(checkPlan(plan));
        const auto oneBaseline = expandPlan(plan, QStringLiteral("st-b"));
        QCOMPARE(oneBaseline.size(), 5);
        QCOMPARE(oneBaseline[0].config.model, QStringLiteral("resnet18"));
        QVERIFY(!oneBaseline[1].config.baseline);
        plan.mutable_baseline()->set_model("mobilenet_v2");
        plan.mutable_grid()->add_model("resnet50");
        const auto refused = checkPlan(plan);
        QVERIFY(!refused);
        QVERIFY2(
            refused.error().contains(QStringLiteral("grid.model[2]: must be one of seed-cnn, resnet18, "
                                                    "mobilenet_v2, mini-cnn, or file:PATH of a TorchScript "
                                                    "module (got \"resnet50\")")),
            qPrintable(refused.error().join(QLatin1Char('\n'))));
        QVERIFY2(
            refused.error()
                .join(QLatin1Char('\n'))
                .contains(QStringLiteral("baseline.model: \"mobilenet_v2\" is not a model the grid trains")),
            qPrintable(refused.error().join(QLatin1Char('\n'))));

        // The journal keeps the model; a journal from before models reads as the default.
        RunConfig resnet = runs[5].config;
        QCOMPARE(journal_events::configFromRecord(journal_events::configRecord(resnet)), resnet);
        v1::RunConfigRecord old = journal_events::configRecord(runs[2].config);
        old.clear_model();
        QCOMPARE(journal_events::configFromRecord(old).model, QStringLiteral("seed-cnn"));
        QCOMPARE(journal_events::configFromRecord(old).key(), runs[2].config.key());
    }

    // A plan names a module by file (issue 36): creating the study copies it into the
    // console's store by content and names it by its sum, in every place a plan names a
    // model, with its file name kept for labels; the plan stays a scale-up (not a tune).
    void planModulesAreNamedByTheirContent()
    {
        QTemporaryDir dir;
        QFile net(dir.filePath(QStringLiteral("net.pt")));
        QVERIFY(net.open(QIODevice::WriteOnly) && net.write("not checked here") > 0);
        net.close();
        const QString sum = QString::fromLatin1(
            QCryptographicHash::hash(QByteArrayLiteral("not checked here"), QCryptographicHash::Sha256)
                .toHex());
        v1::StudyPlan plan = validPlan();
        plan.mutable_grid()->add_model("seed-cnn");
        plan.mutable_grid()->add_model("file:net.pt");
        plan.mutable_training()->set_initial_weights(
            "file:" + dir.filePath(QStringLiteral("net.pt")).toStdString());
        VERIFY_OK(checkPlan(plan));
        QCOMPARE(planModelFiles(plan).size(), 2);
        const QString store = dir.filePath(QStringLiteral("store"));
        VERIFY_OK(resolvePlanModels(&plan, dir.path(), store));
        QVERIFY(!plan.has_tune());
        QCOMPARE(plan.grid().model(1), "sha256:" + sum.toStdString());
        QCOMPARE(plan.training().initial_weights(), "sha256:" + sum.toStdString());
        QCOMPARE(plan.model_names().at(sum.toStdString()), std::string("net.pt"));
        QCOMPARE(planModelSums(plan), QStringList { QStringLiteral("sha256:") + sum });
        VERIFY_OK(checkPlan(plan));
        const auto stored = storedModelFile(store, QStringLiteral("sha256:") + sum);
        VERIFY_OK(stored);
        QFile copy(*stored);
        QVERIFY(copy.open(QIODevice::ReadOnly));
        QCOMPARE(copy.readAll(), QByteArrayLiteral("not checked here"));
        QCOMPARE(modelDisplayName(plan, QStringLiteral("sha256:") + sum), QStringLiteral("net.pt"));
        const auto runs = expandPlan(plan, QStringLiteral("st-f"));
        QCOMPARE(
            runs.last().config.key(), QStringLiteral("w4-b64-e3-cpu-t0-fp32-lr_none-ts_") + sum.left(12));

        // What cannot be resolved is named with its field.
        v1::StudyPlan missing = validPlan();
        missing.mutable_training()->set_model("file:gone.pt");
        const Status gone = resolvePlanModels(&missing, dir.path(), store);
        QVERIFY(!gone);
        QVERIFY2(gone.error().startsWith(QStringLiteral("training.model: model file "))
                && gone.error().contains(QStringLiteral("gone.pt: no such file")),
            qPrintable(gone.error()));
        QVERIFY(!storedModelFile(store, QStringLiteral("sha256:") + QString(64, QLatin1Char('0'))));
    }

    void runSpecCarriesTheConfiguration()
    {
        v1::StudyPlan plan = validPlan();
        plan.mutable_training()->set_learning_rate(0.07);
        RunConfig c;
        c.workers = 4;
        c.batchSize = 32;
        c.epochs = 5;
        c.precision = QStringLiteral("bf16");
        c.lrRule = QStringLiteral("linear");
        const v1::RunSpec spec = runSpecFor(plan, c);
        QCOMPARE(spec.dataset(), std::string("synthetic"));
        QCOMPARE(spec.batch_size(), 32);
        QCOMPARE(spec.epochs(), 5);
        QCOMPARE(spec.precision(), v1::BF16);
        QCOMPARE(spec.lr_scaling(), std::string("linear"));
        QCOMPARE(spec.learning_rate(), 0.07);
        QCOMPARE(spec.checkpoint_every_epochs(), 1);
    }

    // Repeats train with the plan's seed unless it says "vary": then repeat r uses seed + r.
    void repeatSeedsSameOrVary()
    {
        v1::StudyPlan plan = validPlan();
        plan.mutable_training()->set_seed(42);
        RunConfig c;
        QCOMPARE(runSpecFor(plan, c, std::nullopt, 2).seed(), 42u);
        plan.set_repeat_seeds("vary");
        QCOMPARE(runSpecFor(plan, c, std::nullopt, 0).seed(), 42u);
        QCOMPARE(runSpecFor(plan, c, std::nullopt, 2).seed(), 44u);
        VERIFY_OK(checkPlan(plan));
        plan.mutable_training()->clear_seed(); // the default seed, 1, shifted too
        QCOMPARE(runSpecFor(plan, c, std::nullopt, 1).seed(), 2u);
        plan.set_repeat_seeds("random");
        const QStringList problems = checkPlan(plan).error();
        QCOMPARE(problems.size(), 1);
        QVERIFY2(problems.first().startsWith(QLatin1String("repeatSeeds: \"same\"")),
            qPrintable(problems.first()));
        // A plan file says it in its own words, and says it back.
        const auto parsed = parsePlanJson(R"({"name":"x","dataset":"d","repeats":3,"repeatSeeds":"vary"})");
        VERIFY_OK(parsed);
        QCOMPARE(parsed->repeat_seeds(), std::string("vary"));
    }

    // A spread run's first placement waits for an agent it knows that answered late, when
    // without it ranks planned apart would share an agent (a fresh clone's CI saw h1, just
    // back from the network probe, left out); not for one it never saw, nor when it would
    // gain nothing.
    void spreadWaitsForAKnownAgentThatAnsweredLate()
    {
        RunConfig two;
        two.workers = 2;
        NodeCapacity late = node("a", 2);
        late.reachable = false;
        late.error = QStringLiteral("Deadline Exceeded");
        const QList<NodeCapacity> nodes { late, node("b", 2), node("c", 2) };
        const QStringList known { QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c") };
        // On b and c: two agents, as with a; nothing to wait for.
        const Placement onBC = placeRun(two, nodes, PlacementPolicy::Spread, true);
        QCOMPARE(onBC.portions.size(), 2);
        QVERIFY(spreadWaitsFor(onBC, nodes, two.workers, known).isEmpty());
        // Two hosts, one late: both ranks on b, where a would have taken one.
        const QList<NodeCapacity> pair { late, node("b", 2) };
        const Placement doubled = placeRun(two, pair, PlacementPolicy::Spread, true);
        QCOMPARE(doubled.portions.size(), 1);
        QCOMPARE(spreadWaitsFor(doubled, pair, two.workers, known), QStringList { QStringLiteral("a") });
        // Never seen: not waited for (it may never come).
        QVERIFY(spreadWaitsFor(doubled, pair, two.workers, { QStringLiteral("b") }).isEmpty());
        // One worker: nothing to spread.
        RunConfig one;
        one.workers = 1;
        QVERIFY(spreadWaitsFor(placeRun(one, pair, PlacementPolicy::Spread, true), pair, 1, known).isEmpty());
    }

    void placementPacksSpreadsAndExplains()
    {
        RunConfig four;
        four.workers = 4;
        const QList<NodeCapacity> nodes { node("a", 2), node("b", 4) };
        const Placement packed = placeRun(four, nodes, PlacementPolicy::Pack, true);
        QVERIFY(packed.ok());
        QCOMPARE(packed.portions.size(), 1);
        QCOMPARE(packed.portions[0].agent, QStringLiteral("b"));
        QCOMPARE(packed.portions[0].ranks, (QList<int> { 0, 1, 2, 3 }));
        const Placement spread = placeRun(four, nodes, PlacementPolicy::Spread, true);
        QCOMPARE(spread.portions.size(), 2);
        QCOMPARE(spread.portions[0].ranks, (QList<int> { 0, 1 }));
        QCOMPARE(spread.portions[1].ranks, (QList<int> { 2, 3 }));

        RunConfig big;
        big.workers = 8;
        const Placement tooBig = placeRun(big, nodes, PlacementPolicy::Pack, true);
        QVERIFY(!tooBig.ok());
        QVERIFY(tooBig.infeasible);
        QVERIFY2(tooBig.reason.contains(QLatin1String("needs 8 worker slots; the agents have 6")),
            qPrintable(tooBig.reason));

        RunConfig gpu;
        gpu.workers = 1;
        gpu.gpusPerWorker = 2;
        const Placement noGpu = placeRun(gpu, nodes, PlacementPolicy::Pack, true);
        QVERIFY(noGpu.infeasible);
        QVERIFY2(noGpu.reason.contains(QLatin1String("no agent has a GPU")), qPrintable(noGpu.reason));
        const Placement oneGpu = placeRun(gpu, { node("g", 8, 1) }, PlacementPolicy::Pack, true);
        QCOMPARE(oneGpu.reason, QStringLiteral("needs 2 GPUs on one node; the largest node has 1"));

        RunConfig halves;
        halves.workers = 2;
        halves.gpusPerWorker = 0.5;
        const Placement shared = placeRun(halves, { node("g", 8, 1) }, PlacementPolicy::Pack, true);
        QVERIFY(shared.ok()); // two workers share one GPU
        QCOMPARE(shared.portions[0].ranks.size(), 2);

        // Busy hosts wait (not infeasible); unreachable agents are named.
        QList<NodeCapacity> busy { node("a", 4) };
        busy[0].busy = true;
        const Placement waiting = placeRun(four, busy, PlacementPolicy::Pack, true);
        QVERIFY(!waiting.ok());
        QVERIFY(!waiting.infeasible);
        QVERIFY(waiting.reason.startsWith(QLatin1String("waiting for capacity")));
        QVERIFY(placeRun(four, busy, PlacementPolicy::Pack, false).ok()); // sharing allowed
        NodeCapacity down = node("c", 4);
        down.reachable = false;
        down.error = QStringLiteral("connection refused");
        const Placement none = placeRun(four, { down }, PlacementPolicy::Pack, true);
        QVERIFY2(none.reason.contains(QLatin1String("c: connection refused")), qPrintable(none.reason));

        // Only agents that hold the plan's data set take ranks; with none, the run is
        // infeasible and says what the agents do have.
        QList<NodeCapacity> data { node("a", 4), node("b", 4) };
        data[0].datasets = QStringList { QStringLiteral("cifar-10") };
        data[1].datasets = QStringList { QStringLiteral("synthetic") };
        const Placement onB = placeRun(four, data, PlacementPolicy::Pack, true, QStringLiteral("synthetic"));
        QVERIFY(onB.ok());
        QCOMPARE(onB.portions.size(), 1);
        QCOMPARE(onB.portions.front().agent, QStringLiteral("b"));
        const Placement missing
            = placeRun(four, data, PlacementPolicy::Pack, true, QStringLiteral("imagenet"));
        QVERIFY(!missing.ok());
        QVERIFY(missing.infeasible);
        QVERIFY2(missing.reason.contains(QLatin1String("no agent has the data set 'imagenet'"))
                && missing.reason.contains(QLatin1String("a has cifar-10"))
                && missing.reason.contains(QLatin1String("b has synthetic")),
            qPrintable(missing.reason));
        data[1].datasets.clear();
        QVERIFY(placeRun(four, data, PlacementPolicy::Pack, true, QStringLiteral("synthetic"))
                    .reason.contains(QLatin1String("b has none")));
    }
};

QTEST_GUILESS_MAIN(TestStudyPlan)
#include "tst_study_plan.moc"
