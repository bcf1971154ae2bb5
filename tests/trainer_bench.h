// What the training engine tests (tst_trainer_parallel, tst_trainer_resume, tst_trainer_recipe,
// tst_trainer_worker) share: two synthetic sets made once per program, the worker's command line
// on the small one, and how long a heavy training may take.
#pragma once

#include "cifar10.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QStringList>
#include <QTemporaryDir>
#include <QTest>

namespace scalelab::test {

// The two heavy functions (the default recipe's evidence, the two-worker comparison) keep
// both cores busy for two to four minutes alone; beside the suite at twice its slots they
// took 900 s and more (a fresh clone on 2026-11-28, AMD EPYC Zen 4, SCALELAB_TEST_JOBS=12 and
// a busy loop). Their runs may take 2,000 s before the test calls them hung; ctest allows
// the tst_trainer_* functions 2,400 s (tests/CMakeLists.txt).
inline int heavyTrainingLimitMs()
{
    return test::timeLimit(2'000'000);
}

// The sets of one test program, in a folder named on every worker's command line.
class TrainerBench {
protected:
    QTemporaryDir m_tmp;
    QString m_small; // 256 train / 100 test images
    QString m_learnable; // 2000 / 500

    QStringList small(const QStringList &extra) const
    {
        return QStringList { QStringLiteral("train"), QStringLiteral("--data-dir"), m_small,
            QStringLiteral("--batch-size"), QStringLiteral("32"), QStringLiteral("--threads"),
            QStringLiteral("1") }
        + extra;
    }

    // For initTestCase(): the two sets.
    void makeSets()
    {
        m_small = m_tmp.filePath(QStringLiteral("small"));
        m_learnable = m_tmp.filePath(QStringLiteral("learnable"));
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(m_small.toStdString(), 256, 100, 5));
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(m_learnable.toStdString(), 2000, 500, 6));
    }

    // For cleanupTestCase(): no worker is left.
    void checkNothingLeft()
    {
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 10000);
    }
};

} // namespace scalelab::test
