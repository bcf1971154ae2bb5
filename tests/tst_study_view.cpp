// The console's study panel, offscreen: inline refusal of bad values, a placement
// preview that names infeasible runs, and a study launched from the UI against a real
// local agent that fills the runs table to SUCCEEDED.
#include "agent_client.h"
#include "local_agent.h"
#include "study_view.h"
#include "test_support.h"

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab;

class TestStudyView : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    core::LocalAgent m_agent;

    static QString cell(QTableWidget *t, int row, int column)
    {
        const auto *i = t->item(row, column);
        return i ? i->text() : QString();
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(QDir().mkpath(m_tmp.filePath(QStringLiteral("data"))));
        core::LocalAgentOptions options;
        options.agentBinary = test::binary("scalelab-agent");
        options.dataDir = m_tmp.filePath(QStringLiteral("data"));
        options.stateDir = m_tmp.filePath(QStringLiteral("agent"));
        QVERIFY2(m_agent.start(options), qPrintable(m_agent.error()));
        v1::CreateSyntheticDatasetRequest request;
        request.set_name("synth");
        request.set_train_images(128);
        request.set_test_images(64);
        v1::Dataset dataset;
        QVERIFY(core::AgentClient(m_agent.endpoint(), m_agent.token())
                    .createSyntheticDataset(request, &dataset)
                    .ok());
    }

    void cleanupTestCase()
    {
        m_agent.stop();
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }

    void badValuesAreRefusedInline()
    {
        console::StudyView view;
        view.setAgents({ { QStringLiteral("local"), m_agent.endpoint(), m_agent.token() } });
        auto *workers = view.findChildren<QLineEdit *>().at(2);
        workers->setText(QStringLiteral("2, x, 0"));
        const QString text = view.problemsLabel()->text();
        QVERIFY2(text.contains(QLatin1String("'x' is not a whole number")), qPrintable(text));
        QVERIFY2(text.contains(QLatin1String("grid.workers[1]: must be between 1 and 1024 (got 0)")),
            qPrintable(text));
        QString error;
        QVERIFY(!view.launch(&error));
        QVERIFY(error.contains(QLatin1String("'x'")));
        // The preview names what cannot be placed: 4096 workers on a small node.
        workers->setText(QStringLiteral("1024"));
        QVERIFY2(view.problemsLabel()->text().contains(QLatin1String("cannot be placed")),
            qPrintable(view.problemsLabel()->text()));
        bool infeasible = false;
        for (int row = 0; row < view.runsTable()->rowCount(); ++row)
            infeasible = infeasible || cell(view.runsTable(), row, 2) == QLatin1String("INFEASIBLE");
        QVERIFY(infeasible);
    }

    void studyLaunchedFromTheUiFillsTheTable()
    {
        console::StudyView view;
        QString error;
        QVERIFY2(view.openJournal(m_tmp.filePath(QStringLiteral("console")), &error), qPrintable(error));
        view.setAgents({ { QStringLiteral("local"), m_agent.endpoint(), m_agent.token() } });
        v1::StudyPlan plan;
        plan.set_name("ui");
        plan.set_dataset("synth");
        plan.mutable_grid()->add_workers(2);
        plan.mutable_grid()->add_batch_size(16);
        plan.mutable_grid()->add_epochs(1);
        plan.mutable_grid()->add_threads_per_worker(1);
        plan.set_target_accuracy(0.1);
        view.setForm(plan);
        QVERIFY2(view.launch(&error), qPrintable(error));
        QTRY_COMPARE_WITH_TIMEOUT(view.runsTable()->rowCount(), 2, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(view.snapshot().state == QLatin1String("SUCCEEDED"), 180'000);
        // The table follows on its coalescing timer (rows may be sorted either way).
        QTRY_VERIFY_WITH_TIMEOUT(cell(view.runsTable(), 0, 2) == QLatin1String("SUCCEEDED")
                && cell(view.runsTable(), 1, 2) == QLatin1String("SUCCEEDED"),
            5000);
        for (int row = 0; row < 2; ++row) {
            QVERIFY(cell(view.runsTable(), row, 6).endsWith(QLatin1Char('%'))); // test accuracy
            QVERIFY2(!cell(view.runsTable(), row, 10).isEmpty(), // wall-clock
                qPrintable(cell(view.runsTable(), row, 0) + QLatin1Char(' ') + cell(view.runsTable(), row, 2)
                    + QLatin1Char(' ') + cell(view.runsTable(), row, 5) + QLatin1Char(' ')
                    + cell(view.runsTable(), row, 11)));
        }
        // The widget tree renders.
        view.resize(1400, 600);
        const QImage image = view.grab().toImage();
        QVERIFY(!image.isNull());
        if (const QString dir = qEnvironmentVariable("SCALELAB_SCREENSHOT_DIR"); !dir.isEmpty())
            image.save(dir + QStringLiteral("/study_view.png")); // to look at
    }
};

QTEST_MAIN(TestStudyView)
#include "tst_study_view.moc"
