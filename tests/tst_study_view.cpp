// The console's study panel before a launch, offscreen: inline refusal of bad values, a
// placement preview that names infeasible runs and asks no agent itself, launch needs said
// as a hint, elastic ranges, the learning-rate finder and the data set choice.
// Studies launched from the panel are tst_study_view_runs'.
#include "agent_client.h"
#include "agent_fixture.h"
#include "console_support.h"
#include "frozen_columns.h"
#include "lr_find_dialog.h"
#include "metric_chart.h"
#include "parallel_coordinates.h"
#include "run_details.h"
#include "run_plot.h"
#include "runs_table.h"
#include "scaling_panel.h"
#include "study_charts.h"
#include "study_plan.h"
#include "study_results.h"
#include "study_view.h"
#include "study_view_support.h"
#include "tune_charts.h"
#include "tune_plan.h"
#include "verify_ok.h"

#include <QComboBox>
#include <QFileInfo>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSignalSpy>
#include <QThread>

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSettings>
#include <QTableWidget>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

using namespace scalelab;
using test::cell;

class TestStudyView : public QObject {
    Q_OBJECT
private:
    test::AgentFixture m_fixture;

private Q_SLOTS:
    void initTestCase() { VERIFY_OK(test::startAgentWithSynth(m_fixture)); }

    void cleanupTestCase() { VERIFY_OK(m_fixture.stopAndCheckNothingLeft()); }

    void badValuesAreRefusedInline()
    {
        app::StudyView view;
        view.setAgents({ m_fixture.endpoint() });
        v1::DescribeResponse inventory; // as the Agents tab hands it over
        VERIFY_OK(m_fixture.client().describe(&inventory));
        view.setInventory(m_fixture.endpoint().name, inventory);
        auto *workers = view.findChildren<QLineEdit *>().at(2);
        workers->setText(QStringLiteral("2, x, 0"));
        const QString text = view.problemsLabel()->text();
        QVERIFY2(text.contains(QLatin1String("'x' is not a whole number")), qPrintable(text));
        // In the form's words, not the plan's paths, and the field is marked.
        QVERIFY2(text.contains(QLatin1String("Workers (value 2): must be between 1 and 1024 (got 0)")),
            qPrintable(text));
        QVERIFY2(!text.contains(QLatin1String("grid.")), qPrintable(text));
        QVERIFY(workers->styleSheet().contains(QLatin1String("border")));
        QCOMPARE(view.runsTable()->rowCount(), 0); // no preview of an earlier, valid plan
        if (const QByteArray shot = qgetenv("SCALELAB_SCREENSHOT_DIR"); !shot.isEmpty()) {
            view.resize(1280, 720);
            QVERIFY(test::showAndSettle(&view));
            view.grab().save(QString::fromLocal8Bit(shot) + QStringLiteral("/designer-problems.png"));
        }
        const core::Status launched = view.launch();
        QVERIFY(!launched);
        QVERIFY2(launched.error().contains(QLatin1String("'x'")), qPrintable(launched.error()));
        // The preview names what cannot be placed: 4096 workers on a small node.
        workers->setText(QStringLiteral("1024"));
        QVERIFY(workers->styleSheet().isEmpty()); // valid again: no longer marked
        QVERIFY2(view.problemsLabel()->text().contains(QLatin1String("cannot be placed")),
            qPrintable(view.problemsLabel()->text()));
        bool infeasible = false;
        for (int row = 0; row < view.runsTable()->rowCount(); ++row)
            infeasible = infeasible
                || cell(view.runsTable(), row, app::StudyView::StateCol) == QLatin1String("INFEASIBLE");
        QVERIFY(infeasible);
    }

    // Issue 56 item 5: the preview runs on every edit, on the GUI thread, so it asks no agent
    // anything; it places on the inventories the Agents tab hands over. An agent that has
    // not sent one yet (here a port that accepts and never answers, where a Describe waited
    // for its deadline on every keystroke) is named as such, and is asked by no one here.
    void previewAsksNoAgentOnTheGuiThread()
    {
        QTcpServer silent;
        QVERIFY(silent.listen(QHostAddress::LocalHost));
        core::AgentEndpoint endpoint;
        endpoint.name = QStringLiteral("silent");
        endpoint.address = QStringLiteral("127.0.0.1:%1").arg(silent.serverPort());
        app::StudyView view;
        view.setAgents({ endpoint });
        auto *workers = view.findChildren<QLineEdit *>().at(2);
        workers->setText(QStringLiteral("1, 2"));
        QVERIFY(view.runsTable()->rowCount() > 0);
        QString where;
        for (int column = 0; column < view.runsTable()->columnCount(); ++column)
            where += cell(view.runsTable(), 0, column) + QLatin1Char('|');
        QVERIFY2(where.contains(QLatin1String("inventory has not arrived yet")), qPrintable(where));
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty()) {
            view.resize(1400, 700);
            QVERIFY(test::showAndSettle(&view));
            view.runsTable()->horizontalScrollBar()->setValue(
                view.runsTable()->horizontalScrollBar()->maximum());
            QVERIFY(test::showAndSettle(&view));
            view.grab().save(dir + QStringLiteral("/preview_waiting_for_inventory.png")); // to look at
        }
        QVERIFY2(!silent.waitForNewConnection(200), "the preview connected to the agent");
    }

    // The workers field takes torchrun's MIN:MAX for an elastic run (issue 55), written to the
    // plan as grid.workerRanges and shown back as it was typed; a bad range is refused in the
    // form's words. Accumulation steps are a grid axis beside it.
    // Issue 56 item 6: what launching would need of the agents (here a data set none of them
    // has) is a note below the preview, not an error in red, and Launch stays enabled; Launch
    // then refuses, saying why.
    void launchNeedsAreAHintUntilLaunch()
    {
        app::StudyView view;
        view.setAgents({ m_fixture.endpoint() });
        v1::DescribeResponse inventory;
        VERIFY_OK(m_fixture.client().describe(&inventory));
        view.setInventory(m_fixture.endpoint().name, inventory);
        auto *dataset = view.findChild<QLineEdit *>(QStringLiteral("dataset"));
        QVERIFY(dataset);
        dataset->setText(QStringLiteral("nosuch"));
        const QLabel *label = view.problemsLabel();
        QVERIFY2(label->text().contains(QLatin1String("Launching would need:")), qPrintable(label->text()));
        QVERIFY2(label->text().contains(QLatin1String("no connected agent has a data set 'nosuch'")),
            qPrintable(label->text()));
        QVERIFY2(!label->text().contains(QLatin1String("Cannot launch")), qPrintable(label->text()));
        QVERIFY2(!label->styleSheet().contains(QLatin1String("#c62828"))
                && !label->styleSheet().contains(QLatin1String("#ff8a80")),
            qPrintable(label->styleSheet()));
        QVERIFY(!dataset->styleSheet().contains(QLatin1String("border"))); // the field is not wrong
        const core::Status launched = view.launch();
        QVERIFY(!launched);
        QVERIFY2(launched.error().startsWith(QLatin1String("Cannot launch")), qPrintable(launched.error()));
        QVERIFY2(launched.error().contains(QLatin1String("'nosuch'")), qPrintable(launched.error()));
        dataset->setText(QStringLiteral("synth")); // one the agent has: nothing needed
        QVERIFY2(!view.problemsLabel()->text().contains(QLatin1String("Launching would need")),
            qPrintable(view.problemsLabel()->text()));
    }

    void designerTakesElasticRanges()
    {
        app::StudyView view;
        view.setAgents({ m_fixture.endpoint() });
        auto *workers = view.findChild<QLineEdit *>(QStringLiteral("workers"));
        auto *accumulation = view.findChild<QLineEdit *>(QStringLiteral("accumulationSteps"));
        QVERIFY(workers && accumulation);
        QVERIFY(view.findChildren<QLineEdit *>().at(2) == workers); // where the other tests find it
        workers->setText(QStringLiteral("1, 2:4"));
        accumulation->setText(QStringLiteral("1, 2"));
        QStringList problems;
        v1::StudyPlan plan = view.planFromForm(&problems);
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(u'\n')));
        QCOMPARE(plan.grid().workers_size(), 1);
        QCOMPARE(plan.grid().workers(0), 1);
        QCOMPARE(plan.grid().worker_ranges_size(), 1);
        QCOMPARE(plan.grid().worker_ranges(0).min(), 2);
        QCOMPARE(plan.grid().worker_ranges(0).max(), 4);
        QCOMPARE(plan.grid().accumulation_steps_size(), 2);
        QCOMPARE(plan.grid().accumulation_steps(1), 2);
        // The preview: the elastic runs' sizes in the Workers column, shown for such a plan.
        QVERIFY(!view.runsTable()->isColumnHidden(app::StudyView::WorkersCol));
        QStringList sizes;
        for (int row = 0; row < view.runsTable()->rowCount(); ++row)
            sizes << cell(view.runsTable(), row, app::StudyView::WorkersCol);
        QVERIFY2(sizes.contains(QStringLiteral("2–4")) && sizes.contains(QStringLiteral("1")),
            qPrintable(sizes.join(u'|')));
        // Loaded back (through the plan file's JSON, as a saved plan is): as typed.
        const auto reread = core::parsePlanJson(core::planToJson(plan));
        QVERIFY(reread.ok());
        view.setForm(*reread);
        QCOMPARE(workers->text(), QStringLiteral("1, 2:4"));
        QCOMPARE(accumulation->text(), QStringLiteral("1, 2"));
        // A plan without the axis leaves the field empty, saying what that means.
        v1::StudyPlan trained = plan;
        trained.mutable_grid()->clear_accumulation_steps();
        trained.mutable_training()->set_accumulation_steps(4);
        view.setForm(trained);
        QVERIFY(accumulation->text().isEmpty());
        QVERIFY2(accumulation->placeholderText().startsWith(QLatin1String("4 ")),
            qPrintable(accumulation->placeholderText()));
        QCOMPARE(view.planFromForm(&problems).grid().accumulation_steps_size(), 0);
        // Bad ranges, in the form's words, the field marked; no fixed-size run slips through.
        const std::pair<const char *, const char *> bad[]
            = { { "0:2", "the elastic range '0:2' must have 1 <= MIN < MAX" },
                  { "3:3", "the elastic range '3:3' must have 1 <= MIN < MAX" },
                  { "4:2", "the elastic range '4:2' must have 1 <= MIN < MAX" },
                  { "2:x", "'2:x' is neither a whole number nor an elastic range MIN:MAX" } };
        for (const auto &[typed, said] : bad) {
            workers->setText(QString::fromLatin1(typed));
            const QString text = view.problemsLabel()->text();
            QVERIFY2(text.contains(QLatin1String("Workers: ") + QLatin1String(said)), qPrintable(text));
            QVERIFY(workers->styleSheet().contains(QLatin1String("border")));
            problems.clear();
            const v1::StudyPlan refused = view.planFromForm(&problems);
            QCOMPARE(refused.grid().worker_ranges_size() + refused.grid().workers_size(), 0);
        }
        accumulation->setText(QStringLiteral("0"));
        QVERIFY2(view.problemsLabel()->text().contains(
                     QLatin1String("Accumulation steps (value 1): must be between 1")),
            qPrintable(view.problemsLabel()->text()));
    }

    // The runs table's Workers column (issue 55): shown while the study has an elastic run,
    // its range until it changes size, then the sizes it trained at, and why in its tooltip.
    void runsTableShowsTheSizesOfAnElasticRun()
    {
        core::StudySnapshot s;
        core::RunResult fixed;
        fixed.runId = QStringLiteral("st-r01");
        fixed.config.workers = 2;
        core::RunResult elastic = fixed;
        elastic.runId = QStringLiteral("st-r02");
        elastic.config.minWorkers = 1;
        core::RunResult resized = elastic;
        resized.runId = QStringLiteral("st-r03");
        const auto attempt = [](int number, int world, const QString &resize) {
            core::AttemptRecord a;
            a.attempt = number;
            a.worldSize = world;
            a.resize = resize;
            return a;
        };
        resized.attempts = { attempt(1, 2, {}), attempt(2, 1, QStringLiteral("shrank: a host is gone")),
            attempt(3, 2, QStringLiteral("grew back: capacity returned")) };
        s.runs = { fixed };
        app::RunsTable runs;
        const auto noProgress = [](const QString &) { return std::optional<core::ProgressView>(); };
        runs.showStudy(s, core::computeStudyResults(s), QStringLiteral("st"), noProgress);
        QVERIFY(runs.table()->isColumnHidden(app::StudyView::WorkersCol)); // the configuration says it
        s.runs = { fixed, elastic, resized };
        runs.showStudy(s, core::computeStudyResults(s), QStringLiteral("st"), noProgress);
        QVERIFY(!runs.table()->isColumnHidden(app::StudyView::WorkersCol));
        QCOMPARE(cell(runs.table(), 0, app::StudyView::WorkersCol), QStringLiteral("2"));
        QCOMPARE(cell(runs.table(), 1, app::StudyView::WorkersCol), QStringLiteral("1–2"));
        QCOMPARE(cell(runs.table(), 2, app::StudyView::WorkersCol), QStringLiteral("2 → 1 → 2 workers"));
        const QString tip = runs.table()->item(2, app::StudyView::WorkersCol)->toolTip();
        QVERIFY2(tip.startsWith(QLatin1String("Elastic: goes on with as few as 1 of its 2 workers"))
                && tip.contains(QLatin1String("Attempt 2: shrank: a host is gone."))
                && tip.contains(QLatin1String("Attempt 3: grew back")),
            qPrintable(tip));
        QVERIFY2(cell(runs.table(), 1, app::StudyView::ConfigCol).startsWith(QStringLiteral("1–2 workers")),
            qPrintable(cell(runs.table(), 1, app::StudyView::ConfigCol)));
        // Hidden by the user, it stays hidden, and is remembered so.
        runs.setColumnVisible(app::StudyView::WorkersCol, false);
        runs.showStudy(s, core::computeStudyResults(s), QStringLiteral("st"), noProgress);
        QVERIFY(runs.table()->isColumnHidden(app::StudyView::WorkersCol));
        QSettings settings(m_fixture.path(QStringLiteral("workers-column.ini")), QSettings::IniFormat);
        runs.saveColumns(settings);
        QVERIFY(settings.value(QStringLiteral("study/hiddenColumns"))
                    .toString()
                    .contains(QLatin1String("workers")));
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty()) {
            runs.setColumnVisible(app::StudyView::WorkersCol, true);
            runs.showStudy(s, core::computeStudyResults(s), QStringLiteral("st"), noProgress);
            runs.table()->resize(1100, 200);
            QVERIFY(test::showAndSettle(runs.table()));
            runs.table()->grab().save(dir + QStringLiteral("/elastic_runs_table.png")); // to look at
        }
    }

    // "Find…" runs the learning-rate range test on the agent, draws it as it arrives, and
    // "Use …" puts the suggestion into the designer; "auto" is accepted as a value.
    void learningRateIsFoundFromTheDesigner()
    {
        app::StudyView view;
        view.setAgents({ m_fixture.endpoint() });
        auto *dataset = view.findChildren<QLineEdit *>().at(1);
        dataset->setText(QStringLiteral("synth"));
        view.findChildren<QLineEdit *>().at(3)->setText(QStringLiteral("16")); // batch per worker
        auto *lr = view.findChild<QLineEdit *>(QStringLiteral("learningRate"));
        QVERIFY(lr);
        lr->setText(QStringLiteral("abc"));
        QVERIFY2(view.problemsLabel()->text().contains(QLatin1String("neither a number nor \"auto\"")),
            qPrintable(view.problemsLabel()->text()));
        lr->setText(QStringLiteral("auto"));
        QVERIFY2(!view.problemsLabel()->text().contains(QLatin1String("Learning rate")),
            qPrintable(view.problemsLabel()->text()));
        view.findChild<QPushButton *>(QStringLiteral("findLearningRate"))->click();
        auto *dialog = view.findChild<app::LrFindDialog *>(QStringLiteral("lrFindDialog"));
        QVERIFY(dialog);
        QTRY_VERIFY2_WITH_TIMEOUT(
            dialog->suggested() > 0, qPrintable(dialog->statusText()), test::endsWithin());
        QVERIFY(dialog->pointCount() >= 50);
        QVERIFY2(dialog->statusText().contains(QLatin1String("Suggested learning rate")),
            qPrintable(dialog->statusText()));
        if (const QByteArray shot = qgetenv("SCALELAB_SCREENSHOT_DIR"); !shot.isEmpty())
            dialog->grab().save(QString::fromLocal8Bit(shot) + QStringLiteral("/lr-find.png"));
        const double suggested = dialog->suggested();
        QPushButton *use = nullptr;
        for (auto *b : dialog->findChildren<QPushButton *>())
            if (b->text().startsWith(QLatin1String("Use ")))
                use = b;
        QVERIFY(use && use->isEnabled());
        use->click();
        QCOMPARE(lr->text(), QString::number(suggested, 'g', 3));
    }

    // The designer offers the agents' data sets, flags synthetic ones and warns about a
    // name no agent has.
    void datasetChoiceFlagsSyntheticSets()
    {
        app::StudyView view;
        view.setAgents({ m_fixture.endpoint() });
        v1::DescribeResponse inventory;
        QVERIFY(core::AgentClient(m_fixture.address(), m_fixture.token()).describe(&inventory).ok());
        view.setInventory(QStringLiteral("local"), inventory);
        auto *pick = view.findChild<QComboBox *>(QStringLiteral("datasetPick"));
        const int synth = pick->findData(QStringLiteral("synth"));
        QVERIFY(synth > 0);
        QVERIFY2(
            pick->itemText(synth).contains(QLatin1String("[SYNTHETIC]")), qPrintable(pick->itemText(synth)));
        auto *note = view.findChild<QLabel *>(QStringLiteral("datasetNote"));
        view.setDefaultDataset(QStringLiteral("nope"));
        QVERIFY2(note->text().contains(QLatin1String("No connected agent has a data set 'nope'")),
            qPrintable(note->text()));
        pick->activated(synth);
        QVERIFY2(note->text().startsWith(QLatin1String("SYNTHETIC DATA")), qPrintable(note->text()));
    }
};

QTEST_MAIN(TestStudyView)
#include "tst_study_view.moc"
