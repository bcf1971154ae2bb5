// The learning-rate range test of a plan whose learning rate is "auto": the study's runs
// wait for it (StudyState::waitsForLearningRate). It runs on an agent that has the data set
// and a free slot, at the global batch of the plan's first run (the baseline unless
// skipped), and journals what it found (lr_found, with up to 200 points of its curve; an
// inconclusive test keeps the default rate) or that it failed (lr_find_failed: tried again
// 10 s later; the third failure is final and the runs fail with it). The StudyRunner:
//
//   while (study.waitsForLearningRate()) finder.search(nodes);   // each tick: starts one when due
//
// What the journal holds of it is StudyState::learningRateSearch(). One test at a time, on
// a thread of its own with a client of its own; its end is handled on the runner's thread
// (posted to `context`), and a rate found makes the runner tick again at once.
//
// Owned by the StudyRunner, whose RunnerContext and `context` outlive it. Thread: the
// runner's. The destructor tells a test in progress to stop (the agent stops its worker)
// and waits for its thread.
#pragma once

#include "agent_client.h"
#include "placement.h"

#include <QList>
#include <QPair>
#include <QString>

#include <atomic>
#include <thread>

class QObject;

namespace scalelab::core {

class RunnerContext;

class LearningRateFinder {
public:
    LearningRateFinder(RunnerContext &runner, QObject *context);
    ~LearningRateFinder();
    LearningRateFinder(const LearningRateFinder &) = delete;
    LearningRateFinder &operator=(const LearningRateFinder &) = delete;

    // Starts the range test on one of `nodes` that has the data set, unless one runs, the
    // runner stopped, or a failed one was less than 10 s ago.
    void search(const QList<NodeCapacity> &nodes);

private:
    void searched(const QString &agent, int batch, const Status &result, const v1::LrFindResult &found,
        const QList<QPair<double, double>> &points);

    RunnerContext &m_runner;
    QObject *m_context;
    std::thread m_thread;
    bool m_searching = false;
    std::atomic<bool> m_cancel { false };
    qint64 m_notBefore = 0; // after a failed test: when to try again
};

} // namespace scalelab::core
